"""NCCL restricted by NCCL_ALGO / NCCL_PROTO / NCCL_MIN,MAX_NCHANNELS / NCCL_NVLS_ENABLE, release
by release (tracecli/costs/nccl/forced.py; each case cites the NCCL source it follows)."""

import pytest

from tracecli.costs.nccl.forced import enables, restrict
from tracecli.costs.nccl.model import NcclModel
from tracecli.errors import CostModelError
from tracecli.model import CollectiveKind as K

SIZES = [1 << k for k in range(3, 34, 3)]
KINDS = (K.ALL_REDUCE, K.ALL_GATHER, K.REDUCE_SCATTER, K.BROADCAST)


def _h100(nodes=2, version="2.26.2"):
    return NcclModel.for_topology("h100", nodes, 8, True, 3200.0 if nodes > 1 else 0.0,
                                  8 if nodes > 1 else 0, version, "ib" if nodes > 1 else None)


def _picks(model, kind):
    return {model.choice(kind, n)[:2] for n in SIZES}


def test_nothing_forced_is_nccl_s_own_choice():
    m = _h100()
    r = restrict(m, {})
    for kind in KINDS:
        assert [r.choice(kind, n) for n in SIZES] == [m.choice(kind, n) for n in SIZES]
    assert r.nccl_env == () and r._table().comm.channels == m._table().comm.channels


