"""What aws-ofi-nccl changes in NCCL's environment on AWS.

Sources: github.com/aws/aws-ofi-nccl tags, github.com/NVIDIA/nccl tags (:mod:`.pipeline` for
what NCCL does with the chunk settings).

- **The platform's environment** (:func:`plugin_env`). aws-ofi-nccl's platform table gives
  each instance type settings it adds to NCCL's environment at plugin init (v1.16.3
  src/platform-aws.cpp:74-205, ``platform_data_map[].env``, inserted at :585): on p4d and p4de
  ``NCCL_BUFFSIZE=8388608`` and ``NCCL_P2P_NET_CHUNKSIZE=524288`` (:76-103); on p5 and p5e
  (:148-163) and on p5en and later (the ``p-series`` entry, :115-135; p5en/p6-b200 and p6-b300
  entries of their own at 2daf7d3, src/platform-aws.cpp:149-200) those and ``NCCL_NVLSTREE_MAX_CHUNKSIZE=524288``,
  ``NCCL_NVLS_CHUNKSIZE=524288`` and ``NCCL_NET_FORCE_FLUSH=0``. The job's own value wins: an
  entry is inserted with ``overwrite`` false and a variable already set is kept
  (include/nccl_ofi_environ.h v1.16.3:40-51, 94-104; before v1.16, ``setenv(..., 0)``,
  v1.10.0-aws src/platform-aws.c:513-524, which first set both chunk settings, commit
  3defe9e2; v1.8.1-aws set the NVLSTree one alone, :439-440; KeitaW's p5 log, aws-ofi-nccl
  1.9.2-aws, prints both). tracecli models the ones its time model reads: ``NCCL_BUFFSIZE``
  (the Simple buffer's step, where NVLS chunks start) and the two chunk settings
  (:func:`.pipeline.first_chunk`). They apply on a ``--platform`` whose network is EFA, at any
  node count (NCCL loads its net plugin at init), and on hardware given by flags over
  ``--net efa`` on several nodes, read as the instance it matches (``transports.efa_class``:
  a NIC a GPU, p5's; fewer, p4d's).
"""

from __future__ import annotations

from typing import Mapping, Optional

from ...errors import CostModelError
from .platforms import PLATFORMS
from .transports import efa_class
from .versions import parse_version

__all__ = ["plugin_env", "chunking", "check_env", "VARS", "CHUNK_CHOICES"]

_P4 = (("NCCL_BUFFSIZE", "8388608"),)
_P5 = _P4 + (("NCCL_NVLSTREE_MAX_CHUNKSIZE", "524288"), ("NCCL_NVLS_CHUNKSIZE", "524288"))
PLATFORM_ENV = {"aws-p4d": _P4, "aws-p4de": _P4, "aws-p5": _P5, "aws-p5e": _P5,
                "aws-p5en": _P5, "aws-p6-b200": _P5}
CLASS_ENV = {"efa-sendrecv": _P4, "efa-rdma": _P5}  # hardware flags: the instance they match
# the release that first reads each chunk setting (pipeline.py)
CHUNK_FROM = {"NCCL_NVLS_CHUNKSIZE": (2, 21), "NCCL_NVLSTREE_MAX_CHUNKSIZE": (2, 20)}
CHUNK_CHOICES = tuple(1 << k for k in range(14, 25))  # 16 KiB to 16 MiB, powers of two
VARS = tuple(CHUNK_FROM)


def plugin_env(model) -> dict[str, str]:
    """The settings aws-ofi-nccl adds to NCCL's environment for ``model``'s job (see the
    module), those the job sets itself left out (the job's win)."""
    platform = PLATFORMS.get(model.name.removeprefix("nccl:"))
    if platform is not None and platform.net == "efa" and model.net in (None, "efa"):
        added = PLATFORM_ENV.get(platform.name, ())
    elif platform is None and model.link_net == "efa":
        added = CLASS_ENV[efa_class(None, model.nics or 0, model.topology.gpus_per_node)]
    else:
        added = ()
    own = dict(model.nccl_env)
    return {k: v for k, v in added if k not in own}


def chunking(model) -> tuple[Optional[int], Optional[int], Optional[int]]:
    """``(NCCL_BUFFSIZE, NCCL_NVLS_CHUNKSIZE, NCCL_NVLSTREE_MAX_CHUNKSIZE)`` as NCCL reads them
    in ``model``'s job: its own settings, else the plugin's (``None``: unset)."""
    from .forced import _number

    env = {**plugin_env(model), **dict(model.nccl_env)}
    return tuple(_number(v, env[v]) if v in env else None  # type: ignore[return-value]
                 for v in ("NCCL_BUFFSIZE", "NCCL_NVLS_CHUNKSIZE", "NCCL_NVLSTREE_MAX_CHUNKSIZE"))


def check_env(env: Mapping[str, str], version: str, net: Optional[str], nodes: int) -> None:
    """Refuse chunk settings NCCL ``version`` does not read or tracecli does not model."""
    from .forced import _number

    release = (parse_version(version) or (0, 0, 0))[:2]
    for var, since in CHUNK_FROM.items():
        if var not in env:
            continue
        if release < since:
            raise CostModelError(f"{var}: NCCL {version} does not read it (from "
                                 f"{since[0]}.{since[1]}; pipeline.py); leave it out")
        value = _number(var, env[var])
        if value not in CHUNK_CHOICES and not (value == -2 and var.startswith("NCCL_NVLSTREE")):
            raise CostModelError(f"{var}={env[var]}: tracecli models a power of two from "
                                 f"{CHUNK_CHOICES[0]} to {CHUNK_CHOICES[-1]} bytes"
                                 + (" (or -2, unset)" if var.startswith("NCCL_NVLSTREE") else "")
                                 + ": " + ", ".join(map(str, CHUNK_CHOICES)))
