"""`dynamics.mass_solve`: `M^-1 B` whose derivative is `M^-1 (dB - dM X)`, never through Cholesky.

Checked against central differences of NumPy's dense solve (nobody's rule here), in forward mode
(`jvp`, `jacfwd`), in reverse mode (`grad`, by transposition) and under `vmap`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics.mass_solve import mass_solve


def _spd(rng, n):
    a = rng.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


def _central_difference(f, x, dx, eps=1e-6):
    return (f(x + eps * dx) - f(x - eps * dx)) / (2 * eps)


@pytest.mark.parametrize("columns", [None, 1, 13])
def test_the_tangent_is_the_derivative_of_the_dense_solve(columns):
    rng = np.random.default_rng(0)
    n = 18
    mass = _spd(rng, n)
    shape = (n,) if columns is None else (n, columns)
    rhs = rng.normal(size=shape)
    dmass = rng.normal(size=(n, n))
    dmass = dmass + dmass.T  # a tangent of a symmetric matrix
    drhs = rng.normal(size=shape)
    value, tangent = jax.jvp(mass_solve, (jnp.asarray(mass), jnp.asarray(rhs)),
                             (jnp.asarray(dmass), jnp.asarray(drhs)))  # fmt: skip
    np.testing.assert_allclose(value, np.linalg.solve(mass, rhs), rtol=1e-12, atol=1e-14)
    expected = _central_difference(
        lambda t: np.linalg.solve(mass + t * dmass, rhs + t * drhs), 0.0, 1.0
    )
    np.testing.assert_allclose(tangent, expected, rtol=1e-7, atol=1e-9)


def test_jacfwd_grad_and_vmap_agree_with_central_differences():
    rng = np.random.default_rng(1)
    n, m = 6, 3
    mass0, rhs0 = _spd(rng, n), rng.normal(size=(n, m))
    weights = rng.normal(size=(n, m))

    def loss(scale):  # a scalar through both arguments
        mass = mass0 * (1.0 + scale[0]) + scale[1] * np.eye(n)
        return jnp.sum(weights * mass_solve(mass, rhs0 * (1.0 + scale[2])))

    def loss_np(scale):
        mass = mass0 * (1.0 + scale[0]) + scale[1] * np.eye(n)
        return np.sum(weights * np.linalg.solve(mass, rhs0 * (1.0 + scale[2])))

    point = np.array([0.1, 0.3, -0.2])
    expected = np.array([
        _central_difference(loss_np, point, e) for e in np.eye(3)
    ])  # fmt: skip
    np.testing.assert_allclose(jax.grad(loss)(jnp.asarray(point)), expected, rtol=1e-7)
    np.testing.assert_allclose(jax.jacfwd(loss)(jnp.asarray(point)), expected, rtol=1e-7)
    batch = jnp.asarray(point + rng.normal(scale=0.05, size=(4, 3)))
    batched = jax.vmap(jax.grad(loss))(batch)
    for row, p in zip(batched, np.asarray(batch)):
        np.testing.assert_allclose(
            row, [_central_difference(loss_np, p, e) for e in np.eye(3)], rtol=1e-7
        )
