"""NCCL's tuning constants, per NCCL release, read from ``src/graph/tuning.cc`` of NVIDIA/nccl.

Each :class:`Constants` is the table of one tagged release; a version between two tags takes
the latest tag at or below it (:func:`constants_for`). Line numbers are those of the tag named.

- ``base`` (µs, ``[algo][proto]``): ``baseLat`` / ``.baseLatencies``.
  v2.23.4-1 tuning.cc:56-59; v2.28.3-1 tuning.cc:150-156 (PAT row added); v2.30.7-1 tuning.cc:150-155.
- ``hw`` (µs, ``[NVLINK|PCI|NET][algo][proto]``): ``hwLat`` / ``.hwLatencies``.
  v2.23.4-1 tuning.cc:65-78; v2.30.7-1 tuning.cc:157-175. NET/NVLSTree/Simple is 14 up to
  v2.28.7 and 20.9 from v2.28.9 (tuning.cc:174 of v2.28.9-1).
- ``ll_max[row][nodes]``, ``ring_ll128[cc][nodes]``, ``tree_ll128``, ``tree``, ``nvls_tree`` (GB/s
  per channel, nodes index N1/N2/N4+): ``llMaxBws``, ``perChMaxRingLL128Bws``,
  ``perChMaxTreeLL128Bws``, ``perChMaxTreeBws``, ``perChMaxNVLSTreeBws``; v2.23.4-1
  tuning.cc:86-106 (Volta, Ampere, Hopper only); v2.25.1-1 adds Blackwell as 2x Hopper;
  v2.28.3-1 tuning.cc:177-211 own Blackwell rows, changed again in v2.28.7 (ring LL128 N2
  34.6), v2.28.9 (NVLSTree N4 43.8), v2.29.2 (ring LL128 34.5/34.6/34.5), v2.29.7 (40/40/40),
  v2.30.3 (NVLSTree N4 80.0); v2.30.7-1 tuning.cc:177-211.
- ``nvls_eff`` (v2.28.3+ only): ``nvlsEfficiency``, v2.30.7-1 tuning.cc:139-144.
- ``tree_correction[proto][log2(bytes/64)]``: ``treeCorrectionFactor``, 23 entries up to
  v2.27 (v2.27.7-1 tuning.cc), 24 from v2.28 (v2.30.7-1 tuning.cc:623-627).

``era`` "2.21" (v2.21.5-1 and v2.22.3-1, whose tuning.cc constants are the same; tuning.cc:56-106
of v2.22.3-1): no PAT; tree/Simple base latency 0 and hardware latency 28 µs on every link
(NVLink, PCI and network alike); ring LL128 at 0.7 of the bus when ``ppn < 2``; the network
latency of each algorithm's own row even at one GPU per node; ``2·nNodes`` inter-node ring
steps for all-reduce; NVLS bandwidth ``min(bwIntra, bwInter)``; CollNetDirect all-gather /
reduce-scatter ``ppn·bw·(0.85w + 0.95(1-w))`` with ``w = (ppn-1)/7``
(v2.22.3-1 tuning.cc:118-265). ``era`` "2.19" (v2.19.4-1 and v2.20.5-1): the "2.21" formulas with the ring LL bus at a
quarter (several nodes, all-reduce, reduce) or a third, Hopper's LL caps copied from Ampere's and
NVLS/NVLSTree 23 µs on NVLink. ``era`` "2.18" (v2.18.6-1): more (see ``_V2_18``). Releases
before 2.18 are refused with what differs (:data:`BEFORE_2_18`).

>>> constants_for("2.29.7").ring_ll128[3]
(40.0, 40.0, 40.0)
>>> constants_for("2.27.3").nvls_model, constants_for("2.30.7").nvls_model
('2.23', '2.28')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Optional

__all__ = ["Constants", "RELEASES", "DEFAULT_VERSION", "constants_for", "parse_version"]

DEFAULT_VERSION = "2.30.7"

# Algorithms and protocols in NCCL's enum order (src/include/plugin/nccl_tuner.h of v2.30.7).
ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOS = ("LL", "LL128", "Simple")

Row = tuple[float, float, float]


@dataclass(frozen=True)
class Constants:
    """One release's tables (see the module docstring for where each lives)."""

    tag: str
    base: tuple[Row, ...]            # [algo] -> (LL, LL128, Simple)
    hw: tuple[tuple[Row, ...], ...]  # [NVLINK, PCI, NET][algo]
    ll_max: tuple[Row, ...]          # rows: Volta/Intel, Ampere/AMD, Hopper, Blackwell
    ring_ll128: tuple[Row, ...]      # [compcap] -> (N1, N2, N4)
    tree_ll128: tuple[Row, ...]
    tree: tuple[Row, ...]
    nvls_tree: tuple[Row, ...]
    nvls_eff: tuple[float, float, float, float]
    tree_correction: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]
    nvls_model: str  # "2.23": bw = min(bwIntra, bwInter), ratio 5/6; "2.28": nvlsEfficiency model
    nvls_tree_correction: bool  # v2.28+: NVLSTree AllReduce on sm100 x86 takes the tree factor
    era: str = "2.23"  # "2.18", "2.19" (2.19-2.20), "2.21" (2.21-2.22): older formulas; "2.23": later


