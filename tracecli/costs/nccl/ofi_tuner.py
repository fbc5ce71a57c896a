"""aws-ofi-nccl's bundled "region" tuner: the (algorithm, protocol) it makes NCCL pick on AWS
p5.48xlarge and p5e.48xlarge, where the job's network plugin is aws-ofi-nccl.

Sources (tags of github.com/aws/aws-ofi-nccl; NCCL tags of github.com/NVIDIA/nccl):

- Who runs it. From v1.16.0 the tuner is bundled into the net plugin (``src/Makefile.am``
  v1.16.3:86-97; before, ``libnccl-ofi-tuner.so`` of its own, v1.13.2-aws:96-100, which NCCL
  opens only where ``NCCL_TUNER_PLUGIN`` names it). NCCL 2.21+ takes a tuner from the net
  plugin's library when ``NCCL_TUNER_PLUGIN`` is unset or names no library it can open
  (``src/misc/tuner.cc`` v2.21.5-1:62-104; ``src/plugin/tuner.cc`` v2.27.7-1:53-59); 2.28+
  reads ``NCCL_TUNER_PLUGIN=none`` as no tuner (v2.28.9-1:56-59). NCCL 2.19-2.20 open only the
  library ``NCCL_TUNER_PLUGIN`` names (``src/misc/tuner.cc`` v2.20.5-1:29-45); 2.18 has no
  tuners. NCCL 2.21 calls the v2 interface (``nccl_tuner.h`` v2.21.5-1:58), whose answer NCCL
  takes as it is (``enqueue.cc`` v2.21.5-1:1549-1554); 2.22+ the v3 one with NCCL's cost table.
  2.19-2.20 ``dlopen`` the name as given (v2.20.5-1:29-32; ``NCCL_TUNER_PLUGIN=ofi`` opens
  nothing), and aws-ofi-nccl's v1 init then fails the communicator where ``NCCL_ALGO`` or
  ``NCCL_PROTO`` is set (``nccl_ofi_tuner.cpp`` v1.16.3:269-276; ``init.cc`` v2.20.5-1:1505).
  Only release 1.16.x's loading is modelled (:func:`active`).
- Whether it tunes. ``nccl_ofi_tuner_init`` (``src/tuner/nccl_ofi_tuner.cpp`` v1.16.3:47-170):
  the instance type (DMI product name) must be ``p5.48xlarge`` or ``p5e.48xlarge`` (lines
  100-101; ``p5en.48xlarge`` and ``p6-b200.48xlarge`` have their own regions, not modelled here);
  ``OFI_NCCL_TUNER_TYPE=Internal`` (case-insensitive, ``include/nccl_ofi_param.h`` v1.16.3:294)
  and, from v1.16.0, any ``OFI_NCCL_FORCE_NUM_RAILS`` (lines 80-97) leave NCCL's own choice;
  ``OFI_NCCL_TUNER_TYPE=Model`` picks the model tuner (lines 139-154), not modelled here; any
  other value runs the Region tuner (lines 72-80). p4d/p4de have no table: no tuner.
- What it picks. ``region_get_coll_info_internal_v3`` (``src/tuner/nccl_ofi_regions.cpp``
  v1.16.3:1328-1407): nothing on 2 nodes or fewer (lines 1352-1357; added in v1.14.0, absent
  from v1.13.x's ``nccl_ofi_regions.c``:975-1033); else the point ``(nBytes, nRanks)`` is tested
  against each region in order, skipping a pair NCCL's table marks ignored (disabled), and the
  first region that holds it (inside or on an edge) gets cost 0, which NCCL's argmin then takes.
  No region: NCCL's own choice. The v2 path (lines 1263-1326) skips NVLSTree without NVLS
  support and does not read NCCL's table.
- The regions. ``region_init_internal_p5_p5e`` (v1.16.3:608-707): all-reduce at 8 ranks a
  node, ported here; its tables for 2 and 1 ranks a node (lines 708-896) and p5en's and p6's are
  not: there tracecli says so and shows NCCL's own pick. Geometry: ``intersect``, ``distance``,
  ``is_inside_region`` and ``extend_region`` (v1.16.3:76-271, the same in 1.13-1.18), ported
  below with the ``long double`` steps in x86's 80-bit precision (:func:`_ext`); from 1.19.0
  the points are tested in log2 space (``transform_log2``, v1.21.1:205,242,258), not ported.

>>> region_pick("1.16.3", "p5.48xlarge", "AllReduce", 64 << 20, 32, 4)
('Ring', 'LL128')
>>> region_pick("1.16.3", "p5.48xlarge", "AllReduce", 64 << 20, 16, 2) is None  # <= 2 nodes
True
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping, Optional

from ...errors import CostModelError
from .algotime import algo_time, best, candidates
from .versions import ALGOS, PROTOS, parse_version

__all__ = ["DEFAULT_RELEASE", "INSTANCES", "TUNER_VARS", "region_pick", "check_env", "active",
           "note", "tuned", "tuner_doc"]

# EFA installer 1.43.2 (2025-08-15) ships libnccl-ofi 1.16.3 (AWS EC2 user guide, "Elastic
# Fabric Adapter release notes", efa-changelog): the release in the p5 training table's image.
DEFAULT_RELEASE = "1.16.3"
# tracecli's platform presets and the instance type aws-ofi-nccl reads (platforms.py)
INSTANCES = {"aws-p4d": "p4d.24xlarge", "aws-p4de": "p4de.24xlarge", "aws-p5": "p5.48xlarge",
             "aws-p5e": "p5e.48xlarge", "aws-p5en": "p5en.48xlarge",
             "aws-p6-b200": "p6-b200.48xlarge"}
COVERED = ("p5.48xlarge", "p5e.48xlarge")  # nccl_ofi_tuner.cpp v1.16.3:100-101
# ranks a node for which each instance type's region_init_internal_* has a table (v1.16.3: p5en
# 284, 435; p5/p5e 615, 708, 818; p6 942, 1025), all-reduce among them; other shapes: no regions
SHAPES = {"p5.48xlarge": (8, 2, 1), "p5e.48xlarge": (8, 2, 1), "p5en.48xlarge": (8, 1),
          "p6-b200.48xlarge": (8, 1)}
PORTED = 8  # the shape whose table tracecli ports (p5/p5e's); the others' picks are not modelled
# aws-ofi-nccl 1.16.3's library and the links to it it installs (src/Makefile.am v1.16.3:72-107)
LIBRARIES = ("libnccl-net-ofi.so", "libnccl-net.so", "libnccl-ofi-tuner.so", "libnccl-tuner-ofi.so")
MAX_SIZE, MAX_RANKS = 100.0 * 1024 ** 3, 1024.0 * 1024  # nccl_ofi_tuner_region.h v1.16.3:49-54
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
    if not (min(xs) - 1 <= point[0] <= max(xs) + 1 and min(ys) - 1 <= point[1] <= max(ys) + 1):
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


def extend(a, b, z):
    """``extend_region`` (v1.16.3:244-271)."""
    if a[0] == b[0]:
        return a[0], z[1]
    if a[1] == b[1]:
        return z[0], a[1]
    m = (a[1] - b[1]) / (a[0] - b[0])
    c = b[1] - m * b[0]
    projected = m * z[0] + c
    return (z[0], projected) if projected < z[1] else ((z[1] - c) / m, z[1])


def _p5_p5e_allreduce() -> list:
    """``region_init_internal_p5_p5e``'s all-reduce regions at 8 ranks a node (v1.16.3:615-706),
    in order: ``[(algorithm, protocol, vertices), ...]``."""
    top = (MAX_SIZE, MAX_RANKS)
    tree_ll128 = extend((402653184, 2048), (402653184, 4096), top)
    nvlstree_1 = extend((8053063680, 160), (9663676416, 192), top)
    nvlstree_2 = extend((402653184, 2048), (402653184, 4096), top)
    ring_simple = extend((8053063680, 160), (9663676416, 192), top)
    return [
        ("Tree", "LL128", [(0, 16), (31457280, 16), (37748736, 32), (117440512, 64),
                           (301989888, 128), (301989888, 256), (335544320, 512),
                           (536870912, 1024), (402653184, 2048), (402653184, 4096),
                           tree_ll128, (0, tree_ll128[1])]),
        ("NVLSTree", "Simple", [(31457281, 16), (MAX_SIZE, 16), (31457281, 16)]),
        ("Ring", "LL128", [(31457280, 17), (1073741824, 17), (2147483648, 64),
                           (2147483648, 128), (1342177280, 160), (2147483648, 256),
                           (1074790400, 256), (444596224, 160), (301989888, 128),
                           (117440512, 64), (37748736, 32)]),
        ("NVLSTree", "Simple", [(2147483648, 128), (6442450944, 128), (8053063680, 160),
                                (9663676416, 192), nvlstree_1, nvlstree_2, (402653184, 4096),
                                (402653184, 2048), (536870912, 1024), (335544320, 512),
                                (301989888, 256), (310378496, 160), (444596224, 160),
                                (1074790400, 256), (2684354560, 256), (2147483648, 224),
                                (1342177280, 160)]),
        ("Ring", "Simple", [(1073741824, 17), (ring_simple[0], 17), ring_simple,
                            (9663676416, 192), (8053063680, 160), (2684354560, 64),
                            (1610612736, 32)]),
    ]


REGIONS = {("p5", "AllReduce"): _p5_p5e_allreduce()}


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
    interface skips the others; ``None``: the v2 interface, which skips NVLSTree unless
    ``nvls``). Releases 1.13-1.18 only: from 1.19.0 the geometry runs on log2 coordinates
    (``transform_log2``, ``nccl_ofi_regions.cpp`` v1.21.1:205,242,258), not ported. A shape
    with a table not ported here (2 or 1 ranks a node, :func:`modelled`) is refused too."""
    rel = _release(release)
    if rel >= (1, 19):
        raise CostModelError(f"aws-ofi-nccl {release}'s region tuner tests points in log2 space "
                             "(from 1.19.0), which tracecli does not model; it models 1.13-1.18")
    if rel < (1, 13) or instance not in COVERED or nodes <= 0 or ranks % nodes:
        return None  # before 1.13 p5/p5e had no region tables of this shape (nccl_ofi_regions.c)
    if nodes <= 2 and rel >= (1, 14):
        return None  # nccl_ofi_regions.cpp v1.16.3:1352-1357
    if ranks // nodes in SHAPES[instance] and ranks // nodes != PORTED:
        raise CostModelError(f"aws-ofi-nccl's table for {ranks // nodes} GPUs a node on "
                             f"{instance} is not modelled")
    if ranks != PORTED * nodes:
        return None  # no table: no regions
    point = (float(nbytes), float(ranks))
    for algo, proto, vertices in REGIONS.get(("p5", func), ()):
        if enabled is not None and (algo, proto) not in enabled:
            continue
        if enabled is None and algo == "NVLSTree" and not nvls:
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


