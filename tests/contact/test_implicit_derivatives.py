"""Implicit derivatives of the contact solve and of the step (`derivatives="implicit"`).

References we did not write: central finite differences of a converged solve, and plain automatic
differentiation through every sweep at convergence (`derivatives="unrolled"`, JAX's own rules).
Cases on Go2's real Delassus matrix (four feet on the ground): all feet sticking, all sliding,
two separating, a mixed set, one foot exactly at the rim of the cone (a kink: one-sided), a foot
at zero load (a kink), and, through the whole step, four loaded feet, a touchdown and sliding
feet under the hard and smooth models, with `jit`, `vmap`, `jacfwd` and `jacrev`.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynamics
from contact import StepParams, activation, compute_foot_contacts, coulomb, step
from dynamics import State, free_body

jax.config.update("jax_enable_x64", True)

CONVERGED = 400  # sweeps after which every case here is solved to < 1e-12 m/s
RELATIVE = 1e-6  # the bar: |J - J_ref| <= 1e-6 max |J_ref| entrywise
FD_STEP = 1e-6
# The smooth activation's length scale is 1/kappa = 3e-4 m: central differences of the step
# with h = 1e-6 err by (h kappa)^2 / 6 ~ 1.5e-6 relative, so the step tests use h = 1e-7
# (truncation 1.5e-8, round-off ~1e-9 relative).
STEP_FD_STEP = 1e-7
MU = 0.8
FAST_COMPILE = {"xla_backend_optimization_level": 0}
jit = functools.partial(jax.jit, compiler_options=FAST_COMPILE)


@pytest.fixture(scope="module")
def go2():
    return dynamics.load_robot("go2")


@pytest.fixture(scope="module")
def standing_delassus(go2):
    """`G (4, 3, 4, 3)` of Go2 standing on its four feet (contact frames `[t1, t2, n]`), without
    its rotor inertia (the cases' velocities were chosen on that Delassus matrix)."""
    go2 = dataclasses.replace(go2, armature=np.zeros(go2.nv))
    q = jnp.asarray(go2.q_standing)
    jac = compute_foot_contacts(go2, StepParams().terrain, q).jacobian.reshape(12, go2.nv)
    mass = dynamics.mass_matrix(go2, q)
    return (jac @ jnp.linalg.solve(mass, jac.T)).reshape(4, 3, 4, 3)


def _solve(derivatives, num_sweeps=CONVERGED):
    def f(g, c, mu, w):
        return coulomb.solve_impulses(g, c, mu, w, num_sweeps, "gauss_seidel", derivatives)[0]

    return f


def _flat_inputs(g, c, mu, w):
    return jnp.concatenate([g.ravel(), c.ravel(), mu, w])


def _unflat(x, k=4):
    n = 9 * k * k
    return (
        x[:n].reshape(k, 3, k, 3),
        x[n : n + 3 * k].reshape(k, 3),
        x[n + 3 * k : n + 4 * k],
        x[n + 4 * k :],
    )


def _central_differences(f, x, h=FD_STEP, indices=None):
    """`df/dx` by central differences (columns `indices`, default all)."""
    indices = range(x.shape[0]) if indices is None else indices
    columns = []
    for i in indices:
        e = jnp.zeros_like(x).at[i].set(h)
        columns.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    return np.stack(columns, axis=-1)


def _close(actual, reference, rel=RELATIVE):
    actual, reference = np.asarray(actual), np.asarray(reference)
    scale = np.max(np.abs(reference))
    err = np.max(np.abs(actual - reference))
    assert np.all(np.isfinite(actual))
    assert err <= rel * scale, (err, scale)


# ------------------------------------------------------------------------- the solve, per mode
CASES = {
    # c (4, 3): free contact velocity [m/s]; what each foot must be doing at the solution
    "sticking": ([[0.01, -0.02, -0.5], [0.02, 0.01, -0.4], [-0.01, 0.0, -0.6], [0.0, 0.02, -0.3]],
                 ["stick"] * 4),
    "sliding": ([[1.5, 0.3, -0.3], [1.2, -0.4, -0.2], [-1.3, 0.2, -0.3], [1.4, 0.5, -0.2]],
                ["slide"] * 4),
    "separating": ([[0.01, 0.0, -0.5], [0.0, 0.01, 0.4], [0.02, 0.0, -0.6], [0.0, 0.0, 0.3]],
                   ["stick", "separate", "stick", "separate"]),
    "mixed": ([[0.01, 0.0, -0.5], [1.5, 0.4, -0.2], [0.0, 0.0, 0.5], [0.02, -0.01, -0.4]],
              ["stick", "slide", "separate", "stick"]),
}  # fmt: skip
WEIGHTS = {"hard": [1.0, 1.0, 1.0, 1.0], "smooth": [1.0, 0.93, 0.6, 0.99]}


def _modes(p, mu, tol=1e-9):
    out = []
    for p_i, mu_i in zip(np.asarray(p), np.asarray(mu)):
        if p_i[2] <= tol:
            out.append("separate")
        elif np.linalg.norm(p_i[:2]) < mu_i * p_i[2] * (1 - 1e-6):
            out.append("stick")
        else:
            out.append("slide")
    return out


@pytest.mark.parametrize("model", ["hard", "smooth"])
@pytest.mark.parametrize("case", list(CASES))
def test_solve_jacobian_matches_finite_differences_and_unrolled(standing_delassus, case, model):
    """For each contact mode, on Go2's Delassus matrix: the solve converges (the case is what
    it says), and the implicit Jacobian with respect to `(G, c, mu, w)` equals central
    differences of the converged solve and unrolled AD at convergence (1e-6 relative), forward
    (jitted `jacfwd`) and reverse (`jacrev`) alike."""
    c, expected = CASES[case]
    g, c = standing_delassus, jnp.asarray(c)
    mu, w = jnp.full(4, MU), jnp.asarray(WEIGHTS[model])
    x = _flat_inputs(g, c, mu, w)
    def solution(x):
        return _solve("implicit")(*_unflat(x))

    implicit = jit(solution)
    p, info = coulomb.solve_impulses(g, c, mu, w, CONVERGED)
    assert float(info["residual"]) < 1e-12
    assert _modes(p / w[:, None], mu) == expected

    j_implicit = jit(jax.jacfwd(solution))(x)
    j_reverse = jit(jax.jacrev(solution))(x)
    j_unrolled = jit(jax.jacfwd(lambda x: _solve("unrolled")(*_unflat(x))))(x)
    j_fd = _central_differences(implicit, x)
    _close(j_implicit, j_fd)
    _close(j_implicit, j_unrolled)
    _close(j_reverse, j_implicit, rel=1e-12)


def test_solve_jacobian_under_vmap_equals_one_by_one(standing_delassus):
    """`vmap` of the implicit `jacfwd` over a batch of cases (every mode, both weightings)
    equals the cases one by one."""
    g = standing_delassus
    cs = jnp.asarray([CASES[k][0] for k in CASES] * 2)
    ws = jnp.asarray([WEIGHTS["hard"]] * len(CASES) + [WEIGHTS["smooth"]] * len(CASES))
    mu = jnp.full(4, MU)
    jac = jax.jacfwd(_solve("implicit"), argnums=1)
    batched = jit(jax.vmap(jac, in_axes=(None, 0, None, 0)))(g, cs, mu, ws)
    single = jit(jac)
    for i in range(cs.shape[0]):
        np.testing.assert_allclose(batched[i], single(g, cs[i], mu, ws[i]), rtol=1e-12, atol=1e-15)


def test_rim_of_the_cone_is_one_sided(standing_delassus):
    """Foot 0 exactly at the rim (|p_t| = mu p_n, found by solving with a large mu and setting
    mu to the ratio): a kink between sticking and sliding. The implicit derivative is finite and
    equals one of the two one-sided difference quotients (the branch the projection takes)."""
    g = standing_delassus
    c = jnp.asarray(CASES["sticking"][0]).at[0, :2].set(jnp.array([0.3, 0.1]))
    p, _ = coulomb.solve_impulses(g, c, jnp.full(4, 5.0), None, CONVERGED)
    ratio = float(jnp.linalg.norm(p[0, :2]) / p[0, 2])
    mu = jnp.full(4, 5.0).at[0].set(ratio)

    def solution(c):
        return _solve("implicit")(g, c, mu, jnp.ones(4))

    f = jit(solution)
    j = np.asarray(jit(jax.jacfwd(solution))(c)).reshape(12, 12)
    assert np.all(np.isfinite(j))
    h = 1e-7
    matched = 0
    for i in range(12):
        e = jnp.zeros(12).at[i].set(h).reshape(4, 3)
        forward = (np.asarray(f(c + e)) - np.asarray(f(c))).ravel() / h
        backward = (np.asarray(f(c)) - np.asarray(f(c - e))).ravel() / h
        scale = np.max(np.abs(j))
        ok_f = np.max(np.abs(j[:, i] - forward)) <= 1e-5 * scale
        ok_b = np.max(np.abs(j[:, i] - backward)) <= 1e-5 * scale
        assert ok_f or ok_b, (
            i,
            np.max(np.abs(j[:, i] - forward)),
            np.max(np.abs(j[:, i] - backward)),
        )
        matched += ok_f and ok_b
    assert matched < 12  # the kink is real: some direction sees two different one-sided slopes


def test_zero_load_and_unconverged_solves_give_finite_derivatives(standing_delassus):
    """Bad input: a foot at zero load (c = 0, the apex of the cone) and a solve stopped after
    one sweep still give finite Jacobians, and the residual reports the unconverged solve."""
    g = standing_delassus
    c = jnp.asarray(CASES["mixed"][0]).at[3].set(0.0)
    mu, w = jnp.full(4, MU), jnp.ones(4)
    for sweeps in (1, CONVERGED):
        jac = jit(jax.jacfwd(_solve("implicit", sweeps), argnums=(0, 1, 2, 3)))(g, c, mu, w)
        assert all(np.all(np.isfinite(np.asarray(j))) for j in jac)
    _, info = coulomb.solve_impulses(g, jnp.asarray(CASES["mixed"][0]), mu, w, 1)
    assert float(info["residual"]) > 1e-3


# ------------------------------------------------------------------------- the whole step
def _go2_state(go2, gap, v_base=(0.0, 0.0, 0.0)):
    q = jnp.asarray(go2.q_standing)
    gaps = compute_foot_contacts(go2, StepParams().terrain, q).gap
    q = q.at[2].add(gap - jnp.min(gaps))
    v = jnp.zeros(go2.nv).at[:3].set(jnp.asarray(v_base))
    return State(q, v)


def _stance_torque(go2, q):
    """Joint torques that hold Go2's weight on its four feet at `q`: `tau = g_j(q) - (J^T f)_j`
    with `f = m g / 4` along each contact normal (so every foot stays loaded)."""
    contacts = compute_foot_contacts(go2, StepParams().terrain, q)
    weight = float(np.sum(go2.body_mass)) * 9.81 / 4
    forces = jnp.zeros((4, 3)).at[:, 2].set(weight)
    generalized = jnp.einsum("kan,ka->n", contacts.jacobian, forces)
    gravity = dynamics.rnea(go2, q, jnp.zeros(go2.nv), jnp.zeros(go2.nv))
    return (gravity - generalized)[go2.nv - go2.nu :]


STEP_CASES = {
    # (lowest foot gap [m], base velocity [m/s], what the feet do)
    "four_feet_loaded": (-1e-3, (0.0, 0.0, 0.0)),
    "touchdown": (2e-3, (0.0, 0.0, -1.2)),
    "sliding": (-1e-3, (1.5, 0.3, 0.0)),
}


def _step_function(go2, params, s0, tau0, contact, derivatives, num_sweeps=CONVERGED):
    """`x = [dq (nv), v (nv), tau (nu)] -> [q+ (-) q0, v+]` around state `s0`."""

    def f(x):
        nv = go2.nv
        s = State(dynamics.integrate(go2, s0.q, x[:nv]), x[nv : 2 * nv])
        nxt, _ = step(
            go2, params, s, x[2 * nv :], contact=contact, num_sweeps=num_sweeps,
            derivatives=derivatives,
        )  # fmt: skip
        return jnp.concatenate([dynamics.difference(go2, s0.q, nxt.q), nxt.v])

    return f, jnp.concatenate([jnp.zeros(go2.nv), s0.v, tau0])


@pytest.mark.parametrize(
    "case, contact",
    [("four_feet_loaded", "hard")]
    # smooth shares hard's code but for the activation weights (test_activation_weights_enter_
    # the_implicit_rule, fast): with the other cases, ~12 s each, in the slow suite
    + [pytest.param("four_feet_loaded", "smooth", marks=pytest.mark.slow)]
    + [pytest.param(case, contact, marks=pytest.mark.slow)
       for case in ("touchdown", "sliding") for contact in ("hard", "smooth")],
)
def test_step_jacobian_matches_finite_differences_and_unrolled(go2, case, contact):
    """Go2's whole step (midpoint kinematics, mass-matrix solves, the impulse solve) under
    `jacfwd`: implicit equals unrolled AD at convergence and central differences of the
    converged step (1e-6 relative); the case's contacts are active as described."""
    gap, v_base = STEP_CASES[case]
    params = StepParams()
    s0 = _go2_state(go2, gap, v_base)
    tau0 = _stance_torque(go2, s0.q)
    f, x0 = _step_function(go2, params, s0, tau0, contact, "implicit")
    _, info = step(go2, params, s0, tau0, contact=contact, num_sweeps=CONVERGED)
    assert float(info.residual) < 1e-12
    assert np.all(np.asarray(info.impulse[:, 2]) > 0)  # all four feet carry load
    if case == "sliding":
        slip = np.linalg.norm(np.asarray(info.impulse[:, :2]), axis=1)
        assert np.all(slip >= MU * np.asarray(info.impulse[:, 2]) * (1 - 1e-6))
    j_implicit = jit(jax.jacfwd(f))(x0)
    g_unrolled, _ = _step_function(go2, params, s0, tau0, contact, "unrolled")
    j_unrolled = jit(jax.jacfwd(g_unrolled))(x0)
    _close(j_implicit, j_unrolled)
    _close(j_implicit, _central_differences(jit(f), x0, h=STEP_FD_STEP))


@pytest.mark.slow  # ~80-130 s of compilation (fast suite under 15 min)
def test_step_implicit_jacobian_under_vmap_and_reverse_mode(go2):
    """`vmap(jacfwd)` of the implicit step over states (loaded, touchdown, sliding) equals the
    states one by one, and `jacrev` equals `jacfwd` (reverse mode by transposition)."""
    params = StepParams()
    tau0 = 2.0 * jnp.sin(jnp.arange(go2.nu, dtype=float))
    states = [_go2_state(go2, *STEP_CASES[k]) for k in STEP_CASES]
    f, _ = _step_function(go2, params, states[0], tau0, "smooth", "implicit", num_sweeps=20)
    xs = jnp.stack([jnp.concatenate([jnp.zeros(go2.nv), s.v, tau0]) for s in states])
    q0s = jnp.stack([s.q for s in states])

    def jac_at(q0, x):
        def g(x):
            s = State(dynamics.integrate(go2, q0, x[: go2.nv]), x[go2.nv : 2 * go2.nv])
            nxt, _ = step(go2, params, s, x[2 * go2.nv :], contact="smooth", derivatives="implicit")
            return jnp.concatenate([dynamics.difference(go2, q0, nxt.q), nxt.v])

        return jax.jacfwd(g)(x), jax.jacrev(g)(x)

    fwd_b, rev_b = jit(jax.vmap(jac_at))(q0s, xs)
    single = jit(jac_at)
    for i in range(len(states)):
        fwd, rev = single(q0s[i], xs[i])
        np.testing.assert_allclose(fwd_b[i], fwd, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(rev, fwd, rtol=1e-9, atol=1e-10)


def test_box_on_four_coplanar_corners_singular_system_is_finite_and_exact():
    """A box sliding and spinning on its four bottom corners (hard model): four normal
    constraints on three independent directions (height, roll, pitch), so the normal impulses
    are statically indeterminate and the tangent system is singular. The implicit derivative is
    finite and its velocity Jacobian equals central differences of the converged step."""
    box = free_body.box(mass=1.0, size=(0.2, 0.1, 0.05))
    params = StepParams()
    q = jnp.array([0.0, 0.0, 0.025 - 1e-3, 0.0, 0.0, 0.0, 1.0])
    s0 = State(q, jnp.array([0.5, 0.2, 0.0, 0.0, 0.0, 1.0]))

    def f(x):
        s = State(dynamics.integrate(box, s0.q, x[:6]), x[6:])
        nxt, _ = step(
            box, params, s, jnp.zeros(0), contact="hard", num_sweeps=CONVERGED,
            derivatives="implicit",
        )  # fmt: skip
        return nxt.v

    x0 = jnp.concatenate([jnp.zeros(6), s0.v])
    _, info = step(box, params, s0, jnp.zeros(0), contact="hard", num_sweeps=CONVERGED)
    assert float(info.residual) < 1e-12 and int(jnp.sum(info.impulse[:, 2] > 0)) >= 3
    j = jit(jax.jacfwd(f))(x0)
    assert np.max(np.abs(np.asarray(j))) > 0.1  # sliding friction: the velocities respond
    _close(j, _central_differences(jit(f), x0))


def test_activation_weights_enter_the_implicit_rule(go2):
    """Smooth model, a foot hovering inside the activation zone (0 < w < 1): the derivative with
    respect to the height, which moves `w`, matches central differences (1e-6 relative)."""
    params = StepParams()
    s0 = _go2_state(go2, 2e-3, (0.0, 0.0, -0.1))
    _, info = step(go2, params, s0, jnp.zeros(go2.nu), contact="smooth", num_sweeps=CONVERGED)
    w = np.asarray(activation("smooth", params, info.gap))
    assert np.any((w > 0.01) & (w < 0.99)), w
    f, x0 = _step_function(go2, params, s0, jnp.zeros(go2.nu), "smooth", "implicit")
    j = jit(jax.jacfwd(f))(x0)
    _close(j[:, 2:3], _central_differences(jit(f), x0, h=STEP_FD_STEP, indices=[2]))
