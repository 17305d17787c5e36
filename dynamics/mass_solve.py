"""Solves with the joint-space mass matrix whose derivative never differentiates the factorisation.

    X = M^-1 B                      (Cholesky of the SPD `M (n, n)`, `B (n, m)` or `(n,)`)
    dX = M^-1 (dB - dM X)           (differentiate `M X = B`)

This is Pinocchio's rule for forward-dynamics derivatives, `da = M^-1 (dtau - dRNEA(q, v, a))`
with the acceleration held (Carpentier and Mansard 2018), stated for any right-hand side: the
tangent costs one product `dM X` and one product with `M^-1`, formed once from the factor the
primal computes (with every tangent direction in the right-hand side, as under `jacfwd`, one
matrix product is cheaper than two triangular solves with that many columns). Plain
automatic differentiation of `cho_factor` instead pushes every tangent direction through the
factorisation, far dearer under `jacfwd` than the primal CRBA + Cholesky
(`benchmarks/bench_linearize.py`).

The rule is a `jax.custom_jvp` with a tangent linear in `(dM, dB)`: `jacfwd`, `jvp` and `vmap`
work directly, `grad` and `vjp` by transposition.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl


@jax.custom_jvp
def mass_solve(mass, rhs):
    """`M^-1 B` for SPD `mass (n, n)` and `rhs (n,)` or `(n, m)`; see the module docstring."""
    return jsl.cho_solve(jsl.cho_factor(mass), rhs)


@mass_solve.defjvp
def _mass_solve_jvp(primals, tangents):
    mass, rhs = primals
    dmass, drhs = tangents
    factor = jsl.cho_factor(mass)
    x = jsl.cho_solve(factor, rhs)
    # The tangent through an explicit inverse: under `jacfwd` the right-hand side carries every
    # tangent direction, and one matrix product with `M^-1` is cheaper than two triangular
    # solves with that many columns.
    inverse = jsl.cho_solve(factor, jnp.eye(mass.shape[-1], dtype=x.dtype))
    return x, inverse @ (drhs - dmass @ x)
