"""Joining a torchrun world: each process's GPU, and one backend for every node.

Under torchrun every process runs the command. NCCL puts a process on GPU ``LOCAL_RANK``
of its node (torchrun sets it, with ``LOCAL_WORLD_SIZE``); ``RANK`` is global, so falling
back to it would name a GPU node 2 does not have: NCCL without ``LOCAL_RANK`` is refused.
With ``--backend auto`` each process can only see its own node, and nodes with different
GPU counts would choose differently and hang at init; so the processes agree through the
world's store (the one ``init_process_group`` then uses): NCCL only if every process can
run it, else gloo everywhere, with the reason of one process that could not.
"""

from __future__ import annotations

import datetime
import os
from typing import Mapping, Optional

from ..errors import ReplayUnavailableError

__all__ = ["in_torchrun", "local_rank", "nccl_refusal", "agree", "world_store", "joined_store"]

_PREFIX = "tracecli/backend"
_STORE: list = []  # this process's connection to the world's store, once made


def in_torchrun(environ: Optional[Mapping[str, str]] = None) -> bool:
    environ = os.environ if environ is None else environ
    return all(k in environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def local_rank(environ: Mapping[str, str]) -> Optional[int]:
    text = environ.get("LOCAL_RANK", "")
    return int(text) if text.isdigit() else None


def nccl_refusal(environ: Mapping[str, str], visible: int, built: bool) -> Optional[str]:
    """Why this process cannot run NCCL (``None``: it can)."""
    if not built:
        return "this torch build has no NCCL"
    local = local_rank(environ)
    if local is None:
        return ("LOCAL_RANK is not set (NCCL puts each process on GPU LOCAL_RANK of its node; "
                "torchrun sets it)")
    text = environ.get("LOCAL_WORLD_SIZE", "")
    needed = max(int(text) if text.isdigit() else 0, local + 1)
    if visible < needed:
        return f"{visible} CUDA devices visible for {needed} ranks on its node"
    return None


def world_store(timeout_s: float):
    """The world's store (``env://``: MASTER_ADDR, MASTER_PORT; rank 0 or torchrun's agent
    hosts it), made once per process; ``init_process_group`` is then given it."""
    if not _STORE:
        import torch.distributed as dist

        timeout = datetime.timedelta(seconds=timeout_s)
        _STORE.append(next(dist.rendezvous("env://", timeout=timeout))[0])
    return _STORE[0]


def joined_store():
    """The store the default group uses, if this process made one (``None``: let
    ``init_process_group`` rendezvous through ``env://`` itself)."""
    if not _STORE:
        return None
    import torch.distributed as dist

    return dist.PrefixStore("default_pg", _STORE[0])  # as init_process_group prefixes its own


def agree(store, rank: int, world: int, refusal: Optional[str]) -> tuple[str, Optional[str]]:
    """Every process's backend: NCCL if no process refused it, else gloo and one reason.

    Each process adds its vote, then waits until all have voted (a key the last one sets);
    ``store.wait`` fails after the store's timeout if a process never comes."""
    if refusal is not None:
        store.set(f"{_PREFIX}/why", f"rank {rank}: {refusal}")
        store.add(f"{_PREFIX}/gloo", 1)
    if store.add(f"{_PREFIX}/voted", 1) == world:
        store.set(f"{_PREFIX}/done", "1")
    store.wait([f"{_PREFIX}/done"])
    if store.add(f"{_PREFIX}/gloo", 0) == 0:
        return "nccl", None
    why = store.get(f"{_PREFIX}/why").decode(errors="replace")
    return "gloo", f"{why}: every rank runs gloo on CPU"


def require_local_rank(environ: Mapping[str, str]) -> int:
    local = local_rank(environ)
    if local is None:
        raise ReplayUnavailableError("under torchrun, NCCL needs LOCAL_RANK (each process's GPU "
                                     "on its node; RANK is global): run under torchrun, or set "
                                     "LOCAL_RANK and LOCAL_WORLD_SIZE")
    return local
