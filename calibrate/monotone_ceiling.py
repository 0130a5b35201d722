"""The best accuracy any prediction that never falls as a shape grows can reach on a set of measured calls.

A kernel model costs a user's new shape from its sizes alone: a bigger GEMM or convolution (every size at least
as large, the same transposes or the same kernel, stride and padding) is never predicted faster. Measured library
times need not obey that (cuBLAS 8 on the P100: 4096 x 16 x 4096 in 404 us, x 32 in 172 us), so no such model can be
exact. This module computes how far the measurements themselves allow one to go: the predictions p minimising
sum |p_i - m_i| / m_i subject to p_i <= p_j wherever shape i is dominated by shape j (an L1 isotonic regression on
that partial order, solved as a linear programme), and their accuracies 1 - |p_i - m_i| / m_i. A mean below a
target would show the target out of reach of every such model; a high one shows the measurements allow it and the
gap lies in the model's form. Fitted to all rows: an upper bound for held-out figures too. docs/gpu-kernels.md.
"""
from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np


def dominated_pairs(shapes: Sequence[tuple[Hashable, tuple[int, ...]]]) -> list[tuple[int, int]]:
    """(i, j) for every pair whose configurations are equal and whose sizes differ with every size of i at most j's:
    shapes are (configuration, sizes) with sizes in one fixed order."""
    out = []
    for i, (ci, si) in enumerate(shapes):
        for j, (cj, sj) in enumerate(shapes):
            if i != j and ci == cj and si != sj and all(a <= b for a, b in zip(si, sj)):
                out.append((i, j))
    return out


def monotone_ceiling(shapes: Sequence[tuple[Hashable, tuple[int, ...]]], measured_s: Sequence[float]) -> np.ndarray:
    """Per call, the accuracy of the monotone predictions of best mean accuracy (module docstring)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    m = np.asarray(measured_s, dtype=float)
    n = len(m)
    if n == 0:
        return np.zeros(0)
    if len(shapes) != n or np.any(~np.isfinite(m)) or np.any(m <= 0):
        raise ValueError("monotone_ceiling: one shape per measured time, every time positive")
    pairs = dominated_pairs(shapes)
    # variables: p_0..p_{n-1}, e_0..e_{n-1}; minimise sum e subject to |p_i - m_i| / m_i <= e_i and p_i <= p_j
    rows, cols, vals = [], [], []
    for i in range(n):
        rows += [i, i, n + i, n + i]
        cols += [i, n + i, i, n + i]
        vals += [1.0 / m[i], -1.0, -1.0 / m[i], -1.0]
    for k, (i, j) in enumerate(pairs):
        rows += [2 * n + k, 2 * n + k]
        cols += [i, j]
        vals += [1.0, -1.0]
    a_ub = coo_matrix((vals, (rows, cols)), shape=(2 * n + len(pairs), 2 * n)).tocsr()
    b_ub = np.concatenate([np.ones(n), -np.ones(n), np.zeros(len(pairs))])
    cost = np.concatenate([np.zeros(n), np.ones(n)])
    result = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=[(0, None)] * (2 * n), method="highs")
    if not result.success:  # always feasible (p = 0, e = 1); a solver failure is a bug, not bad input
        raise RuntimeError(f"monotone_ceiling: the linear programme failed: {result.message}")
    return 1.0 - result.x[n:]
