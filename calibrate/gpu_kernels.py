"""GPU kernel time from a call's shape: tiles, waves, split-K, the memory floor and convolution algorithms.

A cuBLAS/cuDNN kernel splits its (implicit) GEMM into output tiles, one thread block each, run in waves over the
SMs, each streaming its operands at a rate bounded by the SM's peak and by its feed bandwidth; the kernel takes the
fastest choice of tile and split-K (a split GEMM pays one more call floor: cuBLAS adds the partial results in a
kernel of its own), and the call max(floor, that, operand bytes / DRAM bandwidth). A convolution may also run
Winograd (fused F(2x2, 3x3), or F(4x4, 3x3) with its transforms through DRAM) or FFT algorithms (the fastest with
cuDNN's search, the implicit GEMM with PyTorch's default heuristic). Formulas, sources and the choice of each
regime: docs/method.md §3b ("GPU kernels") and docs/decisions/2026-12-06-gpu-kernel-model.md. Everything here is
pure: the fit (calibrate.gpu_kernel_fit) evaluates the same `candidates` and `candidate_time` on arrays that
prediction evaluates one call at a time.
"""
from __future__ import annotations

from typing import Mapping, NamedTuple, Optional

from calibrate.shapes import per_dim
from profiler.dtypes import DTYPE_BYTES, canonical_dtype
from profiler.errors import UserError
from profiler.opmath import gemm_backward_shape, window_output_size

#: the algorithms a convolution may run (indices are stored in candidate arrays)
ALGORITHMS = ("implicit_gemm", "winograd", "fft", "implicit_gemm_3d", "winograd_fused")
#: the implicit GEMM algorithms (2-D and 3-D windows: the same products, their own kernels)
IMPLICIT = ("implicit_gemm", "implicit_gemm_3d")
PASSES = ("fwd", "bwd_data", "bwd_weight")
#: the kernel families of one math mode, reported apart (a 3-D convolution's pass takes the 2-D pass's ratio times
#: the 3-D implicit GEMM regime's own, conv3d_<pass>)
FAMILIES = ("gemm/fwd", "conv2d/fwd", "conv2d/bwd_data", "conv2d/bwd_weight", "conv3d/fwd", "conv3d/bwd_data",
            "conv3d/bwd_weight")
#: CTA output tiles (rows x columns) the libraries choose among: CUTLASS/cuBLAS threadblock shapes from 16 to
#: 256 on a side, at most 8:1, 512 to 32768 outputs
TILES = tuple((a, b) for a in (16, 32, 64, 128, 256) for b in (16, 32, 64, 128, 256)
              if 512 <= a * b <= 32768 and max(a, b) <= 8 * min(a, b))
#: tiles of grouped convolutions' per-group products, as narrow as a group (a depthwise one has one channel):
#: cuDNN and PyTorch run them with kernels of their own, not as padded dense tiles
THIN_TILES = tuple((a, b) for a in (64, 128, 256) for b in (1, 2, 4, 8)) + tuple((b, a) for a in (64, 128, 256)
                                                                               for b in (1, 2, 4, 8))
#: split-K factors (each split a CTA of its own, partial results added afterwards)
SPLITS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: a split leaves at least this much of the reduction to each CTA
MIN_SPLIT_DEPTH = 32
#: Winograd F(4x4, 3x3): 36 transformed points per 4x4 output tile (Lavin and Gray 2016)
WINOGRAD_TILE, WINOGRAD_POINTS = 4, 36
#: cuDNN's fused Winograd F(2x2, 3x3): 16 points per 2x2 output tile, transformed in shared memory (no DRAM pass)
FUSED_TILE, FUSED_POINTS = 2, 16
#: cuDNN's FFT_TILING: 32x32 tiles, a real FFT keeps 32 x 17 complex points, a complex product is 4 real ones
FFT_SIZE, FFT_POINTS, COMPLEX_FLOPS = 32, 32 * 17, 4
#: bytes of a float32 partial result of split-K (written once, read once)
PARTIAL_BYTES = 2 * 4
#: tensor cores need every channel count of a convolution to be a multiple of this; cuDNN 7.3 on pads C and K up to
#: it (release notes v7.3.0: "the c and k dimensions of the tensors are now padded to multiples of 8")
TENSOR_CORE_ALIGNMENT = 8
#: the convolutions the model costs: cuDNN runs a 3-D one as the implicit GEMM of its 3-D window (no Winograd or FFT)
CONV_OPS = ("conv2d", "conv3d")


