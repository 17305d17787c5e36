"""FDDP's backward pass in C: the Gauss-Newton model of every knot and the Riccati recursion.

`trajopt/engine/riccati.c` (its comment states the equations, those of
`trajopt.engine.riccati.backward`), built and loaded by `trajopt.engine.c_kernels`, called on
NumPy buffers.

- `gauss_newton(lin)` -> `GaussNewton`: `l_x = R_x^T r`, `l_u`, `l_xx = R_x^T R_x`, `l_uu`,
  `l_ux`, per knot. They do not depend on the regularisation, so a line search that raises
  `mu` and runs the recursion again reuses them.
- `backward(model, defects, mu)` -> `(k (T, nu), K (T, nu, nx), dV1, dV2, ok)`, the return
  of `trajopt.engine.riccati.backward`, as NumPy values.
"""

from __future__ import annotations

import ctypes
import functools
from typing import NamedTuple

import numpy as np

from native import c_library

from .c_kernels import DOUBLES, buffer, load


@functools.cache
def library() -> ctypes.CDLL:
    """The compiled `riccati.c`, built on first use and loaded."""
    return load("riccati", {
        "gauss_newton": (None, [ctypes.c_int] * 4 + [DOUBLES] * 8),
        "riccati": (ctypes.c_int,
                    [ctypes.c_int] * 4 + [DOUBLES] * 10 + [ctypes.c_double] + [DOUBLES] * 3),
    }, after=(c_library.DENSE_CHOLESKY,))  # fmt: skip


class GaussNewton(NamedTuple):
    """Every knot's Gauss-Newton cost model and dynamics (what the recursion reads), float64."""

    A: np.ndarray  # (T, nx, nx)
    B: np.ndarray  # (T, nx, nu)
    l_x: np.ndarray  # (T, nx)  R_x^T r
    l_u: np.ndarray  # (T, nu)  R_u^T r
    l_xx: np.ndarray  # (T, nx, nx)  R_x^T R_x
    l_uu: np.ndarray  # (T, nu, nu)  R_u^T R_u
    l_ux: np.ndarray  # (T, nu, nx)  R_u^T R_x
    r_T: np.ndarray  # (nr_T,) weighted terminal residuals
    R_T: np.ndarray  # (nr_T, nx)


def gauss_newton(lin) -> GaussNewton:
    """The Gauss-Newton model of `lin` (a `shooting.Linearization`, or its first seven
    arrays `(A, B, r, R_x, R_u, r_T, R_T)`)."""
    A, B, r, Rx, Ru, rT, RT = (buffer(a) for a in lin[:7])
    T, nx, nu = B.shape
    nr = r.shape[1]
    if Rx.shape != (T, nr, nx) or Ru.shape != (T, nr, nu) or A.shape != (T, nx, nx):
        raise ValueError(
            f"inconsistent linearisation shapes: A {A.shape}, B {B.shape}, r {r.shape}, "
            f"R_x {Rx.shape}, R_u {Ru.shape}"
        )
    if RT.shape != (rT.shape[0], nx):
        raise ValueError(f"R_T must be (nr_T, {nx}) for r_T {rT.shape}, got {RT.shape}")
    lx, lu = np.empty((T, nx)), np.empty((T, nu))
    lxx, luu, lux = np.empty((T, nx, nx)), np.empty((T, nu, nu)), np.empty((T, nu, nx))
    library().gauss_newton(T, nx, nu, nr, r, Rx, Ru, lx, lu, lxx, luu, lux)
    return GaussNewton(A, B, lx, lu, lxx, luu, lux, rT, RT)


def backward(model: GaussNewton, defects, mu: float):
    """The Riccati recursion on `model` with `defects (T + 1, nx)` and regularisation `mu`:
    `(k (T, nu), K (T, nu, nx), dV1, dV2, ok)` (`ok` False where a `Q_uu` is not positive
    definite; `k` and `K` are then not complete)."""
    T, nx, nu = model.B.shape
    defects = buffer(defects)
    if defects.shape != (T + 1, nx):
        raise ValueError(f"defects must be ({T + 1}, {nx}), got {defects.shape}")
    k, K, dV = np.zeros((T, nu)), np.zeros((T, nu, nx)), np.zeros(2)
    status = library().riccati(
        T, nx, nu, model.r_T.shape[0], model.A, model.B, model.l_x, model.l_u, model.l_xx,
        model.l_uu, model.l_ux, model.r_T, model.R_T, defects, float(mu), k, K, dV,
    )  # fmt: skip
    if status < 0:
        raise MemoryError("the Riccati recursion could not allocate its work space")
    return k, K, float(dV[0]), float(dV[1]), bool(status)
