"""NCCL restricted by its environment, release by release: ``NCCL_ALGO``, ``NCCL_PROTO``,
``NCCL_MIN_NCHANNELS``, ``NCCL_MAX_NCHANNELS`` and ``NCCL_NVLS_ENABLE``, as a job that sets them
(Google's GPUDirect-TCPX configurations set ``NCCL_ALGO=Ring NCCL_PROTO=Simple`` and, in some,
12 channels; ``NCCL_NVLS_ENABLE=0`` is a common workaround) makes NCCL choose and run.

- ``NCCL_ALGO`` / ``NCCL_PROTO`` are read by ``parseList`` (src/graph/tuning.cc): a list of
  names, case-insensitive, ``^`` first to disable the names instead; from 2.24
  (v2.24.3-1 tuning.cc ``parseList(str, prefixElems, ...)``) ``;``-separated entries may name
  the collective they apply to (``allreduce:tree,ring;allgather:ring``; every entry but the
  first must). A disabled pair's bandwidth is 0, so NCCL's argmin never picks it; naming
  LL128 enables it even where NCCL would not by default (its default is "2": on only for
  NVLink paths, tuning.cc v2.18.5-1:287-296). 2.18 only: Ring is never disabled for a
  collective other than all-reduce ("That allows to run real apps with NCCL_ALGO=TREE",
  v2.18.5-1 tuning.cc:298-299; gone from v2.19.1-1); before 2.20, an ``NCCL_ALGO`` naming only
  CollNet falls back to Ring and Tree without CollNet (v2.19.4-1 tuning.cc:273-276). A
  collective left with no pair fails in NCCL ("No algorithm/protocol available", enqueue.cc);
  here :meth:`.model.NcclModel.pick` says so. Names NCCL would reject or, before 2.24, ignore
  are refused: a typo must not pass as a setting.
- ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS`` (src/graph/connect.cc, v2.18.5-1:413-417):
  they bound ``comm->nChannels`` AFTER the graph search (max first, then channels copied up to
  min); NCCL's bandwidths keep the searched graph's ``nChannels`` (tuning.cc:175), so only the
  communicator's channel count moves (:attr:`.tuning.Comm.channels`).
- ``NCCL_NVLS_ENABLE`` (src/transport/nvls.cc ``ncclNvlsInit``, default 2: where the
  hardware supports it): 0 turns NVLS support off, so no NVLS or NVLSTree; 1 where this
  topology has no NVLS is refused (NCCL would try and fail).

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
from .tuning import ALGOS, FUNCS, LL128, NVLS, NVLS_TREE, PROTOS, RING, TREE, Table, tune
from .versions import parse_version

__all__ = ["restrict", "apply", "enables", "KNOWN", "settings"]

KNOWN = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
         "NCCL_NVLS_ENABLE")
MAXCHANNELS = 32  # src/include/device.h (MAXCHANNELS), 2.18-2.30
PREFIXES = (2, 24)  # the release whose parseList reads "collective:list;..." entries
PAT_FROM = (2, 23)  # the release that named the PAT algorithm


def _release(version: str) -> tuple[int, int]:
    v = parse_version(version)
    if v is None:
        raise CostModelError(f"cannot read NCCL version {version!r}; write it as 2.21.5")
    return v[0], v[1]


def _int(var: str, text: str, low: int, high: int) -> int:
    try:
        n = int(text.strip(), 0)  # strtoll(str, NULL, 0), as NCCL's parameters are read
    except ValueError:
        n = None
    if n is None or not low <= n <= high:
        raise CostModelError(f"{var}={text}: pass a whole number from {low} to {high}")
    return n


def parse_list(var: str, text: str, names: tuple[str, ...], defaults: tuple[int, ...],
               release: tuple[int, int]) -> list[list[int]]:
    """NCCL's ``parseList``: ``[collective][name]`` enables, from ``defaults`` (all
    collectives alike before 2.24)."""
    out = [list(defaults) for _ in FUNCS]
    if release < PREFIXES and ":" in text:
        raise CostModelError(f"{var}={text}: entries per collective (allreduce:ring) are read "
                             f"from NCCL 2.24; NCCL {release[0]}.{release[1]} reads one list")
    lower = {n.lower(): i for i, n in enumerate(names)}
    entries = [e for e in (text.split(";") if release >= PREFIXES else [text]) if e]
    if not entries:
        raise CostModelError(f"{var} is empty: give a list of " + ", ".join(names))
    for i, entry in enumerate(entries):
        head, colon, body = entry.partition(":")
        prefix = head if colon and body and release >= PREFIXES else None
        if prefix is None:
            body = entry
            if i:
                raise CostModelError(f"{var}={text}: every entry but the first must name its "
                                     "collective (allreduce:ring;allgather:ring)")
        if prefix is not None and prefix.lower() not in {f.lower() for f in FUNCS}:
            raise CostModelError(f"{var}={text}: {prefix!r} is not a collective; use one of "
                                 + ", ".join(FUNCS))
        negate = body.startswith("^")
        words = [w for w in body[negate:].split(",") if w]
        for f, func in enumerate(FUNCS):
            if prefix is not None and prefix.lower() != func.lower():
                continue
            out[f] = [int(negate)] * len(names)
            for w in words:
                if w.lower() not in lower:
                    raise CostModelError(
                        f"{var}={text}: {w!r} is not one of " + ", ".join(names)
                        + (f" (NCCL {release[0]}.{release[1]}'s names)" if len(names) < 7 else ""))
                out[f][lower[w.lower()]] = int(not negate)
    return out


def enables(env: Mapping[str, str], version: str, nodes: int) -> tuple[list, list]:
    """``(algo[collective][algorithm], proto[collective][protocol])`` as NCCL ``version`` sets
    them from ``env`` on ``nodes`` nodes: 1 on, 0 off, 2 (LL128) NCCL's own default."""
    release = _release(version)
    names = ALGOS if release >= PAT_FROM else ALGOS[:-1]
    algo = [[1] * len(ALGOS) for _ in FUNCS]
    if "NCCL_ALGO" in env:
        algo = [row + [1] * (len(ALGOS) - len(row))
                for row in parse_list("NCCL_ALGO", env["NCCL_ALGO"], names, (1,) * len(names),
                                      release)]
    proto = [[1, 2, 1] for _ in FUNCS]
    if "NCCL_PROTO" in env:
        proto = parse_list("NCCL_PROTO", env["NCCL_PROTO"], PROTOS, (1, 2, 1), release)
    if release < (2, 20):  # without CollNet, an NCCL_ALGO of CollNet alone: Ring and Tree
        on = [a for a in (RING, TREE, NVLS, NVLS_TREE) if algo[0][a]
              and not (a == NVLS_TREE and nodes == 1) and not (a == NVLS and nodes > 1)]
        if not on:
            for row in algo:
                row[RING] = row[TREE] = 1
    if release < (2, 19):  # Ring stays for every collective but all-reduce
        for f, func in enumerate(FUNCS):
            if func != "AllReduce":
                algo[f][RING] = 1
    return algo, proto


