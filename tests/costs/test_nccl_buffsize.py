"""``--nccl-env NCCL_BUFFSIZE``: what NCCL does with the Simple buffer, release by release
(NVIDIA/nccl src/init.cc computeBuffSizes, src/enqueue.cc calcCollChunking), and what of it
tracecli's time model reads (tracecli/costs/nccl/ofi_env.py, pipeline.first_chunk)."""

from __future__ import annotations

import json

import pytest

from conftest import assert_error, run
from tracecli.costs.nccl.forced import restrict
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.ofi_env import BUFFSIZE_CHOICES, chunking, plugin_env
from tracecli.costs.nccl.pipeline import first_chunk
from tracecli.errors import CostModelError
from tracecli.model import CollectiveKind as K

KIB, MIB = 1024, 1 << 20
RELEASES = ("2.18.3", "2.19.3", "2.20.5", "2.21.5", "2.24.3", "2.27.7", "2.30.7")


def test_the_buffer_moves_the_nvls_chunk_where_its_step_is_under_the_cap():
    # calcCollChunking: chunkSize = buffSizes[SIMPLE] / NCCL_STEPS (chunkSteps 1 but for a
    # ring), then NVLS caps it at 128 KiB up to 2.20 (v2.18.3-1 enqueue.cc:1307-1310,
    # 1339-1340; v2.20.3-1 :1704-1706) and at nvlsChunkSize from 2.21 (v2.21.5-1 :1743-1745,
    # v2.30.7-1 :2222-2225, 2263-2267): a 64 KiB step (512 KiB buffers) is the chunk, a
    # 2 MiB step (16 MiB buffers) is capped
    for v in RELEASES:
        assert first_chunk("NVLS", 1, v, (512 * KIB, None, None)) == 64 * KIB, v
        assert first_chunk("NVLS", 1, v, (16 * MIB, None, None)) == 128 * KIB, v
        assert first_chunk("NVLS", 1, v, (128 * KIB, None, None)) == 16 * KIB, v
    # from 2.21 the cap is NCCL_NVLS_CHUNKSIZE: a 1 MiB cap lets a 1 MiB step through
    assert first_chunk("NVLS", 1, "2.30.7", (8 * MIB, 1 * MIB, None)) == 1 * MIB
    assert first_chunk("NVLS", 1, "2.30.7", (4 * MIB, 1 * MIB, None)) == 512 * KIB


def test_the_buffer_moves_nvlstree_s_chunk_up_to_2_20_only():
    # 2.18: the step itself (v2.18.3-1 enqueue.cc:1310); 2.19: the step, 64 KiB from 4 nodes
    # whatever the step (v2.19.3-1 :1372); 2.20: the step, at most NVLSTREE_MAX (unset: 64 KiB
    # from 4 nodes, v2.20.3-1 :1687, 1714-1717); from 2.21 nvlsChunkSize, not the step
    # (v2.21.5-1 :1754-1757; v2.30.7-1 :2281)
    two = {v: first_chunk("NVLSTree", 2, v, (2 * MIB, None, None)) for v in RELEASES}
    assert two == {"2.18.3": 256 * KIB, "2.19.3": 256 * KIB, "2.20.5": 256 * KIB,
                   "2.21.5": 128 * KIB, "2.24.3": 128 * KIB, "2.27.7": 128 * KIB,
                   "2.30.7": 128 * KIB}
    small = (128 * KIB, None, None)  # a 16 KiB step
    assert [first_chunk("NVLSTree", 4, v, small) for v in ("2.18.3", "2.19.3", "2.20.5")] == \
        [16 * KIB, 64 * KIB, 16 * KIB]
    for v in RELEASES[3:]:
        assert first_chunk("NVLSTree", 2, v, small) == first_chunk("NVLSTree", 2, v)


def test_the_job_s_buffer_wins_over_aws_ofi_nccl_s():
    # nccl_ofi_environ.h v1.16.3:40-51, 94-104: the plugin inserts with overwrite false
    p5 = NcclModel.for_platform("aws-p5", 2, "2.19.3")
    assert chunking(p5)[0] == 8 * MIB
    own = restrict(p5, {"NCCL_BUFFSIZE": "4194304"})
    assert chunking(own)[0] == 4 * MIB and "NCCL_BUFFSIZE" not in plugin_env(own)
    # -2 is set (the plugin keeps it) and NCCL reads it as unset: its own 4 MiB
    # (init.cc:827 v2.30.7-1: envs[p] != -2 ? envs[p] : defaults[p])
    unset = restrict(p5, {"NCCL_BUFFSIZE": "-2"})
    assert chunking(unset)[0] is None and "NCCL_BUFFSIZE" not in plugin_env(unset)
    assert first_chunk("NVLSTree", 2, "2.19.3", chunking(unset)) == 512 * KIB
    assert first_chunk("NVLSTree", 2, "2.19.3", chunking(p5)) == 1 * MIB
    # 2.19's NVLSTree starts from the step: the job's 4 MiB halves the fill of a 16 GiB
    # all-reduce against the plugin's 8 MiB (no shrinking at that size: 32 loops of 1 MiB)
    n = 16 << 30
    assert p5.pick(K.ALL_REDUCE, n)[0] == own.pick(K.ALL_REDUCE, n)[0] == "NVLSTree"
    assert own.features(K.ALL_REDUCE, n)[6] == pytest.approx(p5.features(K.ALL_REDUCE, n)[6] / 2)
    assert own.timed_us(K.ALL_REDUCE, n) < p5.timed_us(K.ALL_REDUCE, n)
    # another scale keeps the job's setting
    assert chunking(own.on(32))[0] == 4 * MIB
    p4d = restrict(NcclModel.for_platform("aws-p4d", 2), {"NCCL_BUFFSIZE": "16777216"})
    assert plugin_env(p4d) == {} and chunking(p4d)[0] == 16 * MIB


