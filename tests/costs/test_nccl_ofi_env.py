"""aws-ofi-nccl's platform environment (NVLS chunks, the Simple buffer) and its protocol as
``OFI_NCCL_PROTOCOL`` sets it (tracecli/costs/nccl/ofi_env.py, pipeline.first_chunk)."""

from __future__ import annotations

import json

import pytest

from conftest import assert_error, run
from tracecli.costs.nccl.forced import restrict
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.timing import launch_us
from tracecli.costs.nccl.ofi_env import chunking, plugin_env
from tracecli.costs.nccl.pipeline import chunk_bytes, fill_bytes, first_chunk
from tracecli.errors import CostModelError
from tracecli.model import CollectiveKind as K

P5 = {"NCCL_BUFFSIZE": "8388608", "NCCL_NVLS_CHUNKSIZE": "524288",
      "NCCL_NVLSTREE_MAX_CHUNKSIZE": "524288"}
KIB = 1024


def test_the_first_chunk_release_by_release():
    # NCCL's own defaults: the Simple step (4 MiB / 8) for NVLSTree up to 2.20, 64 KiB from
    # 4 nodes from 2.19; nvlsChunkSize (128 KiB) from 2.21; NVLS 128 KiB throughout
    assert [first_chunk("NVLSTree", 2, v) for v in ("2.18.3", "2.19.3", "2.20.5", "2.21.5",
                                                     "2.30.7")] == [512 * KIB] * 3 + [128 * KIB] * 2
    assert [first_chunk("NVLSTree", 4, v) for v in ("2.18.3", "2.19.3", "2.20.5", "2.22.3",
                                                     "2.30.7")] == [512 * KIB] + [64 * KIB] * 4
    assert {first_chunk("NVLS", 1, v) for v in ("2.18.3", "2.20.5", "2.30.7")} == {128 * KIB}
    # aws-ofi-nccl's p5 settings: 8 MiB buffers (a 1 MiB step), 512 KiB chunks
    p5 = (8 << 20, 512 * KIB, 512 * KIB)
    assert first_chunk("NVLSTree", 2, "2.19.3", p5) == 1 << 20  # no setting read: the step
    assert first_chunk("NVLSTree", 2, "2.20.5", p5) == 512 * KIB  # the step, capped
    assert first_chunk("NVLSTree", 8, "2.22.3", p5) == 512 * KIB  # no 64 KiB from 4 nodes
    assert first_chunk("NVLS", 1, "2.20.5", p5) == 128 * KIB  # NVLS_CHUNKSIZE read from 2.21
    assert first_chunk("NVLS", 1, "2.21.5", p5) == 512 * KIB
    # NVLS is capped by the step too; NVLSTree from 2.21 is not (enqueue.cc:2263, 2281)
    assert first_chunk("NVLS", 1, "2.30.7", (None, 2 << 20, None)) == 512 * KIB
    assert first_chunk("NVLSTree", 2, "2.30.7", (None, 2 << 20, None)) == 2 << 20
    # and the shrinking at mid sizes starts from it: 512 KiB survives only 32 loops
    ops = 16 * 8
    assert chunk_bytes("NVLSTree", 32 * ops * 512 * KIB, ops, 2, "2.22.3", p5) == 512 * KIB
    assert chunk_bytes("NVLSTree", 32 * ops * 512 * KIB - 1, ops, 2, "2.22.3", p5) == 256 * KIB


def test_the_platform_sets_the_environment_and_the_job_wins():
    p5 = NcclModel.for_platform("aws-p5", 2, "2.22.3")
    assert plugin_env(p5) == P5
    assert plugin_env(NcclModel.for_platform("aws-p5", 1, "2.22.3")) == P5  # loaded at init
    assert plugin_env(NcclModel.for_platform("aws-p4d", 2)) == {"NCCL_BUFFSIZE": "8388608"}
    assert plugin_env(NcclModel.for_platform("dgx-h100", 2)) == {}
    # hardware flags over EFA: read as the instance they match (a NIC a GPU: p5)
    flags = NcclModel.for_topology("h100", 2, 8, True, 3200.0, 32, "2.22.3", "efa")
    assert plugin_env(flags) == P5
    assert plugin_env(NcclModel.for_topology("h100", 2, 8, True, 3200.0, 8, "2.22.3", "ib")) == {}
    # the job's own setting is kept (nccl_ofi_environ.h: overwrite false)
    own = restrict(p5, {"NCCL_NVLS_CHUNKSIZE": "131072"})
    assert chunking(own) == (8 << 20, 128 * KIB, 512 * KIB)
    assert "NCCL_NVLS_CHUNKSIZE" not in plugin_env(own)


