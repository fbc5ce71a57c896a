"""The dtype DeepSpeed sends each gradient in, as DeepSpeed 0.19.8 decides it.

``DeepSpeedZeroOptimizer.get_param_comm_dtype`` (``runtime/base_optimizer.py`` l.393-397)
picks each parameter's IPG bucket and the dtype its flush sends:

- under ``torch_autocast``, each parameter's own ``comm_dtype`` attribute, else its dtype:
  ``init_autocast_params`` sets the autocast dtype on the parameters of ``Linear`` and
  ``Conv1d/2d/3d`` modules (or the config's ``lower_precision_safe_modules``;
  ``runtime/torch_autocast.py`` l.15-20, l.35-57, l.81-86), and ``communication_data_type``
  is not read (``base_optimizer.py`` l.394-395);
- otherwise the engine's ``communication_data_type`` for every parameter
  (``runtime/engine.py`` l.1719-1730): the config's, else float16 with ``fp16``, bfloat16
  with ``bf16``, else float32. Those two configs also cast the model, so its parameters are
  of that dtype; a model of several dtypes without them is flattened by ZeRO-1/2 into one
  float32 group (``stage_1_and_2.py`` l.1390-1400) and refused by ZeRO-3
  (``runtime/zero/utils.py`` l.218).

The knobs are those settings; where a parameter list or sidecar carries DeepSpeed's own
answer (the ``comm_dtype`` mark, written by docs/inputs.md's one-liner from
``engine.optimizer.get_param_comm_dtype(p)``), that answer is what is sent unless a knob
says otherwise, and autocast needs it: which parameters are a ``Linear``'s is not in a
parameter's shape.
"""

from __future__ import annotations

from typing import Optional, Sequence

from ...errors import PlanError
from ..base import Grad

__all__ = ["comm_dtypes", "config_name", "dtype_named", "PRECISIONS"]

_DTYPES = {"fp32": "float32", "float32": "float32", "float": "float32",
           "fp16": "float16", "float16": "float16", "half": "float16",
           "bf16": "bfloat16", "bfloat16": "bfloat16"}
_CONFIG_NAMES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
PRECISIONS = {"auto": None, "fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def dtype_named(value: str, flag: str) -> Optional[str]:
    """The dtype a knob names (DeepSpeed's ``fp32``/``fp16``/``bf16`` or torch's names;
    ``""``: none given).

    >>> dtype_named("bf16", "--x"), dtype_named("float32", "--x"), dtype_named("", "--x")
    ('bfloat16', 'float32', None)
    """
    if not value:
        return None
    dtype = _DTYPES.get(value.lower().removeprefix("torch."))
    if dtype is None:
        raise PlanError(f"{flag} must be fp32, fp16 or bf16 (or float32, float16, bfloat16), "
                        f"not {value!r}")
    return dtype


def config_name(dtype: str) -> str:
    """DeepSpeed's config name of a dtype (``communication_data_type`` takes only these)."""
    return _CONFIG_NAMES[dtype]


def _precision(opts) -> Optional[str]:
    value = opts.deepspeed_precision.lower()
    if value not in PRECISIONS:
        raise PlanError(f"--deepspeed-precision must be auto, fp32, bf16 or fp16, not "
                        f"{opts.deepspeed_precision!r}")
    return PRECISIONS[value]


def comm_dtypes(grads: Sequence[Grad], opts, stage: int) -> tuple[list[str], list[str]]:
    """Each gradient's communication dtype (module docstring) and what the plan's reader
    must know of how it was decided."""
    autocast = dtype_named(opts.deepspeed_autocast, "--deepspeed-autocast")
    config = dtype_named(opts.deepspeed_communication_data_type,
                         "--deepspeed-communication-data-type")
    precision = _precision(opts)
    own = {g.dtype for g in grads}
    if stage == 3 and len(own) > 1 and precision is None:
        raise PlanError(f"DeepSpeed ZeRO-3 refuses parameters of several dtypes ({', '.join(sorted(own))}): "
                        "its partition buffers hold one (deepspeed.initialize fails at "
                        "runtime/zero/utils.py l.218); give a bf16 or fp16 config "
                        "(--deepspeed-precision) or one dtype")
    marks = [g.meta.comm_dtype for g in grads]
    if autocast is not None:
        return _autocast(grads, marks, autocast, config)
    if config is not None:
        return [config] * len(grads), []
    if precision is not None:
        return [precision] * len(grads), []
    if any(marks):  # DeepSpeed's own answer, from the parameter list
        return [m or g.dtype for m, g in zip(marks, grads)], \
            ["communication dtypes: the parameter list's comm_dtype marks (DeepSpeed's own answer)"]
    if len(own) > 1:
        return ["float32"] * len(grads), [
            f"parameters of {len(own)} dtypes without a bf16 or fp16 config: ZeRO-1/2 flatten "
            "them into one float32 group and send float32 (DeepSpeed's communication_data_type "
            "default)"]
    return [g.dtype for g in grads], []


def _autocast(grads: Sequence[Grad], marks: list, autocast: str,
              config: Optional[str]) -> tuple[list[str], list[str]]:
    """Under ``torch_autocast``: each parameter's mark, else its own dtype."""
    if not any(marks) and any(g.dtype != autocast for g in grads):
        raise PlanError(f"under torch_autocast DeepSpeed sends the gradients of Linear and Conv "
                        f"parameters in {autocast} and the rest in their own dtype; which are which "
                        "is in the comm_dtype marks of the sidecar docs/inputs.md's DeepSpeed one-liner "
                        "writes after deepspeed.initialize: pass it (--sizes, or as the parameter list)")
    other = sorted({m for m in marks if m and m != autocast})
    if other:
        raise PlanError(f"the parameter list marks gradients sent in {', '.join(other)}, but "
                        f"torch_autocast sends in {autocast} or the parameter's own dtype: it was "
                        "written under another config")
    notes = ["torch_autocast: Linear and Conv gradients (the comm_dtype marks) sent in "
             f"{autocast}, the rest in their own dtype"]
    if config is not None:
        notes.append("communication_data_type is not read under torch_autocast "
                     "(runtime/base_optimizer.py l.394-395)")
    return [m or g.dtype for m, g in zip(marks, grads)], notes
