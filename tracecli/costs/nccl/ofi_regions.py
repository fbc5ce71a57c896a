"""aws-ofi-nccl 1.16.3's region tables: for each instance type, GPUs a node and collective, the
polygons in the (bytes, ranks) plane where its region tuner makes NCCL take an (algorithm,
protocol) pair, in the order the tuner tests them (the first that holds a point wins).

Source: ``src/tuner/nccl_ofi_regions.cpp`` at tag v1.16.3 of github.com/aws/aws-ofi-nccl, each
table below cited by its lines; the vertices are copied as written, the extended ones computed
by ``extend_region`` (v1.16.3:244-271, :func:`extend`) as the C code does at init.
``region_init_internal`` (v1.16.3:1425-1457) picks the function by platform:
``region_init_internal_p5_p5e`` (608-903), ``region_init_internal_p5en`` (277-602),
``region_init_internal_p6`` (909-1170). Each has tables for 8 GPUs a node
(``nRanks == 8 * nNodes``) and 1 (``nRanks == nNodes``); p5/p5e also for 2. Other shapes and
collectives (broadcast, reduce): no regions, NCCL's own choice.

On p6-b200 the tuner also sets the channels of a tree/LL128 pick (:func:`best_channels`).

Those functions are the same text from these releases to these (compared tag by tag, comments
and blanks aside): p5/p5e 1.13.0-aws to 1.18.0, p5en 1.15.0 to 1.16.3, p6 1.16.0 to 1.16.3
(:data:`SAME`).
"""

from __future__ import annotations

import math

__all__ = ["MAX_SIZE", "MAX_RANKS", "PLATFORM", "TABLES", "SAME", "extend", "best_channels"]

MAX_SIZE, MAX_RANKS = 100.0 * 1024 ** 3, 1024.0 * 1024  # nccl_ofi_tuner_region.h v1.16.3:49-54
TOP = (MAX_SIZE, MAX_RANKS)
# nccl_ofi_tuner.cpp v1.16.3:100-108: the DMI product name and the tables it selects
PLATFORM = {"p5.48xlarge": "p5", "p5e.48xlarge": "p5", "p5en.48xlarge": "p5en",
            "p6-b200.48xlarge": "p6"}
# releases (major, minor, patch) whose region_init_internal_* is 1.16.3's, first and last tag
SAME = {"p5": ((1, 13, 0), (1, 18, 0)), "p5en": ((1, 15, 0), (1, 16, 3)),
        "p6": ((1, 16, 0), (1, 16, 3))}


def extend(a, b, z):
    """``extend_region`` (v1.16.3:244-271): the point where the line through ``a`` and ``b``
    meets ``x = z.x`` or, where that lies above ``z.y``, ``y = z.y``."""
    if a[0] == b[0]:
        return a[0], z[1]
    if a[1] == b[1]:
        return z[0], a[1]
    m = (a[1] - b[1]) / (a[0] - b[0])
    c = b[1] - m * b[0]
    projected = m * z[0] + c
    return (z[0], projected) if projected < z[1] else ((z[1] - c) / m, z[1])


def _p5_8() -> dict:
    """``region_init_internal_p5_p5e``, 8 GPUs a node (v1.16.3:615-707): all-reduce only."""
    tree_ll128 = extend((402653184, 2048), (402653184, 4096), TOP)  # 618-621
    nvlstree_1 = extend((8053063680, 160), (9663676416, 192), TOP)  # 623-626
    nvlstree_2 = extend((402653184, 2048), (402653184, 4096), TOP)  # 628-631
    ring_simple = extend((8053063680, 160), (9663676416, 192), TOP)  # 633-636
    return {"AllReduce": [  # 638-701
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
    ]}