def check_env(env: Mapping[str, str], version: Optional[str] = None) -> None:
    """Refuse tuner settings tracecli does not model, and those NCCL ``version`` fails the
    communicator under (one line each)."""
    kind = env.get("OFI_NCCL_TUNER_TYPE")
    if kind is not None and kind.lower() == "model":  # strcasecmp, nccl_ofi_tuner.cpp v1.16.3:72-80
        raise CostModelError(f"OFI_NCCL_TUNER_TYPE={kind}: tracecli models aws-ofi-nccl's "
                             "Region tuner and Internal (NCCL's own choice); the Model tuner "
                             "is not modelled")
    plugin = env.get("NCCL_TUNER_PLUGIN")
    if plugin and plugin.lower() != "none" and "ofi" not in plugin.lower() \
            and not _opens(plugin):
        raise CostModelError(f"NCCL_TUNER_PLUGIN={plugin}: tracecli models aws-ofi-nccl's "
                             "tuner (a library named *ofi*) or none; another tuner's choice is "
                             "not modelled")
    if version is not None and (2, 19) <= _nccl(version) < (2, 21) and plugin \
            and _opens(plugin) and ("NCCL_ALGO" in env or "NCCL_PROTO" in env):
        raise CostModelError(f"NCCL {version} loads aws-ofi-nccl's tuner ({plugin}), whose init "
                             "refuses NCCL_ALGO/NCCL_PROTO (nccl_ofi_tuner.cpp v1.16.3:269-276):"
                             " NCCL fails communicator init; unset them or NCCL_TUNER_PLUGIN")


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
        return None  # not AWS EFA, no tuner table (p4d, p4de), or no network plugin on one node
    nccl = _nccl(version)
    plugin = env.get("NCCL_TUNER_PLUGIN") or None  # 2.21+: "" is unset (strlen, v2.21.5-1:61)
    if nccl < (2, 19):
        return None  # no tuner interface
    if nccl < (2, 21):
        if env.get("NCCL_TUNER_PLUGIN") is None or not _opens(env["NCCL_TUNER_PLUGIN"]):
            return None  # 2.19-2.20 open only the library NCCL_TUNER_PLUGIN names
    elif plugin is not None and plugin.lower() == "none" and nccl >= (2, 28):
        return None  # tuner.cc v2.28.9-1:56-59; before 2.28 "none" opens nothing: the net plugin's
    if env.get("OFI_NCCL_TUNER_TYPE", "").lower() == "internal":
        return None  # any other value but Model (refused): the Region tuner (v1.16.3:72-80)
    if "OFI_NCCL_FORCE_NUM_RAILS" in env:
        return None  # v1.16.3:80-97
    return instance


