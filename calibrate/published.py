"""Published reference profiles (`provenance: published`) built from published measurements and datasheets.

Every number below carries its source (the measurement or document it comes from, marked verified /
third-party / derived / unverified / assumed). Regenerate the files with

    python -m calibrate.published [--out-dir calibrate/profiles]

The profiles have no samples; their coefficients use the calibrated schema (calibrate.coefficients) so the
same cost model serves both. Intervals are degenerate (low = high = value) unless a source gives a range.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from calibrate.coefficients import (Coefficients, ComputeFit, EfficiencyModel, Estimate, Execution, Fabric, FrameworkFit,
                                    GpuKernels, LinkModel, ModelError, Segment, SegmentedFit, Tree)
from calibrate.cost_api import COLLECTIVES
from calibrate.fabric import default_background
from calibrate.spread import published_spread
from calibrate.storage_fit import published_storage
from calibrate.backends.gpu import WINOGRAD_FAMILY
from calibrate.shapes import FLOP_FEATURES, MATMUL_OPS
from calibrate.shipped import shipped_profiles_dir
from calibrate.system_constants import (StackScales, SystemConstants, for_family, gpu_family, load_constants,
                                        load_model_error, load_stacks)
from profiler.profile import (GPUInfo, Machine, Profile, Provenance, SCHEMA_VERSION, dump_yaml, write_atomic)

GIB = 2**30


@dataclass(frozen=True)
class Fig:
    """A published figure: value (SI), optional range, and where it comes from."""

    value: float
    source: str
    low: float | None = None
    high: float | None = None

    def estimate(self) -> Estimate:
        return Estimate(value=self.value, low=self.low if self.low is not None else self.value,
                        high=self.high if self.high is not None else self.value)


@dataclass(frozen=True)
class GPU:
    name: str
    memory_bytes: Fig
    clock_mhz: float
    nvlink_links: int
    pcie_generation: int
    peak_flops: dict[str, Fig]       # dtype -> dense peak FLOP/s
    achievable_fraction: dict[str, Fig]  # dtype -> achieved GEMM / peak
    triad_bytes_per_s: Fig
    h2d_bytes_per_s: Fig
    d2h_bytes_per_s: Fig
    #: dtype -> (((n, FLOP/s of an n^3 matrix product), ...) in rising n, source): measured GEMM throughput by size,
    #: where published; matrix products smaller than the plateau run at the measured share of it (gemm_efficiency)
    gemm_by_size: dict[str, tuple[tuple[tuple[int, float], ...], str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Node:
    file: str
    title: str
    gpu: GPU
    gpus_per_node: int
    cpu_model: str
    cpu_cores: int
    host_memory_bytes: float
    host_memory_bytes_per_s: Fig
    node_source: str
    allreduce_bus_bytes_per_s: Fig
    other_collective_bus_bytes_per_s: Fig
    p2p_bytes_per_s: Fig
    base_latency_s: Fig
    step_latency_s: Fig
    inter_bus_bytes_per_s: Fig
    inter_step_latency_s: Fig
    inter_p2p_bytes_per_s: Fig
    rails_per_node: int = 1          # NICs NCCL uses per node
    nodes_per_leaf: Optional[int] = None
    oversubscription: float = 1.0
    fabric_source: str = "leaf size and over-subscription not published: one non-blocking switch assumed"
    notes: list[str] = field(default_factory=list)


COPY_ALPHA = Fig(32.6e-6, "relative-weighted alpha-beta fit of gpu-benches cuda-memcpy on a V100 PCIe (21 sizes, 1 KB-1 GB), alpha = 32.6 us "
                          "(derived); the only published copy latency, assumed for every GPU")
NCCL_BASE = Fig(5.6e-6, "nccl-tests#123 DGX A100 ring fit "
                        "alpha ~ 5.6 us + 1.98 us x 2(n-1) (derived from verified points)")
NCCL_STEP = Fig(1.98e-6, NCCL_BASE.source)
NCCL_NET_STEP = Fig(14.0e-6, "NCCL src/graph/tuning.cc hwLat NET Ring Simple = 14.0 us per "
                             "inter-node step (verified constant)")
#: the start-up of an inter-node collective's bandwidth regime (predictor.published.nccl.fill_s), from the one
#: InfiniBand curve of nccl_published.yaml; its interval spans every curve it can be read from (EFA, TCPXO)
NCCL_NET_FILL = Fig(0.3025e-3, "large-message intercept minus 1 KiB latency of the Azure NDmv4 2-node all-reduce "
                               "(8 x HDR per node, mscclpp docs/performance-ndmv4.md: 1 and 4 GiB, 1 KiB; derived "
                               "from verified points): 0.30 ms; EFA and TCPXO curves (p4de, p5, a3-mega) 0.80-0.95 "
                               "ms; assumed for every InfiniBand node", low=0.3025e-3, high=0.9499e-3)

V100 = GPU(
    name="Tesla V100-SXM2-16GB",
    memory_bytes=Fig(16 * GIB, "HBM2 16 GB (binary GB, as nvidia-smi reports)"),
    clock_mhz=1530, nvlink_links=6, pcie_generation=3,
    peak_flops={
        "float32": Fig(15.7e12, "FP32 15.7 TFLOP/s at 1.53 GHz (Cornell CVW, third-party)"),
        "float16": Fig(125e12, "125 Tensor TFLOPS (developer.nvidia.com, verified)"),
        "bfloat16": Fig(10.65e12, "no BF16 tensor cores; torch bf16 matmul measured 10.65 TFLOP/s "
                                  "@8192 (emulated; zzc0721/torch-performance-test-data#140, verified)"),
    },
    achievable_fraction={
        "float32": Fig(14.51 / 15.7, "FP32 14.51 TFLOP/s @10240 / 15.7 peak = 92% (derived)"),
        "float16": Fig(97.4 / 125, "FP16 torch matmul 97.4 TFLOP/s @8192 / 125 = 78% (derived)",
                       low=83 / 125, high=97.4 / 125),
        "bfloat16": Fig(1.0, "the bf16 peak above is already the measured emulated rate"),
    },
    triad_bytes_per_s=Fig(814e9, "gpu-benches gpu-stream V100 triad 814 GB/s (verified; form factor not "
                                 "stated); interval: its scale 802 to read 866 GB/s", low=802e9, high=866e9),
    h2d_bytes_per_s=Fig(12.57e9, "gpu-benches cuda-memcpy on a V100 PCIe, relative-weighted fit 12.57 GB/s; "
                                 "12.35 GB/s at >= 512 MB (gpu-benches, V100-PCIe)", low=12.0e9, high=12.57e9),
    d2h_bytes_per_s=Fig(12.35e9, "no V100 D2H figure; assumed equal to H2D 12.35 GB/s (PCIe Gen3 x16 is "
                                 "symmetric)"),
    gemm_by_size={"float16": (((1024, 57.3e12), (2048, 78.2e12), (4096, 95.7e12), (8192, 97.4e12)),
                              "FP16 torch matmul on V100-SXM2-16GB: 57.3 TFLOP/s @1024^3, 78.2 @2048^3, 95.7 @4096^3, "
                              "97.4 @8192^3 (zzc0721/torch-performance-test-data#140, verified)")},
)

A100 = GPU(
    name="NVIDIA A100-SXM4-40GB",
    memory_bytes=Fig(40 * GIB, "HBM2 40 GB (binary GB), DGX A100 MLPerf v0.7 configuration"),
    clock_mhz=1410, nvlink_links=12, pcie_generation=4,
    peak_flops={
        "float32": Fig(19.5e12, "FP32 19.5 TFLOP/s (glennklockwood citing the datasheet, third-party)"),
        "tf32": Fig(156e12, "TF32 tensor core 156 TFLOP/s dense (third-party)"),
        "float16": Fig(312e12, "FP16 tensor core 312 TFLOP/s dense (third-party)"),
        "bfloat16": Fig(312e12, "BF16 tensor core 312 TFLOP/s dense (third-party)"),
    },
    achievable_fraction={
        "float32": Fig(13.5 / 19.5, "A100-SXM4-40GB FP32 mixbench 13-14 TFLOP/s ~ 70% (derived)",
                       low=13.0 / 19.5, high=14.0 / 19.5),
        "tf32": Fig(2147483648000/0.016 / 156e12, "PyTorch CUDA notes (pytorch#40800, verified text): a 10240^3 float32 matmul "
                                         "in TF32 mode 'takes 0.016s' (another revision: 0.018 s) on GA100, i.e. "
                                         "134 (119) TFLOP/s of the 156 peak", low=2147483648000/0.018 / 156e12, high=2147483648000/0.016 / 156e12),
        "float16": Fig(256.5 / 312, "A100-SXM4-80GB FP16 cuBLASLt 256.5 TFLOP/s @16k^3 = 82% (Azure, "
                                    "verified)", low=221.8 / 312, high=256.5 / 312),
        "bfloat16": Fig(271.2 / 312, "A100 BF16 MAMF 271.2 TFLOP/s = 86.9% (stas00, verified)",
                        low=267.9 / 312, high=271.2 / 312),
    },
    triad_bytes_per_s=Fig(1360e9, "gpu-benches a100_40 triad 1360 GB/s (verified); interval up to its "
                                 "read 1490 GB/s", low=1360e9, high=1490e9),
    h2d_bytes_per_s=Fig(25.13e9, "nvbandwidth host_to_device_memcpy_sm A100-SXM4-40GB 512 MiB 25.13 GB/s "
                                 "(nvbandwidth#42, verified); interval: 18.05 GB/s at 10 GiB to Azure's 26.28 GB/s", low=18.05e9, high=26.28e9),
    d2h_bytes_per_s=Fig(25.13e9, "the only A100 D2H figure (Azure 6.27 GB/s) is flagged anomalous; "
                                 "assumed equal to H2D"),
    # BF16 keeps its plateau: its MAMF figure reached 271.2 TFLOP/s at 1024 x 10240 x 5120, a mid-size product
    gemm_by_size={"float16": (((1024, 119.4e12), (2048, 221.8e12), (4096, 228.0e12), (8192, 253.7e12),
                               (16384, 256.5e12)),
                              "FP16 cuBLASLt on A100-SXM4-80GB: 119.4 TFLOP/s @1k^3, 221.8 @2k^3, 228.0 @4k^3, 253.7 "
                              "@8k^3, 256.5 @16k^3 (Azure ND A100 v4, verified)")},
)

H100 = GPU(
    name="NVIDIA H100-SXM5-80GB",
    memory_bytes=Fig(80 * GIB, "HBM3 80 GB (binary GB)"),
    clock_mhz=1830, nvlink_links=18, pcie_generation=5,
    peak_flops={
        "float32": Fig(66.9e12, "FP32 66.9 TFLOP/s (glennklockwood, third-party)"),
        "tf32": Fig(494.7e12, "TF32 tensor core 494.7 TFLOP/s dense (third-party)"),
        "float16": Fig(989.4e12, "FP16 tensor core 989.4 TFLOP/s dense (third-party)"),
        "bfloat16": Fig(989.4e12, "BF16 tensor core 989.4 TFLOP/s dense (third-party)"),
        "float8": Fig(1978.9e12, "FP8 tensor core 1,978.9 TFLOP/s dense, twice BF16 (NVIDIA H100 datasheet: 3,958 "
                                 "with sparsity; third-party)"),
    },
    achievable_fraction={
        "float8": Fig(794.5 / 989.4, "no published H100 FP8 GEMM figure; assumed the BF16 MAMF fraction 80.3% "
                                     "(assumed)", low=0.5, high=794.5 / 989.4),
        "tf32": Fig(794.5 / 989.4, "no published H100 TF32 GEMM figure; assumed the BF16 MAMF fraction "
                                   "80.3% (assumed)", low=0.5, high=794.5 / 989.4),
        "float32": Fig(794.5 / 989.4, "no published H100 FP32 GEMM figure; assumed the BF16 MAMF fraction "
                                      "80.3% (assumed)"),
        "float16": Fig(794.5 / 989.4, "H100 BF16 MAMF 794.5 TFLOP/s = 80.3% (stas00, verified); the caveat "
                                      "there says to use MAMF for FP16 too"),
        "bfloat16": Fig(794.5 / 989.4, "H100 BF16 MAMF 794.5 TFLOP/s = 80.3% (stas00, verified)",
                        low=792.1 / 989.4, high=794.5 / 989.4),
    },
    triad_bytes_per_s=Fig(2970e9, "Azure ND H100 v5 BabelStream triad 2.97 TB/s (verified); interval "
                                 "from its copy 2.90 TB/s", low=2900e9,
                          high=2970e9),
    h2d_bytes_per_s=Fig(51e9, "Azure ND H100 v5 H2D SM copy 51 GB/s (verified); low end: another "
                                 "cluster's 35.2 GB/s", low=35.2e9, high=51e9),
    d2h_bytes_per_s=Fig(52e9, "Azure ND H100 v5 D2H SM copy 52 GB/s (verified)", low=52e9, high=52.8e9),
)

NODES = [
    Node(file="v100-abci-4gpu.published.yaml", title="ABCI 1.0 compute node (V): 4 x V100-SXM2-16GB, 2 x IB EDR",
         gpu=V100, gpus_per_node=4, cpu_model="2 x Intel Xeon Gold 6148", cpu_cores=40, host_memory_bytes=384e9,
         host_memory_bytes_per_s=Fig(2 * 6 * 21.33e9, "2 sockets x 6 channels DDR4-2666 x 21.33 GB/s: theoretical peak, not a STREAM measurement, shared by every process on the node (unverified: vendor memory-channel spec)"),
         node_source="mlcommons hpc_results_v0.7 Fujitsu ABCI system JSONs (verified)",
         allreduce_bus_bytes_per_s=Fig(85.36e9, "vTrain V100 4-GPU LUT busbw at 1 GiB 85.36 GB/s; no "
                                                "published 4xV100 ABCI table, topology of the proxy unknown (unverified)"),
         other_collective_bus_bytes_per_s=Fig(85.36e9, "no figure for other collectives; assumed the all-reduce busbw"),
         p2p_bytes_per_s=Fig(50e9, "ParaDL's ABCI constants: NVLink 50 GB/s; 2 links per pair is "
                                   "(unverified) for ABCI"),
         base_latency_s=NCCL_BASE, step_latency_s=NCCL_STEP,
         inter_bus_bytes_per_s=Fig(25e9, "2 x EDR 100 Gb/s = 25 GB/s injection per node (derived); "
                                         "no published nccl-tests figure; ParaDL assumes a 12.5 GB/s link",
                                   low=12.5e9, high=25e9),
         inter_step_latency_s=NCCL_NET_STEP,
         inter_p2p_bytes_per_s=Fig(25e9 / 4, "2 x EDR 100 Gb/s = 25 GB/s over 4 GPUs: per-GPU share of the node's NIC line rate when every GPU exchanges at once (derived)"),
         rails_per_node=2, nodes_per_leaf=34, oversubscription=3.0,
         fabric_source="34 nodes per rack on full-bisection leaves, 1:3 over-subscription to the spine "
                       "(news.mynavi.jp ABCI article, third-party; ParaDL's ABCI topology constants)"),
    Node(file="v100-dgx1-8gpu.published.yaml", title="DGX-1: 8 x V100-SXM2-16GB, hybrid cube-mesh NVLink, 4 x IB EDR",
         gpu=V100, gpus_per_node=8, cpu_model="2 x Intel Xeon E5-2698 v4", cpu_cores=40, host_memory_bytes=512e9,
         host_memory_bytes_per_s=Fig(2 * 4 * 19.2e9, "2 sockets x 4 channels DDR4-2400 x 19.2 GB/s: theoretical peak, not a STREAM measurement, shared by every process on the node (unverified: vendor memory-channel spec)"),
         node_source="MLPerf v0.7 NVIDIA dgx1_ngc20.06_mxnet.json (verified)",
         allreduce_bus_bytes_per_s=Fig(134.51e9, "vTrain V100 8-GPU LUT busbw at 1 GiB 134.5 GB/s "
                                                 "(verified; DGX-1-like system likely but unverified)"),
         other_collective_bus_bytes_per_s=Fig(134.51e9, "no figure for other collectives; assumed the all-reduce busbw"),
         p2p_bytes_per_s=Fig(25e9, "one NVLink 2 link, 25 GB/s per direction (some pairs have 2)",
                             high=50e9),
         base_latency_s=NCCL_BASE, step_latency_s=NCCL_STEP,
         inter_bus_bytes_per_s=Fig(48e9, "NCCL maintainer in nccl-tests#29: 'DGX-1 can get 48 GB/s because we have 4 IB "
                                         "adapters' (verified text); 4 x EDR line rate 50 GB/s", low=40e9, high=50e9),
         rails_per_node=4,
         inter_step_latency_s=NCCL_NET_STEP,
         inter_p2p_bytes_per_s=Fig(50e9 / 8, "4 x EDR 100 Gb/s = 50 GB/s over 8 GPUs: per-GPU share of the node's NIC line rate when every GPU exchanges at once (derived)",
                                   high=12.5e9)),
    Node(file="a100-dgx-8gpu.published.yaml", title="DGX A100: 8 x A100-SXM4-40GB, NVSwitch, 8 x IB HDR 200",
         gpu=A100, gpus_per_node=8, cpu_model="2 x AMD EPYC 7742", cpu_cores=128, host_memory_bytes=2e12,
         host_memory_bytes_per_s=Fig(2 * 8 * 25.6e9, "2 sockets x 8 channels DDR4-3200 x 25.6 GB/s: theoretical peak, not a STREAM measurement, shared by every process on the node (unverified: vendor memory-channel spec)"),
         node_source="MLPerf v0.7 dgxa100_ngc20.06_mxnet.json (verified)",
         allreduce_bus_bytes_per_s=Fig(229.35e9, "vTrain A100 8-GPU LUT busbw at 1 GiB 229.35 GB/s; "
                                                 "stas00 228.9-234.9, Azure 228.1-231.6 (verified)",
                                       low=228.1e9, high=234.9e9),
         other_collective_bus_bytes_per_s=Fig(229.35e9, "no A100 figure for other collectives; assumed the all-reduce "
                                                        "busbw (on H200 ring ops match ring all-reduce within 2%)"),
         p2p_bytes_per_s=Fig(237.5e9, "p2pBandwidthLatencyTest bidirectional 430-520 GB/s (nccl-tests#149, "
                                      "verified), halved for one direction (derived)", low=215e9, high=260e9),
         base_latency_s=NCCL_BASE, step_latency_s=NCCL_STEP,
         inter_bus_bytes_per_s=Fig(192e9, "DGX A100 8 x HDR multi-node all-reduce busBW 192 GB/s "
                                          "(NVIDIA staff in nccl#812, third-party)"),
         inter_step_latency_s=NCCL_NET_STEP,
         inter_p2p_bytes_per_s=Fig(200e9 / 8, "8 x HDR 200 Gb/s = 200 GB/s over 8 GPUs: per-GPU share of the node's NIC line rate when every GPU exchanges at once (derived)"),
         rails_per_node=8),
    Node(file="h100-dgx-8gpu.published.yaml", title="DGX H100: 8 x H100-SXM5-80GB, NVSwitch gen 3, 8 x IB NDR 400",
         gpu=H100, gpus_per_node=8, cpu_model="2 x Intel Xeon Platinum 8480C", cpu_cores=112, host_memory_bytes=2e12,
         host_memory_bytes_per_s=Fig(2 * 8 * 38.4e9, "2 sockets x 8 channels DDR5-4800 x 38.4 GB/s: theoretical peak, not a STREAM measurement, shared by every process on the node (unverified: vendor memory-channel spec)"),
         node_source="MLPerf v3.0 dgxh100_ngc23.04_mxnet.json (verified)",
         allreduce_bus_bytes_per_s=Fig(478.9e9, "Azure ND H100 v5 NVLS all-reduce busbw 478.9 GB/s at 8 GB "
                                                "(verified); NVIDIA staff ~480 (nccl-tests#212)",
                                       low=466.4e9, high=480e9),
         other_collective_bus_bytes_per_s=Fig(370e9, "~370 GB/s busBw for non-all-reduce collectives "
                                                     "(sjeaugey, nccl-tests#212, verified)", low=361.4e9, high=370e9),
         p2p_bytes_per_s=Fig(378e9, "P2P NVLink unidirectional 376-380 GB/s (nccl#1264, verified)",
                             low=376e9, high=380e9),
         base_latency_s=NCCL_BASE,
         step_latency_s=Fig((26e-6 - 5.6e-6) / 14, "Azure ND H100 v5 1 KB all-reduce ~26 us on 8 GPUs "
                                                  "(derived) = 5.6 us base + 14 steps x 1.46 us (derived)"),
         inter_bus_bytes_per_s=Fig(320e9, "8xH100, 8 x 400 Gb RoCE, 4 nodes busbw 320 GB/s (nccl#1221, "
                                          "verified; RoCE proxy for DGX H100's IB NDR)", high=430e9),
         inter_step_latency_s=NCCL_NET_STEP,
         inter_p2p_bytes_per_s=Fig(400e9 / 8, "8 x NDR 400 Gb/s = 400 GB/s over 8 GPUs: per-GPU share of the node's NIC line rate when every GPU exchanges at once (derived)"),
         rails_per_node=8),
]

EDR_RAIL = Fig(12.2e9, "NCCL maintainer in nccl-tests#29: a single 100 Gb/s card per node gives 'about 12.2 GB/s ... as good "
                       "as you can get' all-reduce busbw (verified text)")
HDR_RAIL = Fig(24e9, "192 GB/s measured on 8 x HDR 200 Gb/s (NVIDIA staff, nccl#812, third-party) / 8 rails (derived)")

V100_32 = replace(V100, name="Tesla V100-SXM2-32GB", memory_bytes=Fig(32 * GIB, "HBM2 32 GB variant (binary GB)"))
V100_SXM3 = replace(V100, name="Tesla V100-SXM3-32GB", memory_bytes=Fig(32 * GIB, "DGX-2: 16 x V100 32 GB (binary GB); "
                    "the SXM3 part's higher boost clock is not in our sources, so the SXM2 peaks are used (assumed)"))
A100_80 = replace(
    A100, name="NVIDIA A100-SXM4-80GB", memory_bytes=Fig(80 * GIB, "HBM2e 80 GB (binary GB)"),
    triad_bytes_per_s=Fig(1700e9, "Azure ND A100 v4 (A100-SXM4-80GB) BabelStream triad 1.70 TB/s (verified); "
                                  "gpu-benches a100_80 triad 1759", low=1610e9, high=1759e9))
A100_PCIE = replace(
    A100, name="NVIDIA A100-PCIE-40GB", gemm_by_size={},
    achievable_fraction={**A100.achievable_fraction,
                         "float16": Fig(256.4 / 312, "stas00 MAMF finder, A100 PCIe BF16/FP16 256.4 TFLOP/s = 82.2% "
                                                     "(verified)")},
    h2d_bytes_per_s=A100.h2d_bytes_per_s)
A100_PCIE_80 = replace(A100_PCIE, name="NVIDIA A100-PCIe-80GB", memory_bytes=A100_80.memory_bytes,
                       triad_bytes_per_s=Fig(1759e9, "gpu-benches a100_80 triad 1759 GB/s (variant not "
                                                     "stated; PCIe peak 1935 GB/s)", low=1610e9, high=1759e9))
P100 = GPU(
    name="Tesla P100-SXM2-16GB",
    memory_bytes=Fig(16 * GIB, "AnandTech, 'NVIDIA Announces Tesla P100' (2016): 16 GB HBM2 (third-party)"),
    clock_mhz=1480, nvlink_links=4, pcie_generation=3,
    peak_flops={
        "float32": Fig(10.6e12, "AnandTech Tesla P100 table: single precision 10.6 TFLOP/s at 1480 MHz (third-party)"),
        "float16": Fig(21.2e12, "AnandTech Tesla P100 table: half precision 21.2 TFLOP/s, no tensor cores (third-party)"),
    },
    achievable_fraction={
        "float32": Fig(V100.achievable_fraction["float32"].value, "no published P100 GEMM figure; assumed the V100 FP32 "
                                                                 "fraction 92% (assumed)", low=0.75,
                                 high=V100.achievable_fraction["float32"].value),
        "float16": Fig(V100.achievable_fraction["float32"].value, "no published P100 FP16 GEMM figure; assumed the V100 "
                                                                 "FP32 fraction (assumed)", low=0.6,
                                 high=V100.achievable_fraction["float32"].value),
    },
    triad_bytes_per_s=Fig(0.9 * 720e9, "no published P100 STREAM figure: 720 GB/s HBM2 peak (AnandTech, third-party) at "
                                       "the 90% triad share V100 reaches (assumed)", low=0.8 * 720e9, high=0.9 * 720e9),
    h2d_bytes_per_s=V100.h2d_bytes_per_s, d2h_bytes_per_s=V100.d2h_bytes_per_s,
)

NODES += [
    Node(file="v100-dgx1-1edr-8gpu.published.yaml",
         title="DGX-1-class node: 8 x V100-SXM2-16GB, hybrid cube-mesh NVLink, 1 x IB EDR (OneFlow DLPerf cluster)",
         gpu=V100, gpus_per_node=8, cpu_model="2 x Intel Xeon Gold 5118 (DLPerf rows' system.cpu)", cpu_cores=24,
         host_memory_bytes=512e9, host_memory_bytes_per_s=NODES[1].host_memory_bytes_per_s,
         node_source="OneFlow DLPerf v1.0 report: 4 nodes x 8 V100-SXM2-16GB, NVLink hybrid mesh, one EDR HCA per node",
         allreduce_bus_bytes_per_s=NODES[1].allreduce_bus_bytes_per_s,
         other_collective_bus_bytes_per_s=NODES[1].other_collective_bus_bytes_per_s,
         p2p_bytes_per_s=NODES[1].p2p_bytes_per_s, base_latency_s=NCCL_BASE, step_latency_s=NCCL_STEP,
         inter_bus_bytes_per_s=EDR_RAIL, inter_step_latency_s=NCCL_NET_STEP,
         inter_p2p_bytes_per_s=Fig(12.5e9 / 8, "1 x EDR 100 Gb/s = 12.5 GB/s over 8 GPUs (derived)"), rails_per_node=1),
    Node(file="v100-dgx2-16gpu.published.yaml",
         title="DGX-2: 16 x V100-SXM3-32GB, NVSwitch, 8 x IB EDR compute",
         gpu=V100_SXM3, gpus_per_node=16, cpu_model="2 x Intel Xeon Platinum 8168", cpu_cores=48, host_memory_bytes=1.5e12,
         host_memory_bytes_per_s=Fig(2 * 6 * 21.33e9, "2 sockets x 6 channels DDR4-2666: theoretical peak (unverified)"),
         node_source="MLPerf v0.6 NVIDIA dgx2_ngc19.05_mxnet system JSON (via the corpus record): 16 x V100-SXM3, NVSwitch",
         allreduce_bus_bytes_per_s=Fig(134.51e9, "no published DGX-2 nccl-tests figure; assumed the V100 8-GPU LUT busbw "
                                                 "134.5 GB/s (vTrain); NVSwitch gives each GPU 6 x 25 GB/s",
                                       high=150e9),
         other_collective_bus_bytes_per_s=Fig(134.51e9, "assumed the all-reduce busbw"),
         p2p_bytes_per_s=Fig(150e9, "NVSwitch: 6 NVLink2 links x 25 GB/s per direction to any peer (line rate)"),
         base_latency_s=NCCL_BASE, step_latency_s=NCCL_STEP,
         inter_bus_bytes_per_s=Fig(8 * EDR_RAIL.value, f"8 compute EDR rails x {EDR_RAIL.value / 1e9:.1f} GB/s per rail "
                                                        f"(derived): {EDR_RAIL.source}", low=4 * EDR_RAIL.value),
         inter_step_latency_s=NCCL_NET_STEP,
         inter_p2p_bytes_per_s=Fig(100e9 / 16, "8 x EDR 100 Gb/s = 100 GB/s over 16 GPUs (derived)"), rails_per_node=8),
    Node(file="a100-80gb-dgx-8gpu.published.yaml", title="DGX A100: 8 x A100-SXM4-80GB, NVSwitch, 8 x IB HDR 200",
         gpu=A100_80, gpus_per_node=8, cpu_model="2 x AMD EPYC 7742", cpu_cores=128, host_memory_bytes=2e12,
         host_memory_bytes_per_s=NODES[2].host_memory_bytes_per_s,
         node_source="MLPerf v1.0 DGX A100 JSONs use A100-SXM4-80GB (verified)",
         allreduce_bus_bytes_per_s=Fig(229.35e9, "Azure ND A100 v4 (A100-80GB) 228.1 GB/s at 1 GiB, 231.6 at "
                                                 "8 GiB; vTrain A100 229.35 (verified)", low=228.1e9, high=231.6e9),
         other_collective_bus_bytes_per_s=NODES[2].other_collective_bus_bytes_per_s,
         p2p_bytes_per_s=NODES[2].p2p_bytes_per_s, base_latency_s=NCCL_BASE, step_latency_s=NCCL_STEP,
         inter_bus_bytes_per_s=NODES[2].inter_bus_bytes_per_s, inter_step_latency_s=NCCL_NET_STEP,
         inter_p2p_bytes_per_s=NODES[2].inter_p2p_bytes_per_s, rails_per_node=8),
    Node(file="a100-sxm-4gpu-2hdr.published.yaml",
         title="4 x A100-SXM4-40GB node (Dell XE8545 class), NVLink, 2 x IB HDR 200",
         gpu=A100, gpus_per_node=4, cpu_model="2 x AMD EPYC (XE8545)", cpu_cores=128, host_memory_bytes=1e12,
         host_memory_bytes_per_s=NODES[2].host_memory_bytes_per_s,
         node_source="MLPerf v2.0 Dell XE8545x4A100-SXM-40GB system JSON (via the corpus record): 2 x ConnectX-6 HDR",
         allreduce_bus_bytes_per_s=Fig(229.35e9, "no published 4 x A100 NVLink nccl-tests figure; assumed the 8-GPU DGX "
                                                 "A100 busbw (unverified)", low=150e9, high=234.9e9),
         other_collective_bus_bytes_per_s=NODES[2].other_collective_bus_bytes_per_s,
         p2p_bytes_per_s=NODES[2].p2p_bytes_per_s, base_latency_s=NCCL_BASE, step_latency_s=NCCL_STEP,
         inter_bus_bytes_per_s=Fig(2 * HDR_RAIL.value, f"2 HDR rails x 24 GB/s (derived): {HDR_RAIL.source}"),
         inter_step_latency_s=NCCL_NET_STEP,
         inter_p2p_bytes_per_s=Fig(50e9 / 4, "2 x HDR 200 Gb/s = 50 GB/s over 4 GPUs (derived)"), rails_per_node=2),
]
_PCIE_RING = Fig(0.78 * 31.5e9, "no published nccl-tests figure for A100 PCIe nodes: a ring over PCIe Gen4 x16 (31.5 GB/s "
                                "per direction, derived) at the 78% share V100 PCIe copies reach (12.35 of 15.75 GB/s) "
                                "(assumed)", low=0.4 * 31.5e9, high=31.5e9)
for _file, _gpu, _n in (("a100-pcie-8gpu-1edr.published.yaml", A100_PCIE, 8), ("a100-pcie-4gpu-1edr.published.yaml", A100_PCIE_80, 4)):
    NODES.append(Node(
        file=_file, title=f"{_n} x {_gpu.name} over PCIe Gen4, 1 x IB EDR (Dell DSS8440 / R750xa class)",
        gpu=_gpu, gpus_per_node=_n, cpu_model="2 x Intel Xeon (Dell)", cpu_cores=48, host_memory_bytes=768e9,
        host_memory_bytes_per_s=NODES[0].host_memory_bytes_per_s,
        node_source="MLPerf v1.0 / v3.0 Dell system JSONs (via the corpus records): A100 PCIe, 1 x ConnectX-5 EDR",
        allreduce_bus_bytes_per_s=_PCIE_RING, other_collective_bus_bytes_per_s=_PCIE_RING, p2p_bytes_per_s=_PCIE_RING,
        base_latency_s=NCCL_BASE, step_latency_s=NCCL_STEP, inter_bus_bytes_per_s=EDR_RAIL,
        inter_step_latency_s=NCCL_NET_STEP,
        inter_p2p_bytes_per_s=Fig(12.5e9 / _n, f"1 x EDR 100 Gb/s = 12.5 GB/s over {_n} GPUs (derived)"), rails_per_node=1))
NODES.append(Node(
    file="p100-dgx1-8gpu.published.yaml", title="DGX-1 (Pascal): 8 x P100-SXM2-16GB, hybrid cube-mesh NVLink 1, 4 x IB EDR",
    gpu=P100, gpus_per_node=8, cpu_model="2 x Intel Xeon E5-2698 v4", cpu_cores=40, host_memory_bytes=512e9,
    host_memory_bytes_per_s=NODES[1].host_memory_bytes_per_s,
    node_source="TensorFlow benchmarks page (2017): NVIDIA DGX-1 with 8 x P100; DGX-1 node layout as the V100 model",
    allreduce_bus_bytes_per_s=Fig(134.51e9 * 20 / 25, "no published DGX-1 P100 figure: the V100 DGX-1 busbw 134.5 GB/s "
                                                      "scaled by NVLink 1 / NVLink 2 link rate 20/25 (assumed)",
                                  low=50e9, high=134.51e9 * 20 / 25),
    other_collective_bus_bytes_per_s=Fig(134.51e9 * 20 / 25, "assumed the all-reduce busbw"),
    p2p_bytes_per_s=Fig(20e9, "one NVLink 1 link: 20 GB/s per direction (AnandTech P100 article: 4 links, 80 GB/s per "
                              "direction in all, third-party)"),
    base_latency_s=NCCL_BASE, step_latency_s=NCCL_STEP, inter_bus_bytes_per_s=NODES[1].inter_bus_bytes_per_s,
    inter_step_latency_s=NCCL_NET_STEP, inter_p2p_bytes_per_s=NODES[1].inter_p2p_bytes_per_s, rails_per_node=4))

_DGX_A100 = next(n for n in NODES if n.file == "a100-dgx-8gpu.published.yaml")
_VTRAIN_NODE_GBPS = 800  # vTrain config/validation/multi/*.json: inter_node_bandwidth 800, in Gb/s (src/predictor.py)
NODES.append(replace(
    _DGX_A100, file="a100-40gb-4hdr-8gpu.published.yaml",
    title="vTrain's A100 cluster: 8 x A100-SXM4 per node, NVSwitch, 800 Gb/s of network per node (4 x IB HDR 200)",
    node_source="vTrain validation configs (config/validation/multi/*.json @f8dda847): gpu_name A100, node_size 8, "
                "inter_node_bandwidth 800, which src/predictor.py reads as Gb/s (bandwidth * 2**30 / 8); 800 Gb/s "
                "per node is half a DGX A100's 8 x HDR 200 (the per-GPU reading, 8 x 800 Gb/s, exceeds any A100 "
                "node). GPU, NVLink and host as the DGX A100 40 GB (memory size not stated)",
    inter_bus_bytes_per_s=Fig(192e9 * _VTRAIN_NODE_GBPS / 1600, "DGX A100 8 x HDR (1600 Gb/s per node) multi-node "
                                                               "all-reduce busBW 192 GB/s (nccl#812) scaled to the "
                                                               "800 Gb/s per node vTrain states (derived)"),
    inter_p2p_bytes_per_s=Fig(_VTRAIN_NODE_GBPS / 8 * 1e9 / 8, "800 Gb/s = 100 GB/s over 8 GPUs: per-GPU share of the "
                                                               "node's network when every GPU exchanges at once "
                                                               "(derived)"),
    rails_per_node=4))

OVERLAP_EFFICIENCY = Fig(1 / 1.76, "kernels overlapped with an NCCL collective run slower: on A100-SXM4-80GB a GEMM took "
                                   "2.08 ms instead of 1.18 (1.76x), attention 1.83x, element-wise 2.5x (nccl#1428, "
                                   "verified text; memory-bandwidth contention per the NCCL maintainer); BN backward "
                                   "2-4x under Horovod allreduce on V100 (nccl#338). eta = 1 / 1.76; the interval "
                                   "spans 1/4 to it. Assumed for every GPU; measure it on yours",
                         low=0.25, high=1 / 1.76)
NO_STREAM_LATENCY = Fig(0.0, "STREAM latency not published; 0 s")
COMPUTE_OPS = ("gemm", "conv2d", "conv3d", "conv2d_grouped")
MEMORY_OPS = {"batchnorm": ("fwd", "bwd_data"), "relu": ("fwd", "bwd_data"), "maxpool": ("fwd", "bwd_data"),
              "avgpool": ("fwd", "bwd_data"), "add": ("fwd",)}
KERNEL_LAUNCH = Fig(3e-6, "per-kernel launch floor: 'the launch overhead of null kernels ... about 3 microseconds with "
                         "recent hardware and software' (NVIDIA developer forums, "
                         "https://forums.developer.nvidia.com/t/too-much-time-for-kernel-launch-latency/233645, "
                         "third-party). A floor: PyTorch's own host time per operator comes "
                         "on top and is not published, so very small kernels are still predicted optimistically")


WINOGRAD_REDUCTION = Fig(36 / 16, "multiplications of a 3x3 convolution over a 2x2 output tile: 36 direct, 16 with "
                                    "Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray 2016, 'Fast Algorithms for "
                                    "Convolutional Neural Networks'), which cuDNN implements for float32; evidence that "
                                    "it runs: VGG16 (3x3 stride-1 convolutions, about 93 GFLOP per image per training "
                                    "step) trained at 154 images/s on one P100 in the TensorFlow benchmarks (2017, "
                                    "cuDNN 5.1), 14 TFLOP/s of direct-convolution work on a 10.6 TFLOP/s GPU")


def gemm_efficiency(frac: float, by_size: tuple[tuple[int, float], ...]) -> EfficiencyModel:
    """Matrix-product efficiency by size from measured throughput of n^3 products (GPU.gemm_by_size): the plateau
    `frac` times each size's share of the largest size's throughput, held from halfway (in log FLOPs) to the
    next smaller size up to halfway to the next larger one; the plateau from the largest size on. One regression
    tree on log10 FLOPs (calibrate.shapes.FLOP_FEATURES[0]) in the fitted profiles' format."""
    top = by_size[-1][1]
    logs = [math.log10(2.0 * n ** 3) for n, _ in by_size]
    cuts = [(a + b) / 2 for a, b in zip(logs, logs[1:])]
    nodes = []  # (left, right, feature, threshold, value): node 2k splits at cuts[k], its left child is size k's leaf
    for k, cut in enumerate(cuts):
        nodes += [(2 * k + 1, 2 * k + 2, 0, cut, 0.0), (-1, -1, -2, -2.0, math.log(by_size[k][1] / top))]
    nodes.append((-1, -1, -2, -2.0, 0.0))  # the plateau
    left, right, feature, threshold, value = (list(column) for column in zip(*nodes))
    tree = Tree(children_left=left, children_right=right, feature=feature, threshold=threshold, value=value)
    return EfficiencyModel(features=list(FLOP_FEATURES), init=math.log(frac), trees=[tree])


