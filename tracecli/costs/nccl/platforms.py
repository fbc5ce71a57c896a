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
    # eight GPUs on NVLink at a GPU's full NVLink rate to any peer are the 8-GPU HGX board's
    # NVSwitch (NVIDIA's NVSwitch platforms: HGX A100/H100/H200/B200 8-GPU baseboards, "NVIDIA
    # NVSwitch", docs.nvidia.com/ai-enterprise/.../vgpu/features/nvswitch.html) where the cloud's
    # page names NVLink, not the switch
    Platform("azure-nd-h200-v5", "h200", 8, True, 8, 3200.0,
             "Azure ND H200 v5 (Standard_ND96isr_H200_v5; Microsoft Learn \"ND-H200-v5 size "
             "series\", learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/"
             "nd-h200-v5-series): 8x H200 141GB on 900 GB/s NVLink (NVSwitch), each GPU its own "
             "400 Gb/s NVIDIA Quantum-2 CX7 InfiniBand (3.2 Tb/s a VM), GPUDirect RDMA", "ib"),
    Platform("azure-nd-a100-v4", "a100", 8, True, 8, 1600.0,
             "Azure ND A100 v4 (Standard_ND96asr_v4; Microsoft Learn \"NDasrA100_v4 size "
             "series\", learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/"
             "ndasra100v4-series): 8x A100 40GB on NVLink 3.0 (NVSwitch), each GPU its own 200 "
             "Gb/s Mellanox HDR InfiniBand (1.6 Tb/s a VM; the page's \"200 GB/s\" is Gb/s, "
             "\"8 x 200 Gigabit HDR\" in its 2021 text), GPUDirect RDMA", "ib"),
    Platform("azure-ndm-a100-v4", "a100", 8, True, 8, 1600.0,
             "Azure NDm A100 v4 (Standard_ND96amsr_A100_v4; Microsoft Learn \"NDm_A100_v4 size "
             "series\", learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/"
             "ndma100v4-series): 8x A100 80GB on NVLink 3.0 (NVSwitch), each GPU its own 200 "
             "Gb/s Mellanox HDR InfiniBand (1.6 Tb/s a VM), GPUDirect RDMA", "ib"),
    Platform("gcp-a3ultra", "h200", 8, True, 8, 3200.0,
             "Google Cloud a3-ultragpu-8g (A3 Ultra): 8x H200 141GB (NVSwitch), eight NVIDIA "
             "ConnectX-7 GPU NICs, 3,200 Gbps for GPU-to-GPU traffic (Google Cloud \"Networking "
             "and GPU machines\", cloud.google.com/compute/docs/gpus/gpu-network-bandwidth), "
             "GPUDirect RDMA over RoCE v2 (MRDMA NICs, \"RDMA network profiles\", "
             "cloud.google.com/vpc/docs/rdma-network-profiles) through Google's gIB NCCL "
             "plugin", "roce"),
    Platform("dgx-b200", "b200", 8, True, 8, 3200.0,
             "NVIDIA DGX B200 User Guide, \"Introduction to NVIDIA DGX B200 Systems\" "
             "(docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html): 8x B200, "
             "2 NVLink 5 NVSwitches, 4 OSFP ports for 8x single-port ConnectX-7, InfiniBand "
             "(default) up to 400 Gb/s each, for the cluster (compute) network", "ib"),
    Platform("dgx-h200", "h200", 8, True, 8, 3200.0,
             "NVIDIA DGX BasePOD reference architecture, \"Core Components\" (docs.nvidia.com/"
             "dgx-basepod/reference-architecture-infrastructure-foundation-enterprise-ai/latest/"
             "core-components.html): DGX H200, 8x H200 (1,128 GB), 4 NVSwitch chips, 4 OSFP "
             "ports serving 8x single-port ConnectX-7 VPI, up to 400 Gb/s InfiniBand/Ethernet; "
             "\"Reference Architectures\" (same guide): eight compute connections a node at "
             "NDR400 on the InfiniBand compute fabric", "ib"),
)}
