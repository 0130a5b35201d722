"""Compute microbenchmarks: GEMMs, linear layers (`linear_cases`), conv2d/conv3d in their three passes, the
memory-bound CNN ops and the transformer families (`transformer_cases`), each point timed by profiler.timing.Timer
and returned as a Sample with its FLOPs (2 per multiply-add, docs/method.md §1) and its compulsory bytes (every
operand read once, every result written once; the *_bytes functions), from which the fitting stage derives
throughput and arithmetic intensity.

The grids: archetype layers of ResNet, VGG, Inception and a CosmoFlow-style 3-D net, each also with one dimension
shrunk as a parallel strategy splits it (batch, H/W, F, C), and the designs beside them; what each grid holds and
why each design has its shapes, with the measurements behind them: docs/calibration.md ("Shape grids").
"""
from __future__ import annotations

import itertools
import math
import os
import weakref
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

from profiler import caches
from profiler.cases import GRID_ENV, BenchCase
from profiler.profile import WEIGHT_DESIGN_LAYER
from profiler import opmath
from profiler.dtypes import FP8, dtype_bytes
from profiler.opmath import gemm_bytes, gemm_flops, window_output_size
from profiler.errors import UserError

GPU_DTYPES = ("float32", "tf32", "float16", "bfloat16")
CPU_DTYPES = ("float32",)
TORCH_DTYPES = {"float32": torch.float32, "tf32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
INDEX_BYTES = 8  # int64 max-pool indices


# ---------------------------------------------------------------------------------------------- counting
def element_bytes(dtype: str) -> int:
    return dtype_bytes(dtype)


def conv_spatial(params: dict) -> tuple[list[int], list[int]]:
    """(input spatial sizes, output spatial sizes), in (D,) H, W order."""
    spatial_in = ([params["D"]] if "D" in params else []) + [params["H"], params["W"]]
    k, s, p = params["kernel"], params["stride"], params["padding"]
    return spatial_in, [window_output_size(n, k, s, p) for n in spatial_in]


def conv_flops(params: dict) -> int:
    """2·N·F·prod(out)·(C/groups)·kernel^d, the same for fwd, bwd_data and bwd_weight."""
    spatial_in, spatial_out = conv_spatial(params)
    d = len(spatial_in)
    c_group = params["C"] // params.get("groups", 1)
    return int(opmath.conv_flops(params["N"], c_group, params["F"], params["kernel"] ** d, math.prod(spatial_out)))


def conv_bytes(params: dict, elem_bytes: int) -> int:
    """Input, weight and output once each (fwd reads x, w and writes y; bwd_data reads dy, w and writes dx;
    bwd_weight reads x, dy and writes dw: the same three tensors)."""
    spatial_in, spatial_out = conv_spatial(params)
    d = len(spatial_in)
    n, c, f = params["N"], params["C"], params["F"]
    c_group = c // params.get("groups", 1)
    return elem_bytes * (n * c * math.prod(spatial_in) + f * c_group * params["kernel"] ** d + n * f * math.prod(spatial_out))


def activation_elems(params: dict) -> int:
    return params["N"] * params["C"] * params["H"] * params["W"] * params.get("D", 1)


def pool_output_elems(params: dict) -> int:
    spatial_in = ([params["D"]] if "D" in params else []) + [params["H"], params["W"]]
    out = [window_output_size(n, params["kernel"], params["stride"], params["padding"]) for n in spatial_in]
    return params["N"] * params["C"] * math.prod(out)


def memory_op_counts(op: str, variant: str, params: dict, elem_bytes: int) -> tuple[int, int]:
    """(flops, bytes_moved) of one call of a memory-bound op, compulsory traffic only.

    batchnorm fwd (training): read x, write y; ~8 flops/element (mean, variance, normalise, affine).
    batchnorm bwd: read dy and x, write dx; ~12 flops/element.
    relu fwd: read x, write y; 1 flop/element. relu bwd: read dy and y, write dx; 1 flop/element.
    add fwd: read a and b, write c; 1 flop/element.
    maxpool fwd: read x, write y and its int64 indices; kernel^d comparisons per output.
    maxpool bwd: read dy and the indices, write dx (input-sized).
    avgpool fwd: read x, write y; kernel^d additions per output. avgpool bwd: read dy, write dx; 1 per input.
    """
    n = activation_elems(params)
    if op in ("maxpool", "avgpool"):
        out = pool_output_elems(params)
        window = params["kernel"] ** (3 if "D" in params else 2)
        index = INDEX_BYTES * out if op == "maxpool" else 0
        if variant == "fwd":
            return out * window, elem_bytes * (n + out) + index
        return n, elem_bytes * (out + n) + index
    table = {
        ("batchnorm", "fwd"): (8, 2),
        ("batchnorm", "bwd"): (12, 3),
        ("relu", "fwd"): (1, 2),
        ("relu", "bwd"): (1, 3),
        ("add", "fwd"): (1, 3),
    }
    flops_per_elem, tensors = table[(op, variant)]
    return flops_per_elem * n, tensors * n * elem_bytes


# ---------------------------------------------------------------------------------------------- grids
# Archetype layers: (name, C, F, H=W, kernel, stride, padding, CPU batch). The CPU batch keeps one forward
# call near 0.2-2 GFLOP; GPU grids multiply it.
CONV2D_LAYERS = [
    ("resnet_conv1_7x7s2", 3, 64, 224, 7, 2, 3, 2),
    ("resnet_res2_3x3", 64, 64, 56, 3, 1, 1, 4),
    ("resnet_res3_1x1", 256, 128, 28, 1, 1, 0, 4),
    ("resnet_down_3x3s2", 128, 128, 56, 3, 2, 1, 4),
    ("resnet_res4_3x3", 256, 256, 14, 3, 1, 1, 4),
    ("resnet_res5_3x3", 512, 512, 7, 3, 1, 1, 4),
    ("vgg_conv2_3x3", 64, 128, 112, 3, 1, 1, 1),
    ("vgg_conv4_3x3", 256, 512, 28, 3, 1, 1, 1),
    ("inception_5x5", 32, 64, 28, 5, 1, 2, 4),
    ("inception_1x1", 192, 64, 28, 1, 1, 0, 4),
    # narrow layers: what a filter/channel split of a 64-filter layer leaves on one device, and the
    # down-scaled nets validation runs on CPU (few channels, large images: poor CPU efficiency)
    ("narrow_3to8_3x3", 3, 8, 64, 3, 1, 1, 8),
    ("narrow_8to16_3x3", 8, 16, 32, 3, 1, 1, 16),
    ("narrow_16to32_3x3", 16, 32, 32, 3, 1, 1, 8),
    # channels that are not whole SIMD blocks (user nets, random nets): oneDNN's blocked layouts pad them
    ("odd_40to72_3x3", 40, 72, 28, 3, 1, 1, 8),
    ("odd_100to48_1x1", 100, 48, 28, 1, 1, 0, 8),
]
# CosmoFlow-style 3-D layers: (name, C, F, D=H=W, kernel, stride, padding, CPU batch).
CONV3D_LAYERS = [
    ("cosmo_conv1_3x3x3", 4, 16, 32, 3, 1, 1, 1),
    ("cosmo_conv2_3x3x3", 16, 32, 32, 3, 1, 1, 1),
    ("cosmo_conv3_3x3x3", 32, 64, 16, 3, 1, 1, 1),
    ("cosmo_conv4_3x3x3", 64, 128, 8, 3, 1, 1, 4),
    ("cosmo_down_2x2x2s2", 32, 32, 32, 2, 2, 0, 1),
    ("narrow3d_1to4_3x3x3", 1, 4, 16, 3, 1, 1, 8),
    ("narrow3d_4to8_3x3x3", 4, 8, 16, 3, 1, 1, 8),
    # the down-scaled 3-D nets validation runs (few channels, 4-16 cubed; docs/calibration.md "Shape grids")
    ("narrow3d_4to4_3x3x3", 4, 4, 16, 3, 1, 1, 8),
    ("narrow3d_8to16_3x3x3", 8, 16, 8, 3, 1, 1, 8),
    ("narrow3d_16to32_3x3x3", 16, 32, 4, 3, 1, 1, 16),
    ("mid3d_16to16_3x3x3", 16, 16, 16, 3, 1, 1, 2),
    ("mid3d_32to32_3x3x3", 32, 32, 8, 3, 1, 1, 4),
]
# MLPerf HPC CosmoFlow's own layers at one sample per GPU (its 128^3 x 4 input), measured by the full GPU grid in the
# tensor-core dtypes the MLPerf runs took: 3-D tensor-core kernels at few channels run far below the 2-D ones'
# efficiency and no published figure says how far (docs/decisions/2026-12-06-cosmoflow-dataset.md); named "cosmo_" as
# CONV3D_LAYERS' CosmoFlow shapes, so a kernel fit holds them out with those (one network: gpu_kernel_fit.kernel_samples)
COSMOFLOW_GPU_LAYERS = [
    ("cosmo_l1_3x3x3", 4, 32, 128, 3, 1, 1, 1),
    ("cosmo_l2_3x3x3", 32, 64, 64, 3, 1, 1, 1),
    ("cosmo_l3_3x3x3", 64, 128, 32, 3, 1, 1, 1),
    ("cosmo_l4_3x3x3", 128, 256, 16, 3, 1, 1, 1),
]
COSMOFLOW_GPU_DTYPES = ("float16", "bfloat16")
# A spread of small convolutions, the shapes that splits of narrow nets leave on one device: every (C, F) pair,
# spatial size and batch rotating so each value meets many others, capped at SMALL_MAX_FLOPS; each rotation meets
# every (C, F) pair once more at another size and batch (docs/calibration.md "Shape grids").
SMALL_CONV_DESIGN = {
    False: dict(channels=(3, 4, 8, 16, 32, 64), filters=(4, 8, 16, 32, 64), sizes=(8, 16, 32, 64),
                batches=(1, 2, 4, 8, 16), rotations=1),
    True: dict(channels=(1, 4, 8, 16, 32), filters=(4, 8, 16, 32), sizes=(4, 8, 16), batches=(1, 2, 4, 8),
               rotations=2),
}
SMALL_MAX_FLOPS = 2e8
# Pointwise (1x1(x1)) convolutions of few channels at stride 1 and 2 and batches up to 128, in the same rotation:
# their time follows the activation bytes oneDNN reorders into its blocked layout, not the FLOPs, and neither the
# archetypes nor the 3x3 design above reach them (docs/decisions/2026-12-02-pointwise-conv-design.md).
POINTWISE_CONV_DESIGN = {
    False: dict(channels=(3, 4, 8, 16, 32, 64), filters=(4, 8, 16, 32, 64), sizes=(8, 16, 32, 64),
                batches=(2, 8, 32, 128), rotations=1, kernel=1, strides=(1, 2), padding=0),
    True: dict(channels=(1, 4, 8, 16, 32), filters=(4, 8, 16, 32), sizes=(4, 8, 16), batches=(2, 8, 32),
               rotations=1, kernel=1, strides=(1, 2), padding=0),
}
#: the conv `layer` tag of CONV2D_GPU_DESIGN's points
GPU_DESIGN_LAYER = "gpu_kernel_design"
QUICK_SPLIT_LAYERS = {"resnet_res2_3x3", "resnet_res4_3x3", "cosmo_conv4_3x3x3", "narrow3d_4to8_3x3x3"}
# (M, N, K): cubes from 64 to 1024 and products with one small side (docs/calibration.md "Shape grids").
# Plain GEMMs cost the implicit GEMMs of non-square convolutions, and linear layers only for profiles
# without linear families: a linear layer's skinny-batch products are measured as linear layers
# (LINEAR_SHAPES_*), so the quick grid leaves its skinny-batch GEMMs and the largest one to the full grid.
GEMM_SHAPES_QUICK = [(128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
                     (1024, 64, 4096), (4096, 1024, 64), (64, 64, 64), (192, 192, 192), (384, 384, 384),
                     (768, 768, 768), (256, 2048, 512), (512, 512, 2048)]
GEMM_SHAPES_FULL = GEMM_SHAPES_QUICK + [(64, 1024, 4096), (2048, 1024, 1024), (32, 1024, 1024),
                                        (1024, 1024, 32), (2048, 2048, 2048), (256, 4096, 4096),
                                        (4096, 256, 4096), (4096, 4096, 256), (1024, 1024, 8192),
                                        (32, 4096, 4096), (4096, 4096, 4096), (8192, 8192, 8192)]
GEMM_SHAPES_TINY = [(64, 64, 64), (128, 64, 256)]
# Linear layers (M = batch, N = out features, K = in features): the batch from 1 to 512 against in and out
# features from 10 (a classifier head) to 8192 (a flattened feature map), so the batch is the skinny side of
# the forward and backward-data products and the reduction of the backward-weight one. Classifier heads of
# ResNet/VGG/AlexNet/CosmoFlow, MLP layers and the heads of down-scaled CNNs; on CPU each call stays under
# about 0.3 GFLOP. The last is a head over a flattened feature map whose weight lies beyond the caches, which
# such products stream (docs/calibration.md "Shape grids").
LINEAR_SHAPES_QUICK = [(1, 1000, 2048), (1, 4096, 4096), (2, 10, 512), (4, 256, 8192), (8, 4096, 4096),
                       (16, 10, 2048), (32, 1024, 1024), (32, 64, 4096), (64, 128, 256), (64, 4096, 512),
                       (128, 64, 64), (128, 1000, 512), (256, 512, 1024), (256, 16, 128), (512, 256, 256),
                       (512, 10, 1024), (4, 4096, 1024), (16, 512, 4096), (64, 10, 8192), (2, 256, 1024),
                       (8, 1000, 4096), (32, 256, 2048), (128, 512, 1024), (256, 1024, 256), (8, 256, 65536)]
LINEAR_SHAPES_FULL = LINEAR_SHAPES_QUICK + [(2, 1000, 25088), (32, 4096, 4096), (128, 2048, 2048), (256, 4096, 1024),
                                            (512, 2048, 512), (512, 64, 4096), (512, 1000, 2048)]
#: GPU grids add the full-size layers of the zoo at large batches (VGG's 25088-wide fc1) and larger products
LINEAR_SHAPES_GPU_EXTRA = [(64, 4096, 25088), (256, 4096, 25088), (512, 4096, 4096), (256, 1000, 2048),
                           (128, 8192, 8192), (512, 16384, 4096), (1, 16384, 16384)]
LINEAR_SHAPES_TINY = [(2, 8, 16), (16, 32, 8)]

# ---- the GPU grids (docs/calibration.md "Shape grids"; docs/decisions/2026-12-06-gpu-grid.md) -------------------
# What the GPU kernel model's constants need (calibrate.gpu_kernels): waves and tile quantisation over GEMMs from 128
# to 8192 a side; the memory-bound regime of skinny products (a side of 8-64); split-K over a large reduction (K up
# to 500000, DeepBench's language-model products); transposed operands; and convolutions in all three passes with
# 1x1, 3x3, 5x5 and 7x7 kernels at strides 1 and 2, 3 (first layers: no tensor-core alignment), 64, 256 and 512
# channels, on 7x7 to 224x224 maps. Within a budget: the full GPU grid (every section a plain `profiler calibrate
# --device cuda` runs) stays under GPU_GRID_BUDGET_S of benchmarks at GPU_SECONDS_PER_POINT.
#: seconds one GPU point takes, build, cuDNN's search and timing included: an H200 measured 2005 of the 2668 points
#: of a GPU calibration in 200 s (timer settings of profiler.cases.timer_settings, unchanged since)
GPU_SECONDS_PER_POINT = 200 / 2005
#: the full GPU grid's benchmarks must finish within this on one H100-class GPU (issue 37)
GPU_GRID_BUDGET_S = 180.0
#: (M, N, K, transpose_a, transpose_b): C = op(A) op(B) as torch.matmul runs it on row-major tensors, op(A) = A
#: stored (K, M) and passed transposed where transpose_a (B stored (N, K) where transpose_b), the operand order
#: calibrate.gpu_kernels.GEMM_PASS_TRANSPOSES names linear layers' products in
GEMM_SHAPES_GPU = [
    # waves and tiles: squares and rectangles from 64 to 8192 a side
    (64, 64, 64, False, False), (128, 128, 128, False, False), (256, 256, 256, False, False),
    (512, 512, 512, False, False), (1024, 1024, 1024, False, False), (2048, 2048, 2048, False, False),
    (4096, 4096, 4096, False, False), (8192, 8192, 8192, False, False), (256, 2048, 512, False, False),
    (2048, 1024, 1024, False, False), (256, 4096, 4096, False, False), (4096, 4096, 256, False, False),
    # skinny: one side of 8-64 (memory-bound; DeepSpeech's and a small batch's products)
    (8, 4096, 4096, False, False), (16, 2048, 2048, False, False), (32, 8192, 2048, False, False),
    (64, 1024, 4096, False, False), (4096, 8, 4096, False, False), (2048, 16, 2048, False, False),
    (8192, 32, 2048, False, False), (4096, 64, 1024, False, False),
    # a large reduction: split-K
    (512, 512, 131072, False, False), (1024, 16, 500000, False, False), (64, 64, 262144, False, False),
    # transposed operands, skinny and square
    (2048, 16, 2048, True, False), (4096, 64, 4096, True, False), (1024, 1024, 1024, True, False),
    (4096, 4096, 4096, True, False), (1024, 16, 500000, True, False), (1024, 16, 512, False, True),
    (1024, 1024, 1024, False, True), (4096, 4096, 4096, False, True), (2048, 32, 2048, True, True),
]
#: the quick GPU grid's GEMMs: one of each kind above
GEMM_SHAPES_GPU_QUICK = [GEMM_SHAPES_GPU[i] for i in (1, 3, 4, 6, 8, 12, 16, 19, 21, 23, 25, 29, 31)]
#: linear layers on a GPU (M = batch or tokens, N = out, K = in features): classifier heads at batch 1-512, VGG's
#: 25088-wide fc1, the products of transformer layers at thousands of tokens, and a 65536-wide head beyond L2
LINEAR_SHAPES_GPU = [(1, 1000, 2048), (1, 4096, 4096), (8, 4096, 4096), (32, 1024, 1024), (32, 64, 4096),
                     (64, 4096, 512), (128, 1000, 512), (256, 512, 1024), (16, 512, 4096), (8, 256, 65536),
                     (64, 4096, 25088), (256, 4096, 25088), (512, 4096, 4096), (256, 1000, 2048), (128, 8192, 8192),
                     (512, 16384, 4096), (1, 16384, 16384), (2048, 4096, 1024), (8192, 3072, 768),
                     (4096, 1024, 4096)]
LINEAR_SHAPES_GPU_QUICK = [LINEAR_SHAPES_GPU[i] for i in (0, 2, 3, 5, 7, 9, 11, 12, 14, 16, 17, 19)]
#: the GPU convolution design, beside the archetypes at 8x their CPU batch: (name, C, F, H=W, kernel, stride,
#: padding, batch). Every kernel size at both strides; 3, 64, 256 and 512 input channels; maps 7 to 224.
CONV2D_GPU_DESIGN = [
    ("k1_64to256_56", 64, 256, 56, 1, 1, 0, 32), ("k1_256to64_56", 256, 64, 56, 1, 1, 0, 32),
    ("k1_256to512_28s2", 256, 512, 28, 1, 2, 0, 32), ("k1_512to512_7", 512, 512, 7, 1, 1, 0, 64),
    ("k1_64to64_112s2", 64, 64, 112, 1, 2, 0, 16), ("k1_512to256_14", 512, 256, 14, 1, 1, 0, 8),
    ("k3_3to64_224", 3, 64, 224, 3, 1, 1, 8), ("k3_3to64_112s2", 3, 64, 112, 3, 2, 1, 32),
    ("k3_64to64_224", 64, 64, 224, 3, 1, 1, 8), ("k3_256to256_56", 256, 256, 56, 3, 1, 1, 8),
    ("k3_256to256_28s2", 256, 256, 28, 3, 2, 1, 16), ("k3_512to512_14s2", 512, 512, 14, 3, 2, 1, 16),
    ("k3_512to512_7", 512, 512, 7, 3, 1, 1, 8), ("k5_3to64_112s2", 3, 64, 112, 5, 2, 2, 16),
    ("k5_64to64_56", 64, 64, 56, 5, 1, 2, 16), ("k5_256to256_14", 256, 256, 14, 5, 1, 2, 16),
    ("k5_64to256_28s2", 64, 256, 28, 5, 2, 2, 32), ("k5_512to512_7", 512, 512, 7, 5, 1, 2, 16),
    ("k7_3to64_224s2", 3, 64, 224, 7, 2, 3, 64), ("k7_64to64_56", 64, 64, 56, 7, 1, 3, 16),
    ("k7_256to256_14", 256, 256, 14, 7, 1, 3, 16), ("k7_64to64_112s2", 64, 64, 112, 7, 2, 3, 8),
    ("k7_512to512_7", 512, 512, 7, 7, 1, 3, 16), ("k7_256to512_28s2", 256, 512, 28, 7, 2, 3, 8),
]
#: the quick GPU grid's share of the design: every kernel size at both strides, first layers included
CONV2D_GPU_DESIGN_QUICK = [CONV2D_GPU_DESIGN[i] for i in (0, 2, 6, 7, 9, 11, 14, 16, 18, 19, 21, 22)]
#: grouped convolutions on a GPU, their own family (calibrate.shapes.family_op): (name, channels C = F, groups, H=W,
#: kernel, stride, padding, batch). Depthwise (groups = C) 3x3 and 5x5 at strides 1 and 2 on 112x112 to 7x7 maps
#: with 32-1152 channels (MobileNetV2's and EfficientNet-B0's), and ResNeXt-50 32x4d's 32-group 3x3 convolutions
#: (4 and 16 channels a group)
CONV2D_GROUPED_GPU_DESIGN = [
    ("dw3_32_112", 32, 32, 112, 3, 1, 1, 32), ("dw3_96_112s2", 96, 96, 112, 3, 2, 1, 32),
    ("dw5_144_56s2", 144, 144, 56, 5, 2, 2, 32), ("dw3_240_28", 240, 240, 28, 3, 1, 1, 64),
    ("dw5_672_14", 672, 672, 14, 5, 1, 2, 64), ("dw5_1152_7", 1152, 1152, 7, 5, 1, 2, 64),
    ("g32_128_56", 128, 32, 56, 3, 1, 1, 32), ("g32_512_28s2", 512, 32, 28, 3, 2, 1, 32),
]
#: the quick GPU grid's grouped convolutions: both kernel sizes, both strides, depthwise and grouped
CONV2D_GROUPED_GPU_DESIGN_QUICK = [CONV2D_GROUPED_GPU_DESIGN[i] for i in (0, 2, 4, 6)]


def grouped_params(layer: tuple) -> dict:
    """The conv2d params of a CONV2D_GROUPED_GPU_DESIGN entry."""
    name, channels, groups, size, k, s, p, batch = layer
    return {"N": batch, "C": channels, "F": channels, "H": size, "W": size, "kernel": k, "stride": s, "padding": p,
            "groups": groups}


#: memory-bound activations on a GPU: launch-bound (65k elements), L2-resident (6.4M) and DRAM-bound (51M and 67M
#: elements, beyond every L2), 2-D and 3-D
MEMORY_OP_SHAPES_GPU = [dict(N=16, C=64, H=8, W=8), dict(N=32, C=64, H=56, W=56), dict(N=64, C=256, H=56, W=56),
                        dict(N=8, C=32, D=64, H=64, W=64)]
MEMORY_OP_SHAPES_GPU_QUICK = [MEMORY_OP_SHAPES_GPU[i] for i in (0, 2, 3)]
# Memory-bound op activations (N, C, H, W[, D]), 2-D and 3-D (3-D pooling and normalisation kernels are separate
# and slower code paths): element counts from 4k to 13M at about 2x steps, so the fit sees the cache-resident,
# the L3 and the DRAM regimes (and the page faults of freshly allocated outputs beyond glibc's mmap threshold)
# with several shapes each (docs/decisions/2026-11-29-memory-bound-op-fits.md).
MEMORY_OP_SHAPES_QUICK = [dict(N=2, C=16, H=16, W=16), dict(N=8, C=4, H=32, W=32), dict(N=4, C=64, H=28, W=28),
                          dict(N=16, C=8, H=64, W=64), dict(N=32, C=16, H=32, W=32), dict(N=8, C=64, H=64, W=64),
                          dict(N=16, C=32, H=96, W=96), dict(N=32, C=64, H=64, W=64), dict(N=16, C=64, H=112, W=112),
                          dict(N=2, C=4, D=8, H=8, W=8), dict(N=8, C=16, D=4, H=4, W=4),
                          dict(N=16, C=8, D=8, H=8, W=8), dict(N=8, C=4, D=16, H=16, W=16),
                          dict(N=8, C=8, D=16, H=16, W=16), dict(N=4, C=16, D=24, H=24, W=24),
                          dict(N=8, C=16, D=32, H=32, W=32), dict(N=8, C=32, D=32, H=32, W=32),
                          dict(N=4, C=32, H=32, W=32), dict(N=8, C=32, H=56, W=56), dict(N=8, C=256, H=28, W=28),
                          dict(N=16, C=96, H=48, W=48), dict(N=32, C=96, H=56, W=56),
                          dict(N=1, C=8, D=16, H=16, W=16), dict(N=4, C=8, D=24, H=24, W=24),
                          dict(N=8, C=8, D=32, H=32, W=32), dict(N=2, C=16, D=48, H=48, W=48),
                          dict(N=4, C=16, D=56, H=56, W=56)]
MEMORY_OP_SHAPES_FULL = MEMORY_OP_SHAPES_QUICK + [dict(N=32, C=256, H=56, W=56), dict(N=8, C=256, H=14, W=14),
                                                  dict(N=2, C=32, H=32, W=32, D=32)]
MEMORY_OP_SHAPES_TINY = [dict(N=2, C=4, H=8, W=8)]
#: the two max-pool windows CNNs use: ResNet's overlapping 3x3 stride 2 and VGG's 2x2 stride 2, both measured (the
#: fit gets the window volume as a feature; docs/decisions/2026-11-29-memory-bound-op-fits.md)
MAXPOOLS = (dict(kernel=3, stride=2, padding=1), dict(kernel=2, stride=2, padding=0))
#: average pooling: VGG-style 2x2 stride 2, and the global pooling of a classifier head (the window the whole
#: map, `GLOBAL_WINDOW`: ResNet's and the random nets' heads), whose backward spreads one value over the map
#: and runs far from max-pooling's cost (docs/calibration.md "Shape grids")
GLOBAL_WINDOW = "global"
AVGPOOLS = (dict(kernel=2, stride=2, padding=0), GLOBAL_WINDOW)


def split_variants(params: dict, all_splits: bool) -> list[tuple[str, dict]]:
    """The layer itself and the shapes a 4-way split leaves on one device: batch/4, at least 1 (data
    parallel), H/2 and W/2 (spatial over 4 = 2x2), F/4 (filter), C/4 (channel). Splits that would leave a
    dimension below 1 (or below the kernel, for spatial) or change nothing are skipped."""
    out = [("base", params)]
    if not all_splits:
        return out
    candidates = [("filter", {"F": params["F"] // 4}), ("channel", {"C": params["C"] // 4})]
    if params["N"] > 1:
        candidates.insert(0, ("batch", {"N": max(1, params["N"] // 4)}))
    spatial = {k: params[k] // 2 for k in ("H", "W")}
    if min(spatial.values()) >= params["kernel"]:
        candidates.append(("spatial", spatial))
    for tag, change in candidates:
        if min(change.values()) >= 1:
            out.append((tag, {**params, **change}))
    return out


@dataclass(frozen=True)
class GridChoice:
    """Which grid to run: `quick` (CPU, < 90 s with memory), `full`, or `tiny` (tests)."""

    name: str
    batch_scales: tuple[int, ...]  # multiples of each archetype's CPU batch
    split_scale: int  # the batch multiple whose split variants are run
    dtypes: tuple[str, ...]


def choose_grid(device: str, quick: bool) -> GridChoice:
    tiny = os.environ.get(GRID_ENV, "")
    if tiny not in ("", "tiny"):
        raise UserError(f"environment variable {GRID_ENV}={tiny!r}: the only accepted value is 'tiny'")
    dtypes = GPU_DTYPES if device.startswith("cuda") else CPU_DTYPES
    if tiny:
        return GridChoice("tiny", (1,), 1, dtypes[:1])
    if device.startswith("cuda"):  # the archetypes at 8x; the full grid adds the kernel design (GEMM_SHAPES_GPU, ...)
        return GridChoice("quick" if quick else "full", (8,), 8, dtypes)
    return GridChoice("quick", (1,), 1, dtypes) if quick else GridChoice("full", (1, 4), 1, dtypes)


# ---------------------------------------------------------------------------------------------- cases
#: normal values a CPU operand is copied from (float32 elements; a larger operand repeats them): one-thread
#: torch.randn draws about 0.1 GB/s, and drawing every operand afresh took a fifth of a quick calibration
CPU_POOL_ELEMENTS = 1 << 22
_POOLS: dict[str, torch.Tensor] = {}
_OFFSETS = itertools.cycle(range(0, CPU_POOL_ELEMENTS, 1_000_003))
#: CPU operands are consecutive slices of one arena per dtype, filled once from the pool: the copies of a rotating
#: point (profiler.cases.rotating: at most ROTATION_LLC_MULTIPLE x LLC of operands, plus one copy) are distinct
#: memory without writing every copy afresh (45 GB of copies, 8 s of a quick calibration). The arena holds this
#: many last-level caches; an operand larger than it is copied from the pool as before. Benchmark calls only read
#: their operands (results go to fresh tensors), so slices may be reused by later points.
ARENA_LLC_MULTIPLE = 3
_ARENAS: dict[str, list] = {}  # dtype -> [arena tensor, next free element]
_ALIGN_BYTES = 64  # every slice starts on a cache line, as a fresh allocation does


def _pool(dtype: str) -> torch.Tensor:
    if dtype not in _POOLS:
        _POOLS[dtype] = torch.randn(CPU_POOL_ELEMENTS, generator=torch.Generator().manual_seed(0)).to(
            TORCH_DTYPES[dtype])
    return _POOLS[dtype]


def _fill(flat: torch.Tensor, pool: torch.Tensor) -> None:
    """Copy the pool into `flat`, repeated from a different place each time it wraps."""
    done = 0
    while done < flat.numel():
        offset = next(_OFFSETS)
        take = min(flat.numel() - done, len(pool) - offset)
        flat[done:done + take].copy_(pool[offset:offset + take])
        done += take


def _arena_slice(numel: int, dtype: str) -> Optional[torch.Tensor]:
    """The next `numel` elements of the dtype's arena (wrapping to its start), or None if it is too small."""
    if dtype not in _ARENAS:
        element = TORCH_DTYPES[dtype].itemsize
        elements = ARENA_LLC_MULTIPLE * caches.cpu_last_level_cache_bytes() // element
        arena = torch.empty(elements, dtype=TORCH_DTYPES[dtype])
        _fill(arena, _pool(dtype))
        _ARENAS[dtype] = [arena, 0]
    arena, start = _ARENAS[dtype]
    if numel > len(arena):
        return None
    if start + numel > len(arena):
        start = 0
    step = _ALIGN_BYTES // arena.element_size()
    _ARENAS[dtype][1] = -(-(start + numel) // step) * step
    return arena[start:start + numel]


def _tensor(shape, dtype: str, device: str) -> torch.Tensor:
    """An operand of standard-normal values: drawn on a GPU; on the CPU a slice of the arena (copied from the
    pool drawn once when larger than the arena)."""
    torch_dtype = TORCH_DTYPES[dtype]
    if not str(device).startswith("cpu") or not torch_dtype.is_floating_point:
        return torch.randn(*shape, dtype=torch_dtype, device=device)
    numel = math.prod(shape)
    view = _arena_slice(numel, dtype)
    if view is not None:
        return view.view(*shape)
    out = torch.empty(*shape, dtype=torch_dtype)
    _fill(out.view(-1), _pool(dtype))
    return out


def _like(t: torch.Tensor, dtype: str) -> torch.Tensor:
    return _tensor(tuple(t.shape), dtype, str(t.device))


def gemm_case(M: int, N: int, K: int, dtype: str, device: str, transpose_a: bool = False,
              transpose_b: bool = False) -> BenchCase:
    """C = op(A) op(B) for op(A) (M, K), op(B) (K, N): A stored (K, M) and passed as its transposed view where
    transpose_a, B stored (N, K) where transpose_b (GEMM_SHAPES_GPU). On the host C is written into one
    preallocated tensor (calibrate.shapes.PREALLOCATED_IN_BENCHMARK; the cost model adds its first touch); on a
    GPU it is allocated per call as autograd allocates a result (the caching allocator hands back the block the
    previous call freed, as in a training step). params record the transposes on a GPU, where they are set."""
    gpu = str(device).startswith("cuda")

    def build():
        a = _tensor((K, M), dtype, device).t() if transpose_a else _tensor((M, K), dtype, device)
        b = _tensor((N, K), dtype, device).t() if transpose_b else _tensor((K, N), dtype, device)
        if gpu:
            return lambda: torch.matmul(a, b)
        c = torch.empty(M, N, dtype=TORCH_DTYPES[dtype], device=device)
        return lambda: torch.matmul(a, b, out=c)

    params = {"M": M, "N": N, "K": K}
    if gpu or transpose_a or transpose_b:
        params.update(transpose_a=bool(transpose_a), transpose_b=bool(transpose_b))
    return BenchCase("gemm", "fwd", params, dtype, gemm_flops(M, N, K), gemm_bytes(M, N, K, element_bytes(dtype)),
                     build)


def linear_fwd(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Y = X W^T + b as F.linear runs it on a 2-D input: addmm over the transposed view of W (N, K)."""
    return torch.addmm(b, x, w.t())


def linear_bwd_data(dy: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """dX = dY W, both operands row-major as stored (AddmmBackward0's mm_mat1_backward)."""
    return torch.mm(dy, w)


def linear_bwd_weight(dy: torch.Tensor, x: torch.Tensor, dw: Optional[torch.Tensor] = None,
                      db: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """dW = dY^T X over the transposed view of dY (mm_mat2_backward, as W^T was column-major), reducing over
    the batch; db = the batch sum of dY that autograd's sum_to takes for the broadcast bias. Into dw (N, K) and
    db (1, N) where given (the host benchmark's reused weight-gradient buffers, `linear_cases`)."""
    if dw is None:
        return torch.mm(dy.t(), x), torch.sum(dy, 0, keepdim=True)
    return torch.mm(dy.t(), x, out=dw), torch.sum(dy, 0, keepdim=True, out=db)


#: pass -> (the call, the operands it takes, by name)
LINEAR_PASSES = {"fwd": (linear_fwd, ("x", "w", "b")), "bwd_data": (linear_bwd_data, ("dy", "w")),
                 "bwd_weight": (linear_bwd_weight, ("dy", "x"))}


def linear_cases(M: int, N: int, K: int, dtype: str, device: str, tags: dict | None = None) -> list[BenchCase]:
    """The three calls of one nn.Linear(K, N) layer (with bias) on an (M, K) input, as autograd runs them
    (AddmmBackward0): with the operand layouts training holds, since a GEMM's speed depends on which operands are
    transposed and which side is skinny. FLOPs 2MNK per pass, bytes A, B and C once (profiler.opmath).

    Results are allocated per call as autograd allocates them, except the host's weight gradient, written into
    the point's own buffers so that the timed call's first touch does not depend on what the process freed before;
    the cost model adds the first touch training pays (calibrate.shapes.PREALLOCATED_IN_BENCHMARK;
    docs/decisions/2026-12-06-gpu-grid.md, where the glibc figures are)."""
    params = {"M": M, "N": N, "K": K}
    reuse_weight_grad = not str(device).startswith("cuda")

    def builder(variant: str):
        def build():
            shape = {"x": (M, K), "w": (N, K), "b": (N,), "dy": (M, N)}
            fn, operands = LINEAR_PASSES[variant]
            args = [_tensor(shape[name], dtype, device) for name in operands]
            if variant == "bwd_weight" and reuse_weight_grad:
                args += [torch.empty(N, K, dtype=TORCH_DTYPES[dtype], device=device),
                         torch.empty(1, N, dtype=TORCH_DTYPES[dtype], device=device)]
            return lambda: fn(*args)

        return build

    cases = []
    flops, nbytes = int(gemm_flops(M, N, K)), gemm_bytes(M, N, K, element_bytes(dtype))
    for variant in LINEAR_PASSES:
        cases.append(BenchCase("linear", variant, dict(params), dtype, flops, nbytes, builder(variant),
                               dict(tags or {})))
    return cases


#: what a GPU needs to run FP8 products (profiler.dtypes.FP8): FP8 tensor cores (compute capability 8.9: Ada, Hopper
#: and later)
FP8_MIN_CAPABILITY = (8, 9)
#: pass -> (shape of the first operand, shape of the second as stored) of an FP8 linear layer's GEMM; Hopper's FP8
#: GEMMs take only the TN layout, so the second operand is a transposed copy (Transformer Engine's cast-transpose
#: writes it) read column-major: fwd Y = X W^T, bwd_data dX = dY W (W^T stored), bwd_weight dW = dY^T X (dY^T, X^T)
FP8_LINEAR_OPERANDS = {"fwd": ("MK", "NK"), "bwd_data": ("MN", "KN"), "bwd_weight": ("NM", "KM")}


def fp8_capable(device: str) -> bool:
    """Whether `device` runs FP8 matrix products (a CUDA GPU of FP8_MIN_CAPABILITY and a torch with _scaled_mm)."""
    return (device.startswith("cuda") and hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn")
            and torch.cuda.is_available() and torch.cuda.get_device_capability(device) >= FP8_MIN_CAPABILITY)


def fp8_linear_cases(M: int, N: int, K: int, device: str) -> list[BenchCase]:
    """The three FP8 GEMMs of one Transformer Engine linear layer on an (M, K) input: E4M3 operands with per-tensor
    scales through torch._scaled_mm, bfloat16 result (FP8_LINEAR_OPERANDS). FLOPs 2MNK per pass, bytes A, B and
    C once at one byte each (what calibrate.shapes.work counts for float8)."""
    size = {"M": M, "N": N, "K": K}
    params = dict(size)

    def builder(variant: str):
        def build():
            first, second = (tuple(size[d] for d in dims) for dims in FP8_LINEAR_OPERANDS[variant])
            a = torch.randn(*first, device=device).to(torch.float8_e4m3fn)
            b = torch.randn(*second, device=device).to(torch.float8_e4m3fn)
            one = torch.ones((), device=device)
            return lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        return build

    flops, nbytes = int(gemm_flops(M, N, K)), gemm_bytes(M, N, K, element_bytes(FP8))
    return [BenchCase("linear", variant, dict(params), FP8, flops, nbytes, builder(variant))
            for variant in FP8_LINEAR_OPERANDS]


def conv_cases(params: dict, dtype: str, device: str, tags: dict | None = None) -> list[BenchCase]:
    """fwd, bwd_data and bwd_weight of one convolution, the backward passes through
    aten.convolution_backward with an output mask, so each pass is timed alone."""
    benchmark = "conv3d" if "D" in params else "conv2d"
    d = 3 if "D" in params else 2
    spatial_in, spatial_out = conv_spatial(params)
    n, c, f, k = params["N"], params["C"], params["F"], params["kernel"]
    groups = params.get("groups", 1)
    stride, padding = [params["stride"]] * d, [params["padding"]] * d
    conv = torch.nn.functional.conv3d if d == 3 else torch.nn.functional.conv2d
    flops, nbytes = conv_flops(params), conv_bytes(params, element_bytes(dtype))

    def builder(variant: str):
        def build():
            x = _tensor((n, c, *spatial_in), dtype, device)
            w = _tensor((f, c // groups, *[k] * d), dtype, device)
            if variant == "fwd":
                return lambda: conv(x, w, stride=stride, padding=padding, groups=groups)
            dy = _tensor((n, f, *spatial_out), dtype, device)
            mask = [variant == "bwd_data", variant == "bwd_weight", False]
            return lambda: torch.ops.aten.convolution_backward(
                dy, x, w, None, stride, padding, [1] * d, False, [0] * d, groups, mask)

        return build

    return [BenchCase(benchmark, v, dict(params), dtype, flops, nbytes, builder(v), dict(tags or {}))
            for v in ("fwd", "bwd_data", "bwd_weight")]


MEMORY_OP_VARIANTS = (("batchnorm", "fwd"), ("batchnorm", "bwd"), ("relu", "fwd"), ("relu", "bwd"), ("add", "fwd"),
                      ("maxpool", "fwd"), ("maxpool", "bwd"), ("avgpool", "fwd"), ("avgpool", "bwd"))


def memory_op_case(op: str, variant: str, params: dict, dtype: str, device: str) -> BenchCase:
    """One memory-bound call on an (N, C, [D,] H, W) activation; maxpool reads kernel, stride (default: the
    kernel) and padding (default 0) from params, as calibrate.shapes does."""
    d = 3 if "D" in params else 2
    dims = (params["N"], params["C"], *([params["D"]] if d == 3 else []), params["H"], params["W"])
    tensor_kw = dict(dtype=TORCH_DTYPES[dtype], device=device)
    #: what the operand copies of a pooling backward share (profiler.cases.rotating builds them back to back): the
    #: input, which the kernel does not read (it only sizes the gradient), and the max-pool indices, cloned so that
    #: each copy reads its own. Weak values: freed with the point's last copy.
    shared: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    def bn_state():
        c = params["C"]
        return (torch.ones(c, **tensor_kw), torch.zeros(c, **tensor_kw), torch.zeros(c, **tensor_kw),
                torch.ones(c, **tensor_kw))

    def build_bn_fwd():
        x = _tensor(dims, dtype, device)
        w, b, rm, rv = bn_state()
        return lambda: torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)

    def build_bn_bwd():
        x, dy = _tensor(dims, dtype, device), _tensor(dims, dtype, device)
        w, b, rm, rv = bn_state()
        _, mean, invstd = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
        return lambda: torch.ops.aten.native_batch_norm_backward(dy, x, w, rm, rv, mean, invstd, True, 1e-5,
                                                                 [True, True, True])

    # ReLU's forward and the add write into a preallocated result on the host (calibrate.shapes.PREALLOCATED_IN_BENCHMARK:
    # the cost model adds the first touch); on a GPU they allocate it per call, from the caching allocator, as autograd does
    gpu = str(device).startswith("cuda")

    def build_relu_fwd():
        x = _tensor(dims, dtype, device)
        if gpu:
            return lambda: torch.relu(x)
        y = torch.empty(dims, **tensor_kw)
        return lambda: torch.clamp(x, min=0, out=y)

    def build_relu_bwd():
        y, dy = torch.relu(_tensor(dims, dtype, device)), _tensor(dims, dtype, device)
        return lambda: torch.ops.aten.threshold_backward(dy, y, 0)

    def build_add():
        a, b = _tensor(dims, dtype, device), _tensor(dims, dtype, device)
        if gpu:
            return lambda: torch.add(a, b)
        c = torch.empty(dims, **tensor_kw)
        return lambda: torch.add(a, b, out=c)

    pool = torch.ops.aten.max_pool3d_with_indices if d == 3 else torch.ops.aten.max_pool2d_with_indices
    pool_bwd = (torch.ops.aten.max_pool3d_with_indices_backward if d == 3
                else torch.ops.aten.max_pool2d_with_indices_backward)
    kernel = params.get("kernel", 2)
    window = ([kernel] * d, [params.get("stride", kernel)] * d, [params.get("padding", 0)] * d)
    pooled = dims[:2] + opmath.window_output_dims(dims[2:], *window)  # a pooling's output (ceil_mode False)

    def build_pool_fwd():
        x = _tensor(dims, dtype, device)
        return lambda: pool(x, *window)

    def build_pool_bwd():  # reads dy and the indices; x only sizes the gradient
        x, first_idx = shared.get("max_x"), shared.get("max_idx")
        if x is None or first_idx is None:
            x = _tensor(dims, dtype, device)
            idx = pool(x, *window)[1]
            shared["max_x"], shared["max_idx"] = x, idx
        else:
            idx = first_idx.clone()  # the same scatter pattern in fresh memory, without a forward per copy
        dy = _tensor(pooled, dtype, device)
        return lambda: pool_bwd(dy, x, *window, [1] * d, False, idx)

    avg = torch.ops.aten.avg_pool3d if d == 3 else torch.ops.aten.avg_pool2d
    avg_bwd = torch.ops.aten.avg_pool3d_backward if d == 3 else torch.ops.aten.avg_pool2d_backward

    def build_avg_fwd():  # nn.AvgPool's defaults: ceil_mode False, count_include_pad True
        x = _tensor(dims, dtype, device)
        return lambda: avg(x, *window, False, True, None)

    def build_avg_bwd():  # reads dy; x only sizes the gradient
        x = shared.get("avg_x")
        if x is None:
            x = shared["avg_x"] = _tensor(dims, dtype, device)
        dy = _tensor(pooled, dtype, device)
        return lambda: avg_bwd(dy, x, *window, False, True, None)

    builders = {("batchnorm", "fwd"): build_bn_fwd, ("batchnorm", "bwd"): build_bn_bwd, ("relu", "fwd"): build_relu_fwd,
                ("relu", "bwd"): build_relu_bwd, ("add", "fwd"): build_add, ("maxpool", "fwd"): build_pool_fwd,
                ("maxpool", "bwd"): build_pool_bwd, ("avgpool", "fwd"): build_avg_fwd, ("avgpool", "bwd"): build_avg_bwd}
    counted = params if op not in ("maxpool", "avgpool") else {**params, "kernel": kernel, "stride": window[1][0],
                                                                "padding": window[2][0]}
    flops, nbytes = memory_op_counts(op, variant, counted, element_bytes(dtype))
    return BenchCase(op, variant, dict(params), dtype, flops, nbytes, builders[(op, variant)])


def _window(shape: dict, window) -> dict | None:
    """A pooling window's params on `shape`: GLOBAL_WINDOW is the whole map (square or cubic maps only)."""
    if window != GLOBAL_WINDOW:
        return window
    sizes = {shape[k] for k in ("D", "H", "W") if k in shape}
    return dict(kernel=shape["H"], stride=shape["H"], padding=0) if len(sizes) == 1 else None


def memory_op_cases(shape: dict, dtype: str, device: str) -> list[BenchCase]:
    """Every memory-bound op and pass on one activation shape, max-pooling with each of MAXPOOLS and average
    pooling with each of AVGPOOLS (a global window on square or cubic maps only)."""
    windows = {"maxpool": MAXPOOLS, "avgpool": AVGPOOLS}
    cases = []
    for op, variant in MEMORY_OP_VARIANTS:
        for window in windows.get(op, ({},)):
            params = _window(shape, window)
            if params is not None:
                cases.append(memory_op_case(op, variant, {**shape, **params}, dtype, device))
    return cases


# Transformer shapes. bmm (B = samples x heads, M, N, K): a score product (M = N = seq, K = head size) and a
# context product (N = head size, K = seq). sdpa (B = samples x heads, S, D, causal). Token activations for
# layer norm and GELU as {N, C = seq, H = 1, W = hidden or 4 hidden}; scores for softmax {N, C = heads, H = W = seq}.
BMM_SHAPES = {"tiny": [(2, 16, 16, 8)],
              "quick": [(16, 128, 128, 32), (16, 128, 32, 128), (8, 256, 256, 64)],
              "full": [(16, 128, 128, 32), (16, 128, 32, 128), (8, 256, 256, 64), (8, 256, 64, 256),
                       (48, 128, 128, 64), (48, 128, 64, 128), (4, 512, 512, 64), (4, 512, 64, 512)],
              "gpu": [(96, 512, 512, 64), (96, 512, 64, 512), (192, 1024, 1024, 64), (192, 1024, 64, 1024),
                      (384, 2048, 2048, 128), (384, 2048, 128, 2048)]}
SDPA_SHAPES = {"tiny": [(2, 16, 8, 1)],
               "quick": [(32, 32, 16, 1), (16, 128, 32, 1), (8, 256, 64, 0)],
               "full": [(32, 32, 16, 1), (16, 128, 32, 1), (8, 256, 64, 0), (16, 128, 32, 0), (8, 256, 64, 1),
                        (4, 512, 64, 1), (48, 128, 64, 0)],
               "gpu": [(96, 512, 64, 1), (96, 1024, 64, 0), (192, 1024, 128, 1), (384, 2048, 128, 1),
                       (96, 4096, 128, 1)]}
TOKEN_SHAPES = {"tiny": [dict(N=2, C=8, H=1, W=16)],
                "quick": [dict(N=4, C=128, H=1, W=256), dict(N=8, C=256, H=1, W=768)],
                "full": [dict(N=4, C=128, H=1, W=256), dict(N=8, C=256, H=1, W=768), dict(N=2, C=512, H=1, W=1024),
                         dict(N=8, C=128, H=1, W=3072)],
                "gpu": [dict(N=8, C=512, H=1, W=768), dict(N=8, C=1024, H=1, W=4096), dict(N=16, C=2048, H=1, W=8192)]}
SCORE_SHAPES = {"tiny": [dict(N=2, C=2, H=8, W=8)],
                "quick": [dict(N=2, C=4, H=128, W=128), dict(N=4, C=8, H=256, W=256)],
                "full": [dict(N=2, C=4, H=128, W=128), dict(N=4, C=8, H=256, W=256), dict(N=2, C=12, H=512, W=512)],
                "gpu": [dict(N=8, C=12, H=512, W=512), dict(N=8, C=16, H=1024, W=1024), dict(N=4, C=32, H=2048, W=2048)]}
TOKEN_OPS = ("layernorm", "gelu")


def bmm_cases(B: int, M: int, N: int, K: int, dtype: str, device: str, tags: dict | None = None) -> list[BenchCase]:
    """The three calls of C = A B for A (B, M, K), B (B, K, N), as autograd's BmmBackward0 runs them:
    fwd bmm(A, B), bwd_data dA = bmm(dC, B^T), bwd_weight dB = bmm(A^T, dC) (over transposed views)."""
    params = {"B": B, "M": M, "N": N, "K": K}

    def builder(variant: str):
        def build():
            a, b, dc = _tensor((B, M, K), dtype, device), _tensor((B, K, N), dtype, device), _tensor((B, M, N), dtype, device)
            if variant == "fwd":
                return lambda: torch.bmm(a, b)
            if variant == "bwd_data":
                return lambda: torch.bmm(dc, b.transpose(1, 2))
            return lambda: torch.bmm(a.transpose(1, 2), dc)

        return build

    flops, nbytes = int(opmath.bmm_flops(B, M, N, K)), opmath.bmm_bytes(B, M, N, K, element_bytes(dtype))
    return [BenchCase("bmm", v, dict(params), dtype, flops, nbytes, builder(v), dict(tags or {}))
            for v in ("fwd", "bwd_data", "bwd_weight")]


def sdpa_cases(B: int, S: int, D: int, causal: int, dtype: str, device: str, tags: dict | None = None) -> list[BenchCase]:
    """Fused attention on Q, K, V (B, S, D): fwd F.scaled_dot_product_attention, bwd the gradients of Q, K and
    V through autograd.grad on a retained graph (the kernel's backward call; nothing accumulates)."""
    params = {"B": B, "S": S, "D": D, "causal": causal}

    def builder(variant: str):
        def build():
            q, k, v = (_tensor((B, S, D), dtype, device).requires_grad_(variant == "bwd") for _ in range(3))
            if variant == "fwd":
                def fwd():
                    with torch.no_grad():
                        return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                return fwd
            out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
            grad = _like(out, dtype)
            return lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)

        return build

    cases = []
    for variant, pass_ in (("fwd", "fwd"), ("bwd", "bwd_data")):
        flops = int(opmath.sdpa_flops(B, S, S, D, pass_, bool(causal)))
        nbytes = opmath.sdpa_bytes(B, S, S, D, pass_, element_bytes(dtype))
        cases.append(BenchCase("sdpa", variant, dict(params), dtype, flops, nbytes, builder(variant), dict(tags or {})))
    return cases


def token_op_case(op: str, variant: str, params: dict, dtype: str, device: str) -> BenchCase:
    """Layer norm over the last dimension (with affine weight and bias), GELU, or softmax over the last
    dimension, on an (N, C, H x W) activation: fwd, or bwd through the aten backward op autograd calls
    (native_layer_norm_backward with its weight and bias gradients, gelu_backward, _softmax_backward_data)."""
    n, c, width = params["N"], params["C"], params["H"] * params["W"]
    shape = (n, c, params["H"], params["W"]) if op == "softmax" else (n, c, width)
    last = shape[-1]

    def build():
        x = _tensor(shape, dtype, device)
        if op == "layernorm":
            w, b = _tensor((last,), dtype, device), _tensor((last,), dtype, device)
            if variant == "fwd":
                return lambda: torch.ops.aten.native_layer_norm(x, [last], w, b, 1e-5)
            _, mean, rstd = torch.ops.aten.native_layer_norm(x, [last], w, b, 1e-5)
            dy = _like(x, dtype)
            return lambda: torch.ops.aten.native_layer_norm_backward(dy, x, [last], mean, rstd, w, b, [True, True, True])
        if op == "gelu":
            if variant == "fwd":
                return lambda: F.gelu(x)
            dy = _like(x, dtype)
            return lambda: torch.ops.aten.gelu_backward(dy, x)
        if variant == "fwd":
            return lambda: torch.softmax(x, -1)
        y, dy = torch.softmax(x, -1), _like(x, dtype)
        return lambda: torch.ops.aten._softmax_backward_data(dy, y, -1, x.dtype)

    pass_ = "fwd" if variant == "fwd" else "bwd_data"
    elems = n * c * width
    flops = opmath.ELEMENT_FLOPS[op][0 if variant == "fwd" else 1] * elems
    nbytes = opmath.element_pass_bytes(op, pass_, elems, element_bytes(dtype))
    return BenchCase(op, variant, dict(params), dtype, flops, nbytes, build)


def transformer_cases(grid: str, dtype: str, device: str) -> list[BenchCase]:
    """Every transformer case of a grid ("tiny", "quick", "full"; a GPU runs the quick and the "gpu" sizes)."""
    gpu = device.startswith("cuda") and grid != "tiny"
    size = "tiny" if grid == "tiny" else "quick" if gpu else grid  # a GPU: the small sizes and the "gpu" ones
    cases = []
    for shape in BMM_SHAPES[size] + (BMM_SHAPES["gpu"] if gpu else []):
        cases += bmm_cases(*shape, dtype, device)
    for shape in SDPA_SHAPES[size] + (SDPA_SHAPES["gpu"] if gpu else []):
        cases += sdpa_cases(*shape, dtype, device)
    if dtype != "tf32":  # TF32 changes only matmul math
        for op, table in (("layernorm", TOKEN_SHAPES), ("gelu", TOKEN_SHAPES), ("softmax", SCORE_SHAPES)):
            for shape in table[size] + (table["gpu"] if gpu else []):
                cases += [token_op_case(op, v, shape, dtype, device) for v in ("fwd", "bwd")]
    return cases


def _layer_params(layer: tuple, scale: int, three_d: bool) -> dict:
    name, c, f, size, k, s, p, batch = layer
    spatial = {"D": size, "H": size, "W": size} if three_d else {"H": size, "W": size}
    return {"N": batch * scale, "C": c, "F": f, **spatial, "kernel": k, "stride": s, "padding": p}


def small_conv_params(three_d: bool, designs: dict = SMALL_CONV_DESIGN) -> list[dict]:
    """A small-convolution design (SMALL_CONV_DESIGN: 3x3(x3), stride 1, padding 1; POINTWISE_CONV_DESIGN: 1x1(x1)
    at its strides) as conv params, batch then size halved under the cap."""
    design = designs[three_d]
    sizes, batches = design["sizes"], design["batches"]
    kernel, padding, strides = design.get("kernel", 3), design.get("padding", 1), design.get("strides", (1,))
    out = []
    for r in range(design["rotations"]):
        for ci, c in enumerate(design["channels"]):
            for fi, f in enumerate(design["filters"]):  # Latin-square rotation: no size or batch tied to one F
                size, batch = sizes[(ci + fi + r) % len(sizes)], batches[(ci + 2 * fi + r) % len(batches)]
                stride = strides[(ci + fi // 2 + r) % len(strides)]  # varies with C, F, size and batch
                while True:
                    params = _layer_params((None, c, f, size, kernel, stride, padding, batch), 1, three_d)
                    if conv_flops(params) <= SMALL_MAX_FLOPS or (batch == 1 and size <= 4):
                        break
                    batch, size = (batch // 2, size) if batch > 1 else (batch, size // 2)
                if params not in out:
                    out.append(params)
    return out


#: the weight-bound convolution design (CPU): 3x3 convolutions on a 2x2 map, C = F, at these batches, with a weight
#: of about each of these multiples of the last-level cache. On such a call the time goes to the weight oneDNN
#: reorders on every call, not the arithmetic; calibrate.backends.host_fit fits a time floor from these points
#: (docs/decisions/2026-12-02-convolution-weight-floor.md).
WEIGHT_DESIGN_LLC_MULTIPLES = (0.25, 2.0)
WEIGHT_DESIGN_BATCHES = (1, 8)
#: the design's second kernel, 7x7 on the 2x2 map ("same" padding 3 is wider than the map): oneDNN runs its forward
#: and backward-data as im2col + one GEMM per sample (calibrate.backends.host.onednn_gemm_conv; only those two passes
#: are measured for it; docs/decisions/2026-12-02-im2col-floor.md)
IM2COL_DESIGN_KERNEL = 7
IM2COL_DESIGN_PASSES = ("fwd", "bwd_data")


def weight_design_params(llc_bytes: int, element_bytes: int = 4, kernel: int = 3) -> list[dict]:
    """The weight-bound design's conv2d params for one kernel size on a 2x2 map ("same" padding): C = F, a
    multiple of 16, closest to each weight target."""
    out = []
    for multiple in WEIGHT_DESIGN_LLC_MULTIPLES:
        channels = max(16, int(round(math.sqrt(multiple * llc_bytes / (kernel * kernel * element_bytes)) / 16)) * 16)
        for batch in WEIGHT_DESIGN_BATCHES:
            out.append({"N": batch, "C": channels, "F": channels, "H": 2, "W": 2, "kernel": kernel, "stride": 1,
                        "padding": kernel // 2})
    return out


def plan_compute(device: str, quick: bool) -> list[BenchCase]:
    """Every compute point of the chosen grid, in run order (dtype-major so flags change rarely)."""
    grid = choose_grid(device, quick)
    full, gpu = grid.name == "full", device.startswith("cuda")
    cases: list[BenchCase] = []
    for dtype in grid.dtypes:
        first = len(cases)
        if grid.name == "tiny":
            gemms, linears = GEMM_SHAPES_TINY, LINEAR_SHAPES_TINY
            convs = [({}, {"N": 1, "C": 4, "F": 8, "H": 16, "W": 16, "kernel": 3, "stride": 1, "padding": 1}),
                     ({}, {"N": 1, "C": 2, "F": 4, "D": 8, "H": 8, "W": 8, "kernel": 3, "stride": 1, "padding": 1})]
            mem_shapes, im2col = MEMORY_OP_SHAPES_TINY, []
        elif gpu:
            gemms = GEMM_SHAPES_GPU if full else GEMM_SHAPES_GPU_QUICK
            linears = LINEAR_SHAPES_GPU if full else LINEAR_SHAPES_GPU_QUICK
            convs, im2col = [], []
            for layers, three_d in ((CONV2D_LAYERS, False), (CONV3D_LAYERS, True)):
                for layer in layers:
                    for scale in grid.batch_scales:
                        # splits of two 3-D layers: the kernel model costs a 2-D convolution of any shape
                        splits = scale == grid.split_scale and three_d and layer[0] in QUICK_SPLIT_LAYERS
                        for tag, params in split_variants(_layer_params(layer, scale, three_d), splits):
                            convs.append(({"layer": layer[0], "split": tag}, params))
            convs += [({"layer": GPU_DESIGN_LAYER, "split": "base"}, _layer_params((*layer[:7], 1), layer[7], False))
                      for layer in (CONV2D_GPU_DESIGN if full else CONV2D_GPU_DESIGN_QUICK)]
            convs += [({"layer": layer[0], "split": "base"}, grouped_params(layer))
                      for layer in (CONV2D_GROUPED_GPU_DESIGN if full else CONV2D_GROUPED_GPU_DESIGN_QUICK)]
            if full and dtype in COSMOFLOW_GPU_DTYPES:
                convs += [({"layer": layer[0], "split": "base"}, _layer_params(layer, 1, True))
                          for layer in COSMOFLOW_GPU_LAYERS]
            mem_shapes = MEMORY_OP_SHAPES_GPU if full else MEMORY_OP_SHAPES_GPU_QUICK
        else:
            gemms = GEMM_SHAPES_FULL if full else GEMM_SHAPES_QUICK
            linears = LINEAR_SHAPES_FULL if full else LINEAR_SHAPES_QUICK
            convs, im2col = [], []
            for layers, three_d in ((CONV2D_LAYERS, False), (CONV3D_LAYERS, True)):
                for layer in layers:
                    for scale in grid.batch_scales:
                        splits = scale == grid.split_scale and (full or layer[0] in QUICK_SPLIT_LAYERS)
                        for tag, params in split_variants(_layer_params(layer, scale, three_d), splits):
                            convs.append(({"layer": layer[0], "split": tag}, params))
                if not device.startswith("cuda"):  # on a GPU these are launch-bound: the launch term covers them
                    convs += [({"layer": "small_design", "split": "base"}, p) for p in small_conv_params(three_d)]
                    convs += [({"layer": "pointwise_design", "split": "base"}, p)
                              for p in small_conv_params(three_d, POINTWISE_CONV_DESIGN)]
            if not device.startswith("cuda"):  # cuDNN reads plain weights: no per-call reorder to measure
                llc, size = caches.cpu_last_level_cache_bytes(), element_bytes(dtype)
                convs += [({"layer": WEIGHT_DESIGN_LAYER, "split": "base"}, p) for p in weight_design_params(llc, size)]
                im2col = [({"layer": WEIGHT_DESIGN_LAYER, "split": "base"}, p)
                          for p in weight_design_params(llc, size, IM2COL_DESIGN_KERNEL)]
            mem_shapes = MEMORY_OP_SHAPES_FULL if full else MEMORY_OP_SHAPES_QUICK
        cases += [gemm_case(M, N, K, dtype, device, *transposes) for M, N, K, *transposes in gemms]
        for M, N, K in linears:
            cases += linear_cases(M, N, K, dtype, device)
        for tags, params in convs:
            cases += conv_cases(params, dtype, device, tags)
        for tags, params in im2col:
            cases += [c for c in conv_cases(params, dtype, device, tags) if c.variant in IM2COL_DESIGN_PASSES]
        if dtype != "tf32":  # TF32 changes only matmul/conv math; memory-bound ops would repeat float32
            for shape in mem_shapes:
                cases += memory_op_cases(shape, dtype, device)
        cases += transformer_cases(grid.name, dtype, device)
        flags = dtype_flags(dtype, device)
        for case in cases[first:]:
            case.tags.update(flags)
            case.build = _under_flags(case.build, flags)
            case.rotate = True  # operands from memory, as in a training step (profiler.cases.measure_case)
    if fp8_capable(device) and grid.name != "tiny":  # FP8 linear layers (predictor --dtype fp8), sides rounded
        first = len(cases)                          # up to the multiples of 16 FP8 GEMMs need
        up = lambda v: -(-v // 16) * 16
        for M, N, K in dict.fromkeys((up(M), up(N), up(K)) for M, N, K in linears):
            cases += fp8_linear_cases(M, N, K, device)
        for case in cases[first:]:
            case.tags.update(dtype_flags(FP8, device))
            case.rotate = True
    return cases


def _under_flags(build, flags: dict):
    def build_with_flags():
        apply_flags(flags)
        return build()

    return build_with_flags


def run_under_dtype_flags(case: BenchCase, device: str) -> BenchCase:
    """The case, built under its dtype's backend flags (dtype_flags: TF32, cudnn.benchmark) and recording them, as
    every grid point is; for points planned elsewhere (a shapes file, DeepBench's list)."""
    flags = dtype_flags(case.dtype, device)
    case.tags.update(flags)
    case.build = _under_flags(case.build, flags)
    return case


# ---------------------------------------------------------------------------------------------- flags
def dtype_flags(dtype: str, device: str) -> dict:
    """The backend flags a dtype runs under (torch.backends in the PyTorch docs): TF32 only for the `tf32`
    pseudo-dtype, cudnn.benchmark (autotuned algorithms) on GPU. Recorded with every sample."""
    if not device.startswith("cuda"):
        return {}
    return {"matmul_allow_tf32": dtype == "tf32", "cudnn_allow_tf32": dtype == "tf32", "cudnn_benchmark": True}


def apply_flags(flags: dict) -> None:
    if not flags:
        return
    torch.backends.cuda.matmul.allow_tf32 = flags["matmul_allow_tf32"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn_allow_tf32"]
    torch.backends.cudnn.benchmark = flags["cudnn_benchmark"]
