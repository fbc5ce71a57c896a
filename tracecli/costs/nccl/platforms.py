"""Named platforms: GPU, GPUs per node, fabric inside a node, NICs and their bandwidth per node,
and the network transport between nodes.

Figures are vendor specifications (not measurements), as each ``source`` says; the graph NCCL
picks on them is estimated by :func:`~.graph.search_graphs` unless a log gives it, and the
transport (``net``, :mod:`.transports`) selects the time model's constants.

>>> PLATFORMS["dgx-h100"].nic_gbps, PLATFORMS["aws-p4d"].nic_gbps, PLATFORMS["aws-p5"].net
(3200.0, 400.0, 'efa')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["Platform", "PLATFORMS"]


@dataclass(frozen=True)
class Platform:
    name: str
    gpu: str
    gpus_per_node: int
    nvswitch: bool
    nics: int
    nic_gbps: float  # summed over the node's NICs, Gb/s
    source: str
    net: str = "ib"
    net_latency: Optional[float] = None  # µs the network reports to NCCL (None: the transport's)
    mesh: bool = False  # GPUs linked by NVLink to each other, no NVSwitch (nvswitch False)
    # the protocol aws-ofi-nccl runs on the instance type (transports.efa_class; EFA only)
    protocol: Optional[str] = None


PLATFORMS = {p.name: p for p in (
    Platform("dgx-a100", "a100", 8, True, 8, 1600.0,
             "NVIDIA DGX A100 datasheet: 8x A100 SXM4, 6 NVSwitches, 8x ConnectX-6 HDR 200 Gb/s "
             "InfiniBand for compute", "ib"),
    Platform("dgx-h100", "h100", 8, True, 8, 3200.0,
             "NVIDIA DGX H100 datasheet: 8x H100 SXM5, 4 NVSwitches, 8x ConnectX-7 400 Gb/s "
             "(OSFP) InfiniBand for compute", "ib"),
    Platform("hgx-h200", "h200", 8, True, 8, 3200.0,
             "NVIDIA HGX H200 reference: 8x H200 SXM5 on NVLink 4 / NVSwitch; 8x 400 Gb/s NICs "
             "assumed (one per GPU, as on DGX H100), InfiniBand assumed", "ib"),
    Platform("aws-p4d", "a100", 8, True, 4, 400.0,
             "AWS p4d.24xlarge: 8x A100 40GB on NVSwitch, 400 Gbps EFA (4x 100 Gbps)", "efa",
             protocol="SENDRECV"),
    Platform("aws-p4de", "a100", 8, True, 4, 400.0,
             "AWS p4de.24xlarge: 8x A100 80GB on NVSwitch, 400 Gbps EFA (4x 100 Gbps)", "efa",
             protocol="SENDRECV"),
    Platform("aws-p5", "h100", 8, True, 32, 3200.0,
             "AWS p5.48xlarge: 8x H100 80GB on NVSwitch, 3200 Gbps EFA (32x 100 Gbps)", "efa",
             protocol="RDMA"),
    Platform("aws-p5e", "h200", 8, True, 32, 3200.0,
             "AWS p5e.48xlarge: 8x H200 141GB on NVSwitch, 3200 Gbps EFA (32x 100 Gbps)", "efa",
             protocol="RDMA"),
    Platform("aws-p5en", "h200", 8, True, 16, 3200.0,
             "AWS p5en.48xlarge: 8x H200 141GB on NVSwitch, 3200 Gbps EFAv3 (16x 200 Gbps); "
             "aws-ofi-nccl reports 35 us (platform-aws.cpp:150-154)", "efa", 35.0,
             protocol="RDMA"),
    Platform("aws-p6-b200", "b200", 8, True, 8, 3200.0,
             "AWS p6-b200.48xlarge: 8x B200 on NVSwitch, 3200 Gbps EFAv4 (8x 400 Gbps); "
             "aws-ofi-nccl reports 35 us (platform-aws.cpp:150-154)", "efa", 35.0,
             protocol="RDMA"),
    Platform("gcp-a3", "h100", 8, True, 4, 800.0,
             "Google Cloud a3-highgpu-8g (A3 High): 8x H100 80GB on NVSwitch, GPUDirect-TCPX "
             "over 4x 200 Gbps GPU NICs", "tcpx"),
    Platform("gcp-a3mega", "h100", 8, True, 8, 1600.0,
             "Google Cloud a3-megagpu-8g (A3 Mega): 8x H100 80GB on NVSwitch, GPUDirect-TCPXO "
             "over 8x 200 Gbps GPU NICs", "tcpxo"),
    Platform("gcp-a4", "b200", 8, True, 8, 3200.0,
             "Google Cloud a4-highgpu-8g (A4): 8x B200 on NVSwitch, 8x 400 Gbps RoCE GPU NICs "
             "(3.2 Tbps)", "roce"),
    Platform("oci-bm-gpu4.8", "a100", 8, True, 16, 1600.0,
             "OCI BM.GPU4.8: 8x A100 40GB on NVSwitch, cluster network RoCE v2 16x 100 Gbps "
             "(ports of dual-port NICs, merged by NCCL 2.20+)", "roce"),
    Platform("oci-bm-gpu-h100.8", "h100", 8, True, 16, 3200.0,
             "OCI BM.GPU.H100.8: 8x H100 80GB on NVSwitch, cluster network RoCE v2 16x 200 Gbps "
             "(ports of dual-port NICs, merged by NCCL 2.20+)", "roce"),
    Platform("cscs-alps-gh200", "gh200", 4, False, 4, 800.0,
             "CSCS Alps GH200 node (HPE Cray EX254n): four GH200 linked by NVLink to each "
             "other, no NVSwitch, and four NICs, one per "
             "GH200 (CSCS docs, docs/alps/hardware.md); HPE Slingshot 11, 200 Gb/s a NIC, "
             "through libfabric (aws-ofi-nccl)", "ofi", mesh=True),
    Platform("azure-nd-h100-v5", "h100", 8, True, 8, 3200.0,
             "Azure ND H100 v5: 8x H100 80GB on NVLink 4 / NVSwitch, 8x 400 Gb/s NDR "
             "InfiniBand (one per GPU, 3.2 Tb/s a VM)", "ib"),
)}
