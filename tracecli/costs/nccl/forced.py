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
  v2.18.5-1 tuning.cc:298-299). Before 2.24, an ``NCCL_ALGO`` leaving none of Ring, Tree,
  NVLS and NVLSTree (CollNet alone, or PAT) turns Ring and Tree back on without CollNet
  (v2.23.4-1 tuning.cc:310-314), and from 2.19 a collective left with no pair gets Ring back
  at the bandwidths NCCL kept aside (``ringbdw``, v2.19.1-1 tuning.cc:304-318: every protocol
  up to 2.21, those still enabled from v2.22.3-1:318). From 2.24 a collective left with no
  pair fails in NCCL ("No algorithm/protocol available", enqueue.cc); here
  :meth:`.model.NcclModel.pick` says so. Names NCCL would reject or, before 2.24, ignore are
  refused: a typo must not pass as a setting.
- ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS``: read as ``strtoll`` reads them and clamped
  as NCCL clamps them (max 1..32, min 0..32, -2 unset; connect.cc ``ncclMaxNchannels``);
  they bound ``comm->nChannels`` after the graph search (:mod:`.channels`); NCCL's bandwidths
  keep the searched graph's ``nChannels`` (tuning.cc:175).
- ``NCCL_BUFFSIZE``, ``NCCL_NVLS_CHUNKSIZE``, ``NCCL_NVLSTREE_MAX_CHUNKSIZE`` (the NVLS
  pipelines' chunk, :func:`.pipeline.first_chunk`) and aws-ofi-nccl's ``OFI_NCCL_PROTOCOL``:
  :mod:`.ofi_env`.
- ``NCCL_NVLS_ENABLE`` (src/transport/nvls.cc ``ncclNvlsInit``, default 2: where the
  hardware supports it): 0 turns NVLS support off, so no NVLS or NVLSTree; any other value
  forces it on, which NCCL cannot run on NVSwitch GPUs without multicast (before sm90):
  refused there; elsewhere NCCL finds no NVLS graph (or too few GPUs) and runs without.

>>> from tracecli.costs.nccl.model import NcclModel
>>> from tracecli.model import CollectiveKind as K
>>> m = NcclModel.for_topology("h100", 2, 8, True, 800.0, 4, "2.19.3", "tcpx")
>>> m.choice(K.ALL_REDUCE, 1 << 30)[:2]
('NVLSTree', 'Simple')
>>> r = restrict(m, {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "12"})
>>> r.choice(K.ALL_REDUCE, 1 << 30)[:2], r.choice(K.ALL_GATHER, 1 << 10)[:2]
(('Ring', 'Simple'), ('Ring', 'Simple'))
>>> r._table().comm.channels  # comm->nChannels (channels.py)
12
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Mapping, Optional

from ...errors import CostModelError
from .tuning import (ALGOS, CN_CHAIN, CN_DIRECT, FUNCS, LL128, NVLS, NVLS_TREE, PROTOS, RING,
                     TREE, Table, tune)
from .versions import parse_version
from .ofi_tuner import TUNER_VARS, check_env
from . import ofi_env

__all__ = ["restrict", "apply", "enables", "KNOWN", "settings", "channel_bounds", "no_algorithm"]

KNOWN = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
         "NCCL_NVLS_ENABLE") + TUNER_VARS + ofi_env.VARS  # who tunes on AWS (ofi_tuner.py),
# the NVLS chunks and aws-ofi-nccl's protocol (ofi_env.py)
PREFIXES = (2, 24)  # the release whose parseList reads "collective:list;..." entries
PAT_FROM = (2, 23)  # the release that named the PAT algorithm
MAX_SETTING = 200  # characters of one setting's value
MAX_ENTRY = 69  # of one ;-entry: "reducescatter:^" and all seven names, each once
_STRTOLL = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def _release(version: str) -> tuple[int, int]:
    v = parse_version(version)
    if v is None:
        raise CostModelError(f"cannot read NCCL version {version!r}; write it as 2.21.5")
    return v[0], v[1]


def _number(var: str, text: str) -> int:
    """``text`` as NCCL's ``strtoll(str, NULL, 0)`` reads it (src/misc/param.cc), where all of
    it is a number; text NCCL would read only part of, or as 0, is refused."""
    m = _STRTOLL.fullmatch(text.rstrip())
    if m is None or len(text) > 40:
        raise CostModelError(f"{var}={text}: NCCL reads only a whole number here (12, 0x10, "
                             "-2); pass the number you mean")
    digits = m.group(2)
    base = 16 if digits[:2].lower() == "0x" else 8 if len(digits) > 1 and digits[0] == "0" else 10
    return int(m.group(1) + digits, base)


def channel_bounds(env: Mapping[str, str]) -> tuple[Optional[int], Optional[int]]:
    """``(NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS)`` as read (``None``: unset, or -2, NCCL's own
    mark of unset); :func:`.channels.comm_channels` clamps them as connect.cc does."""
    out = []
    for var in ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"):
        n = _number(var, env[var]) if var in env else None
        out.append(None if n == -2 else n)
    return out[0], out[1]


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
            if i or text.startswith(";"):  # strtok's first token must open the string
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
    if release < PREFIXES:  # without CollNet, none of Ring/Tree/NVLS/NVLSTree: Ring and Tree
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