def _compute(gpu: GPU) -> dict[str, ComputeFit]:
    out = {}
    triad = gpu.triad_bytes_per_s
    for dtype, peak in gpu.peak_flops.items():
        frac = gpu.achievable_fraction[dtype]
        scale = Estimate(value=1.0, low=frac.value / (frac.high or frac.value), high=frac.value / (frac.low or frac.value))
        winograd = (WINOGRAD_FAMILY,) if dtype == "float32" else ()
        for op in COMPUTE_OPS + winograd:
            reduction = WINOGRAD_REDUCTION.value if op == WINOGRAD_FAMILY else 1.0
            by_size = gpu.gemm_by_size.get(dtype) if op == "gemm" else None
            for pass_ in ("fwd", "bwd_data", "bwd_weight"):
                out[f"{op}/{pass_}/{dtype}"] = ComputeFit(
                    kind="flops", launch_s=KERNEL_LAUNCH.estimate(), peak_per_s=peak.value * reduction,
                    memory_bandwidth_bytes_per_s=triad.value,
                    efficiency=gemm_efficiency(frac.value, by_size[0]) if by_size else EfficiencyModel(
                        features=[], init=math.log(frac.value)), time_scale=scale,
                    sources=[peak.source, frac.source, f"memory bound: {triad.source}", KERNEL_LAUNCH.source,
                             "convolutions assumed to reach the GEMM fraction (implicit-GEMM cuDNN kernels)"] + (
                        [f"direct-convolution FLOPs over {reduction:.2f}: {WINOGRAD_REDUCTION.source}"]
                        if reduction != 1.0 else []) + (
                        [f"efficiency by size, share of the largest measured: {by_size[1]}"] if by_size else []))
        for op, passes in MEMORY_OPS.items():
            for pass_ in passes:
                out[f"{op}/{pass_}/{dtype}"] = ComputeFit(
                    kind="bytes", launch_s=KERNEL_LAUNCH.estimate(), peak_per_s=triad.value,
                    efficiency=EfficiencyModel(features=[], init=0.0),
                    time_scale=Estimate(value=1.0, low=triad.value / (triad.high or triad.value),
                                        high=triad.value / (triad.low or triad.value)),
                    sources=[f"memory-bound at STREAM triad: {triad.source}", KERNEL_LAUNCH.source])
    return out


