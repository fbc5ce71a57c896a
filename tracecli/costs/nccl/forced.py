"""NCCL restricted by its environment: ``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_MIN_NCHANNELS`` and
``NCCL_MAX_NCHANNELS``, as a run that sets them (Google's GPUDirect-TCPX configurations set
``NCCL_ALGO=Ring NCCL_PROTO=Simple`` and, in some, 12 channels) makes NCCL choose and run.

- ``NCCL_ALGO`` / ``NCCL_PROTO`` (src/graph/tuning.cc, v2.18.5-1:244-300, the same through
  2.30): a disabled pair's bandwidth is 0, so NCCL's argmin never picks it; a disabled
  protocol is disabled for every collective, a disabled algorithm for all but Ring of a
  collective other than all-reduce ("Never disable ring for non-allreduce operations",
  tuning.cc:296). Only plain lists of names are read (NCCL's ``^`` negation is refused).
- ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS`` (src/graph/connect.cc, v2.18.5-1:413-417):
  they bound ``comm->nChannels`` AFTER the graph search (max first, then channels copied up to
  min); NCCL's bandwidths keep the searched graph's ``nChannels`` (tuning.cc:175), so only the
  communicator's channel count moves (:attr:`.tuning.Comm.channels`).

>>> from tracecli.costs.nccl.model import NcclModel
>>> from tracecli.model import CollectiveKind as K
>>> m = NcclModel.for_topology("h100", 2, 8, True, 800.0, 4, "2.19.3", "tcpx")
>>> m.choice(K.ALL_REDUCE, 1 << 30)[:2]
('NVLSTree', 'Simple')
>>> r = restrict(m, {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "12"})
>>> r.choice(K.ALL_REDUCE, 1 << 30)[:2], r.choice(K.ALL_GATHER, 1 << 10)[:2], r.comm_channels
(('Ring', 'Simple'), ('Ring', 'Simple'), 12)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Optional

from ...errors import CostModelError
from .tuning import ALGOS, FUNCS, PROTOS, RING, Table

__all__ = ["restrict", "disable", "KNOWN"]

KNOWN = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")
MAXCHANNELS = 32  # src/include/device.h (MAXCHANNELS), 2.18-2.30


def _names(var: str, text: str, known: tuple[str, ...]) -> tuple[str, ...]:
    lower = {k.lower(): k for k in known}
    out = []
    for word in text.split(","):
        name = lower.get(word.strip().lower())
        if name is None:
            raise CostModelError(f"{var}={text}: {word.strip()!r} is not one of "
                                 + ", ".join(known) + " (lists of names only, no ^)")
        out.append(name)
    return tuple(out)


def _channels(var: str, text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAXCHANNELS:
        raise CostModelError(f"{var}={text}: pass a channel count from 1 to {MAXCHANNELS}")
    return n


def restrict(model, env: Mapping[str, str]):
    """``model`` as NCCL runs under the settings ``env`` names (:data:`KNOWN`; others refused)."""
    unknown = sorted(set(env) - set(KNOWN))
    if unknown:
        raise CostModelError(f"{unknown[0]} is not modelled; known: " + ", ".join(KNOWN))
    algos = _names("NCCL_ALGO", env["NCCL_ALGO"], ALGOS) if "NCCL_ALGO" in env else None
    protos = _names("NCCL_PROTO", env["NCCL_PROTO"], PROTOS) if "NCCL_PROTO" in env else None
    channels = 2 * model.ring.n_channels  # connect.cc doubling (tuning.Comm.channels)
    if "NCCL_MAX_NCHANNELS" in env:
        channels = min(channels, _channels("NCCL_MAX_NCHANNELS", env["NCCL_MAX_NCHANNELS"]))
    if "NCCL_MIN_NCHANNELS" in env:
        channels = max(channels, _channels("NCCL_MIN_NCHANNELS", env["NCCL_MIN_NCHANNELS"]))
    forced = {"NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"} & set(env)
    return replace(model, algos=algos, protos=protos,
                   comm_channels=channels if forced else model.comm_channels,
                   source=model.source + "; " + " ".join(f"{k}={env[k]}" for k in sorted(env)),
                   _cache={})


def disable(table: Table, algos: Optional[tuple[str, ...]],
            protos: Optional[tuple[str, ...]]) -> Table:
    """``table`` with the pairs ``NCCL_ALGO`` / ``NCCL_PROTO`` disable at bandwidth 0
    (tuning.cc:293-297); ``None``: no restriction."""
    if algos is None and protos is None:
        return table
    for f, func in enumerate(FUNCS):
        for a, algo in enumerate(ALGOS):
            for p, proto in enumerate(PROTOS):
                if protos is not None and proto not in protos:
                    table.bw[f][a][p] = 0.0
                elif (algos is not None and algo not in algos
                      and not (a == RING and func != "AllReduce")):
                    table.bw[f][a][p] = 0.0
    return table
