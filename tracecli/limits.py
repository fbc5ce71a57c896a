"""Figures tracecli assumes or bounds by everywhere, each written once.

``MAX_RANKS`` bounds every rank count read or asked for (a world size in a trace, a log or a
profile, ``--gpus``, nodes x GPUs per node). ``DEFAULT_DEVICE`` is the GPU assumed where
none is given: its roofline for compute estimates, its NCCL graph for a topology.
"""

__all__ = ["MAX_RANKS", "DEFAULT_DEVICE"]

MAX_RANKS = 1 << 20
DEFAULT_DEVICE = "h100"