def _line(alpha: Fig, bandwidth: Fig) -> SegmentedFit:
    return SegmentedFit(segments=[Segment(from_x=0.0, alpha_s=alpha.estimate(), bandwidth_bytes_per_s=bandwidth.estimate())],
                        sources=[alpha.source, bandwidth.source])


def _links(node: Node) -> dict[str, dict[str, LinkModel]]:
    links = {}
    for op in COLLECTIVES:
        intra_bw = {"allreduce": node.allreduce_bus_bytes_per_s, "sendrecv": node.p2p_bytes_per_s,
                    "halo": node.p2p_bytes_per_s}.get(op, node.other_collective_bus_bytes_per_s)
        p2p = op in ("sendrecv", "halo")
        inter_bw = node.inter_p2p_bytes_per_s if p2p else node.inter_bus_bytes_per_s
        common = dict(base_latency_s=node.base_latency_s.estimate(), step_latency_s=node.step_latency_s.estimate())
        inter_sources = [node.inter_step_latency_s.source, inter_bw.source]
        if not p2p:  # rings: the fill of the all-reduce curves (point-to-point has none)
            if op != "allreduce":
                inter_sources.append("assumed: the node's inter-node all-reduce bus bandwidth")
            inter_sources.append(f"fill: {NCCL_NET_FILL.source}")
            if op != "allreduce":
                inter_sources.append("fill assumed: the all-reduce's")
        links[op] = {
            "intra": LinkModel(**common, bus_bandwidth_bytes_per_s=intra_bw.estimate(),
                               sources=[node.base_latency_s.source, node.step_latency_s.source, intra_bw.source]),
            "inter": LinkModel(**common, inter_step_latency_s=node.inter_step_latency_s.estimate(),
                               bus_bandwidth_bytes_per_s=inter_bw.estimate(),
                               fill_latency_s=None if p2p else NCCL_NET_FILL.estimate(), sources=inter_sources),
        }
    return links