@pytest.mark.parametrize("version", ["2.18.3", "2.20.5", "2.24.3", "2.30.7"])
def test_the_buffer_changes_no_choice_and_no_ring_or_tree_time(version):
    # no release's tuning.cc reads buffSizes: NCCL's (algorithm, protocol) is the same; the
    # time model's only term a buffer moves is the NVLS/NVLSTree fill (pipeline.py)
    base = NcclModel.for_topology("h100", 2, 8, True, 3200.0, 8, version, "ib")
    sizes = [1 << k for k in range(3, 35, 2)]
    for buff in ("131072", "1048576", "134217728"):
        m = restrict(base, {"NCCL_BUFFSIZE": buff})
        for kind in (K.ALL_REDUCE, K.ALL_GATHER, K.REDUCE_SCATTER, K.BROADCAST):
            for n in sizes:
                a, p, us = m.pick(kind, n)
                assert (a, p, us) == base.pick(kind, n)
                if a not in ("NVLS", "NVLSTree"):
                    assert m.timed_us(kind, n) == base.timed_us(kind, n)


def test_the_buffer_moves_an_nvls_prediction():
    # one DGX H100 node on 2.30: NVLS at 1 GiB; a 64 KiB step halves the 128 KiB chunk, the
    # loop and so the fill (the pick stays NVLS)
    m = NcclModel.for_platform("dgx-h100", 1, "2.30.7")
    small = restrict(m, {"NCCL_BUFFSIZE": "524288"})
    n = 1 << 30
    assert m.pick(K.ALL_REDUCE, n)[0] == small.pick(K.ALL_REDUCE, n)[0] == "NVLS"
    assert small.features(K.ALL_REDUCE, n)[6] == pytest.approx(m.features(K.ALL_REDUCE, n)[6] / 2)
    assert small.timed_us(K.ALL_REDUCE, n) < m.timed_us(K.ALL_REDUCE, n)
    # at or above a 1 MiB buffer the step (128 KiB) is at the cap: nothing moves
    for buff in ("1048576", "4194304", "134217728"):
        assert restrict(m, {"NCCL_BUFFSIZE": buff}).timed_us(K.ALL_REDUCE, n) == \
            m.timed_us(K.ALL_REDUCE, n)


def test_the_bound_is_the_steps_tracecli_models():
    assert BUFFSIZE_CHOICES[0] == 128 * KIB and BUFFSIZE_CHOICES[-1] == 128 * MIB
    assert all(b & (b - 1) == 0 for b in BUFFSIZE_CHOICES) and len(BUFFSIZE_CHOICES) == 11
    m = NcclModel.for_platform("dgx-h100", 2, "2.22.3")
    for ok in ("131072", "0x800000", "134217728", "-2"):
        restrict(m, {"NCCL_BUFFSIZE": ok})


@pytest.mark.parametrize("value", ["5000000", "65536", "4096", "0", "-1", "268435456",
                                   "2147483648", "8M", "", "lots"])
def test_a_buffer_outside_the_bound_is_refused(value):
    with pytest.raises(CostModelError) as e:
        restrict(NcclModel.for_platform("dgx-h100", 2, "2.22.3"), {"NCCL_BUFFSIZE": value})
    said = str(e.value)
    assert said.startswith(f"NCCL_BUFFSIZE={value}: ") and "\n" not in said
    assert "131072, 262144" in said and "134217728" in said and "(or -2, unset)" in said


def test_the_cli_takes_and_refuses_it():
    doc = json.loads(run("collective", "allreduce", "--platform", "aws-p5", "--nodes", "2",
                         "--nccl", "2.19.3", "--nccl-env", "NCCL_BUFFSIZE=4194304",
                         "--json").stdout)
    assert doc["topology"]["nccl_env"] == {"NCCL_BUFFSIZE": "4194304"}
    model = " ".join(doc["model"].split())
    assert "with NCCL_BUFFSIZE=4194304" in model
    assert "aws-ofi-nccl sets NCCL_NVLSTREE_MAX_CHUNKSIZE=524288" in model
    assert "NCCL_BUFFSIZE=8388608" not in model
    assert_error(run("collective", "allreduce", "--platform", "dgx-h100",
                     "--nccl-env", "NCCL_BUFFSIZE=3000000"),
                 "tracecli", "--nccl-env NCCL_BUFFSIZE=3000000", "131072, 262144", "134217728")
