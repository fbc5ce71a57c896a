"""The ``--platform`` presets added from vendor pages: each one's figures are what its source
states, and ``tracecli collective --platform NAME`` runs on it and names it."""

from __future__ import annotations

import json

import pytest

from conftest import run
from tracecli.costs.nccl.platforms import PLATFORMS
from tracecli.costs.nccl.tuning import ALGOS, PROTOS

# What each vendor page states, transcribed from it (the source named in the preset):
# (GPU, GPUs a node, NVSwitch, NICs a node, Gb/s a NIC, transport) and the words of the page
# the preset's source must carry for them. NVSwitch on the cloud VMs: eight GPUs on NVLink,
# each at its full NVLink rate to any peer, are the 8-GPU HGX board's switch (platforms.py).
STATED = {
    # Microsoft Learn "ND-H200-v5 size series": eight H200 "interconnected with 900 GB/s
    # NVLink", "its own dedicated ... 400 Gbps NVIDIA Quantum-2 CX7 InfiniBand connection",
    # "3.2Tb/s of interconnect bandwidth per VM"
    "azure-nd-h200-v5": (("h200", 8, True, 8, 400.0, "ib"),
                         ("8x H200", "400 Gb/s", "Quantum-2 CX7 InfiniBand", "3.2 Tb/s")),
    # Microsoft Learn "NDasrA100_v4 size series": eight A100 40GB, "its own dedicated,
    # topology-agnostic 200 GB/s [Gb/s] NVIDIA Mellanox HDR InfiniBand connection", 1.6 Tb/s a VM
    "azure-nd-a100-v4": (("a100", 8, True, 8, 200.0, "ib"),
                         ("8x A100 40GB", "200 Gb/s", "HDR InfiniBand", "1.6 Tb/s")),
    # Microsoft Learn "NDm_A100_v4 size series": the same with A100 80GB
    "azure-ndm-a100-v4": (("a100", 8, True, 8, 200.0, "ib"),
                          ("8x A100 80GB", "200 Gb/s", "HDR InfiniBand", "1.6 Tb/s")),
    # Google Cloud "Networking and GPU machines": A3 Ultra, NVIDIA H200, eight ConnectX-7 NICs,
    # 3,200 Gbps GPU-to-GPU; "RDMA network profiles": RoCE v2 on A3 Ultra's MRDMA NICs
    "gcp-a3ultra": (("h200", 8, True, 8, 400.0, "roce"),
                    ("8x H200", "eight NVIDIA ConnectX-7", "3,200 Gbps", "RoCE v2")),
    # NVIDIA DGX B200 User Guide: 8 B200, 2 NVLink switches, 8 single-port ConnectX-7 for the
    # cluster network, InfiniBand (default) up to 400 Gb/s each
    "dgx-b200": (("b200", 8, True, 8, 400.0, "ib"),
                 ("8x B200", "NVSwitches", "8x single-port ConnectX-7", "400 Gb/s", "InfiniBand")),
    # NVIDIA DGX BasePOD "Core Components": DGX H200, eight Hopper GPUs (1,128 GB), four
    # NVSwitch chips, eight single-port ConnectX-7 VPI up to 400 Gb/s InfiniBand
    "dgx-h200": (("h200", 8, True, 8, 400.0, "ib"),
                 ("8x H200", "4 NVSwitch", "8x single-port ConnectX-7", "400 Gb/s", "InfiniBand")),
}


@pytest.mark.parametrize("name", sorted(STATED))
def test_preset_figures_are_what_its_source_states(name):
    # a transcription check: STATED holds the figures as read from each vendor page, typed apart
    # from the presets; it catches a preset that drifts from them, not a misread page
    (gpu, per_node, nvswitch, nics, per_nic, net), words = STATED[name]
    p = PLATFORMS[name]
    assert (p.name, p.gpu, p.gpus_per_node, p.nvswitch, p.nics, p.net) == \
        (name, gpu, per_node, nvswitch, nics, net)
    assert p.nic_gbps == nics * per_nic  # summed over the node's NICs
    assert (p.mesh, p.protocol, p.net_latency) == (False, None, None)  # verbs: the transport's 0
    for w in words:
        assert w in p.source, (name, w)


@pytest.mark.parametrize("name", sorted(STATED))
def test_collective_runs_on_the_preset_and_names_it(name):
    args = ("collective", "allreduce", "--platform", name, "--nodes", "2", "--sizes", "8,1M,1G")
    text = run(*args)
    assert text.exit_code == 0, text.output
    assert text.stdout.startswith(f"allreduce on 2 x 8 {PLATFORMS[name].gpu} (16 ranks)")
    assert f"nccl:{name}" in text.stdout
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    p = PLATFORMS[name]
    assert doc["model"].startswith(f"nccl:{name}: ")
    topo = doc["topology"]
    assert (topo["nodes"], topo["gpus_per_node"], topo["device"], topo["intra"], topo["nic_gbps"],
            topo["nics"], topo["net"]) == (2, 8, p.gpu, "nvswitch", p.nic_gbps, p.nics, p.net)
    rows = doc["rows"]
    assert [r["bytes"] for r in rows] == [8, 1 << 20, 1 << 30]
    times = [r["predicted_us"] for r in rows]
    assert all(t > 0 for t in times) and times == sorted(times)
    assert all(r["algorithm"] in ALGOS and r["protocol"] in PROTOS for r in rows)
    # 1 GiB on 2 nodes: each node sends the other at least half the data twice (reduce-scatter
    # then all-gather between the nodes), so no faster than the node's NICs at line rate
    line_rate_us = (1 << 30) * 8 / (p.nic_gbps * 1e3)
    assert times[-1] > line_rate_us
