"""Test machinery: loaded by every Python process whose PYTHONPATH starts with this folder.
With ``TRACECLI_FAKE_CUDA`` (a JSON config) in its environment, the process gets a fake
``torch.cuda`` and a fake NCCL group over gloo (``tests/fake_nccl_group.py``); without it,
this does nothing."""

import json
import os
import sys

_CONFIG = os.environ.get("TRACECLI_FAKE_CUDA")
if _CONFIG:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import fake_nccl_group

    fake_nccl_group.activate(json.loads(_CONFIG))