class Param(NamedTuple):
    """A constant of the model: its meaning, the centre of its prior and the prior's spread (log space)."""

    meaning: str
    prior: float
    sigma: float


#: every fitted constant, with its prior (calibrate.gpu_kernel_fit). Priors: docs/method.md ("GPU kernels").
PARAMS: dict[str, Param] = {
    "efficiency": Param("share of an SM's peak the implicit-GEMM forward main loop reaches", 0.8, 0.5),
    "gemm_ratio": Param("cuBLAS GEMM efficiency relative to the convolution forward", 1.0, 0.15),
    "bwd_data_ratio": Param("backward-data efficiency relative to the forward", 1.0, 0.3),
    "strided_bwd_data_ratio": Param("a strided backward-data's efficiency relative to a unit-stride one", 1.0, 1.0),
    "gapped_bwd_data_ratio": Param("... of one whose kernel is narrower than its stride (gaps between windows)",
                                   1.0, 1.0),
    "bwd_weight_ratio": Param("backward-weight efficiency relative to the forward", 1.0, 0.3),
    "feed_bytes_per_s": Param("operand bytes per second one SM takes in (L2 to shared memory)", 1.6e10, 0.7),
    "memory_efficiency": Param("share of the datasheet DRAM bandwidth a streaming kernel reaches", 0.8, 0.5),
    "floor_s": Param("shortest time of a GEMM call (launch and set-up)", 6e-6, 1.0),
    "conv_floor_ratio": Param("shortest convolution call relative to the shortest GEMM (more kernels)", 1.5, 0.5),
    "conv_overhead_s": Param("time a convolution call adds to its main kernel (index, zero-fill and reduction "
                             "kernels)", 5e-6, 1.0),
    "wave_s": Param("fixed time of one wave of CTAs (prologue, epilogue)", 1e-6, 1.0),
    "winograd_fwd": Param("Winograd efficiency relative to implicit GEMM, forward", 0.5, 0.5),
    "winograd_bwd_data": Param("... backward-data", 0.5, 0.5),
    "winograd_bwd_weight": Param("... backward-weight", 0.5, 0.5),
    "fft_fwd": Param("FFT efficiency relative to implicit GEMM, forward", 0.5, 0.5),
    "fft_bwd_data": Param("... backward-data", 0.5, 0.5),
    "fft_bwd_weight": Param("... backward-weight", 0.5, 0.5),
    "conv3d_fwd": Param("3-D implicit-GEMM efficiency relative to the 2-D one, forward", 1.0, 0.5),
    "conv3d_bwd_data": Param("... backward-data", 1.0, 0.5),
    "conv3d_bwd_weight": Param("... backward-weight", 1.0, 0.5),
    "transposed_memory_ratio": Param("memory time of a GEMM with a transposed operand relative to none", 1.0, 0.5),
    "unaligned_ratio": Param("a channel-padded tensor-core convolution's forward efficiency relative to an aligned "
                             "one", 0.5, 1.5),
    "unaligned_bwd_ratio": Param("... its backward passes' (cuDNN's padded kernels differ by pass)", 0.5, 1.5),
}


class Hardware(NamedTuple):
    """What the model needs of a GPU and a math mode: SMs, the mode's peak, the CUDA-core float32 peak (the
    fallback of unaligned grouped tensor-core calls), DRAM bandwidth, and whether the mode runs on tensor cores."""

    sms: int
    peak_flops_per_s: float
    fallback_flops_per_s: float
    memory_bytes_per_s: float
    tensor_cores: bool


def _pair(params: Mapping, key: str, default: int) -> tuple[int, int]:
    value = params.get(key, default)
    if isinstance(value, (list, tuple)):
        return (int(value[0]), int(value[-1])) if value else (default, default)
    return int(value), int(value)


