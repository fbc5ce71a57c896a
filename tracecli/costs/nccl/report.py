"""What an NCCL model says of itself in one line: the topology, the graph and where it came
from, and the fitted constants that time it (``collective``'s and plans' ``cost model:`` line)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .graph import nic_allows_ll128
from .ofi_env import VARS, plugin_env, protocol
from .ofi_tuner import TUNER_VARS, note
from .transports import nccl_nics
from .versions import constants_for

if TYPE_CHECKING:
    from .model import NcclModel

__all__ = ["summary_of"]


def summary_of(self: "NcclModel") -> str:
    """One line: what the model is and where its figures come from."""
    t, r = self.topology, self.ring
    fabric = {"nvswitch": " on NVSwitch", "nvlink": " on NVLink (no switch)",
              "pcie": " on PCIe"}.get(self.intra, "") \
        if t.gpus_per_node > 1 else ""
    net = (f", {self.nic_gbps:g} Gb/s per node over {self.nics} NIC"
           f"{'s' if self.nics != 1 else ''}" if self.nic_gbps else "")
    if self.nic_devices is not None and self.nics:
        why = nccl_nics(self.nics, t.gpus_per_node, self.link_net, self.version,
                        protocol(dict(self.nccl_env)))[1]
        net += f" (NCCL sees {self.nic_devices}: {why})"
    if self.nic_path is not None and t.nodes > 1:  # the path, not the GPUs' links, decides
        ll128 = "" if nic_allows_ll128(self.compcap, self.nic_path) \
            else ": NCCL enables no LL128 there"
        net += f"; NICs at {self.nic_path.upper()} from their GPUs{ll128}"
    if self.plugin_latency_us:
        net += f"; the network reports {self.plugin_latency_us:g} us of latency to NCCL"
    added = plugin_env(self)
    if added:
        net += "; aws-ofi-nccl sets " + " ".join(f"{k}={v}" for k, v in sorted(added.items()))
    forced = [(k, v) for k, v in self.nccl_env if k not in TUNER_VARS + VARS]
    run = [f"{k}={v}" for k, v in self.nccl_env if k in VARS]
    if run:
        net += "; with " + " ".join(run)
    if forced:
        # an entry per word (forced.MAX_ENTRY): at 80 columns a setting wraps between entries
        net += "; restricted by " + " ".join(f"{k}={v}".replace(";", "; ") for k, v in forced)
    tuner = [f"{k}={v}" for k, v in self.nccl_env if k in TUNER_VARS]
    if tuner:  # who tunes, not what NCCL may pick (ofi_tuner.active)
        net += "; tuner settings " + " ".join(tuner)
    net += note(self)
    return (f"{self.name}: NCCL {self.version}'s own model ({constants_for(self.version).tag} "
            f"constants) of {t.nodes} x {t.gpus_per_node} {self.device or 'GPUs'}{fabric}{net}; "
            f"ring graph {r.n_channels} channels x {r.bw_intra:g}/{r.bw_inter:g} GB/s "
            f"({self.graph_source}); {_timed(self)}")


def _timed(self: "NcclModel") -> str:
    """How the choice is timed: the transport and the fitted constants."""
    hit = self.time_params()
    if hit is None:
        return "NCCL's own times, no launch floor"
    p, cls = hit
    net = f" over {self.link_net}" if self.link_net else ""
    shares = [f"{name} x{p.bw + share:.2f}" for name, share in (("ring", p.ring_net),
                                                                 ("LL", p.ll_net))
              if self.link_net and share]
    by_pick = f" ({', '.join(shares)})" if shares else ""
    nvls = f" (NVLS x{p.lat_nvls:.2f})" if self.nvls is not None else ""
    beyond = self.beyond_scale()
    return (f"timed{net} with constants fitted on public nccl-tests tables ({cls}: "
            f"{p.floor + p.net_floor:.0f} us floor, latency x{p.lat:.2f}{nvls}, "
            f"bandwidth x{p.bw:.2f}{by_pick})" + (f"; {beyond}" if beyond else ""))