def _apply_constants(compute: dict[str, ComputeFit], constants: SystemConstants) -> dict[str, ComputeFit]:
    """The compute fits with the family's fitted time scales (calibrate.system_constants) on their intervals."""
    out = {}
    for key, fit in compute.items():
        dtype = key.rsplit("/", 1)[1]
        if key.split("/", 1)[0] in MATMUL_OPS:  # matrix products stay at the measured GEMM fraction
            out[key] = fit
            continue
        grouped = fit.kind != "bytes" and "_grouped/" in key
        table = constants.bytes_time_scale if fit.kind == "bytes" else (
            constants.grouped_time_scale if grouped else constants.flops_time_scale)
        factor = table.get(dtype)
        if factor is None:
            out[key] = fit
            continue
        ts = fit.time_scale
        out[key] = fit.model_copy(update={
            "time_scale": Estimate(value=ts.value * factor, low=ts.low * factor, high=ts.high * factor),
            "sources": fit.sources + [f"time scale {factor:.3f} {constants.describe(dtype, grouped)}"]})
    return out


def _framework(constants: Optional[SystemConstants]) -> Optional[FrameworkFit]:
    if constants is None or constants.per_layer_s <= 0:
        return None
    per_layer = Estimate.exact(constants.per_layer_s)
    return FrameworkFit(forward_per_layer_s=per_layer, backward_per_layer_s=per_layer,
                        sources=[f"framework time per layer and pass {constants.describe()}"])


