"""Backends: what a kind of device adds to the generic compute path, behind one small interface.

calibrate.shapes counts a call's FLOPs, bytes and generic efficiency features; calibrate.compute fits and
evaluates the efficiency curves; calibrate.cost_model and calibrate.fit compose them. What depends on the device
(which kernel runs and the work it executes, features of its own, floors, extra time, coefficients fitted only
there) is its backend's: calibrate.backends.host (PyTorch on the CPU) or calibrate.backends.gpu. The
backend is chosen by the profile's device (for_coefficients, for_profile). docs/method.md §3.

A fit records the features it was trained on (EfficiencyModel.features), and prediction follows that list
(feature_row): a profile fitted before a backend's features changed still predicts as it did.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Protocol, Sequence

from calibrate.backends.gpu import GpuBackend
from calibrate.backends.host import HostBackend
from profiler.errors import UserError


class Backend(Protocol):
    #: whether "device" memory is host memory (Coefficients.device_is_host)
    device_is_host: bool
    #: the feature columns only this backend computes (0 for a call on any other)
    own_features: frozenset

    def for_sample(self, sample) -> "Backend":
        """The backend as one calibration sample ran (the host: that sample's thread count)."""

    def feature_names(self, op: str) -> list[str]:
        """The efficiency features of an op's fits, in the order `work` gives them."""

    def work(self, op: str, pass_: str, params: Mapping[str, Any], dtype: str) -> dict[str, Any]:
        """flops, bytes, work (what a fit divides time by) and features (feature_names order) of one call."""

    def curve_point(self, sample, op: str, pass_: str, dtype: str) -> bool:
        """Whether a compute sample belongs on its family's efficiency curve (not on a floor of the backend's)."""

    def family_candidates(self, op: str, params: Mapping[str, Any], dtype: str) -> tuple[str, ...]:
        """Compute families tried before the op's own, where the profile has them."""

    def floor_s(self, coefficients, op: str, pass_: str, params: Mapping[str, Any], dtype: str) -> float:
        """A time the fitted curve may not undercut (0: none)."""

    def first_touch_s(self, coefficients, op: str, pass_: str, params: Mapping[str, Any], dtype: str,
                      fit=None, fitted_as=None) -> float:
        """Time a call pays on top of its measured (fit None) or fitted time for fresh memory its benchmark did not
        allocate; fitted_as: (op, pass, params, dtype) as the family fit costs it."""

    def kernel_time_s(self, coefficients, op: str, pass_: str, params: Mapping[str, Any], dtype: str,
                      search: bool, cache: dict) -> Optional[float]:
        """The time of a call from a kernel model of the backend's own, or None (the family fits cost it)."""

    def errors_by_kernel(self, feature_names: Sequence[str], points, preds, truth) -> Optional[dict[str, float]]:
        """Held-out median errors per kernel regime the backend tells apart (FitQuality.by_kernel), or None."""

    def fit_fields(self, by_kind: Mapping[str, list], machine) -> dict[str, Any]:
        """The backend's own Coefficients fields, fitted from a profile's samples by kind."""

    def report_lines(self, coefficients, rate: Callable[[float], str]) -> list[str]:
        """Lines of `profiler show` for the backend's own coefficients."""


def for_coefficients(coefficients) -> Backend:
    """The backend of a fitted or published profile's coefficients (Coefficients.device_is_host)."""
    return HostBackend.of_coefficients(coefficients) if coefficients.device_is_host else GpuBackend()


def for_profile(machine, samples: Sequence) -> Backend:
    """The backend a profile's samples are fitted with: the host's when the machine records no GPU and every
    sample ran on the CPU, else the GPU's."""
    if (machine is None or not machine.gpus) and all(s.device.startswith("cpu") for s in samples):
        return HostBackend.of_machine(machine)
    return GpuBackend()


#: every backend's own feature columns (a fit may have stored another backend's: feature_row)
OWN_FEATURES = HostBackend.own_features | GpuBackend.own_features


def feature_row(names: Sequence[str], features: Sequence[float], stored: Sequence[str]) -> Sequence[float]:
    """A call's features (in `names` order) as a fit stored its own list (`stored`): a column another backend
    computes is 0 here, as it was when such a fit was trained (a GPU fit from before the backends split recorded
    the host's columns, always 0 on a GPU)."""
    if stored == names:
        return features
    values = dict(zip(names, features))
    row = []
    for name in stored:
        if name in values:
            row.append(values[name])
        elif name in OWN_FEATURES:
            row.append(0.0)
        else:
            raise UserError(f"a compute fit names the feature {name!r}, which no backend computes "
                            f"(known: {', '.join(names)})")
    return row