_Z: Row = (0.0, 0.0, 0.0)
_TC23 = ((1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
         (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
         (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9))
_TC28 = (_TC23[0] + (1.0,), _TC23[1] + (1.0,), _TC23[2] + (.9,))

_V2_23 = Constants(
    tag="v2.23.4-1",
    base=((6.8, 14.0, 8.4), (6.6, 14.0, 8.4), _Z, _Z, _Z, _Z, (8.0, 8.0, 8.0)),
    hw=(((.6, 1.25, 4.0), (.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 25), (0, 0, 25), (0, 0, 4.0)),
        ((1.0, 1.9, 4.0), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), _Z, _Z, (0, 0, 4.0)),
        ((5.0, 8.5, 14), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 14), (0, 0, 14))),
    ll_max=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (141.0, 45.0, 35.0)),
    ring_ll128=((20.0,) * 3, (20.0,) * 3, (36.7,) * 3, (36.7,) * 3),
    tree_ll128=((20.0,) * 3, (20.0,) * 3, (36.7, 36.7, 29.0), (36.7, 36.7, 29.0)),
    tree=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (38.7, 41.4, 36.0)),
    nvls_tree=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 57.7, 45.5)),
    nvls_eff=(0.0, 0.0, 0.0, 0.0), tree_correction=_TC23, nvls_model="2.23",
    nvls_tree_correction=False)
# Before v2.25 NCCL has no Blackwell row: sm100 takes the Hopper row (compCapIndex caps at 2).


def _x2(row: Row) -> Row:
    return tuple(2 * v for v in row)  # type: ignore[return-value]


_V2_25 = replace(_V2_23, tag="v2.25.1-1",
                 ll_max=_V2_23.ll_max[:3] + (_x2(_V2_23.ll_max[2]),),
                 ring_ll128=_V2_23.ring_ll128[:3] + (_x2(_V2_23.ring_ll128[2]),),
                 tree_ll128=_V2_23.tree_ll128[:3] + (_x2(_V2_23.tree_ll128[2]),),
                 tree=_V2_23.tree[:3] + (_x2(_V2_23.tree[2]),))
_V2_28_3 = replace(_V2_25, tag="v2.28.3-1",
                   tree_ll128=_V2_25.tree_ll128[:3] + ((55.6, 31.67, 20.0),),
                   tree=_V2_25.tree[:3] + ((70.0, 42.8, 24.0),),
                   nvls_tree=_V2_25.nvls_tree[:3] + ((0.0, 96.0, 43.1),),
                   nvls_eff=(0.0, 0.0, 0.85, 0.74), tree_correction=_TC28, nvls_model="2.28",
                   nvls_tree_correction=True)
_V2_28_7 = replace(_V2_28_3, tag="v2.28.7-1",
                   ring_ll128=_V2_28_3.ring_ll128[:3] + ((73.4, 34.6, 73.4),))
_NET_2_28_9 = _V2_28_7.hw[2][:5] + ((0, 0, 20.9),) + _V2_28_7.hw[2][6:]
_V2_28_9 = replace(_V2_28_7, tag="v2.28.9-1", hw=_V2_28_7.hw[:2] + (_NET_2_28_9,),
                   nvls_tree=_V2_28_7.nvls_tree[:3] + ((0.0, 96.0, 43.8),))
_V2_29_2 = replace(_V2_28_9, tag="v2.29.2-1",
                   ring_ll128=_V2_28_9.ring_ll128[:3] + ((34.5, 34.6, 34.5),))
_V2_29_7 = replace(_V2_29_2, tag="v2.29.7-1", ring_ll128=_V2_29_2.ring_ll128[:3] + ((40.0,) * 3,))
_V2_30_3 = replace(_V2_29_7, tag="v2.30.3-1",
                   nvls_tree=_V2_29_7.nvls_tree[:3] + ((0.0, 96.0, 80.0),))

# v2.22.3-1 tuning.cc:56-106 (v2.21.5-1 has the same values).
_V2_21 = replace(
    _V2_23, tag="v2.21.5-1", era="2.21",
    base=((6.8, 14.0, 0.0),) + _V2_23.base[1:6] + (_Z,),
    hw=tuple(((row[0][0], row[0][1], 28.0),) + row[1:6] + (_Z,) for row in _V2_23.hw))

