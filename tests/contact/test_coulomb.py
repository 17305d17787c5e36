"""Disk-cone projection and the fixed-sweep Coulomb impulse solver.

References we did not write: closed-form single-contact solutions, Coulomb's conditions checked
directly on the output, and scipy's bounded least squares for the frictionless case.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from jax.test_util import check_grads

from contact import coulomb

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(1)


CONVERGED = 1000  # sweeps after which the test problems are solved to round-off


@functools.partial(jax.jit, static_argnames=("num_sweeps", "method"))
def _solve(g, c, mu, w, num_sweeps, method):
    return coulomb.solve_impulses(g, c, mu, w, num_sweeps=num_sweeps, method=method)


def solve(g, c, mu, w=None, num_sweeps=CONVERGED, method="gauss_seidel"):
    """Jitted solve returning NumPy arrays (few distinct compilations keep the tests fast)."""
    w = jnp.ones(jnp.shape(mu)) if w is None else w
    p, info = _solve(g, c, mu, w, num_sweeps, method)
    return np.asarray(p), jax.tree_util.tree_map(np.asarray, info)


def _random_problem(k=4, seed=0):
    """Random SPD Delassus `(k, 3, k, 3)` with coupled contacts, free velocities mostly
    approaching, some contacts separating."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(3 * k, 3 * k + 2))
    g = a @ a.T / (3 * k) + 0.1 * np.eye(3 * k)
    c = rng.normal(size=(k, 3)) * 0.5
    c[:, 2] = -np.abs(c[:, 2]) - 0.2
    c[-1, 2] = 0.3  # the last contact separates on its own
    return jnp.asarray(g.reshape(k, 3, k, 3)), jnp.asarray(c)


# ----------------------------------------------------------------------------- projection
project = jax.jit(coulomb.project_disk_cone)


def test_projection_lands_in_cone_idempotent_and_keeps_interior():
    p = RNG.normal(size=(200, 3))
    mu = RNG.uniform(0.0, 1.5, size=200)
    q = np.asarray(project(p, mu))
    assert np.all(q[:, 2] >= 0)
    assert np.all(np.linalg.norm(q[:, :2], axis=1) <= mu * q[:, 2] + 1e-15)
    np.testing.assert_allclose(project(q, mu), q, atol=1e-15)
    # negative normal impulse -> zero; interior points unchanged; p_n kept when clipping
    np.testing.assert_array_equal(q[p[:, 2] <= 0], 0.0)
    inside = (p[:, 2] > 0) & (np.linalg.norm(p[:, :2], axis=1) <= mu * p[:, 2])
    assert int(inside.sum()) > 5
    np.testing.assert_array_equal(q[inside], p[inside])
    np.testing.assert_array_equal(q[p[:, 2] > 0, 2], p[p[:, 2] > 0, 2])
    # clipped tangent keeps its direction
    clipped = (p[:, 2] > 0) & ~inside
    cos = np.sum(q[clipped, :2] * p[clipped, :2], 1) / (
        np.linalg.norm(q[clipped, :2], axis=1) * np.linalg.norm(p[clipped, :2], axis=1)
    )
    np.testing.assert_allclose(cos[mu[clipped] > 0], 1.0, atol=1e-14)


def test_projection_gradients():
    for p in ([0.3, -0.2, 1.0], [2.0, 1.0, 1.0]):  # interior, clipped
        check_grads(
            project, (jnp.array(p), jnp.array(0.7)), order=1, modes=["fwd", "rev"], eps=1e-6
        )
    # finite at the kinks: p_t = 0, p_n = 0, mu = 0
    jac = jax.jit(jax.jacrev(coulomb.project_disk_cone, argnums=(0, 1)))
    for p, mu in (([0.0, 0.0, 1.0], 0.5), ([0.0, 0.0, 0.0], 0.5), ([1.0, 0.0, 1.0], 0.0)):
        for d in jac(jnp.array(p), jnp.array(mu)):
            assert bool(jnp.all(jnp.isfinite(d)))


# ----------------------------------------------------------------------------- single contact
G1 = jnp.diag(jnp.array([2.0, 3.0, 1.5])).reshape(1, 3, 1, 3)


def test_single_contact_sticking():
    c = jnp.array([[0.1, -0.05, -1.0]])
    p, info = solve(G1, c, jnp.array([0.8]))
    np.testing.assert_allclose(p, -c / jnp.array([[2.0, 3.0, 1.5]]), rtol=1e-15)
    np.testing.assert_allclose(info["velocity"], 0.0, atol=1e-15)
    assert float(info["residual"]) < 1e-15