def build_profile(node: Node, constants: Optional[SystemConstants] = None,
                  model_error: Optional[dict] = None, stacks: Optional[StackScales] = None,
                  kernels: Optional[GpuKernels] = None) -> Profile:
    """The published profile of a node; `constants`: its GPU family's constants fitted to published runs
    (None: datasheet figures only); `model_error`: the held-out error of the published validation; `stacks`:
    the software stacks' factors fitted with the constants (kept only with them: they are relative to the
    fitted family scales, not to the datasheet); `kernels`: a GPU kernel model (calibrate.deepbench_kernels)
    that costs the GEMMs and convolutions instead of the datasheet fractions."""
    gpu = node.gpu
    compute = _compute(gpu)
    if constants is not None:
        compute = _apply_constants(compute, constants)
    coefficients = Coefficients(
        compute=compute, framework=_framework(constants), gpu_kernels=kernels,
        execution=Execution(overlap_efficiency=OVERLAP_EFFICIENCY.estimate(), sources=[OVERLAP_EFFICIENCY.source]),
        model_error=ModelError(**model_error) if model_error else None,
        software_stacks=stacks.scales if constants is not None and stacks is not None and stacks.scales else None,
        memory={"device/triad": _line(NO_STREAM_LATENCY, gpu.triad_bytes_per_s),
                "host/triad": _line(NO_STREAM_LATENCY, node.host_memory_bytes_per_s)},
        host_device={"h2d_pinned": _line(COPY_ALPHA, gpu.h2d_bytes_per_s),
                     "d2h_pinned": _line(COPY_ALPHA, gpu.d2h_bytes_per_s)},
        links=_links(node),
        fabric=Fabric(rails_per_node=node.rails_per_node, nodes_per_leaf=node.nodes_per_leaf,
                      oversubscription=node.oversubscription, sources=[node.fabric_source],
                      background_load=default_background()),
        spread=published_spread(), storage=published_storage(node.file),
        notes=[f"published reference profile: {node.title}", node.node_source, gpu.memory_bytes.source,
               "no pageable-copy figures: pageable host<->device copies are not available from this profile",
               "host memory bandwidth is the theoretical channel peak (no published host STREAM figure)"] + node.notes)
    gpus = [GPUInfo(name=gpu.name, memory_bytes=gpu.memory_bytes.value, sm_clock_mhz=gpu.clock_mhz,
                    nvlink_links=gpu.nvlink_links, pcie_generation=gpu.pcie_generation, pcie_width=16)
            for _ in range(node.gpus_per_node)]
    machine = Machine(hostname=f"published:{node.file.split('.')[0]}", cpu_model=node.cpu_model, cpu_cores=node.cpu_cores,
                      memory_bytes=node.host_memory_bytes, gpus=gpus, gpus_per_node=node.gpus_per_node,
                      device_memory_bytes=gpu.memory_bytes.value)
    return Profile(schema_version=SCHEMA_VERSION, machine=machine,
                   provenance=Provenance(kind="published", source=f"{node.title}; figures from "
                                                                   "published measurements and datasheets (see sources)"),
                   created="2026-11-29T00:00:00+00:00", coefficients=coefficients.model_dump(mode="json", exclude_none=True))