def _p5_2() -> dict:
    """``region_init_internal_p5_p5e``, 2 GPUs a node (v1.16.3:708-817): all-reduce only."""
    tree_ll128 = extend((88160256, 128), (178163712, 256), TOP)  # 711-714
    tree_simple_1 = extend((787480576, 128), (1073741824, 256), TOP)  # 716-719
    tree_simple_2 = extend((257114112, 128), (269484032, 256), TOP)  # 721-724
    nvlstree_simple = extend((787480576, 128), (1073741824, 256), TOP)  # 726-729
    return {"AllReduce": [  # 731-811
        ("Tree", "LL128", [(0, 4), (1314816, 4), (1051648, 8), (1051648, 12), (2367488, 16),
                           (5525504, 32), (9473024, 64), (88160256, 128), (178163712, 256),
                           tree_ll128, (0, tree_ll128[1])]),
        ("Ring", "LL128", [(1314816, 4), (19736576, 4), (41842688, 8), (296747008, 64),
                           (257114112, 128), (269484032, 256), (178163712, 256),
                           (88160256, 128), (9473024, 64), (5525504, 32), (2367488, 16),
                           (1051648, 12), (1051648, 8), (1314816, 4)]),
        ("NVLSTree", "Simple", [(19736576, 4), (81844224, 4), (275775488, 8), (275775488, 48),
                                (296747008, 64), (41842688, 8)]),
        ("Tree", "LL128", [(81844224, 4), (269484032, 4), (81844224, 4)]),
        ("Tree", "Simple", [(269484032, 4), (MAX_SIZE, 4), (269484032, 4)]),
        ("Ring", "Simple", [(81844224, 5), (MAX_SIZE, 5), (MAX_SIZE, 32), (1073741824, 40),
                            (1073741824, 128), (787480576, 128), (296747008, 64),
                            (275775488, 48), (275775488, 8), (81844224, 5)]),
        ("Tree", "Simple", [(296747008, 64), (787480576, 128), (1073741824, 256), tree_simple_1,
                            tree_simple_2, (269484032, 256), (257114112, 128)]),
        ("NVLSTree", "Simple", [nvlstree_simple, (1073741824, 256), (787480576, 128),
                                (1073741824, 128), (1073741824, 40), (MAX_SIZE, 32)]),
    ]}


def _p5_1() -> dict:
    """``region_init_internal_p5_p5e``, 1 GPU a node (v1.16.3:818-896)."""
    tree_ll128 = extend((9999360, 64), (119477248, 128), TOP)  # 821-824
    ring_ll128 = extend((4736000, 2), (269484032, 128), TOP)  # 825-828
    ag_ring_simple = extend((4194304, 2), (8589934592, 2048), TOP)  # 859-862
    rs_ring_simple = extend((8388608, 2), (4294967296, 1024), TOP)  # 879-882
    return {
        "AllReduce": [  # 830-850
            ("Tree", "LL128", [(0, 16), (2367488, 16), (9999360, 64), (119477248, 128),
                               tree_ll128]),
            ("Ring", "LL128", [(0, 2), (4736000, 2), (269484032, 128), ring_ll128, tree_ll128,
                               (119477248, 128), (9999360, 64), (2367488, 16), (0, 16)]),
            ("Ring", "Simple", [(4736000, 2), (MAX_SIZE, 2), ring_ll128, (269484032, 128)]),
        ],
        "AllGather": [  # 864-870
            ("Ring", "Simple", [(4194304, 2), (MAX_SIZE, 2), ag_ring_simple, (8589934592, 2048)]),
        ],
        "ReduceScatter": [  # 884-890
            ("Ring", "Simple", [(8388608, 2), (MAX_SIZE, 2), rs_ring_simple, (4294967296, 1024)]),
        ],
    }


def _p5en_8() -> dict:
    """``region_init_internal_p5en``, 8 GPUs a node (v1.16.3:284-434)."""
    tree_ll = extend((262144, 192), (262144, 1024), TOP)  # 287-290
    tree_ll128 = extend((150994944, 128), (251658240, 1024), TOP)  # 291-294
    nvlstree_simple = extend((6442450944, 256), (17179869184, 768), TOP)  # 295-298
    # all-gather (350-386) and reduce-scatter (393-429): the same regions, written twice
    ring_ll = extend((8388608, 256), (33554432, 1024), TOP)  # 351-354, 394-397
    ring_ll128 = extend((8589934592, 512), (17179869184, 1024), TOP)  # 355-358, 398-401
    gather = [
        ("Ring", "LL", [(0, 16), (131072, 16), (262144, 32), (8388608, 256), (33554432, 1024),
                        ring_ll, (0, MAX_RANKS)]),
        ("Ring", "LL128", [ring_ll, (33554432, 1024), (8388608, 256), (262144, 32),
                           (131072, 16), (268435456, 16), (2147483648, 128), (8589934592, 512),
                           (17179869184, 1024), ring_ll128]),
        ("Ring", "Simple", [ring_ll128, (17179869184, 1024), (8589934592, 512),
                            (268435456, 16), (17179869184, 16), (MAX_SIZE, 16)]),
    ]
    return {
        "AllReduce": [  # 300-343
            ("Tree", "LL", [(0, 16), (262144, 16), (262144, 1024), tree_ll]),
            ("Tree", "LL128", [tree_ll, (262144, 1024), (262144, 16), (14680064, 16),
                               (150994944, 128), (251658240, 1024), tree_ll128]),
            ("Ring", "LL128", [(150994944, 128), (14680064, 16), (33554432, 16),
                               (536870912, 32), (536870912, 128)]),
            ("NVLSTree", "Simple", [tree_ll128, (251658240, 1024), (150994944, 128),
                                    (536870912, 128), (536870912, 32), (6442450944, 256),
                                    (17179869184, 768), nvlstree_simple]),
            ("Ring", "Simple", [nvlstree_simple, (17179869184, 768), (6442450944, 256),
                                (536870912, 32), (33554432, 16), (1073741824, 16),
                                (MAX_SIZE, 16)]),
        ],
        "AllGather": gather,
        "ReduceScatter": list(gather),
    }