# v2.19.4-1 and v2.20.5-1 tuning.cc:56-106 (the same values): v2.21's formulas and table but
# NVLS/NVLSTree on NVLink 23 us, Hopper's LL caps a copy of Ampere's (87.7/22.5/19.0) and the
# ring LL factor a quarter or a third (era "2.19", tuning.cc:181).
_AMPERE_LL = _V2_21.ll_max[1]
_V2_19 = replace(
    _V2_21, tag="v2.20.5-1", era="2.19",
    ll_max=_V2_21.ll_max[:2] + (_AMPERE_LL, _AMPERE_LL),
    hw=((_V2_21.hw[0][:4] + ((0, 0, 23), (0, 0, 23)) + _V2_21.hw[0][6:]),) + _V2_21.hw[1:])
# v2.18.6-1 tuning.cc:56-106: NVLS latency in the base row (23 us), tree/Simple 4/6/14 us a hop
# on NVLink/PCI/network, CollNet 8.0/4.75 (NVLink), 8.0/8.0 (PCI), 10.7/14 (network),
# NVLSTree 19 us a network hop; era "2.18": no NVLS for all-gather/reduce-scatter, NVLS
# bandwidth the graph's own, NVLSTree 0.7·nNodes/(2(nNodes-1)) of the bus, 2(nNodes-1) hops.
_V2_18 = replace(
    _V2_19, tag="v2.18.6-1", era="2.18",
    base=((6.8, 14.0, 0.0), (6.6, 14.0, 8.4), (6.8, 14.0, 0.0), (6.8, 14.0, 0.0),
          (0.0, 0.0, 23.0), (0.0, 0.0, 23.0), _Z),
    hw=(((.6, 1.25, 4.0), (.6, 1.9, 3.4), (0, 0, 8.0), (0, 0, 4.75), _Z, _Z, _Z),
        ((1.0, 1.9, 6.0), (1.0, 2.5, 5.7), (0, 0, 8.0), (0, 0, 8.0), _Z, _Z, _Z),
        ((5.0, 8.5, 14.0), (2.7, 4.0, 14.0), (0, 0, 10.7), (0, 0, 14.0), (0, 0, 18.0), (0, 0, 19.0), _Z)))

RELEASES: tuple[tuple[tuple[int, int, int], Constants], ...] = (
    ((2, 18, 0), _V2_18), ((2, 19, 0), _V2_19), ((2, 21, 0), _V2_21), ((2, 23, 0), _V2_23), ((2, 25, 0), _V2_25), ((2, 28, 0), _V2_28_3), ((2, 28, 7), _V2_28_7),
    ((2, 28, 9), _V2_28_9), ((2, 29, 0), _V2_29_2), ((2, 29, 7), _V2_29_7), ((2, 30, 0), _V2_30_3),
)

BEFORE_2_18 = ("before 2.18 NCCL has no NVLSTree and prices NVLS on the ring graph at 3/4 of its "
               "bandwidth with no latency: v2.17.1-1 tuning.cc:67-75, 127, 173")

_VERSION_RE = re.compile(r"^\s*v?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,6}))?(?:[-+].*)?\s*$")  # bounded digits


@lru_cache(maxsize=256)  # read at every size of a plan; pure
def parse_version(text: str) -> Optional[tuple[int, int, int]]:
    """``(major, minor, patch)`` of ``2.21.5``, ``v2.30.7-1``, ``2.19.3+cuda12.3``; else None.

    >>> parse_version("2.21.5+cuda12.4"), parse_version("v2.30.7-1"), parse_version("x")
    ((2, 21, 5), (2, 30, 7), None)
    """
    m = _VERSION_RE.match(text or "")
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def constants_for(version: str) -> Constants:
    """The constants of NCCL ``version``; ValueError (with what to pass) outside 2.18-2.30.

    >>> constants_for("2.17.1")
    Traceback (most recent call last):
    ...
    ValueError: NCCL 2.17.1 is not modelled (before 2.18 NCCL has no NVLSTree and prices NVLS on the ring graph at 3/4 of its bandwidth with no latency: v2.17.1-1 tuning.cc:67-75, 127, 173); use a version from 2.18 to 2.30
    >>> constants_for("2.19.3").ll_max[2], constants_for("2.18.3").base[4]
    ((87.7, 22.5, 19.0), (0.0, 0.0, 23.0))
    >>> constants_for("2.22.3").tag, constants_for("2.22.3").hw[0][0]
    ('v2.21.5-1', (0.6, 1.25, 28.0))
    """
    v = parse_version(version)
    if v is None:
        raise ValueError(f"cannot read NCCL version {version!r}; write it as 2.21.5")
    if v < RELEASES[0][0] or v >= (2, 31, 0):
        why = BEFORE_2_18 if v < RELEASES[0][0] else "released after 2.30, not read"
        raise ValueError(f"NCCL {version} is not modelled ({why}); "
                         "use a version from 2.18 to 2.30")
    chosen = RELEASES[0][1]
    for first, consts in RELEASES:
        if v >= first:
            chosen = consts
    return chosen