def test_the_fill_of_a_p5_run_is_its_512_kib_chunks():
    p5 = NcclModel.for_platform("aws-p5", 4, "2.22.3")
    bare = restrict(p5, {"NCCL_NVLS_CHUNKSIZE": "131072", "NCCL_NVLSTREE_MAX_CHUNKSIZE": "-2"})
    n = 1 << 30
    heads = p5.nvls.n_channels
    # 1 GiB on 16 channels x 8 heads: 512 KiB shrinks to 256 KiB (under 32 loops); NCCL's own
    # 64 KiB from 4 nodes stays: a loop, and the fill, 4 times larger
    assert fill_bytes("NVLSTree", n, 90, 4, heads, "2.22.3", p5.nvls, chunking(p5)) == \
        pytest.approx(4 * fill_bytes("NVLSTree", n, 90, 4, heads, "2.22.3", p5.nvls,
                                     chunking(bare)), abs=4)
    # the time model reads it: on 2 nodes (NCCL's own pick: the tuner leaves 2 nodes alone)
    # the fill of an NVLSTree pick is the chunked one, and it takes longer
    p5 = NcclModel.for_platform("aws-p5", 2, "2.22.3")
    bare = restrict(p5, {"NCCL_NVLS_CHUNKSIZE": "131072"})
    assert p5.pick(K.ALL_REDUCE, n)[0] == "NVLSTree"
    assert p5.features(K.ALL_REDUCE, n) != bare.features(K.ALL_REDUCE, n)
    assert p5.timed_us(K.ALL_REDUCE, n) > bare.timed_us(K.ALL_REDUCE, n)


@pytest.mark.parametrize("env, says", [
    ({"NCCL_NVLS_CHUNKSIZE": "1000"}, "a power of two from 16384"),
    ({"NCCL_NVLS_CHUNKSIZE": "lots"}, "a power of two from 16384"),
    ({"NCCL_NVLS_CHUNKSIZE": ""}, "16384, 32768"),
    ({"NCCL_NVLS_CHUNKSIZE": "512K"}, "16384, 32768"),
    ({"NCCL_NVLSTREE_MAX_CHUNKSIZE": "-1"}, "(or -2, unset)"),
    ({"OFI_NCCL_PROTOCOL": "tcp"}, "use one of RDMA, SENDRECV"),
])
def test_bad_values_are_refused(env, says):
    with pytest.raises(CostModelError) as e:
        restrict(NcclModel.for_platform("aws-p5", 2, "2.22.3"), env)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_the_protocol_is_refused_where_no_efa_runs_even_on_one_node():
    # one node of an InfiniBand platform names its network as surely as two do
    for nodes in (1, 2):
        with pytest.raises(CostModelError, match="not on ib"):
            restrict(NcclModel.for_platform("dgx-h100", nodes, "2.22.3"),
                     {"OFI_NCCL_PROTOCOL": "RDMA"})
    restrict(NcclModel.for_platform("aws-p5", 1, "2.22.3"), {"OFI_NCCL_PROTOCOL": "RDMA"})


def test_a_thread_driving_several_gpus_launches_beyond_the_line_rate():
    # -g N: the kernels' launches come before any byte moves, so a line-bound collective
    # still pays them (timing.launch_us)
    m = NcclModel.for_topology("h100", 2, 8, True, 100.0, 1, "2.30.7", "socket")
    n = 1 << 30
    line = m.timed_us(K.ALL_REDUCE, n)
    launch = launch_us(m.time_params()[0], 8)
    assert launch > 0 and m.timed_us(K.ALL_REDUCE, n, 8) == pytest.approx(line + launch)


