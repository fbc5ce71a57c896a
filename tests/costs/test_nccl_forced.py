"""NCCL restricted by NCCL_ALGO / NCCL_PROTO / NCCL_MIN,MAX_NCHANNELS (tracecli/costs/nccl/forced.py)."""

import pytest

from tracecli.costs.nccl.forced import restrict
from tracecli.costs.nccl.model import NcclModel
from tracecli.errors import CostModelError
from tracecli.model import CollectiveKind as K

SIZES = [1 << k for k in range(3, 34, 3)]


def _h100(nodes=2):
    return NcclModel.for_topology("h100", nodes, 8, True, 3200.0 if nodes > 1 else 0.0,
                                  8 if nodes > 1 else 0, "2.26.2", "ib" if nodes > 1 else None)


def test_nothing_forced_is_nccl_s_own_choice():
    m = _h100()
    r = restrict(m, {})
    for kind in (K.ALL_REDUCE, K.ALL_GATHER, K.REDUCE_SCATTER, K.BROADCAST):
        assert [r.choice(kind, n) for n in SIZES] == [m.choice(kind, n) for n in SIZES]
    assert r.comm_channels == 0 and r._table().comm.channels == m._table().comm.channels


def test_a_disabled_pair_is_never_picked():
    m = _h100()
    assert {m.choice(K.ALL_REDUCE, n)[:2] for n in SIZES} - {("Ring", "Simple")}  # NCCL's own
    r = restrict(m, {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"})
    for kind in (K.ALL_REDUCE, K.ALL_GATHER, K.REDUCE_SCATTER, K.BROADCAST):
        assert {r.choice(kind, n)[:2] for n in SIZES} == {("Ring", "Simple")}, kind
    # the pair keeps NCCL's own time for it: the restriction only removes the others
    t = r.choice(K.ALL_REDUCE, 1 << 30)[2]
    assert t >= m.choice(K.ALL_REDUCE, 1 << 30)[2]
    ll = restrict(m, {"NCCL_PROTO": "ll"})  # NCCL's names are case-insensitive
    assert {ll.choice(K.ALL_REDUCE, n)[1] for n in SIZES} == {"LL"}


def test_ring_is_never_disabled_for_other_collectives_than_all_reduce():
    # tuning.cc: "Never disable ring for non-allreduce operations. That allows to run real
    # apps with NCCL_ALGO=TREE."
    r = restrict(_h100(), {"NCCL_ALGO": "Tree"})
    assert {r.choice(K.ALL_REDUCE, n)[0] for n in SIZES} == {"Tree"}
    assert {r.choice(K.ALL_GATHER, n)[0] for n in SIZES} == {"Ring"}


def test_channel_bounds_apply_after_the_graph_search():
    m = _h100()
    own = m._table().comm.channels
    assert restrict(m, {"NCCL_MAX_NCHANNELS": "4"})._table().comm.channels == min(own, 4)
    assert restrict(m, {"NCCL_MIN_NCHANNELS": "24"})._table().comm.channels == max(own, 24)
    both = restrict(m, {"NCCL_MIN_NCHANNELS": "12", "NCCL_MAX_NCHANNELS": "12"})
    assert both._table().comm.channels == 12
    # NCCL's bandwidths keep the searched graph's channels (tuning.cc:175): the bandwidth
    # term of a large Ring/Simple all-reduce does not move with the communicator's channels
    rs = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
    a = restrict(m, rs).choice(K.ALL_REDUCE, 1 << 33)[2]
    b = restrict(m, {**rs, "NCCL_MIN_NCHANNELS": "12", "NCCL_MAX_NCHANNELS": "12"})
    assert b.choice(K.ALL_REDUCE, 1 << 33)[2] == pytest.approx(a, rel=1e-3)


@pytest.mark.parametrize("env, says", [
    ({"NCCL_ALGO": "^Ring"}, "lists of names only"),
    ({"NCCL_ALGO": "Ring,Bogus"}, "'Bogus' is not one of"),
    ({"NCCL_PROTO": ""}, "is not one of"),
    ({"NCCL_MIN_NCHANNELS": "0"}, "from 1 to 32"),
    ({"NCCL_MAX_NCHANNELS": "lots"}, "from 1 to 32"),
    ({"NCCL_BUFFSIZE": "8388608"}, "NCCL_BUFFSIZE is not modelled"),
])
def test_what_cannot_be_modelled_is_refused(env, says):
    with pytest.raises(CostModelError, match=says):
        restrict(_h100(), env)


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