def _shape(model) -> tuple[Optional[str], bool, bool]:
    """``(instance, tunes, modelled)`` for ``model``'s job: whether the real tuner tunes this
    communicator (more than 2 nodes, a table for its GPUs a node) and whether tracecli
    reproduces what it does (a ported table, or nothing to do)."""
    nodes, platform = model.topology.nodes, model.name.removeprefix("nccl:")
    if platform not in INSTANCES:  # every pick asks: not AWS, no tuner (as active() would say)
        return None, False, True
    instance = active(platform, model.version, nodes, dict(model.nccl_env))
    if instance is None:
        return None, False, True
    per_node = model.gpus // nodes if model.gpus % nodes == 0 else 0
    tunes = nodes > 2 and per_node in SHAPES[instance]
    return instance, tunes, not tunes or (instance in COVERED and per_node == PORTED)


def note(model) -> str:
    """What the model line says of the tuner ("" where there is none to speak of)."""
    instance, tunes, modelled = _shape(model)
    if instance is None:
        return ""
    nodes = model.topology.nodes
    if not tunes:
        return (f"; aws-ofi-nccl {DEFAULT_RELEASE}'s region tuner " + (
            f"leaves {nodes} nodes to NCCL's own pick" if nodes <= 2 else
            f"has no table for {model.gpus // nodes} GPUs a node: NCCL's own pick"))
    if not modelled:
        return (f"; aws-ofi-nccl's tuner picks here; its table for {model.gpus // nodes} GPUs a "
                f"node of {instance} is not modelled: NCCL's own pick shown")
    return (f"; picks by aws-ofi-nccl {DEFAULT_RELEASE}'s region tuner for {instance} where it "
            "has one")


