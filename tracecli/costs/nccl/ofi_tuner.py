"""aws-ofi-nccl's bundled "region" tuner: the (algorithm, protocol) it makes NCCL pick on AWS
p5.48xlarge, p5e.48xlarge, p5en.48xlarge and p6-b200.48xlarge, where the job's network plugin
is aws-ofi-nccl, and the channels it sets on p6-b200.

Sources (tags of github.com/aws/aws-ofi-nccl; NCCL tags of github.com/NVIDIA/nccl):

- Who runs it. From v1.16.0 the tuner is bundled into the net plugin (``src/Makefile.am``
  v1.16.3:86-97; before, ``libnccl-ofi-tuner.so`` of its own, v1.13.2-aws:96-100, which NCCL
  opens only where ``NCCL_TUNER_PLUGIN`` names it). NCCL 2.21+ takes a tuner from the net
  plugin's library when ``NCCL_TUNER_PLUGIN`` is unset or names no library it can open
  (``src/misc/tuner.cc`` v2.21.5-1:62-104; ``src/plugin/tuner.cc`` v2.27.7-1:53-59); 2.28+
  reads ``NCCL_TUNER_PLUGIN=none`` as no tuner (v2.28.9-1:56-59). NCCL 2.19-2.20 open only the
  library ``NCCL_TUNER_PLUGIN`` names (``src/misc/tuner.cc`` v2.20.5-1:29-45), which 1.16's
  net plugin sets, where it is unset, to its own library (``libnccl-net.so``,
  ``platform-aws.cpp`` v1.16.3:475-531, :func:`_tuner_name`); 2.18 has no tuners. NCCL 2.21
  calls the v2 interface (``nccl_tuner.h`` v2.21.5-1:58), whose answer NCCL takes as it is
  (``enqueue.cc`` v2.21.5-1:1549-1554); 2.22+ the v3 one with NCCL's cost table.
  2.19-2.20 ``dlopen`` the name as given (v2.20.5-1:29-32; ``NCCL_TUNER_PLUGIN=ofi`` opens
  nothing), and aws-ofi-nccl's v1 init then fails the communicator where ``NCCL_ALGO`` or
  ``NCCL_PROTO`` is set (``nccl_ofi_tuner.cpp`` v1.16.3:269-276; ``init.cc`` v2.20.5-1:1505).
  Only release 1.16.x's loading is modelled (:func:`active`).
- Whether it tunes. ``nccl_ofi_tuner_init`` (``src/tuner/nccl_ofi_tuner.cpp`` v1.16.3:47-170):
  the instance type (DMI product name) must be ``p5.48xlarge``, ``p5e.48xlarge`` (one set
  of tables), ``p5en.48xlarge`` or ``p6-b200.48xlarge`` (lines 100-108, 1254-1261);
  ``OFI_NCCL_TUNER_TYPE=Internal`` (case-insensitive, ``include/nccl_ofi_param.h``
  v1.16.3:294) and, from v1.16.0, any ``OFI_NCCL_FORCE_NUM_RAILS`` (lines 80-97) leave NCCL's
  own choice; ``OFI_NCCL_TUNER_TYPE=Model`` picks the model tuner (lines 139-154) where the
  instance type has one (not p6-b200), not modelled here; any other value runs the Region
  tuner (lines 72-80). p4d/p4de have no table: no tuner.
- What it picks. ``region_get_coll_info_internal_v3`` (``src/tuner/nccl_ofi_regions.cpp``
  v1.16.3:1328-1407): nothing on 2 nodes or fewer (lines 1352-1357; added in v1.14.0, absent
  from v1.13.x's ``nccl_ofi_regions.c``:975-1033); else the point ``(nBytes, nRanks)`` is tested
  against each region in order, skipping a pair NCCL's table marks ignored (disabled), and the
  first region that holds it (inside or on an edge) gets cost 0, which NCCL's argmin then takes.
  No region: NCCL's own choice. The v2 path (lines 1263-1326) skips PAT, and NVLSTree
  without NVLS support, and does not read NCCL's table. On p6-b200 at 8 GPUs a node a
  tree/LL128 pick of 4-32 MiB also sets the channels (lines 1392-1402, :func:`channels`).
- The regions: every table of 1.16.3 (:mod:`.ofi_regions`): p5/p5e at 8, 2 and 1 GPUs a
  node, p5en and p6-b200 at 8 and 1; all-reduce on each, all-gather and reduce-scatter on
  p5/p5e at 1 and on p5en and p6-b200 at both. Geometry: ``intersect``, ``distance``,
  ``is_inside_region`` and ``extend_region`` (v1.16.3:76-271, the same in 1.13-1.18), ported
  below with the ``long double`` steps in x86's 80-bit precision (:func:`_ext`); from 1.19.0
  the points are tested in log2 space (``transform_log2``, v1.21.1:205,242,258), not ported.

>>> region_pick("1.16.3", "p5.48xlarge", "AllReduce", 64 << 20, 32, 4)
('Ring', 'LL128')
>>> region_pick("1.16.3", "p5.48xlarge", "AllReduce", 64 << 20, 16, 2) is None  # <= 2 nodes
True
>>> region_pick("1.16.3", "p5en.48xlarge", "AllReduce", 16 << 20, 4, 4)  # 1 GPU a node
('Ring', 'Simple')
>>> best_channels(16 << 20, 4)  # p6-b200's tree/LL128 at 16 MiB on 4 nodes
24
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping, Optional

from ...errors import CostModelError
from ...model import CollectiveKind
from .algotime import algo_time, best, candidates
from .ofi_regions import MAX_RANKS, MAX_SIZE, PLATFORM, SAME, TABLES, best_channels, extend
from .versions import ALGOS, PROTOS, parse_version

__all__ = ["DEFAULT_RELEASE", "INSTANCES", "TUNER_VARS", "region_pick", "check_env", "active",
           "note", "tuned", "channels", "best_channels", "tuner_doc", "extend", "inside"]

# EFA installer 1.43.2 (2025-08-15) ships libnccl-ofi 1.16.3 (AWS EC2 user guide, "Elastic
# Fabric Adapter release notes", efa-changelog): the release in the p5 training table's image.
DEFAULT_RELEASE = "1.16.3"
# tracecli's platform presets and the instance type aws-ofi-nccl reads (platforms.py)
INSTANCES = {"aws-p4d": "p4d.24xlarge", "aws-p4de": "p4de.24xlarge", "aws-p5": "p5.48xlarge",
             "aws-p5e": "p5e.48xlarge", "aws-p5en": "p5en.48xlarge",
             "aws-p6-b200": "p6-b200.48xlarge"}
# ranks a node for which each instance type has a table (ofi_regions.TABLES); other shapes: none
SHAPES = {i: tuple(n for (p, n) in TABLES if p == PLATFORM[i]) for i in PLATFORM}
# aws-ofi-nccl 1.16.3's library and the links to it it installs (src/Makefile.am v1.16.3:72-107)
LIBRARIES = ("libnccl-net-ofi.so", "libnccl-net.so", "libnccl-ofi-tuner.so", "libnccl-tuner-ofi.so")
EPS = 1e-10  # is_inside_region's eps (v1.16.3:165)


def _cross(a, b) -> float:
    return a[0] * b[1] - a[1] * b[0]


def _ext(x: Fraction) -> Fraction:
    """``x`` rounded to x86's ``long double`` (64-bit significand, to nearest even): the C code
    divides and scales in it (``intersect``'s ``a``, ``vmadd``), and a point on an edge is one
    whose distance comes out below 1e-10, so the rounding decides the edges."""
    if x == 0:
        return Fraction(0)
    shift = 63 - (abs(x.numerator).bit_length() - x.denominator.bit_length())
    scaled = x * (Fraction(2) ** shift)
    q = round(scaled)  # Fraction rounds half to even
    if abs(q).bit_length() > 64:  # the estimate of the exponent was one low
        q = round(scaled / 2) * 2
    return Fraction(q) / (Fraction(2) ** shift)


def _intersect(x0, x1, y0, y1, eps: float, exact: bool = True):
    """``intersect`` (v1.16.3:76-108): ``(1 | -1 | 0, point)``; the point is None where the C
    code leaves it unset (parallel segments). ``exact=False``: the quotient in double where it
    is far from the thresholds (the same answer) and the point in double (near it)."""
    dx, dy = (x1[0] - x0[0], x1[1] - x0[1]), (y1[0] - y0[0], y1[1] - y0[1])
    d = _cross(dy, dx)
    if abs(d) < eps:
        return 0, None
    num = _cross(x0, dx) - _cross(y0, dx)
    a = num / d
    if exact or min(abs(a - t) for t in (-eps, eps, 1 - eps, 1 + eps)) < 1e-6:
        a = _ext(Fraction(num) / Fraction(d))
        sect = tuple(float(_ext(Fraction(y0[k]) + _ext(a * Fraction(dy[k])))) for k in (0, 1))
    else:
        sect = (y0[0] + a * dy[0], y0[1] + a * dy[1])
    if a < -eps or a > 1 + eps:
        return -1, sect
    if a < eps or a > 1 - eps:
        return 0, sect
    a = (_cross(x0, dy) - _cross(y0, dy)) / d
    return (-1 if a < 0 or a > 1 else 1), sect


def _distance(x, y0, y1, eps: float) -> float:
    """``distance`` (v1.16.3:124-141). A zero-length edge (the C code reads an unset point:
    undefined) counts as far away. The point is found in double first, and again as the C
    code finds it where that lands within 1e-3 of ``x``."""
    dy = (y1[0] - y0[0], y1[1] - y0[1])
    x1 = (x[0] + dy[1], x[1] - dy[0])
    for exact in (False, True):
        r, s = _intersect(x, x1, y0, y1, eps, exact)
        if r == -1 or s is None:
            return math.inf
        far = math.sqrt((s[0] - x[0]) ** 2 + (s[1] - x[1]) ** 2)
        if far > 1e-3:
            return far
    return far


def inside(point, vertices) -> int:
    """``is_inside_region`` (v1.16.3:158-219): 1 inside, 0 on an edge, -1 outside. The
    bounding box starts from vertex 0's x and vertex 1's y, as the C code does."""
    n = len(vertices)
    xs, ys = [v[0] for v in vertices], [v[1] for v in vertices]
    # an edge holds points up to 1e-10 of its length past its ends (intersect's eps on the
    # segment's parameter): 11 bytes on one 100 GiB long; none past this margin
    pad = 1.0 + 1e-9 * (max(xs) - min(xs) + max(ys) - min(ys))
    if not (min(xs) - pad <= point[0] <= max(xs) + pad
            and min(ys) - pad <= point[1] <= max(ys) + pad):
        return -1  # no edge within 1e-10 either: the C code's answer, found sooner
    for i in range(n):
        if _distance(point, vertices[i], vertices[(i + 1) % n], EPS) < EPS:
            return 0
    if not (min(xs) <= point[0] <= max(xs) and min(ys) <= point[1] <= max(ys)):
        return -1
    far = (2.0 * MAX_SIZE, 2.0 * MAX_RANKS)
    crosses = sum(_intersect(point, far, vertices[i], vertices[(i + 1) % n], EPS, False)[0] == 1
                  for i in range(n))  # assert() is compiled out: a 0 is not a crossing
    return 1 if crosses & 1 else -1


def _release(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.removesuffix("-aws").split("."))
    except ValueError:
        raise CostModelError(f"cannot read aws-ofi-nccl release {text!r}; write it as "
                             "1.16.3") from None


def region_pick(release: str, instance: str, func: str, nbytes: int, ranks: int, nodes: int,
                enabled: Optional[set] = None, nvls: bool = True) -> Optional[tuple[str, str]]:
    """The pair aws-ofi-nccl ``release``'s region tuner gives cost 0 for ``func`` (NCCL's name,
    "AllReduce") of ``nbytes`` on ``ranks`` ranks over ``nodes`` nodes of ``instance``; ``None``
    where it leaves NCCL's own choice. ``enabled``: the pairs NCCL's cost table holds (the v3
    interface skips the others, v1.16.3:1366-1371; ``None``: the v2 interface, which skips PAT,
    and NVLSTree unless ``nvls``, v1.16.3:1297-1303). The tables are 1.16.3's
    (:mod:`.ofi_regions`): a release whose table for ``instance`` differs is refused, and so
    are releases from 1.19.0, whose geometry runs on log2 coordinates (``transform_log2``,
    ``nccl_ofi_regions.cpp`` v1.21.1:205,242,258), not ported."""
    rel = _release(release)
    if rel >= (1, 19):
        raise CostModelError(f"aws-ofi-nccl {release}'s region tuner tests points in log2 space "
                             "(from 1.19.0), which tracecli does not model; it models 1.13-1.18")
    if rel < (1, 13) or instance not in PLATFORM or nodes <= 0 or ranks % nodes:
        return None  # before 1.13 no region tables of these shapes (nccl_ofi_regions.c)
    first, last = SAME[PLATFORM[instance]]
    if not first <= rel[:3] <= last:
        raise CostModelError(f"aws-ofi-nccl {release}'s region table for {instance} is not "
                             f"1.16.3's, which tracecli models (the same in "
                             f"{'.'.join(map(str, first))}-{'.'.join(map(str, last))})")
    if nodes <= 2 and rel >= (1, 14):
        return None  # nccl_ofi_regions.cpp v1.16.3:1352-1357
    regions = TABLES.get((PLATFORM[instance], ranks // nodes), {}).get(func, ())
    point = (float(nbytes), float(ranks))  # no table for this shape or collective: no regions
    for algo, proto, vertices in regions:
        if enabled is not None and (algo, proto) not in enabled:
            continue
        if enabled is None and (algo == "PAT" or algo == "NVLSTree" and not nvls):
            continue
        if inside(point, vertices) >= 0:
            return algo, proto
    return None


TUNER_VARS = ("NCCL_TUNER_PLUGIN", "OFI_NCCL_TUNER_TYPE", "OFI_NCCL_FORCE_NUM_RAILS")


def _nccl(version: str) -> tuple[int, int]:
    return (parse_version(version) or (0, 0, 0))[:2]  # checked by forced/versions first


def _opens(plugin: str) -> bool:
    """Whether NCCL 2.19-2.20's ``dlopen(NCCL_TUNER_PLUGIN)`` (``src/misc/tuner.cc``
    v2.20.5-1:29-32: the name as given, no ``libnccl-tuner-%s.so``) opens aws-ofi-nccl's
    library: one of its file names, bare or as a path."""
    return plugin.rsplit("/", 1)[-1] in LIBRARIES


def check_env(env: Mapping[str, str], version: Optional[str] = None,
              platform: Optional[str] = None) -> None:
    """Refuse tuner settings tracecli does not model, and those NCCL ``version`` fails the
    communicator under (one line each). ``OFI_NCCL_TUNER_TYPE=Model`` runs the Model tuner
    where the instance type has one (p5, p5e, p5en: ``is_model_supported``,
    ``nccl_ofi_model.cpp`` v1.16.3:130-137), not modelled; on p6-b200 it is ignored and the
    Region tuner runs (``nccl_ofi_tuner.cpp`` v1.16.3:132-143)."""
    kind = env.get("OFI_NCCL_TUNER_TYPE")
    if kind is not None and kind.lower() == "model" \
            and INSTANCES.get(platform or "") != "p6-b200.48xlarge":  # strcasecmp, v1.16.3:72-80
        raise CostModelError(f"OFI_NCCL_TUNER_TYPE={kind}: tracecli models aws-ofi-nccl's "
                             "Region tuner and Internal (NCCL's own choice); the Model tuner "
                             "is not modelled")
    plugin = env.get("NCCL_TUNER_PLUGIN")
    if plugin and plugin.lower() != "none" and "ofi" not in plugin.lower() \
            and not _opens(plugin):
        raise CostModelError(f"NCCL_TUNER_PLUGIN={plugin}: tracecli models aws-ofi-nccl's "
                             "tuner (a library named *ofi*) or none; another tuner's choice is "
                             "not modelled")
    loaded = _tuner_name(env, platform)
    if version is not None and (2, 19) <= _nccl(version) < (2, 21) and loaded \
            and _opens(loaded) and ("NCCL_ALGO" in env or "NCCL_PROTO" in env):
        raise CostModelError(f"NCCL {version} loads aws-ofi-nccl's tuner ({loaded}), whose init "
                             "refuses NCCL_ALGO/NCCL_PROTO (nccl_ofi_tuner.cpp v1.16.3:269-276):"
                             " NCCL fails communicator init; unset them, or set "
                             "NCCL_TUNER_PLUGIN=none (a library NCCL cannot open: no tuner)")


def _tuner_name(env: Mapping[str, str], platform: Optional[str]) -> Optional[str]:
    """``NCCL_TUNER_PLUGIN`` as NCCL reads it: aws-ofi-nccl 1.16's net plugin, which NCCL inits
    first (``init.cc`` v2.20.5-1: ``commAlloc`` before ``ncclLoadTunerPlugin`` at 1503), sets
    it where it is unset, on every AWS instance, to the library NCCL opened it as
    (``configure_tuner``, ``platform-aws.cpp`` v1.16.3:475-531): ``libnccl-net.so`` where
    ``NCCL_NET_PLUGIN`` is unset (``net.cc`` v2.20.5-1:344-351)."""
    name = env.get("NCCL_TUNER_PLUGIN")
    return "libnccl-net.so" if name is None and platform in INSTANCES else name


def active(platform: str, version: str, nodes: int, env: Mapping[str, str],
           release: str = DEFAULT_RELEASE) -> Optional[str]:
    """The instance type whose region tuner NCCL ``version`` runs on ``platform`` (a preset
    name) under ``env``, or ``None`` where the choice is NCCL's own (no tuner loaded, switched
    off, or no region table for the instance type). Release 1.16.x only, the one the presets'
    images install: the loading differs before (a library of its own before 1.16.0,
    ``src/Makefile.am`` v1.13.2-aws:96-100; "Internal" read with ``strcmp`` in 1.13-1.15) and
    after (no ``ncclTunerPlugin_v1`` from 1.20.0)."""
    if _release(release)[:2] != (1, 16):
        raise CostModelError(f"aws-ofi-nccl {release}: tracecli models how NCCL loads the "
                             "tuner of release 1.16.x only")
    instance = INSTANCES.get(platform)
    if instance not in SHAPES or nodes < 2:
        return None  # not AWS EFA, no tuner table (p4d, p4de), or one node (it picks nothing)
    nccl = _nccl(version)
    plugin = env.get("NCCL_TUNER_PLUGIN") or None  # 2.21+: "" is unset (strlen, v2.21.5-1:61)
    if nccl < (2, 19):
        return None  # no tuner interface
    if nccl < (2, 21):
        if not _opens(_tuner_name(env, platform) or ""):
            return None  # 2.19-2.20 open only the library NCCL_TUNER_PLUGIN names
    elif plugin is not None and plugin.lower() == "none" and nccl >= (2, 28):
        return None  # tuner.cc v2.28.9-1:56-59; before 2.28 "none" opens nothing: the net plugin's
    if env.get("OFI_NCCL_TUNER_TYPE", "").lower() == "internal":
        return None  # any other value: the Region tuner (v1.16.3:72-80; Model: check_env)
    if "OFI_NCCL_FORCE_NUM_RAILS" in env:
        return None  # v1.16.3:80-97
    return instance


def _shape(model) -> tuple[Optional[str], bool]:
    """``(instance, tunes)`` for ``model``'s job: the instance type whose tuner NCCL runs
    (:func:`active`) and whether it tunes this communicator (more than 2 nodes, a table for
    its GPUs a node)."""
    nodes, platform = model.topology.nodes, model.name.removeprefix("nccl:")
    if platform not in INSTANCES:  # every pick asks: not AWS, no tuner (as active() would say)
        return None, False
    instance = active(platform, model.version, nodes, dict(model.nccl_env))
    if instance is None:
        return None, False
    per_node = model.gpus // nodes if model.gpus % nodes == 0 else 0
    return instance, nodes > 2 and per_node in SHAPES[instance]


def note(model) -> str:
    """What the model line says of the tuner ("" where there is none to speak of)."""
    instance, tunes = _shape(model)
    if instance is None:
        return ""
    nodes = model.topology.nodes
    if not tunes:
        return (f"; aws-ofi-nccl {DEFAULT_RELEASE}'s region tuner " + (
            f"leaves {nodes} nodes to NCCL's own pick" if nodes <= 2 else
            f"has no table for {model.gpus // nodes} GPUs a node: NCCL's own pick"))
    sets = (" and the channels of its tree/LL128 all-reduce picks of 4-32 MiB" if
            instance == "p6-b200.48xlarge" and model.gpus == 8 * nodes else "")
    return (f"; picks by aws-ofi-nccl {DEFAULT_RELEASE}'s region tuner for {instance} where it "
            f"has one{sets}")


def _hit(model, table, func: str, charged: int) -> Optional[tuple[str, str]]:
    """The pair the tuner gives cost 0 (``None``: no region, NCCL's own choice): the v3
    interface (NCCL 2.22+) skips what NCCL's table disables, the v2 one (2.21) reads no table."""
    instance, tunes = _shape(model)
    if not tunes:
        return None
    v3 = _nccl(model.version) >= (2, 22)
    enabled = {(ALGOS[x], PROTOS[y]) for x, y in candidates(table, func)} if v3 else None
    return region_pick(DEFAULT_RELEASE, instance, func, charged, model.gpus,
                       model.topology.nodes, enabled, model.nvls is not None)


def tuned(model, table, func: str, charged: int) -> tuple[float, int, int]:
    """``algotime.best`` with aws-ofi-nccl's region tuner in front where the job runs it
    (:func:`active`): ``(µs, algorithm, protocol)``, the µs NCCL's own model time of the pair."""
    us, a, p = best(table, func, charged)
    hit = _hit(model, table, func, charged) if a >= 0 else None
    if hit is None:
        return us, a, p
    a, p = ALGOS.index(hit[0]), PROTOS.index(hit[1])
    us = algo_time(table, func, a, p, charged)
    if us < 0:  # the v2 interface (NCCL 2.21) does not read NCCL's table
        raise CostModelError(f"NCCL {model.version} runs aws-ofi-nccl's tuner choice {hit[0]}/"
                             f"{hit[1]}, which the job's NCCL settings disable: not modelled")
    return us, a, p


def channels(model, kind, algo: str, proto: str, charged: int, start: int) -> int:
    """The channels NCCL runs the tuner's pick on where the tuner sets them (0: NCCL's own
    count): on p6-b200 at 8 GPUs a node, a tree/LL128 all-reduce of 4 to 32 MiB the tuner
    picks gets :func:`best_channels` (v1.16.3:1392-1402, the v3 interface only), which NCCL
    takes over its own (``enqueue.cc`` v2.27.7-1:1935) and runs on at most ``start``, its
    ``nChannels`` (v2.27.7-1:549-550,623-624). ``kind``: a
    :class:`~tracecli.model.CollectiveKind`."""
    if algo != "Tree" or proto != "LL128" or not 4 << 20 <= charged <= 32 << 20 \
            or kind is not CollectiveKind.ALL_REDUCE or model.gpus != 8 * model.topology.nodes \
            or INSTANCES.get(model.name.removeprefix("nccl:")) != "p6-b200.48xlarge" \
            or _nccl(model.version) < (2, 22):
        return 0
    if _hit(model, model._table(), "AllReduce", charged) != ("Tree", "LL128"):
        return 0  # NCCL's own pick (no region), or the tuner's is not tree/LL128
    return min(best_channels(charged, model.topology.nodes), start)


def tuner_doc(model) -> Optional[dict]:
    """``--json``'s ``tuner``: the tuner NCCL runs for this model's job (null: none, or no region
    table for the instance type). ``tunes``: the real tuner picks for this communicator;
    ``modelled``: tracecli's picks are the ones it makes NCCL take (every table of the release
    is ported, :mod:`.ofi_regions`)."""
    instance, tunes = _shape(model)
    if instance is None:
        return None
    return {"name": "aws-ofi-nccl region tuner", "release": DEFAULT_RELEASE,
            "instance": instance, "modelled": True, "tunes": tunes}