def render(node: Node, constants: Optional[dict[str, SystemConstants]] = None, model_error: Optional[dict] = None,
           stacks: Optional[StackScales] = None) -> str:
    """The profile file of a node, with its GPU family's fitted constants, the software stacks' factors and the
    held-out model error (defaults: the shipped constants file; pass {} for no constants)."""
    constants = load_constants() if constants is None else constants
    stacks = load_stacks() if stacks is None else stacks
    header = (f"# PUBLISHED reference profile: {node.title}\n"
              "# Not measured: built from published figures by `python -m calibrate.published`; do not edit by hand.\n"
              "# Every coefficient lists its sources: verified / third-party / derived / unverified / assumed.\n")
    profile = build_profile(node, for_family(constants, gpu_family(node.gpu.name)),
                            load_model_error() if model_error is None else model_error, stacks)
    return header + dump_yaml(profile.model_dump(mode="json", exclude_none=True))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="write the published reference profiles")
    parser.add_argument("--out-dir", default=str(shipped_profiles_dir()),
                        help="folder to write into (default: the shipped profiles, calibrate/profiles)")
    args = parser.parse_args(argv)
    constants = load_constants()
    for node in NODES:
        path = Path(args.out_dir) / node.file
        write_atomic(path, render(node, constants))
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