def tuned(model, table, func: str, charged: int) -> tuple[float, int, int]:
    """``algotime.best`` with aws-ofi-nccl's region tuner in front where the job runs it
    (:func:`active`) and tracecli has its table: ``(µs, algorithm, protocol)``, the µs NCCL's
    own model time of the pair."""
    us, a, p = best(table, func, charged)
    instance, tunes, modelled = _shape(model)
    if not tunes or not modelled or a < 0:
        return us, a, p
    v3 = _nccl(model.version) >= (2, 22)
    enabled = {(ALGOS[x], PROTOS[y]) for x, y in candidates(table, func)} if v3 else None
    hit = region_pick(DEFAULT_RELEASE, instance, func, charged, model.gpus,
                      model.topology.nodes, enabled, model.nvls is not None)
    if hit is None:
        return us, a, p
    a, p = ALGOS.index(hit[0]), PROTOS.index(hit[1])
    us = algo_time(table, func, a, p, charged)
    if us < 0:  # the v2 interface (NCCL 2.21) does not read NCCL's table
        raise CostModelError(f"NCCL {model.version} runs aws-ofi-nccl's tuner choice {hit[0]}/"
                             f"{hit[1]}, which the job's NCCL settings disable: not modelled")
    return us, a, p


def tuner_doc(model) -> Optional[dict]:
    """``--json``'s ``tuner``: the tuner NCCL runs for this model's job (null: none, or no region
    table for the instance type). ``tunes``: the real tuner picks for this communicator;
    ``modelled``: tracecli's picks are the ones it makes NCCL take."""
    instance, tunes, modelled = _shape(model)
    if instance is None:
        return None
    return {"name": "aws-ofi-nccl region tuner", "release": DEFAULT_RELEASE,
            "instance": instance, "modelled": modelled, "tunes": tunes}
