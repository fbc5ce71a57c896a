"""``comm->nChannels`` as NCCL's src/graph/connect.cc makes it, release by release
(tracecli/costs/nccl/channels.py): each case names the NCCL source it follows."""

from dataclasses import replace

import pytest

from tracecli.costs.nccl.channels import comm_channels, model_channels, nvls_channels
from tracecli.costs.nccl.forced import restrict
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.pipeline import nvls_channels as pipeline_nvls
from tracecli.model import CollectiveKind as K


def test_the_sm90_doubling_by_release():
    # v2.19.4-1 connect.cc:410 "2*nChannels <= MAXCHANNELS"; v2.20.3-1:456 "nChannels < 16";
    # minCompCap == 90 through v2.24.3-1, >= 90 from v2.25.1-1
    assert comm_channels(8, 48.0, 90, 2, "2.19.4") == 32
    assert comm_channels(8, 48.0, 90, 2, "2.20.3") == 16
    assert comm_channels(4, 48.0, 90, 2, "2.20.3") == 16
    assert comm_channels(4, 45.0, 90, 2, "2.20.3") == 8  # bwIntra > 45.0, strictly
    assert comm_channels(4, 48.0, 90, 1, "2.20.3") == 8  # several nodes only
    assert comm_channels(4, 48.0, 100, 2, "2.24.3") == 8
    assert comm_channels(4, 48.0, 100, 2, "2.25.1") == 16


def test_the_unpack_doubling_is_tcpx_s_from_2_22():
    # v2.22.3-1 connect.cc:472 (absent in v2.21.5-1); TCPX unpacks on the GPU
    # (nccl-plugin-gpudirecttcpx net_tcpx.cc:739), TCPXO does not (nccl_shim.cc:968)
    def channels(net, version):
        m = NcclModel.for_topology("h100", 2, 8, True, 800.0, 4, version, net)
        return model_channels(replace(m, ring=replace(m.ring, n_channels=4, bw_intra=20.0),
                                      nvls=None))  # no NVLS raise: the doubling alone
    assert channels("tcpx", "2.22.3") == 16 and channels("tcpx", "2.21.5") == 8
    assert channels("tcpxo", "2.22.3") == 8 and channels("ib", "2.22.3") == 8


def test_the_nvls_raise_and_what_a_collective_starts_from():
    # v2.20.3-1 connect.cc:473-474 raises nChannels to nvlsChannels (gone in v2.28.3-1), after
    # recording collChannels (:471), which rings and trees start from up to 2.21
    # (enqueue.cc:1532 of v2.20.3-1, :1568 of v2.21.5-1); from v2.22.3-1 they start from
    # nChannels (enqueue.cc:1617)
    def counts(version):
        m = restrict(NcclModel.for_platform("dgx-h100", 2, version), {"NCCL_MAX_NCHANNELS": "4"})
        return model_channels(m), model_channels(m, collective=True)
    assert counts("2.19.4") == (4, 4)
    assert counts("2.21.5") == (16, 4)
    assert counts("2.24.3") == (16, 16)
    assert counts("2.28.3") == (4, 4)


def test_nvls_channels_by_release():
    # NCCL_NVLS_NCHANNELS 16 up to v2.24.3-1 (nvls.cc:146); NVLS_NCHANNELS_SM90 16 and _SM100 32
    # from v2.25.1-1 (nvls.cc:144-145); _SM100_NVL 24 on one node from v2.27 (nvls.cc:147-149)
    assert [nvls_channels(100, 1, r) for r in ((2, 24), (2, 26), (2, 27))] == [16, 32, 24]
    assert [nvls_channels(100, 2, r) for r in ((2, 24), (2, 26), (2, 30))] == [16, 32, 32]
    assert nvls_channels(90, 1, (2, 30)) == 16
    assert pipeline_nvls(100, 1, "2.24.3") == 16 and pipeline_nvls(100, 1, "2.30.7") == 24


def test_tcpx_forced_to_8_channels_is_timed_alike_across_the_nvls_raise():
    # a Ring/Simple run on 8 channels runs 8 in 2.19, 2.21 and 2.24: the per-channel TCPX time
    # does not move with the NVLS raise of the communicator's count (2.20-2.21: collChannels)
    env = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "8",
           "NCCL_MAX_NCHANNELS": "8"}
    times = {v: restrict(NcclModel.for_platform("gcp-a3", 2, v), env).timed_us(K.ALL_REDUCE, 1 << 30)
             for v in ("2.19.3", "2.21.5")}
    assert times["2.21.5"] == pytest.approx(times["2.19.3"], rel=0.05)
