"""The converged impulse solve (`contact.coulomb.solve_impulses(tolerance=)`).

References we did not write: Coulomb's law itself, written as its complementarity conditions
(Signorini, the friction disk, maximal dissipation) and checked on the returned impulses and
velocities, not through the solver's own residual; the paper's fixed sweeps run to convergence;
central finite differences of the converged solve. Cases: random Delassus matrices (random
contact Jacobians and SPD mass matrices) with approaching, sliding and separating contacts,
under the hard weights and random smooth ones, and Go2's Delassus matrix standing.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from contact import coulomb

jax.config.update("jax_enable_x64", True)

FAST_COMPILE = {"xla_backend_optimization_level": 0}
jit = functools.partial(jax.jit, compiler_options=FAST_COMPILE)
TOLERANCE = 1e-9  # [m/s]
MOST = 3000
MU = 0.7

# One contact of ANYmal C's trot (its own Delassus block and free velocity, a foot 4 cm above
# the ground, so its weight is 0 and it solves its own problem): a normal row coupled to the
# tangential ones about as strongly as the normal entry itself. The paper's full update cycles
# here between two iterates 1.9 m/s of residual apart.
CYCLING_BLOCK = np.array([
    [2.1400006333133494, -0.10251478451075759, -1.024314399073747],
    [-0.10251478451075756, 1.0420723141198012, 0.3035090226012645],
    [-1.0243143990737467, 0.30350902260126456, 0.8096269712781666],
])  # fmt: skip
CYCLING_VELOCITY = np.array([1.910642958599738, -0.9419004191845162, -1.107756405724145])
CYCLING_MU = 0.8


@jit
def _converged(g, c, w):
    return coulomb.solve_impulses(g, c, MU, w, MOST, tolerance=TOLERANCE, derivatives="implicit")


@functools.partial(jit, static_argnames=("sweeps",))
def _fixed(g, c, w, sweeps):
    return coulomb.solve_impulses(g, c, MU, w, sweeps)


def random_contact_problem(seed: int, k: int = 4, nv: int = 18):
    """A Delassus matrix `J M^-1 J^T (k, 3, k, 3)` of a random Jacobian `(3k, nv)` and SPD
    mass matrix, and free contact velocities `(k, 3)` [m/s]: mostly approaching, a contact
    sliding fast and one separating."""
    rng = np.random.default_rng(seed)
    jac = rng.normal(size=(3 * k, nv))
    root = rng.normal(size=(nv, nv))
    mass = root @ root.T + nv * np.eye(nv)
    g = jac @ np.linalg.solve(mass, jac.T)
    c = np.column_stack([rng.normal(0.0, 0.3, k), rng.normal(0.0, 0.3, k), -rng.uniform(0, 1, k)])
    c[0, :2] = [1.5, -0.8]  # sliding hard
    c[-1, 2] = 0.4  # separating
    return jnp.asarray(g.reshape(k, 3, k, 3)), jnp.asarray(c)


def coulomb_violation(impulses, velocity, weights, mu):
    """The largest violation of Coulomb's law by unit impulses `p` and contact velocities `u`
    (each contact's own: `u = G~ p + c`), in the units of each condition made comparable:
    velocity [m/s] for Signorini and sticking, impulse relative to the contact's largest for
    the cone and the sliding direction."""
    p = np.asarray(impulses) / np.where(weights > 0, weights, 1.0)[:, None]
    u = np.asarray(velocity)
    scale = max(np.abs(p).max(), 1e-12)
    pt, pn, ut, un = p[:, :2], p[:, 2], u[:, :2], u[:, 2]
    worst = max(
        (-pn).max() / scale,  # p_n >= 0
        (-un).max(),  # u_n >= 0
        np.abs(np.where(pn > 1e-9 * scale, un, 0.0)).max(),  # p_n > 0 => u_n = 0
        ((np.linalg.norm(pt, axis=1) - mu * pn) / scale).max(),  # |p_t| <= mu p_n
    )
    inside = np.linalg.norm(pt, axis=1) < mu * pn * (1 - 1e-6)
    worst = max(worst, np.abs(np.where(inside[:, None], ut, 0.0)).max())  # sticking: u_t = 0
    sliding = np.linalg.norm(ut, axis=1) > 1e-6
    direction = -mu * pn[:, None] * ut / np.maximum(np.linalg.norm(ut, axis=1), 1e-300)[:, None]
    return max(worst, np.abs(np.where(sliding[:, None], pt - direction, 0.0)).max() / scale)


def contact_velocities(g, c, w, impulses):
    """Each contact's own velocity `G~ p + c` for the solver's weighted impulses `w p`."""
    k = c.shape[0]
    p = np.asarray(impulses) / np.where(w > 0, w, 1.0)[:, None]
    coupled = np.asarray(coulomb.coupled_delassus(g, w))
    return np.einsum("iajb,jb->ia", coupled, p) + np.asarray(c).reshape(k, 3)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("weights", ["hard", "smooth"])
def test_the_converged_solve_obeys_coulombs_law(seed, weights):
    g, c = random_contact_problem(seed)
    k = c.shape[0]
    rng = np.random.default_rng(100 + seed)
    w = np.ones(k) if weights == "hard" else rng.uniform(0.05, 1.0, k)
    impulses, info = _converged(g, c, jnp.asarray(w))
    assert float(info["residual"]) <= TOLERANCE
    assert 0 < int(info["sweeps"]) < MOST
    u = contact_velocities(g, c, w, impulses)
    # the residual bounds every condition's error by about `tolerance` times the steps' scale
    assert coulomb_violation(impulses, u, w, MU) < 1e-7
    modes = set()
    p = np.asarray(impulses)
    for i in range(k):
        if p[i, 2] <= 1e-12:
            modes.add("separating")
        elif np.linalg.norm(p[i, :2]) > MU * p[i, 2] * (1 - 1e-9):
            modes.add("sliding")
        else:
            modes.add("sticking")
    assert {"separating", "sliding"} <= modes


@pytest.mark.parametrize("seed", range(3))
def test_it_equals_the_papers_sweeps_where_those_converge(seed):
    """The relaxation changes the path, not the fixed point: where the paper's full update
    converges, both land on the same impulses."""
    g, c = random_contact_problem(seed)
    w = jnp.ones(c.shape[0])
    reference, reference_info = _fixed(g, c, w, 2000)
    if float(reference_info["residual"]) > 1e-12:
        pytest.skip("the full update does not converge on this case")
    impulses, _ = _converged(g, c, w)
    scale = float(jnp.abs(reference).max())
    np.testing.assert_allclose(impulses, reference, atol=1e-8 * scale)


def test_the_relaxed_sweeps_converge_where_the_full_update_cycles():
    g = jnp.asarray(CYCLING_BLOCK.reshape(1, 3, 1, 3))
    c = jnp.asarray(CYCLING_VELOCITY[None])
    full = coulomb.solve_impulses(g, c, CYCLING_MU, None, 500)[1]["residual"]
    impulses, info = coulomb.solve_impulses(g, c, CYCLING_MU, None, 500, tolerance=1e-10)
    assert float(full) > 0.1
    assert float(info["residual"]) <= 1e-10
    u = CYCLING_BLOCK @ np.asarray(impulses[0]) + CYCLING_VELOCITY
    assert coulomb_violation(impulses, u[None], np.ones(1), CYCLING_MU) < 1e-8


def test_the_implicit_derivative_is_the_converged_steps():
    """Central differences of the converged solve against its implicit derivative, over the
    free velocity and the weights."""
    g, c = random_contact_problem(7)
    w = jnp.asarray(np.random.default_rng(7).uniform(0.3, 1.0, c.shape[0]))

    def impulses(c_, w_):
        return _converged(g, c_, w_)[0]

    for argnum, x in ((0, c), (1, w)):
        analytic = np.asarray(jax.jacfwd(impulses, argnums=argnum)(c, w))
        numeric = np.zeros_like(analytic)
        h = 1e-6
        flat = np.asarray(x).reshape(-1)
        for j in range(flat.size):
            step = np.zeros_like(flat)
            step[j] = h
            up = jnp.asarray((flat + step).reshape(x.shape))
            down = jnp.asarray((flat - step).reshape(x.shape))
            args_up = (up, w) if argnum == 0 else (c, up)
            args_down = (down, w) if argnum == 0 else (c, down)
            numeric.reshape(-1, flat.size)[:, j] = (
                np.asarray(impulses(*args_up)) - np.asarray(impulses(*args_down))
            ).reshape(-1) / (2 * h)
        scale = np.abs(numeric).max()
        np.testing.assert_allclose(analytic, numeric, atol=1e-5 * scale)


def test_a_bad_tolerance_is_refused_by_name():
    g, c = random_contact_problem(0)
    with pytest.raises(ValueError, match="tolerance"):
        coulomb.solve_impulses(g, c, MU, None, 10, tolerance=0.0)