@pytest.mark.parametrize("g_t", [(2.0, 2.0), (2.0, 5.0)])  # isotropic, anisotropic
def test_single_contact_sliding(g_t):
    g = jnp.diag(jnp.array([*g_t, 1.5])).reshape(1, 3, 1, 3)
    c = jnp.array([[2.0, 1.0, -1.0]])
    mu = 0.5
    p, info = solve(g, c, jnp.array([mu]))
    u = info["velocity"][0]
    p = p[0]
    np.testing.assert_allclose(p[2], 1.0 / 1.5, rtol=1e-14)  # u_n = 0
    np.testing.assert_allclose(u[2], 0.0, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(p[:2]), mu * p[2], rtol=1e-14)
    assert np.linalg.norm(u[:2]) > 0.1  # it slips
    # maximal dissipation: p_t opposite to the slip velocity
    np.testing.assert_allclose(p[:2], -mu * p[2] * u[:2] / np.linalg.norm(u[:2]), atol=1e-12)


def test_single_contact_separating():
    c = jnp.array([[0.4, -0.2, 0.3]])
    p, info = solve(G1, c, jnp.array([0.8]))
    np.testing.assert_array_equal(p, 0.0)
    np.testing.assert_allclose(info["velocity"], c)


# ----------------------------------------------------------------------------- multi-contact
def _assert_coulomb(p, u, mu, tol):
    """Coulomb's law on `(p (k, 3), u (k, 3))`, with tolerance `tol` in the units of u and p."""
    p, u, mu = np.asarray(p), np.asarray(u), np.asarray(mu)
    pn, un = p[:, 2], u[:, 2]
    pt, ut = p[:, :2], u[:, :2]
    assert np.all(pn >= 0) and np.all(un >= -tol)
    np.testing.assert_allclose(pn * un, 0.0, atol=tol)
    norm_pt, norm_ut = np.linalg.norm(pt, axis=1), np.linalg.norm(ut, axis=1)
    assert np.all(norm_pt <= mu * pn + 1e-14)
    sticking = norm_pt < mu * pn - 1e-6
    np.testing.assert_allclose(norm_ut[sticking], 0.0, atol=tol)
    sliding = norm_ut > tol
    expected = -(mu * pn / np.maximum(norm_ut, 1e-300))[:, None] * ut
    np.testing.assert_allclose(pt[sliding], expected[sliding], atol=tol)
    return sticking, sliding, pn > 0


@pytest.mark.parametrize("method", ["gauss_seidel", "jacobi"])
def test_random_four_contacts_satisfy_coulomb(method):
    for seed in range(3):
        g, c = _random_problem(seed=seed)
        mu = jnp.array([0.3, 0.8, 0.5, 1.0])
        p, info = solve(g, c, mu, method=method)
        u = np.einsum("iajb,jb->ia", g, p) + c
        np.testing.assert_allclose(info["velocity"], u, atol=1e-14)
        assert float(info["residual"]) < 1e-9, (seed, info["residual"])
        sticking, sliding, touching = _assert_coulomb(p, u, mu, tol=1e-9)
        assert touching.any()


def test_random_problem_has_all_contact_modes():
    """The test problems are not trivial: sticking, sliding and separating contacts occur."""
    modes = np.zeros(3, bool)
    for seed in range(3):
        g, c = _random_problem(seed=seed)
        mu = jnp.array([0.3, 0.8, 0.5, 1.0])
        p, info = solve(g, c, mu)
        sticking, sliding, touching = _assert_coulomb(p, info["velocity"], mu, tol=1e-9)
        modes |= [sticking.any(), sliding.any(), (~touching).any()]
    assert modes.all()


def test_frictionless_matches_scipy_bounded_least_squares():
    """mu = 0: p_n >= 0, u_n = A p_n + c_n >= 0, p_n u_n = 0 is the QP
    min 1/2 p^T A p + c^T p s.t. p >= 0, i.e. min |L^T p + L^-1 c|^2 with A = L L^T."""
    for seed in range(3):
        g, c = _random_problem(seed=seed)
        a = np.asarray(g[:, 2, :, 2])
        cn = np.asarray(c[:, 2])
        chol = np.linalg.cholesky(a)
        ref = scipy.optimize.lsq_linear(
            chol.T, -np.linalg.solve(chol, cn), bounds=(0, np.inf), method="bvls", tol=1e-14
        ).x
        p, _ = solve(g, c, jnp.zeros(4))
        np.testing.assert_allclose(p[:, :2], 0.0, atol=0)
        np.testing.assert_allclose(p[:, 2], ref, atol=1e-10)