def _p5en_1() -> dict:
    """``region_init_internal_p5en``, 1 GPU a node (v1.16.3:435-598)."""
    tree_ll128 = extend((524288, 8), (1048576, 96), TOP)  # 438-441
    tree_simple = extend((8388608, 32), (33554432, 128), TOP)  # 442-445
    ring_ll128 = extend((50331648, 16), (301989888, 128), TOP)  # 446-449
    # all-gather (501-544) and reduce-scatter (551-593): the same regions, written twice
    pat_simple = extend((50331648, 64), (117440512, 128), TOP)  # 502-505, 552-555
    ag_ring_ll128 = extend((50331648, 16), (301989888, 128), TOP)  # 506-509, 556-559
    gather = [
        ("PAT", "Simple", [(0, 2), (65536, 2), (1048576, 2), (16777216, 32), (50331648, 64),
                           (117440512, 128), pat_simple, TOP, (65536, MAX_RANKS),
                           (0, MAX_RANKS)]),
        ("Ring", "LL128", [pat_simple, (117440512, 128), (50331648, 64), (16777216, 32),
                           (1048576, 2), (4194304, 2), (50331648, 16), (301989888, 128),
                           ag_ring_ll128]),
        ("Ring", "Simple", [ag_ring_ll128, (301989888, 128), (50331648, 16), (4194304, 2),
                            (MAX_SIZE, 2)]),
    ]
    return {
        "AllReduce": [  # 451-494
            ("Tree", "LL", [(0, 2), (65536, 2), (65536, 64), (65536, MAX_RANKS)]),
            ("Tree", "LL128", [(65536, MAX_RANKS), (65536, 64), (65536, 2), (262144, 2),
                               (524288, 8), (1048576, 96), tree_ll128]),
            ("Tree", "Simple", [tree_ll128, (1048576, 96), (524288, 8), (262144, 2),
                                (8388608, 32), (33554432, 128), tree_simple]),
            ("Ring", "LL128", [tree_simple, (33554432, 128), (8388608, 32), (262144, 2),
                               (6291456, 2), (50331648, 16), (301989888, 128), ring_ll128]),
            ("Ring", "Simple", [ring_ll128, (301989888, 128), (50331648, 16), (6291456, 2),
                                (MAX_SIZE, 2)]),
        ],
        "AllGather": gather,
        "ReduceScatter": list(gather),
    }


def _p6_8() -> dict:
    """``region_init_internal_p6``, 8 GPUs a node (v1.16.3:942-1024)."""
    # ag_and_rs_0x0_regions (916-940): all-gather (1011-1017) and reduce-scatter (1018-1024)
    gather = [
        ("Ring", "LL", [(0, 16), (1048576, 16), (106954752, 1024), (107374182400, 1021978.297),
                        (0, 1048576)]),
        ("Ring", "LL128", [(1048576, 16), (268435456, 16), (21474836480, 1024),
                           (107374182400, 5107.038), (107374182400, 1021978.297),
                           (106954752, 1024)]),
        ("Ring", "Simple", [(268435456, 16), (107374182400, 16), (107374182400, 5107.038)]),
    ]
    return {
        "AllReduce": [  # 945-1005
            ("Tree", "LL", [(0, 16), (262144, 16), (262144, 1024), (262144, 1048576)]),
            ("Tree", "LL128", [(262144, 1048576), (262144, 1024), (262144, 16), (55574528, 16),
                               (67108864, 32), (465567744, 128), (962592768, 256),
                               (1610612736, 512), (2684354560, 1024),
                               (107374182400, 50944), (107374182400, 1048576)]),
            ("Ring", "LL128", [(55574528, 16), (87031808, 16), (562036736, 32),
                               (17179869184, 1024), (107374182400, 6408.141),
                               (107374182400, 33962.667), (3758096384, 1024),
                               (2147483648, 512), (1610612736, 512), (962592768, 256),
                               (465567744, 128), (67108864, 32)]),
            ("NVLSTree", "Simple", [(1610612736, 512), (2147483648, 512), (3758096384, 1024),
                                    (107374182400, 33962.667), (107374182400, 50944),
                                    (2684354560, 1024)]),
            ("NVLSTree", "Simple", [(87031808, 16), (107374182400, 16), (107374182400, 16),
                                    (87031808, 16)]),
            ("Ring", "Simple", [(562036736, 32), (87031808, 16), (107374182400, 16),
                                (107374182400, 6408.141), (17179869184, 1024)]),
        ],
        "AllGather": gather,
        "ReduceScatter": list(gather),
    }