def test_a_release_that_does_not_read_a_setting_refuses_it():
    with pytest.raises(CostModelError, match="does not read it"):
        restrict(NcclModel.for_platform("aws-p5", 2, "2.20.5"), {"NCCL_NVLS_CHUNKSIZE": "524288"})
    with pytest.raises(CostModelError, match="does not read it"):
        restrict(NcclModel.for_platform("aws-p5", 2, "2.19.3"),
                 {"NCCL_NVLSTREE_MAX_CHUNKSIZE": "524288"})
    restrict(NcclModel.for_platform("aws-p5", 2, "2.20.5"), {"NCCL_NVLSTREE_MAX_CHUNKSIZE": "65536"})


def test_the_protocol_picks_the_time_class_and_the_devices_nccl_sees():
    p5 = NcclModel.for_platform("aws-p5", 2, "2.27.7")
    assert (p5.time_class, p5.nic_devices) == ("efa-rdma", 8)
    sr = restrict(p5, {"OFI_NCCL_PROTOCOL": "sendrecv"})  # strcasecmp
    assert sr.time_class == "efa-sendrecv"
    assert sr.nic_devices is None and sr.nics == 32  # each NIC a device: 32 of 100 Gb/s
    assert sr.ring != p5.ring
    assert sr.timed_us(K.ALL_REDUCE, 1 << 20) != p5.timed_us(K.ALL_REDUCE, 1 << 20)
    # RDMA named on p5 is its own default: the same model
    assert restrict(p5, {"OFI_NCCL_PROTOCOL": "RDMA"}).ring == p5.ring
    p4d = NcclModel.for_platform("aws-p4d", 2)
    rdma = restrict(p4d, {"OFI_NCCL_PROTOCOL": "RDMA"})
    assert (p4d.time_class, rdma.time_class) == ("efa-sendrecv", "efa-rdma")
    assert rdma.ring == p4d.ring  # 4 NICs for 8 GPUs: a group each, the same 4 devices
    # another scale keeps it (on() re-applies the settings to its own graph)
    assert sr.on(32).time_class == "efa-sendrecv" and sr.on(32).nic_devices is None
    # not on another network
    with pytest.raises(CostModelError, match="on EFA"):
        restrict(NcclModel.for_platform("dgx-h100", 2), {"OFI_NCCL_PROTOCOL": "RDMA"})


def test_the_cli_models_and_refuses_them():
    doc = json.loads(run("collective", "allreduce", "--platform", "aws-p5", "--nodes", "2",
                         "--nccl-env", "OFI_NCCL_PROTOCOL=SENDRECV", "--json").stdout)
    assert "efa-sendrecv" in doc["model"] and "with OFI_NCCL_PROTOCOL=SENDRECV" in doc["model"]
    text = " ".join(run("collective", "allreduce", "--platform", "aws-p5", "--nodes", "4").stdout.split())
    assert "aws-ofi-nccl sets NCCL_BUFFSIZE=8388608 NCCL_NVLSTREE_MAX_CHUNKSIZE=524288 " \
           "NCCL_NVLS_CHUNKSIZE=524288" in text
    assert_error(run("collective", "allreduce", "--platform", "aws-p5", "--nodes", "2",
                     "--nccl-env", "NCCL_NVLS_CHUNKSIZE=100000"),
                 "tracecli", "--nccl-env NCCL_NVLS_CHUNKSIZE=100000", "16384, 32768")
    assert_error(run("collective", "allreduce", "--platform", "aws-p5", "--nodes", "2",
                     "--nccl-env", "OFI_NCCL_PROTOCOL=ib"), "tracecli", "RDMA, SENDRECV")
    assert_error(run("collective", "allreduce", "--platform", "dgx-h100", "--nodes", "2",
                     "--nccl-env", "OFI_NCCL_PROTOCOL=RDMA"), "tracecli", "(--net efa)")
