"""--nic-path: a GPU's PCIe path to its NIC, beyond which NCCL enables no LL128 (tuning.cc)."""

import json

import pytest

from click.testing import CliRunner

from tracecli.cli import cli as main
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.request import TopologyRequest, topology_model
from tracecli.errors import CostModelError
from tracecli.model import CollectiveKind as K

# a Polaris-like node (ALCF): 4 A100 on an NVLink mesh, 2 x 200 Gb/s Slingshot, NCCL 2.18.3
POLARIS = ("a100", 2, 4, False, 400.0, 2, "2.18.3", "ofi")
MIB = 1 << 20


def _protocols(model):
    return {model.choice(K.ALL_REDUCE, n)[1] for n in (MIB, 2 * MIB, 4 * MIB, 8 * MIB)}


def test_a_nic_beyond_the_pcie_switch_takes_ll128_away_as_nccl_does():
    near = NcclModel.for_topology(*POLARIS, mesh=True)
    far = NcclModel.for_topology(*POLARIS, mesh=True, nic_path="phb")
    assert "LL128" in _protocols(near)           # the estimate's default: the NIC at PXB
    assert "LL128" not in _protocols(far)        # NCCL 2.18 on sm80: LL128 only to PXB
    assert not far.ring.ll128 and not far.tree.ll128 and far.nic_path == "phb"
    # sm90 keeps LL128 through another GPU's NIC (PXN), not through the host bridge
    h100 = ("h100", 2, 8, True, 3200.0, 8, "2.30.7", "ib")
    assert NcclModel.for_topology(*h100, nic_path="pxn").ring.ll128
    assert not NcclModel.for_topology(*h100, nic_path="phb").ring.ll128
    assert not NcclModel.for_topology("a100", 2, 8, True, 1600.0, 8, "2.30.7", "ib",
                                      nic_path="pxn").ring.ll128
    # one node has no network path: nothing changes there, and the model does not say it
    alone = NcclModel.for_topology("a100", 1, 8, True, 0.0, 0, "2.30.7", None, nic_path="phb")
    assert alone.ring.ll128 and "NICs at" not in alone.summary()


def test_the_path_survives_another_rank_count():
    far = NcclModel.for_topology(*POLARIS, mesh=True, nic_path="phb")
    bigger = far.on(32)
    assert bigger.topology.nodes == 8 and bigger.nic_path == "phb" and not bigger.ring.ll128
    # a one-node model keeps the path (inert there) at another rank count of its node
    one = NcclModel.for_topology("a100", 1, 4, False, 0.0, 0, "2.18.3", "ofi", mesh=True,
                                 nic_path="phb")
    assert one.ring.ll128 and one.on(2).nic_path == "phb"
    # one node's model knows no network: several nodes of it are refused, not timed as one
    with pytest.raises(CostModelError, match="8 GPUs are 2 nodes of 4.*--nodes and "
                                             "--gpus-per-node, with its --nic-gbps"):
        one.on(8)
    # a platform knows its network: one node of it rescaled to several keeps the path and
    # the platform's transport (an A100 at PXN: no LL128 before sm90)
    dgx = topology_model(TopologyRequest(platform="dgx-a100", nodes=1, nic_path="pxn"))[0]
    several = dgx.on(16)
    assert several.topology.nodes == 2 and several.nic_path == "pxn"
    assert not several.ring.ll128 and several.link_net == "ib"
    p5 = topology_model(TopologyRequest(platform="aws-p5", nodes=1))[0].on(16)
    assert (p5.link_net, p5.time_class) == ("efa", "efa-rdma")  # not ib, the default


def test_ll128_off_on_pcie_is_not_blamed_on_the_nic_path():
    pcie = NcclModel.for_topology("a100", 2, 8, False, 800.0, 4, "2.30.7", "ib", nic_path="pix")
    assert not pcie.ring.ll128  # a PCIe node: NCCL enables no LL128 whatever the NIC's path
    assert "NICs at PIX from their GPUs;" in pcie.summary() + ";"
    assert "NCCL enables no LL128 there" not in pcie.summary()


def test_the_cli_takes_it_says_it_and_refuses_it_with_a_log(tmp_path):
    args = ["collective", "allreduce", "--device", "a100", "--nodes", "2", "--gpus-per-node", "4",
            "--intra", "nvlink", "--nic-gbps", "400", "--nics", "2", "--net", "ofi",
            "--nccl", "2.18.3", "--sizes", "1M,4M"]
    r = CliRunner().invoke(main, args + ["--nic-path", "phb", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["topology"]["nic_path"] == "phb"
    assert {row["protocol"] for row in doc["rows"]} & {"LL128"} == set()
    assert "NICs at PHB from their GPUs: NCCL enables no LL128 there" in doc["model"]
    plain = json.loads(CliRunner().invoke(main, args + ["--json"]).output)
    assert plain["topology"]["nic_path"] is None
    assert "LL128" in {row["protocol"] for row in plain["rows"]}
    bad = CliRunner().invoke(main, args + ["--nic-path", "far"])
    assert bad.exit_code == 2 and "pix" in bad.output and "sys" in bad.output
    log = tmp_path / "nccl.log"
    log.write_text("x\n")
    r = CliRunner().invoke(main, args + ["--nic-path", "phb", "--nccl-log", str(log)])
    assert r.exit_code == 2 and "leave --nic-path out" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_the_request_checks_the_name():
    try:
        topology_model(TopologyRequest(nodes=2, nic_gbps=3200.0, nic_path="far"))
    except Exception as e:  # noqa: BLE001 - the message is the contract
        assert "unknown --nic-path 'far'; use one of pix, pxb, pxn, phb, sys" in str(e)
    else:
        raise AssertionError("an unknown path was taken")
