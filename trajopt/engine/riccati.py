"""FDDP's Riccati recursion in JAX: a float64 `lax.scan` from the last knot.

With the knots' linearisation `A = dF/dx`, `B = dF/du`, weighted residuals `r` and their
Jacobians `R_x`, `R_u` (Gauss-Newton: `l_x = R_x^T r`, `l_xx = R_x^T R_x`, ...), the terminal
residuals `r_T`, `R_T`, the defects `f` of multiple shooting and the regularisation `mu`:

    V'_x = V_x + V_xx f                 (at knot t+1)
    Q_x = l_x + A^T V'_x,   Q_u = l_u + B^T V'_x
    Q_xx = l_xx + A^T V_xx A,   Q_uu = l_uu + B^T V_xx B + mu 1,   Q_ux = l_ux + B^T V_xx A
    k = -Q_uu^-1 Q_u,   K = -Q_uu^-1 Q_ux

`backward` is a pure function (the batched solver vmaps it); `RICCATI` its jitted form, whose
traced programs are saved on disk per shape. `trajopt.engine.compiled_riccati` is the same recursion
in C, for `derivatives="compiled"`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .program_cache import DiskCachedFunction


def backward(lin, defects, mu):
    """Riccati recursion (float64 `lax.scan` from the last knot). `lin` is `linearize_horizon`'s
    output (or its first seven arrays), `defects (T+1, nx)`, `mu` the regularisation of `Q_uu`.

    Returns `(k (T, nu), K (T, nu, nx), dV1, dV2, ok)`: `dV1 = sum k^T Q_u`,
    `dV2 = sum k^T Q_uu k` (the expected-change model); `ok` is False when a `Q_uu` is not
    positive definite (its Cholesky factor is not finite): the caller raises `mu`."""
    A, B, r, Rx, Ru, rT, RT = lin[:7]
    nu = B.shape[2]
    eye = jnp.eye(nu, dtype=B.dtype)

    def step(carry, knot):
        Vx, Vxx, dV1, dV2, ok = carry
        A_t, B_t, r_t, Rx_t, Ru_t, f_next = knot
        vx = Vx + Vxx @ f_next
        Qx = Rx_t.T @ r_t + A_t.T @ vx
        Qu = Ru_t.T @ r_t + B_t.T @ vx
        VA = Vxx @ A_t
        Qxx = Rx_t.T @ Rx_t + A_t.T @ VA
        Quu = Ru_t.T @ Ru_t + B_t.T @ Vxx @ B_t + mu * eye
        Qux = Ru_t.T @ Rx_t + B_t.T @ VA
        chol = jnp.linalg.cholesky(Quu)
        gains = -jax.scipy.linalg.cho_solve((chol, True), jnp.concatenate([Qu[:, None], Qux], 1))
        k, K = gains[:, 0], gains[:, 1:]
        Vx = Qx + K.T @ Quu @ k + K.T @ Qu + Qux.T @ k
        Vxx = Qxx + K.T @ Quu @ K + K.T @ Qux + Qux.T @ K
        Vxx = 0.5 * (Vxx + Vxx.T)
        ok = ok & jnp.all(jnp.isfinite(chol))
        return (Vx, Vxx, dV1 + k @ Qu, dV2 + k @ Quu @ k, ok), (k, K)

    zero = jnp.zeros((), dtype=B.dtype)
    init = (RT.T @ rT, RT.T @ RT, zero, zero, jnp.array(True))
    (_, _, dV1, dV2, ok), (k, K) = jax.lax.scan(
        step, init, (A, B, r, Rx, Ru, defects[1:]), reverse=True
    )
    return k, K, dV1, dV2, ok


# The Riccati pass depends on the arrays' shapes only: one jitted function serves every
# structure (its traced programs saved on disk per shape, as the knot backends' are).
RICCATI = DiskCachedFunction("riccati.backward", jax.jit(backward), "riccati")