def _p6_1() -> dict:
    """``region_init_internal_p6``, 1 GPU a node (v1.16.3:1025-1166)."""
    return {
        "AllReduce": [  # 1028-1072
            ("Tree", "LL", [(0, 2), (32768, 2), (32768, 128), (32768, 131072), (0, 131072)]),
            ("Tree", "LL128", [(32768, 2), (131072, 2), (8388608, 128), (8589934592, 131072),
                               (32768, 131072), (32768, 128)]),
            ("Ring", "LL128", [(131072, 2), (3145728, 2), (297795584, 128),
                               (107374182400, 45916), (107374182400, 59831),
                               (164626432, 128), (20971520, 48), (3145728, 48)]),
            ("Tree", "Simple", [(3145728, 48), (20971520, 48), (164626432, 128),
                                (107374182400, 59831), (107374182400, 131072),
                                (8589934592, 131072)]),
            ("Ring", "Simple", [(3145728, 2), (107374182400, 2), (107374182400, 45916),
                                (297795584, 128)]),
        ],
        "AllGather": [  # 1080-1119
            ("Ring", "LL", [(0, 2), (65536, 2), (65536, 4)]),
            ("PAT", "Simple", [(0, 2), (65536, 4), (1048576, 4), (12582912, 48), (88080384, 48),
                               (248512512, 128), (34359738368, 17137), (0, 131072)]),
            ("Ring", "LL128", [(65536, 2), (2097152, 2), (16777216, 8), (291504128, 128),
                               (34359738368, 15008), (34359738368, 17137), (248512512, 128),
                               (88080384, 48), (12582912, 48), (1048576, 4), (65536, 4)]),
            ("Ring", "Simple", [(2097152, 2), (34359738368, 2), (34359738368, 15008),
                                (291504128, 128), (16777216, 8)]),
        ],
        "ReduceScatter": [  # 1127-1161
            ("Ring", "LL", [(0, 2), (65536, 2), (65536, 4)]),
            ("PAT", "Simple", [(0, 2), (65536, 4), (1048576, 4), (67108864, 48),
                               (106954752, 48), (274877906944, 121928), (0, 131072)]),
            ("Ring", "LL128", [(65536, 2), (2097152, 2), (16777216, 8), (106954752, 48),
                               (67108864, 48), (1048576, 4), (65536, 4)]),
            ("Ring", "Simple", [(2097152, 2), (274877906944, 2), (274877906944, 121928),
                                (106954752, 48), (16777216, 8)]),
        ],
    }


# (platform, GPUs a node) -> {NCCL's collective name: [(algorithm, protocol, vertices), ...]}
TABLES = {("p5", 8): _p5_8(), ("p5", 2): _p5_2(), ("p5", 1): _p5_1(),
          ("p5en", 8): _p5en_8(), ("p5en", 1): _p5en_1(),
          ("p6", 8): _p6_8(), ("p6", 1): _p6_1()}


def _chunk_tree_ll128(nbytes: int, channels: int, log2_nodes: int) -> int:
    """``calculateChunkSizeTreeLL128`` (v1.16.3:1173-1226) with ``nccl_defaults.h``'s
    constants (LL128: 120 elements a thread, 640 threads, 8 steps, 16-word lines of which 15
    carry data, 8 shared-memory elements a thread; warps of 32), in its integer and double
    steps (a uint64 quotient against a double bound)."""
    chunk = 120 * 640 * 8 * 8 // 8 // 16 * 15  # buffSize / NCCL_STEPS, its data part: 576000
    steps = 1 + log2_nodes + 0.1 * 8  # ppn = 8
    while nbytes // (channels * chunk) < steps * 64 / 8 and chunk > 131072:
        chunk //= 2
    while nbytes // (channels * chunk) < steps * 16 / 8 and chunk > 32768:
        chunk //= 2
    grain = 32 * 8 // 16 * 15 * 8  # 1920 bytes
    nelem = chunk // grain * (grain // 4)
    return math.ceil(nelem / ((256 - 256 // 16) * 2)) * 256 * 8


def best_channels(nbytes: int, nodes: int) -> int:
    """``calculateBestNChannel`` (v1.16.3:1229-1245): of 16, 24 and 32 channels, the one whose
    tree/LL128 chunk is largest, the larger count on a tie; ``log2_nnodes`` is ``log2i``
    (``nccl_defaults.h``: the floor of log2)."""
    best_nc, top = 0, 0
    for nc in (16, 24, 32):
        payload = _chunk_tree_ll128(nbytes, nc, nodes.bit_length() - 1)
        if payload > top or (payload == top and nc > best_nc):
            best_nc, top = nc, payload
    return best_nc