class ConvShape(NamedTuple):
    n: int
    c: int
    h: int
    w: int
    f: int
    r: int
    s: int
    pad_h: int
    pad_w: int
    stride_h: int
    stride_w: int
    p: int
    q: int
    groups: int = 1
    # a 3-D convolution's depth: input depth, kernel depth, padding, stride, output depth (1, 1, 0, 1, 1 in 2-D)
    d: int = 1
    t: int = 1
    pad_d: int = 0
    stride_d: int = 1
    o: int = 1

    @property
    def kernel_volume(self) -> int:
        return self.t * self.r * self.s

    @property
    def strides(self) -> int:
        return self.stride_d * self.stride_h * self.stride_w

    @property
    def output_positions(self) -> int:
        """Output positions per sample (depth x rows x columns)."""
        return self.o * self.p * self.q

    @property
    def input_positions(self) -> int:
        return self.d * self.h * self.w


def conv_shape(params: Mapping) -> ConvShape:
    """A 2-D or 3-D convolution's sizes from cost-model params (N, C, [D,] H, W, F, kernel, stride, padding;
    a 3-D one has D, and per-dimension kernel, stride and padding as one value or a (depth, rows, columns) list)."""
    three = "D" in params
    try:
        n, c, h, w, f = (int(params[k]) for k in ("N", "C", "H", "W", "F"))
    except KeyError as err:
        raise UserError(f"{'conv3d' if three else 'conv2d'} shape is missing {err.args[0]!r}") from None
    groups = int(params.get("groups", 1))
    if groups < 1 or c % groups or f % groups:
        raise UserError(f"convolution: groups {groups} must divide channels {c} and filters {f}")
    if three:
        d = int(params["D"])
        t, r, s = per_dim(params, "kernel", 3, 1)
        sd, sh, sw = per_dim(params, "stride", 3, 1)
        pd, ph, pw = per_dim(params, "padding", 3, 0)
        return ConvShape(n, c, h, w, f, r, s, ph, pw, sh, sw, window_output_size(h, r, sh, ph),
                         window_output_size(w, s, sw, pw), groups, d, t, pd, sd, window_output_size(d, t, sd, pd))
    r, s = _pair(params, "kernel", 1)
    sh, sw = _pair(params, "stride", 1)
    ph, pw = _pair(params, "padding", 0)
    return ConvShape(n, c, h, w, f, r, s, ph, pw, sh, sw, window_output_size(h, r, sh, ph),
                     window_output_size(w, s, sw, pw), groups)


