"""Own terms with `derivatives="compiled"` and IPOPT: those written with `ctx.ops`
(`dynamics.backend`) are generated into the C library, any other runs in JAX beside it, and
both give the linearisation of the JAX path; IPOPT takes the first kind and refuses the other
by name."""

import jax.numpy as jnp
import numpy as np
import pytest

import trajopt
from trajopt import residual_library
from trajopt.engine import casadi_model, knot_backends, shooting
from trajopt.terms import Bounds, Term


def squared_hips(ctx):  # jnp on the state: JAX only
    return jnp.atleast_1d(jnp.sum(ctx.q[7:10] ** 2))


def terms(model):
    return (
        residual_library.com_position(model, [0.05, 0.01, 0.3], weight=30.0),
        residual_library.base_pose(model, [0.1, 0.02, 0.3], weight=50.0, terminal=True),
        residual_library.friction_cone_margin(model, "FL_foot", 0.5, weight=1e-3),
        Term("swing_gap", lambda ctx: ctx.foot_gaps(), weight=5.0, activation=Bounds(upper=0.05)),
        Term("hips", squared_hips, weight=2.0),
    )


@pytest.fixture(scope="module")
def pair():
    """The same problem with compiled and with implicit derivatives, and a trajectory."""
    implicit = trajopt.make_problem("go2", "trot", 0.5, duration=0.1, derivatives="implicit")
    implicit = implicit.with_terms(*terms(implicit.model))
    compiled = implicit.replace(derivatives="compiled")
    rng = np.random.default_rng(3)
    us = np.tile(np.asarray(implicit.data.x0.u_prev), (implicit.horizon, 1))
    us = us + 0.05 * rng.standard_normal(us.shape)
    xs, _, _ = knot_backends.for_problem(implicit).rollout(implicit.data, us)
    return implicit, compiled, xs, us


def test_terms_written_with_ops_are_generated_and_the_others_run_in_jax(pair):
    _, compiled, _, _ = pair
    generated, in_jax = casadi_model.term_split(compiled)
    assert [t.name for t in generated] == ["com_position", "base_pose", "FL_foot_friction_cone",
                                           "swing_gap"]  # fmt: skip
    assert list(in_jax) == ["hips"]
    assert "raised" in in_jax["hips"]


def test_the_compiled_linearisation_with_own_terms_equals_the_jax_one(pair):
    """`R^T r` and `R^T R` (what the backward pass reads; the rows' order may differ) of every
    knot and of the terminal knot, generated C plus JAX rows against the JAX path, to 1e-10."""
    implicit, compiled, xs, us = pair
    c = knot_backends.for_problem(compiled).linearize_all(compiled.data, xs, us)
    j = shooting.linearize_horizon(implicit, implicit.data, xs, jnp.asarray(us))
    for R_c, R_j in ((c.R_x, j.R_x), (c.R_u, j.R_u)):
        for t in range(implicit.horizon):
            a = np.asarray(R_c[t]).T @ np.asarray(c.r[t])
            b = np.asarray(R_j[t]).T @ np.asarray(j.r[t])
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * np.abs(b).max())
            a = np.asarray(R_c[t]).T @ np.asarray(R_c[t])
            b = np.asarray(R_j[t]).T @ np.asarray(R_j[t])
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * np.abs(b).max())
    np.testing.assert_allclose(np.asarray(c.R_T).T @ np.asarray(c.r_T),
                               np.asarray(j.R_T).T @ np.asarray(j.r_T), rtol=1e-10, atol=1e-12)


@pytest.mark.slow  # two FDDP compilations, ~25 s
def test_fddp_with_compiled_derivatives_takes_the_jax_paths_steps(pair):
    """The same derivatives in C and in JAX: three FDDP iterations reach the same costs."""
    implicit, compiled, _, _ = pair
    c = trajopt.solve(compiled, max_iterations=3, verbose=False)
    j = trajopt.solve(implicit, max_iterations=3, verbose=False)
    assert c.cost == pytest.approx(j.cost, rel=1e-6)
    assert list(c.meta["terms_in_jax"]) == ["hips"] and c.meta["terms_in_jax_seconds"] > 0
    assert "terms_in_jax" not in j.meta
    for name in ("com_position", "base_pose", "swing_gap", "hips"):
        assert c.term_costs[name] == pytest.approx(j.term_costs[name], rel=1e-6, abs=1e-9)


def test_ipopt_takes_the_generated_terms_and_refuses_the_others_by_name(pair):
    implicit, _, xs, us = pair
    with pytest.raises(NotImplementedError, match=r"own terms 'hips' \(its function raised"):
        trajopt.solve(implicit, solver="ipopt", max_iterations=1, verbose=False)
    # the CasADi knots differentiate the paper's fixed sweeps
    plain = trajopt.make_problem("go2", "trot", 0.5, duration=0.1, derivatives="implicit",
                                 contact_tolerance=None, num_sweeps=10)  # fmt: skip
    generated = plain.with_terms(*terms(plain.model)[:-1])
    expected = knot_backends.for_problem(generated).evaluate(generated.data, xs, us)[0]
    assert casadi_model.total_cost(generated, xs, us) == pytest.approx(float(expected), rel=1e-10)


LIBRARY = (
    lambda m: residual_library.frame_translation(m, "FL_foot", [0.2, 0.1, 0.0]),
    lambda m: residual_library.frame_placement(m, "RR_calf", [0.2, 0.1, 0.0],
                                               np.diag([1.0, -1.0, -1.0])),
    lambda m: residual_library.frame_velocity(m, "FR_foot", part="both", reference="local"),
    lambda m: residual_library.frame_velocity(m, "FR_foot", reference="world", terminal=True,
                                              name="FR_foot_world_velocity"),
    lambda m: residual_library.com_velocity(m, [0.3, 0.0, 0.0]),
    lambda m: residual_library.centroidal_momentum(m, terminal=True),
    lambda m: residual_library.joint_state(m, np.zeros(12)),
    lambda m: residual_library.control(m, np.ones(12)),
    lambda m: residual_library.contact_force(m, 1, [1.0, 2.0, 30.0]),
    lambda m: residual_library.footholds(m, np.ones((6, 4, 3))),
)  # fmt: skip


def test_the_library_runs_in_casadi_as_in_jax(pair):
    """Each library residual is generated: CasADi evaluates it to its JAX value at the
    problem's initial state (`term_split`'s check, 1e-9)."""
    plain = trajopt.make_problem("go2", "trot", 0.5, duration=0.1, derivatives="implicit")
    problem = plain.with_terms(*(make(plain.model) for make in LIBRARY))
    generated, in_jax = casadi_model.term_split(problem)
    assert not in_jax and len(generated) == len(LIBRARY)