def test_a_disabled_pair_is_never_picked():
    m = _h100()
    assert _picks(m, K.ALL_REDUCE) - {("Ring", "Simple")}  # NCCL's own
    r = restrict(m, {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"})
    for kind in KINDS:
        assert _picks(r, kind) == {("Ring", "Simple")}, kind
    # the pair keeps NCCL's own time for it: the restriction only removes the others
    t = r.choice(K.ALL_REDUCE, 1 << 30)[2]
    assert t >= m.choice(K.ALL_REDUCE, 1 << 30)[2]
    ll = restrict(m, {"NCCL_PROTO": "ll"})  # NCCL's names are case-insensitive
    assert {p for _, p in _picks(ll, K.ALL_REDUCE)} == {"LL"}
    assert ll.nccl_env == (("NCCL_PROTO", "ll"),) and "NCCL_PROTO=ll" in ll.source


def test_a_caret_disables_the_names_that_follow():
    m = _h100(nodes=1)
    assert "NVLS" in {a for a, _ in _picks(m, K.ALL_REDUCE)}  # NCCL's own, one node of H100
    r = restrict(m, {"NCCL_ALGO": "^NVLS"})
    for kind in KINDS:
        for n in SIZES:  # NVLS's sizes go to the next best; every other size keeps its pick
            own, now = m.choice(kind, n), r.choice(kind, n)
            assert now[0] != "NVLS" and (own[0] == "NVLS" or now == own), (kind, n)
    assert restrict(m, {"NCCL_ALGO": "^"})._table().bw == m._table().bw  # "^": none off


def test_a_collective_left_with_nothing_release_by_release():
    # 2.18: "Never disable ring for non-allreduce operations" (v2.18.5-1 tuning.cc:298-299);
    # 2.19-2.23: Ring restored at the bandwidths kept aside, "at least set ring algo available"
    # (v2.19.1-1 tuning.cc:304-318); 2.24+: the call fails (enqueue.cc, ncclInvalidUsage)
    for version in ("2.18.5", "2.19.3", "2.21.5", "2.23.4"):
        r = restrict(_h100(version=version), {"NCCL_ALGO": "Tree"})
        assert {a for a, _ in _picks(r, K.ALL_REDUCE)} == {"Tree"}, version
        assert {a for a, _ in _picks(r, K.ALL_GATHER)} == {"Ring"}, version
    new = restrict(_h100(version="2.24.3"), {"NCCL_ALGO": "Tree"})
    assert {a for a, _ in _picks(new, K.ALL_REDUCE)} == {"Tree"}
    with pytest.raises(CostModelError, match="no algorithm left for AllGather under NCCL_ALGO=Tree"):
        new.choice(K.ALL_GATHER, 1 << 20)
    # the picks of every collective are in describe(); the one NCCL fails is null there
    assert new.describe()["algorithm"]["allgather"] is None
    assert new.describe()["algorithm"]["allreduce"]


def test_the_restored_ring_keeps_disabled_protocols_up_to_2_21():
    # ringbdw is saved before NCCL_PROTO disables anything up to 2.21 (v2.19.4-1
    # tuning.cc:202-204); from v2.22.3-1 (tuning.cc:318) it is zeroed where the protocol is off
    env = {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}
    old = restrict(_h100(version="2.21.5"), env)
    assert {p for _, p in _picks(old, K.ALL_GATHER)} > {"Simple"}
    assert {p for _, p in _picks(old, K.ALL_REDUCE)} == {"Simple"}
    new = restrict(_h100(version="2.22.3"), env)
    assert _picks(new, K.ALL_GATHER) == {("Ring", "Simple")}


def test_no_ring_tree_or_nvls_falls_back_to_ring_and_tree_before_2_24():
    # v2.23.4-1 tuning.cc:310-314 (CollNet, or PAT, alone); gone from v2.24.3-1
    for version in ("2.19.4", "2.21.5", "2.23.4"):
        algo, _ = enables({"NCCL_ALGO": "CollNetDirect"}, version, 2)
        assert algo[4][:2] == [1, 1], version  # Tree, Ring of AllReduce back on
    algo, _ = enables({"NCCL_ALGO": "PAT"}, "2.23.4", 2)
    assert algo[2][:2] == [1, 1]
    algo, _ = enables({"NCCL_ALGO": "CollNetDirect"}, "2.24.3", 2)
    assert algo[4][:2] == [0, 0]
    r = restrict(_h100(version="2.26.2"), {"NCCL_ALGO": "CollNetDirect"})
    with pytest.raises(CostModelError, match="NCCL fails the call"):
        r.choice(K.ALL_REDUCE, 1 << 20)


def test_entries_per_collective_from_2_24():
    # v2.24.3-1 tuning.cc parseList: "allreduce:tree;allgather:ring", the others unchanged
    m = _h100()
    r = restrict(m, {"NCCL_ALGO": "allreduce:tree;allgather:ring"})
    assert {a for a, _ in _picks(r, K.ALL_REDUCE)} == {"Tree"}
    assert {a for a, _ in _picks(r, K.ALL_GATHER)} == {"Ring"}
    assert _picks(r, K.REDUCE_SCATTER) == _picks(m, K.REDUCE_SCATTER)
    with pytest.raises(CostModelError, match="read from NCCL 2.24; NCCL 2.23 reads one list"):
        restrict(_h100(version="2.23.4"), {"NCCL_ALGO": "allreduce:tree"})
    with pytest.raises(CostModelError, match="every entry but the first"):
        restrict(m, {"NCCL_ALGO": "allreduce:tree;ring"})
    with pytest.raises(CostModelError, match="'allreduc' is not a collective"):
        restrict(m, {"NCCL_ALGO": "allreduc:tree"})


def test_naming_ll128_enables_it_where_nccl_would_not():
    # tuning.cc: LL128's default is "2" (only on NVLink paths); a named LL128 is 1, on
    pcie = NcclModel.for_topology("a100", 1, 4, False, 0.0, 0, "2.26.2")
    assert "LL128" not in {p for _, p in _picks(pcie, K.ALL_REDUCE)}
    forced = restrict(pcie, {"NCCL_PROTO": "LL128"})
    assert {p for _, p in _picks(forced, K.ALL_REDUCE)} == {"LL128"}
    negated = restrict(pcie, {"NCCL_PROTO": "^LL"})  # LL128 and Simple named on
    assert "LL128" in {p for _, p in _picks(negated, K.ALL_REDUCE)}


def test_nvls_enable_zero_turns_nvls_off():
    m = _h100(nodes=1)
    off = restrict(m, {"NCCL_NVLS_ENABLE": "0"})
    assert off.nvls is None and not {a for a, _ in _picks(off, K.ALL_REDUCE)} & {"NVLS", "NVLSTree"}
    assert restrict(m, {"NCCL_NVLS_ENABLE": "2"})._table().bw == m._table().bw
    # 1 forces NVLS: on sm80 behind an NVSwitch NCCL would try multicast and fail
    a100 = NcclModel.for_topology("a100", 1, 8, True, 0.0, 0, "2.26.2")
    with pytest.raises(CostModelError, match="NCCL_NVLS_ENABLE=1 forces NVLS on sm80"):
        restrict(a100, {"NCCL_NVLS_ENABLE": "1"})
    # where NCCL finds no NVLS graph (PCIe) or has too few GPUs (nvls.cc gpuCount <= 2), it
    # runs without: no refusal
    pcie = NcclModel.for_topology("a100", 1, 4, False, 0.0, 0, "2.26.2")
    assert restrict(pcie, {"NCCL_NVLS_ENABLE": "1"}).nvls is None
    two = NcclModel.for_topology("h100", 1, 2, True, 0.0, 0, "2.26.2")
    assert restrict(two, {"NCCL_NVLS_ENABLE": "1"}).nvls is None


def test_channel_bounds_apply_after_the_graph_search():
    m = _h100(version="2.30.7")
    own = m._table().comm.channels
    assert restrict(m, {"NCCL_MAX_NCHANNELS": "4"})._table().comm.channels == min(own, 4)
    assert restrict(m, {"NCCL_MIN_NCHANNELS": "24"})._table().comm.channels == max(own, 24)
    both = restrict(m, {"NCCL_MIN_NCHANNELS": "12", "NCCL_MAX_NCHANNELS": "12"})
    assert both._table().comm.channels == 12
    # read as strtoll reads them and clamped as connect.cc clamps them
    for value, channels in (("0", own), ("-2", own), ("99", 32), ("0x10", max(own, 16)),
                            ("012", max(own, 10))):
        assert restrict(m, {"NCCL_MIN_NCHANNELS": value})._table().comm.channels == channels, value
    assert restrict(m, {"NCCL_MAX_NCHANNELS": "0"})._table().comm.channels == 1
    # NCCL's bandwidths keep the searched graph's channels (tuning.cc:175): the bandwidth
    # term of a large Ring/Simple all-reduce does not move with the communicator's channels
    rs = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
    a = restrict(m, rs).choice(K.ALL_REDUCE, 1 << 33)[2]
    b = restrict(m, {**rs, "NCCL_MIN_NCHANNELS": "12", "NCCL_MAX_NCHANNELS": "12"})
    assert b.choice(K.ALL_REDUCE, 1 << 33)[2] == pytest.approx(a, rel=1e-3)


def test_nvls_raises_the_channels_from_2_20_to_2_27():
    # v2.20.3-1 connect.cc:473-474 "if (comm->nChannels < comm->nvlsChannels)", gone in 2.28
    env = {"NCCL_MAX_NCHANNELS": "4"}
    assert restrict(_h100(version="2.24.3"), env)._table().comm.channels == 16
    assert restrict(_h100(version="2.28.3"), env)._table().comm.channels == 4
    assert restrict(_h100(version="2.19.4"), env)._table().comm.channels == 4


def test_another_scale_keeps_the_settings_read_on_its_own_graph():
    m = restrict(_h100(), {"NCCL_ALGO": "Ring", "NCCL_MAX_NCHANNELS": "4", "NCCL_NVLS_ENABLE": "0"})
    big = m.on(64)
    assert big.topology.nodes == 8 and big.nccl_env == m.nccl_env and big.nvls is None
    assert big._table().comm.channels == 4  # 2.26.2, but NVLS is off: no raise to 16
    assert {a for a, _ in _picks(big, K.ALL_REDUCE)} == {"Ring"}


@pytest.mark.parametrize("env, says", [
    ({"NCCL_ALGO": "Ring,Bogus"}, "'Bogus' is not one of"),
    ({"NCCL_ALGO": ""}, "NCCL_ALGO is empty"),
    ({"NCCL_PROTO": "Simple,LL256"}, "'LL256' is not one of LL, LL128, Simple"),
    ({"NCCL_MIN_NCHANNELS": "1_6"}, "NCCL reads only a whole number"),
    ({"NCCL_MAX_NCHANNELS": "lots"}, "NCCL reads only a whole number"),
    ({"NCCL_MAX_NCHANNELS": "1e9"}, "NCCL reads only a whole number"),
    ({"NCCL_NVLS_ENABLE": "on"}, "NCCL reads only a whole number"),
    ({"NCCL_ALGO": ";ring"}, "every entry but the first"),
    ({"NCCL_ALGO": "ring," * 100}, "NCCL_ALGO's value is over 200 characters"),
    ({"NCCL_ALGO": "ring," * 14}, "or an entry of it over 69"),
    ({"NCCL_LL_BUFFSIZE": "8388608"}, "NCCL_LL_BUFFSIZE is not modelled"),
])
def test_what_cannot_be_modelled_is_refused(env, says):
    with pytest.raises(CostModelError, match=says):
        restrict(_h100(), env)


def test_pat_is_a_name_from_2_23():
    with pytest.raises(CostModelError, match="'PAT' is not one of .*NCCL 2.22's names"):
        restrict(_h100(version="2.22.3"), {"NCCL_ALGO": "Ring,PAT"})
    restrict(_h100(version="2.23.4"), {"NCCL_ALGO": "Ring,PAT"})


def test_tcpx_bandwidth_grows_with_the_channels_that_run():
    # the GPUDirect-TCPX plugin gives every NCCL connection (a channel and peer) sockets and a
    # helper thread of its own (transports.channel_scale): the time model charges TCPX's
    # bandwidth per channel that runs; NCCL's own time (its ranking key) does not move
    def timed(net, channels):
        m = NcclModel.for_topology("h100", 2, 8, True, 800.0, 4, "2.19.3", net)
        env = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
        if channels:
            env.update(NCCL_MIN_NCHANNELS=str(channels), NCCL_MAX_NCHANNELS=str(channels))
        r = restrict(m, env)
        return r.timed_us(K.ALL_REDUCE, 1 << 33), r.choice(K.ALL_REDUCE, 1 << 33)[2]
    own, eight, twelve, many = (timed("tcpx", c) for c in (0, 8, 12, 32))
    assert own == eight  # NCCL's default on A3 High: 2 x 4 ring graph channels
    assert twelve[1] == pytest.approx(eight[1], rel=1e-3)
    assert twelve[0] == pytest.approx(eight[0] * 8 / 12, rel=0.02)  # latency apart
    # never faster than NCCL's bandwidth (the NICs' rate as NCCL's graph prices it)
    assert many[0] >= 0.99 * many[1] and many[0] < twelve[0]
    # another transport's connections share the NIC: its channels do not change its time
    ib8, ib12 = timed("ib", 8), timed("ib", 12)
    assert ib12[0] == pytest.approx(ib8[0], rel=1e-3)