def products(op: str, pass_: str, params: Mapping, algorithm: str) -> tuple[int, int, int, int]:
    """(m, n, k, batch) of the batched GEMM an algorithm runs for one call (docs/method.md, "GPU kernels"):
    implicit GEMM forward (N P Q, F, C R S), backward-data (N H W / (sh sw), C, F R S: a strided one as one product
    per stride phase, which together do the forward's work; strided_bwd_data_ratio prices the rest), backward-weight
    (F, C R S, N P Q), a 3-D one over O P Q, D H W and C T R S; Winograd one product per transformed point over 4x4
    output tiles (fused: over 2x2 tiles); FFT one complex product per frequency over 32x32 tiles."""
    if op == "gemm":
        return int(params["M"]), int(params["N"]), int(params["K"]), 1
    x = conv_shape(params)
    if algorithm in IMPLICIT:  # a grouped convolution: one product per group, of its channels and filters
        g, c, f = x.groups, x.c // x.groups, x.f // x.groups
        volume, outputs = x.kernel_volume, x.n * x.output_positions
        return {"fwd": (outputs, f, c * volume, g),
                "bwd_data": (x.n * x.input_positions // x.strides or 1, c, f * volume, g),
                "bwd_weight": (f, c * volume, outputs, g)}[pass_]
    if algorithm in ("winograd", "winograd_fused"):
        tile, points = (WINOGRAD_TILE, WINOGRAD_POINTS) if algorithm == "winograd" else (FUSED_TILE, FUSED_POINTS)
        tiles = x.n * -(-x.p // tile) * -(-x.q // tile)
        return {"fwd": (tiles, x.f, x.c, points), "bwd_data": (tiles, x.c, x.f, points),
                "bwd_weight": (x.f, x.c, tiles, points)}[pass_]
    edge = FFT_SIZE - max(x.r, x.s) + 1
    tiles = x.n * -(-x.h // edge) * -(-x.w // edge)
    batch = FFT_POINTS * COMPLEX_FLOPS
    return {"fwd": (tiles, x.f, x.c, batch), "bwd_data": (tiles, x.c, x.f, batch),
            "bwd_weight": (x.f, x.c, tiles, batch)}[pass_]


def transform_bytes(params: Mapping, algorithm: str, dtype: str) -> float:
    """DRAM bytes a Winograd or FFT convolution spends on its transforms: the input, the weight and the output
    (or their gradients) each written transformed and read back (36 points per 4x4 tile; 32 x 17 complex
    points per FFT tile, in float32). 0 for the implicit GEMM and the fused Winograd (transforms in shared
    memory)."""
    if algorithm in IMPLICIT or algorithm == "winograd_fused":
        return 0.0
    x = conv_shape(params)
    if algorithm == "winograd":
        tiles = -(-x.p // WINOGRAD_TILE) * -(-x.q // WINOGRAD_TILE)
        points, element = WINOGRAD_POINTS, DTYPE_BYTES[canonical_dtype(dtype)]
    else:
        edge = FFT_SIZE - max(x.r, x.s) + 1
        tiles = -(-x.h // edge) * -(-x.w // edge)
        points, element = 2 * FFT_POINTS, 4
    return 2.0 * float(x.n * x.c * tiles + x.f * x.c + x.n * x.f * tiles) * points * element


def algorithms(op: str, pass_: str, params: Mapping, tensor_cores: bool, search: bool) -> tuple[str, ...]:
    """The algorithms a call may run: a GEMM and every tensor-core convolution its implicit GEMM (cuDNN 7 runs
    no Winograd or FFT kernel on tensor cores: DeepBench's V100 FP16 sheet records implicit GEMM for all 94
    forward shapes); with cuDNN's search also Winograd (3x3, stride 1; the fused F(2x2, 3x3) kernels forward and
    backward-data only: cuDNN has none for the weight gradient) and FFT (stride 1, kernel wider than 1);
    with PyTorch's default heuristic (search False) the implicit GEMM; a 3-D convolution its own implicit GEMM
    kernels (implicit_gemm_3d)."""
    if op == "conv3d":
        return ("implicit_gemm_3d",)
    if op != "conv2d" or tensor_cores or not search or int(params.get("groups", 1)) > 1:
        return ("implicit_gemm",)
    x = conv_shape(params)
    out = ["implicit_gemm"]
    unit_stride = x.stride_h == 1 and x.stride_w == 1
    if unit_stride and (x.r, x.s) == (3, 3):
        out.append("winograd")
        if pass_ != "bwd_weight":
            out.append("winograd_fused")
    if unit_stride and max(x.r, x.s) > 1 and max(x.r, x.s) < FFT_SIZE:
        out.append("fft")
    return tuple(out)


def max_split(op: str, pass_: str, params: Mapping) -> int:
    """How many CTAs may share one output tile's reduction: cuBLAS splits K freely; cuDNN's weight gradient
    reduces one image per CTA at most (its reduction runs over the batch and the output positions), a strided one
    one output row of one image (DeepSpeech's 5x10 stride-2 layers run at a rate proportional to N from N = 4),
    a 3-D one one output depth slice (an image) per CTA; its forward and backward-data kernels do not split."""
    if op == "gemm":
        return SPLITS[-1]
    if pass_ != "bwd_weight":
        return 1
    x = conv_shape(params)
    return int(params["N"]) * (x.o if op == "conv3d" else (x.p if x.strides > 1 else 1))


def gather_amplification(op: str, params: Mapping) -> float:
    """Bytes fetched per useful byte of the operand a convolution gathers from its input: a stride wider than
    the kernel skips pixels inside each fetched sector (1x1 stride 2: half of what is read is used)."""
    if op == "gemm":
        return 1.0
    x = conv_shape(params)
    return x.stride_w / min(x.s, x.stride_w)


def window_reuse(op: str, params: Mapping) -> float:
    """Bytes fetched per im2col element of a convolution's input operand: neighbouring outputs share input pixels,
    so a window of R x S taps moved by s_h x s_w reads each pixel about R S / (s_h s_w) times from the SM's cache."""
    if op == "gemm":
        return 1.0
    x = conv_shape(params)
    return min(1.0, x.strides / x.kernel_volume)


def candidates(op: str, pass_: str, params: Mapping, dtype: str, sms: int, tensor_cores: bool,
               search: bool = True) -> list[tuple[int, int, float, float, float, int]]:
    """Every (algorithm index, waves, FLOPs per CTA, intensity in FLOP/byte, extra DRAM bytes: split partials and
    Winograd/FFT transforms, reduction kernels: 1 for a split GEMM) a call may run as (module docstring); a
    channel-padded call's over its padded shape."""
    element = DTYPE_BYTES[canonical_dtype(dtype)]
    if padded_on_tensor_cores(op, params, tensor_cores):  # its tiles run over the padded channels
        params = padded_channels(params)
    amplify = gather_amplification(op, params)
    # the operand gathered from the input: rows of the forward product, the reduction of the weight gradient
    reuse = window_reuse(op, params)
    rows_amp, cols_amp = (amplify * reuse, 1.0) if pass_ == "fwd" else \
        ((1.0, amplify) if pass_ == "bwd_weight" else (1.0, 1.0))
    limit = max_split(op, pass_, params)
    out = []
    for algorithm in algorithms(op, pass_, params, tensor_cores, search):
        index = ALGORITHMS.index(algorithm)
        m, n, k, batch = products(op, pass_, params, algorithm)
        transforms = transform_bytes(params, algorithm, dtype) if op != "gemm" else 0.0
        for tm, tn in (TILES + THIN_TILES if batch > 1 and algorithm in IMPLICIT else TILES):
            tiles = -(-m // tm) * -(-n // tn) * batch
            intensity = 2.0 * tm * tn / ((tm * rows_amp + tn * cols_amp) * element)
            for split in SPLITS:
                if split > 1 and (split > limit or k / split < MIN_SPLIT_DEPTH):
                    break
                ctas = tiles * split
                partials = float(m * n * batch * split * PARTIAL_BYTES) if split > 1 else 0.0
                out.append((index, -(-ctas // sms), 2.0 * tm * tn * -(-k // split), intensity, partials + transforms,
                            1 if split > 1 and op == "gemm" else 0))
    return out


def operand_bytes(op: str, params: Mapping, dtype: str) -> float:
    """Bytes of a call's operands and result, each moved once: the least DRAM traffic it can have."""
    element = DTYPE_BYTES[canonical_dtype(dtype)]
    if op == "gemm":
        m, n, k = int(params["M"]), int(params["N"]), int(params["K"])
        return float(m * k + k * n + m * n) * element
    x = conv_shape(params)
    return float(x.n * x.c * x.input_positions + x.f * (x.c // x.groups) * x.kernel_volume
                 + x.n * x.f * x.output_positions) * element


def transposed(op: str, params: Mapping) -> bool:
    return op == "gemm" and bool(params.get("transpose_a") or params.get("transpose_b"))


def depthwise(op: str, params: Mapping) -> bool:
    """A convolution with one input channel per group: a few FLOPs per element, run by dedicated kernels at the
    DRAM's pace (the model's memory term alone)."""
    return op in CONV_OPS and int(params.get("groups", 1)) > 1 and int(params["C"]) == int(params["groups"])


def strided_backward_data(op: str, pass_: str, params: Mapping) -> bool:
    """A backward-data of a strided convolution: cuDNN runs other kernels for it (DeepBench: 2.5x faster than
    the all-positions product on V100 FP32, up to 50x slower on the P100's FP16-storage kernels of cuDNN 6)."""
    return op in CONV_OPS and pass_ == "bwd_data" and conv_shape(params).strides != 1


def gapped_backward_data(op: str, pass_: str, params: Mapping) -> bool:
    """A strided backward-data whose kernel is narrower than its stride in some dimension (a 1x1 stride-2
    downsampling): the windows leave input positions no output reads, which the gradient must still write (zeros),
    a different regime from overlapping windows (5x5 stride 2: DeepBench P100 FP16, 0.15 ms unit-stride against
    8.5 ms strided for a 1x1 on 56x56x64, where 5x5 stride-2 layers run at the unit-stride rate)."""
    if not strided_backward_data(op, pass_, params):
        return False
    x = conv_shape(params)
    return x.t < x.stride_d or x.r < x.stride_h or x.s < x.stride_w


def unaligned(op: str, params: Mapping, tensor_cores: bool) -> bool:
    """A tensor-core convolution whose input or output channels (per group) are not a multiple of
    TENSOR_CORE_ALIGNMENT (first layers with 1-3 channels, depthwise convolutions)."""
    if not tensor_cores or op not in CONV_OPS:
        return False
    groups = int(params.get("groups", 1))
    return any((int(params[k]) // groups) % TENSOR_CORE_ALIGNMENT for k in ("C", "F"))


def padded_on_tensor_cores(op: str, params: Mapping, tensor_cores: bool) -> bool:
    """An unaligned dense tensor-core convolution: cuDNN (7.3 on) pads its C and K dimensions up to multiples of 8
    and runs tensor-core kernels on the padded operands, at a fitted share of the peak (a grouped one runs cuDNN's
    grouped CUDA-core kernels)."""
    return unaligned(op, params, tensor_cores) and int(params.get("groups", 1)) == 1


def padded_channels(params: Mapping) -> dict:
    """The call with C and F rounded up to multiples of TENSOR_CORE_ALIGNMENT (what a padded kernel computes)."""
    up = lambda v: -(-int(v) // TENSOR_CORE_ALIGNMENT) * TENSOR_CORE_ALIGNMENT  # noqa: E731
    return dict(params, C=up(params["C"]), F=up(params["F"]))


#: cuBLAS operand order of a linear layer's (and a plain matrix product's) passes as the forward GEMM
#: (M, N, K) they are: PyTorch's linear runs X W^T forward, dY W for the input and dY^T X for the weight gradient
GEMM_PASS_TRANSPOSES = {"linear": {"fwd": (False, True), "bwd_data": (False, False), "bwd_weight": (True, False)},
                        "gemm": {"fwd": (False, False), "bwd_data": (False, True), "bwd_weight": (True, False)}}


def as_kernel_call(op: str, pass_: str, params: Mapping) -> Optional[tuple[str, str, dict]]:
    """(op, pass, params) of the call this model costs for a cost-model call: a GEMM or linear pass as the forward
    GEMM of its shape with its transposes (profiler.opmath.gemm_backward_shape), an undilated 2-D convolution
    as it is (a grouped one as a batch of per-group products); None for anything else."""
    if op in GEMM_PASS_TRANSPOSES and pass_ in PASSES:
        m, n, k = gemm_backward_shape(pass_, int(params["M"]), int(params["N"]), int(params["K"]))
        ta, tb = GEMM_PASS_TRANSPOSES[op][pass_]
        if (op, pass_) == ("gemm", "fwd"):  # a measured GEMM says its own operand order (DeepBench)
            ta, tb = bool(params.get("transpose_a", ta)), bool(params.get("transpose_b", tb))
        return "gemm", "fwd", {"M": m, "N": n, "K": k, "transpose_a": ta, "transpose_b": tb}
    if op in CONV_OPS and pass_ in PASSES and set(per_dim(params, "dilation", 3 if op == "conv3d" else 2, 1)) == {1}:
        return op, pass_, dict(params)
    return None


def family(op: str, pass_: str) -> str:
    return f"{op}/{pass_}"


def candidate_time(values: Mapping[str, float], sm_peak, algorithm, waves, flops, intensity, partials,
                   pass_: str, is_gemm: bool, memory_bytes_per_s: float, reductions=0):
    """Seconds of one candidate (module docstring): works on floats and on numpy arrays alike (the fit).
    sm_peak: the math mode's peak per SM (the fallback's for unaligned calls); reductions: kernels the call adds
    after its main loop (cuBLAS's split-K reduction), one call floor each."""
    ratio = values["gemm_ratio"] if is_gemm else {"fwd": 1.0, "bwd_data": values["bwd_data_ratio"],
                                                  "bwd_weight": values["bwd_weight_ratio"]}[pass_]
    if is_gemm:
        regime = 1.0
    else:
        winograd, fft, three = values[f"winograd_{pass_}"], values[f"fft_{pass_}"], values[f"conv3d_{pass_}"]
        regime = _select(algorithm, winograd, fft, three)
    rate = _minimum(values["efficiency"] * ratio * regime * sm_peak, intensity * values["feed_bytes_per_s"])
    return waves * (values["wave_s"] + flops / rate) + partials / memory_bytes_per_s + reductions * values["floor_s"]


def _select(algorithm, winograd: float, fft: float, three: float):
    if isinstance(algorithm, (int, float)):
        return (1.0, winograd, fft, three, winograd)[int(algorithm)]
    import numpy as np
    return np.choose(algorithm.astype(int), (1.0, winograd, fft, three, winograd))


def _minimum(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a if a < b else b
    import numpy as np
    return np.minimum(a, b)


def unaligned_share(pass_: str) -> str:
    """The constant that prices a channel-padded convolution's pass."""
    return "unaligned_ratio" if pass_ == "fwd" else "unaligned_bwd_ratio"


def sm_peak(values: Mapping[str, float], hardware: Hardware, op: str, params: Mapping, pass_: str = "fwd") -> float:
    """FLOP/s of one SM for this call: the math mode's peak; for a channel-padded tensor-core convolution the
    fitted share of it (one for the forward, one for the backward passes); for an unaligned grouped one the
    CUDA-core peak."""
    if not unaligned(op, params, hardware.tensor_cores):
        return hardware.peak_flops_per_s / hardware.sms
    if padded_on_tensor_cores(op, params, hardware.tensor_cores):  # padded channels at a fitted share of the peak
        return values[unaligned_share(pass_)] * hardware.peak_flops_per_s / hardware.sms
    return hardware.fallback_flops_per_s / hardware.sms  # grouped: cuDNN's grouped CUDA-core kernels


def kernel_time_s(values: Mapping[str, float], hardware: Hardware, op: str, pass_: str, params: Mapping,
                  dtype: str, search: bool = True) -> float:
    """Predicted seconds of one GEMM or 2-D convolution call (module docstring)."""
    if (op != "gemm" and op not in CONV_OPS) or pass_ not in PASSES or (op == "gemm" and pass_ != "fwd"):
        raise UserError(f"the GPU kernel model covers gemm fwd and convolution passes, not {op} {pass_}")
    peak = sm_peak(values, hardware, op, params, pass_)
    is_gemm = op == "gemm"
    compute = 0.0 if depthwise(op, params) else min(
        candidate_time(values, peak, a, w, f, i, p, pass_, is_gemm, hardware.memory_bytes_per_s, r)
        for a, w, f, i, p, r in candidates(op, pass_, params, dtype, hardware.sms, hardware.tensor_cores, search))
    if gapped_backward_data(op, pass_, params):
        compute /= values["gapped_bwd_data_ratio"]
    elif strided_backward_data(op, pass_, params):
        compute /= values["strided_bwd_data_ratio"]
    memory = (operand_bytes(op, params, dtype) / (values["memory_efficiency"] * hardware.memory_bytes_per_s)
              * (values["transposed_memory_ratio"] if transposed(op, params) else 1.0))
    if is_gemm:
        return max(values["floor_s"], compute, memory)
    return values["conv_overhead_s"] + max(values["floor_s"] * values["conv_floor_ratio"], compute, memory)


def chosen_algorithm(values: Mapping[str, float], hardware: Hardware, op: str, pass_: str, params: Mapping,
                     dtype: str, search: bool = True) -> Optional[str]:
    """The algorithm the model picks for a call (for reports; None for a GEMM)."""
    if op == "gemm":
        return None
    peak = sm_peak(values, hardware, op, params, pass_)
    best = min(candidates(op, pass_, params, dtype, hardware.sms, hardware.tensor_cores, search),
               key=lambda c: candidate_time(values, peak, c[0], c[1], c[2], c[3], c[4], pass_, False,
                                            hardware.memory_bytes_per_s, c[5]))
    return ALGORITHMS[best[0]]