def test_flat_layout_and_vmap_agree():
    g, c = _random_problem()
    mu = jnp.full(4, 0.6)
    p_blocks, _ = solve(g, c, mu)
    # vmap over free velocities, with the (3k, 3k) / (3k,) layout
    batched = jax.jit(
        jax.vmap(coulomb.solve_impulses, in_axes=(None, 0, None, None, None)), static_argnums=4
    )
    batch, _ = batched(g.reshape(12, 12), jnp.stack([c, 2 * c]).reshape(2, 12), mu, None, CONVERGED)
    np.testing.assert_allclose(batch[0], p_blocks, atol=1e-15)
    np.testing.assert_allclose(batch[1], 2 * p_blocks, atol=1e-12)  # positively homogeneous


def test_invariant_to_units_of_mass():
    """Steps scale as 1/G, so solve(alpha G, c) = solve(G, c) / alpha sweep by sweep (the
    paper's r = 1 / (1 + sum det G_ij) is not)."""
    g, c = _random_problem()
    mu = jnp.full(4, 0.6)
    p, _ = solve(g, c, mu, num_sweeps=5)
    p_scaled, _ = solve(1e3 * g, c, mu, num_sweeps=5)
    np.testing.assert_allclose(1e3 * p_scaled, p, rtol=1e-10, atol=1e-14)


def test_active_weights():
    g, c = _random_problem(seed=1)
    mu = jnp.full(4, 0.7)
    p_hard, _ = solve(g, c, mu)
    p_ones, _ = solve(g, c, mu, jnp.ones(4))
    np.testing.assert_array_equal(p_hard, p_ones)
    # weight 0 removes a contact: the others solve the problem without it
    w = jnp.array([1.0, 0.0, 1.0, 1.0])
    p_w, _ = solve(g, c, mu, w)
    keep = jnp.array([0, 2, 3])
    p_reduced, _ = solve(g[keep][:, :, keep], c[keep], mu[keep])
    np.testing.assert_array_equal(p_w[1], 0.0)
    np.testing.assert_allclose(p_w[keep], p_reduced, atol=1e-12)
    # a fractional weight scales the contact's impulse
    p_half, _ = solve(g, c, mu, jnp.array([1.0, 1.0, 1.0, 0.5]))
    p_alone, _ = solve(g, c, mu, jnp.array([0.0, 0.0, 0.0, 1.0]))
    assert np.all(np.isfinite(p_half))
    np.testing.assert_allclose(
        p_alone[3],
        coulomb.project_disk_cone(-jnp.linalg.solve(g[3, :, 3, :], c[3]), mu[3]),
        atol=1e-12,
    )


# ----------------------------------------------------------------------------- gradients
def _loss(g, c, mu, w, method):
    p, info = coulomb.solve_impulses(g, c, mu, w, num_sweeps=50, method=method)
    return jnp.sum(p**2) + jnp.sum(info["velocity"] ** 2)


_loss_grad = jax.jit(jax.grad(_loss, argnums=(0, 1, 2, 3)), static_argnums=4)


def test_gradients_finite_through_50_sweeps(method="gauss_seidel"):
    g, c = _random_problem(seed=0)
    mu = jnp.array([0.3, 0.8, 0.5, 1.0])
    w = jnp.array([1.0, 0.7, 1.0, 0.2])
    grads = _loss_grad(g, c, mu, w, method)
    assert all(np.all(np.isfinite(d)) for d in grads)
    assert np.abs(grads[2]).max() > 0  # mu matters (sliding contacts)
    # also through kinks: a contact exactly at rest (c_0 = 0: p_0 = 0 on the cone's apex)
    grads = _loss_grad(g, c.at[0].set(0.0), mu, w, method)
    assert all(np.all(np.isfinite(d)) for d in grads)


def test_check_grads_smooth_configuration():
    """Away from mode switches the solution map is smooth; AD through the sweeps matches
    finite differences in forward and reverse mode."""
    g, c = _random_problem(seed=2)
    mu = jnp.array([0.3, 0.8, 0.5, 1.0])
    w = jnp.array([1.0, 0.9, 0.8, 1.0])
    f = jax.jit(lambda g, c, mu, w: coulomb.solve_impulses(g, c, mu, w, num_sweeps=30)[0])
    check_grads(f, (g, c, mu, w), order=1, modes=["fwd", "rev"], eps=1e-6, atol=1e-6, rtol=1e-6)