def apply(table: Table, env: Mapping[str, str], version: str) -> Table:
    """``table`` (tuning.tune's, NCCL's own enables) as NCCL ``version`` runs under ``env``:
    disabled pairs at bandwidth 0 (tuning.cc's last loop), LL128 where it is named."""
    if "NCCL_ALGO" not in env and "NCCL_PROTO" not in env:
        return table
    comm = table.comm
    algo, proto = enables(env, version, comm.n_nodes)
    forced_on = [f for f in range(len(FUNCS)) if proto[f][LL128] == 1]
    if forced_on:  # named LL128 skips NCCL's path check: the table of graphs that pass it
        on = tune(replace(comm, **{g: replace(getattr(comm, g), ll128=True)
                                   for g in ("ring", "tree", "nvls")}), table.consts)
        for f in forced_on:
            for a in range(len(ALGOS)):
                table.bw[f][a][LL128] = on.bw[f][a][LL128]
    for f in range(len(FUNCS)):
        for a in range(len(ALGOS)):
            for p in range(len(PROTOS)):
                if proto[f][p] == 0 or algo[f][a] == 0:
                    table.bw[f][a][p] = 0.0
    return table


def settings(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``env`` checked for names tracecli models (others refused), in a stable order."""
    unknown = sorted(set(env) - set(KNOWN))
    if unknown:
        raise CostModelError(f"{unknown[0]} is not modelled; known: " + ", ".join(KNOWN))
    return tuple(sorted(env.items()))


def restrict(model, env: Mapping[str, str]):
    """``model`` as NCCL runs under the settings ``env`` names (:data:`KNOWN`; others refused).
    The settings are checked here, against the model's NCCL release."""
    given = settings(env)
    enables(env, model.version, model.topology.nodes)  # refuses what NCCL would not read
    channels = 2 * model.ring.n_channels  # connect.cc doubling (tuning.Comm.channels)
    if "NCCL_MAX_NCHANNELS" in env:
        channels = min(channels, _int("NCCL_MAX_NCHANNELS", env["NCCL_MAX_NCHANNELS"], 1,
                                      MAXCHANNELS))
    if "NCCL_MIN_NCHANNELS" in env:
        channels = max(channels, _int("NCCL_MIN_NCHANNELS", env["NCCL_MIN_NCHANNELS"], 1,
                                      MAXCHANNELS))
    nvls: Optional[object] = model.nvls
    if "NCCL_NVLS_ENABLE" in env:
        nvls_enable = _int("NCCL_NVLS_ENABLE", env["NCCL_NVLS_ENABLE"], 0, 2)
        if nvls_enable == 1 and model.nvls is None:
            raise CostModelError("NCCL_NVLS_ENABLE=1 on a topology without NVLS (it needs an "
                                 "NVSwitch with multicast, sm90+): NCCL would fail; pass 0 or 2")
        nvls = None if nvls_enable == 0 else model.nvls
    forced = {"NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"} & set(env)
    return replace(model, nccl_env=given, nvls=nvls,
                   comm_channels=channels if forced else model.comm_channels,
                   source=model.source + "; " + " ".join(f"{k}={v}" for k, v in given),
                   _cache={})
