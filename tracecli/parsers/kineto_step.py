"""A profiler trace's step as the Trace records it (:class:`~tracecli.model.StepInfo`), on its
clock, and the notes a reader of the trace must see."""

from __future__ import annotations

from typing import Optional

from ..model import Op, OpKind, Purpose, StepInfo, Tensor
from .kineto_device import StepClock
from .kineto_threads import Step

__all__ = ["step_info", "notes_of", "DEVICE_NOTE"]

DEVICE_NOTE = ("times: the device's (kernels linked to their host ops by correlation id): "
               "an op lasts from when the device had done the work launched before it to "
               "when it had done its own; the update is the device's time from the end of "
               "backward and its all-reduces to the step's end (the optimizer, and any wait "
               "for the host); the host's times are not used")


def notes_of(step: Step, steps: list[Step], which: str, clock: StepClock, world: dict,
             ran: bool, tensors: list[Tensor], unrecorded: list[str],
             note: Optional[str]) -> list[str]:
    """What a reader of the trace must know: the step picked, its clock, the run, the
    gradients' shapes and names."""
    notes = [f"step: {step.label} ({which}; the trace holds {len(steps)}: "
             f"{', '.join(s.label for s in steps[:8])}{', ...' if len(steps) > 8 else ''})"]
    if clock.on_device:
        notes.append(DEVICE_NOTE)
    if world:
        notes.append("distributed: " + ", ".join(f"{k} {v}" for k, v in world.items()))
    if (world.get("world_size") or 0) > 1 and ran:
        notes.append(f"one rank of {world['world_size']}: its step, compute and collective "
                     "times are its own, each collective's an upper bound on its transfer; "
                     "they include waiting for the slowest rank, so this trace cannot tell "
                     "wait from transfer nor which rank was late; inspect every rank's trace "
                     "together (tracecli inspect RUN_DIR) for that")
    if unrecorded:
        notes.append(f"shapes: recorded for {len(tensors) - len(unrecorded)} of {len(tensors)} "
                     f"gradients; {len(unrecorded)} unknown (e.g. {unrecorded[0]}; see sizes: below)")
    if note:
        notes.append(note)
    elif tensors and any(t.shape is not None for t in tensors):
        notes.append("names: position and shape; pass the parameter sidecar with --sizes FILE "
                     "(docs/inputs.md) for the model's own names")
    return notes


def step_info(step: Step, steps: list[Step], clock: StepClock, window, ops: list[Op],
              ran: list, world: Optional[int]) -> StepInfo:
    """The traced step on its clock. On the device, the update is the device's time from
    the end of backward and of the step's gradient reductions to the step's end: the
    optimizer's kernels and the time the device waited for the host to launch them, so
    that the step's schedule adds up to the device's step."""
    duration = (clock.end - clock.origin) / 1000.0
    backward = None if window is None else (clock.ms(window[0]), clock.ms(window[1]))
    updates = [op.dur_ms for op in ops if op.kind is OpKind.UPDATE]
    update = sum(updates) if updates else None
    if clock.on_device and backward is not None:
        ends = [c.end_ms for c in ran if c.step == step.index and c.end_ms is not None
                and c.purpose is Purpose.GRADIENTS]
        update = max(duration - max([backward[1]] + ends), 0.0)
    return StepInfo(step.label, step.index, duration,
                    None if backward is None else backward[0],
                    None if backward is None else backward[1],
                    update, tuple(s.label for s in steps), world)