def _available(table: Table, f: int) -> bool:
    """Whether collective ``f`` has a pair NCCL may pick (algotime.candidates' rules)."""
    comm = table.comm
    for a in range(len(ALGOS)):
        if a in (CN_DIRECT, CN_CHAIN) and not comm.collnet or \
                a in (NVLS, NVLS_TREE) and not comm.nvls_support or \
                a == NVLS and comm.n_nodes > 1 and not comm.collnet:
            continue
        if any(table.bw[f][a]):
            return True
    return False


def apply(table: Table, env: Mapping[str, str], version: str) -> Table:
    """``table`` (tuning.tune's, NCCL's own enables) as NCCL ``version`` runs under ``env``:
    disabled pairs at bandwidth 0 (tuning.cc's last loop), LL128 where it is named, Ring
    restored where a collective is left with nothing (2.19-2.23)."""
    if "NCCL_ALGO" not in env and "NCCL_PROTO" not in env:
        return table
    comm, release = table.comm, _release(version)
    algo, proto = enables(env, version, comm.n_nodes)
    # named LL128 skips NCCL's path check: the table of graphs that pass it
    unchecked = tune(replace(comm, **{g: replace(getattr(comm, g), ll128=True)
                                      for g in ("ring", "tree", "nvls")}), table.consts)
    for f in range(len(FUNCS)):
        if proto[f][LL128] == 1:
            for a in range(len(ALGOS)):
                table.bw[f][a][LL128] = unchecked.bw[f][a][LL128]
    if release < (2, 22):  # ringbdw: saved as computed, before any protocol is disabled
        ring_kept = [[unchecked.bw[f][RING][p] for p in range(3)] for f in range(len(FUNCS))]
    else:  # v2.22.3-1 tuning.cc:318: zeroed where the protocol is off
        ring_kept = [[table.bw[f][RING][p] if proto[f][p] else 0.0 for p in range(3)]
                     for f in range(len(FUNCS))]
    for f in range(len(FUNCS)):
        for a in range(len(ALGOS)):
            for p in range(len(PROTOS)):
                if proto[f][p] == 0 or algo[f][a] == 0:
                    table.bw[f][a][p] = 0.0
        if (2, 19) <= release < PREFIXES and not _available(table, f):
            table.bw[f][RING] = list(ring_kept[f])  # "at least set ring algo available"
    table.__dict__.pop("_memo", None)  # algotime's cache of the table
    return table


def settings(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``env`` checked for names tracecli models (others refused), in a stable order."""
    unknown = sorted(set(env) - set(KNOWN))
    if unknown:
        raise CostModelError(f"{unknown[0]} is not modelled; known: " + ", ".join(KNOWN))
    long = next((k for k, v in env.items() if len(v) > MAX_SETTING
                 or any(len(e) > MAX_ENTRY for e in v.split(";"))), None)
    if long is not None:
        raise CostModelError(f"{long}'s value is over {MAX_SETTING} characters, or an entry "
                             f"of it over {MAX_ENTRY}; give the setting as the job's "
                             "environment has it, each name once")
    return tuple(sorted(env.items()))


def restrict(model, env: Mapping[str, str]):
    """``model`` as NCCL runs under the settings ``env`` names (:data:`KNOWN`; others refused).
    The settings are checked here, against the model's NCCL release."""
    given = settings(env)
    enables(env, model.version, model.topology.nodes)  # refuses what NCCL would not read
    check_env(env, model.version, model.name.removeprefix("nccl:"))
    channel_bounds(env)
    ofi_env.check_env(env, model.version, model.link_net, model.topology.nodes,
                      ofi_env.platform_net(model))
    model = ofi_env.regraph(model, ofi_env.protocol(env))
    nvls = model.nvls
    if "NCCL_NVLS_ENABLE" in env:
        value = _number("NCCL_NVLS_ENABLE", env["NCCL_NVLS_ENABLE"])
        if value == 0:
            nvls = None
        elif value != 2 and nvls is None and model.intra == "nvswitch" and model.compcap < 90 \
                and model.topology.gpus_per_node > 2:
            raise CostModelError(f"NCCL_NVLS_ENABLE={env['NCCL_NVLS_ENABLE']} forces NVLS on "
                                 f"sm{model.compcap} GPUs, which have no NVLink multicast: NCCL "
                                 "would fail; pass 0 or 2")
    return replace(model, nccl_env=given, nvls=nvls,
                   source=model.source + "; " + " ".join(f"{k}={v}" for k, v in given))


def no_algorithm(version: str, func: str, env: tuple[tuple[str, str], ...]) -> CostModelError:
    """What NCCL 2.24+ does with a collective its settings leave no pair for: it fails the
    call ("No algorithm/protocol available", enqueue.cc, ``ncclInvalidUsage``)."""
    return CostModelError(f"NCCL {version} has no algorithm left for {func} under "
                          + " ".join("=".join(kv) for kv in env)
                          + ": NCCL fails the call; enable one for it (e.g. Ring)")
