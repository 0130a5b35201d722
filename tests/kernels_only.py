"""A cost model without the host floor of a GPU layer pass (Coefficients.host_dispatch; tests/predictor/
test_host_floor.py tests the floor): tests that cost kernels by hand on tiny shapes read the kernels alone."""
from __future__ import annotations

import copy


def with_coefficients(cost_model, **update):
    """A copy of `cost_model` whose profile's coefficients take `update` (its kernels' costs are shared, unchanged)."""
    other = copy.copy(cost_model)
    other.coefficients = cost_model.coefficients.model_copy(update=update)
    return other


def kernels_only(cost_model):
    """A copy of `cost_model` whose profile has no host dispatch time."""
    return with_coefficients(cost_model, host_dispatch=None)
