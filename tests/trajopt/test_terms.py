"""A problem's own residual terms (`trajopt.terms`): in the cost as 0.5 w |a(r)|^2, optimised by
FDDP and L-BFGS, a new target without recompiling, clear errors before any solve, and the
backends that cannot run them refusing by name."""

import numpy as np
import pytest

import trajopt
from trajopt.engine import knot_backends
from trajopt.terms import Bounds, Term, WeightedQuadratic

TARGET_Y = 0.03  # [m] a final base y the 0.2 s trot alone does not reach (it ends at y ~ 0)
WEIGHT = 2e4


def base_y(ctx):
    return ctx.q[1:2] - ctx.target


@pytest.fixture(scope="module")
def plain():
    return trajopt.make_problem("go2", "trot", 0.5, duration=0.2, derivatives="implicit")


@pytest.fixture(scope="module")
def traced():
    """A counter of the term function's calls: it runs when JAX traces, not when it runs."""
    return []


@pytest.fixture(scope="module")
def problem(plain, traced):
    def counted(ctx):
        traced.append(1)
        return base_y(ctx)

    term = Term("reach_y", counted, weight=WEIGHT, target=[TARGET_Y], terminal=True)
    return plain.with_terms(term)


def test_the_term_costs_half_its_weight_times_its_residual_squared(plain, problem):
    """`evaluate` of the same trajectory with and without the term: the difference is the
    term's cost, `0.5 w (y_T - y*)^2` computed here from the states."""
    us = np.tile(np.asarray(plain.data.x0.u_prev), (plain.horizon, 1))
    with_term = knot_backends.for_problem(problem).rollout_and_evaluate(problem.data, us)
    without = knot_backends.for_problem(plain).rollout_and_evaluate(plain.data, us)
    xs, cost, terms = with_term[:3]
    expected = 0.5 * WEIGHT * (float(xs.q[-1, 1]) - TARGET_Y) ** 2
    assert float(terms["reach_y"]) == pytest.approx(expected, rel=1e-12)
    assert float(cost) - float(without[1]) == pytest.approx(expected, rel=1e-9)


def test_fddp_optimises_the_term_and_a_new_target_reuses_the_compiled_functions(problem, traced):
    traj = trajopt.solve(problem, max_iterations=15, verbose=False)
    assert abs(traj.q[-1, 1] - TARGET_Y) < 0.3 * TARGET_Y  # the trot alone: |y| < 0.001
    before = len(traced)
    moved = problem.with_target("reach_y", [-TARGET_Y])
    traj = trajopt.solve(moved, max_iterations=15, verbose=False)
    assert abs(traj.q[-1, 1] + TARGET_Y) < 0.3 * TARGET_Y
    assert len(traced) == before  # nothing traced again: the same compiled functions


@pytest.mark.slow  # ~16 s; FDDP's fast test optimises the same term
def test_lbfgs_optimises_the_term(problem):
    start = trajopt.solve(problem, solver="lbfgs", max_iterations=1, verbose=False)
    traj = trajopt.solve(problem, solver="lbfgs", max_iterations=30, verbose=False)
    assert traj.term_costs["reach_y"] < 0.5 * start.term_costs["reach_y"]


def test_activations_in_residual_form():
    import casadi as ca
    import jax.numpy as jnp

    from dynamics.backend import CasadiOps, JaxOps

    for ops, r in ((JaxOps(), jnp.array([-2.0, 0.5, 3.0])), (CasadiOps(), ca.DM([-2.0, 0.5, 3.0]))):
        def value(a):
            return np.asarray(a, dtype=float).reshape(-1)

        np.testing.assert_allclose(value(Bounds(-1.0, 1.0)(ops, r)), [-1.0, 0.0, 2.0])
        np.testing.assert_allclose(value(Bounds(lower=0.0)(ops, r)), [-2.0, 0.0, 0.0])
        np.testing.assert_allclose(value(WeightedQuadratic((4.0, 1.0, 0.0))(ops, r)),
                                   [-4.0, 0.5, 0.0])  # fmt: skip


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "function, error, words",
    [
        (lambda ctx: ctx.q[0:4].reshape(2, 2), ValueError, "vector (m,), got shape (2, 2)"),
        (lambda ctx: ctx.q[0:1] * np.nan, ValueError, "NaN or inf"),
        (lambda ctx: np.array([1, 2]), TypeError, "float array, got int"),
        (lambda ctx: ctx.no_such_field, ValueError, "raised AttributeError"),
    ],
)
def test_a_bad_function_is_refused_before_any_solve_naming_the_term(plain, function, error,
                                                                    words):  # fmt: skip
    with pytest.raises(error, match="term 'bad'") as info:
        plain.with_terms(Term("bad", function))
    assert words in str(info.value)


def test_bad_targets_names_and_settings_are_refused_naming_the_term(plain, problem):
    with pytest.raises(ValueError, match=r"term 'reach_y': target must have shape \(1,\)"):
        problem.with_target("reach_y", [0.1, 0.2])
    with pytest.raises(ValueError, match="term 'reach_y': target contains NaN"):
        problem.with_target("reach_y", [np.nan])
    with pytest.raises(KeyError, match="no term 'reach_z'"):
        problem.with_target("reach_z", [0.1])
    with pytest.raises(ValueError, match="duplicate term name 'reach_y'"):
        problem.with_terms(Term("reach_y", base_y, target=[0.0]))
    with pytest.raises(ValueError, match="term 'torque': the name of a built-in term"):
        plain.with_terms(Term("torque", base_y, target=[0.0]))
    with pytest.raises(ValueError, match="term 'w': weight must be finite"):
        Term("w", base_y, weight=-1.0)
    with pytest.raises(ValueError, match="term 'k': a per-knot target's leading axis"):
        plain.with_terms(Term("k", base_y, target=np.zeros((3, 1)), per_knot=True))
    with pytest.raises(ValueError, match="term 'wq': WeightedQuadratic needs 1 finite"):
        plain.with_terms(Term("wq", base_y, target=[0.0],
                              activation=WeightedQuadratic((1.0, 2.0))))  # fmt: skip


def test_a_per_knot_target_gives_each_knot_its_row(plain):
    """A running term with one target row per knot: knot t reads row t."""
    rows = np.arange(plain.horizon + 1, dtype=float)[:, None]
    seen = plain.with_terms(Term("knot_index", lambda ctx: ctx.target - ctx.t, target=rows,
                                 per_knot=True))  # fmt: skip
    us = np.tile(np.asarray(plain.data.x0.u_prev), (plain.horizon, 1))
    terms = knot_backends.for_problem(seen).rollout_and_evaluate(seen.data, us)[2]
    assert float(terms["knot_index"]) == 0.0  # row t - t at every knot


@pytest.mark.slow
def test_the_batched_solver_takes_the_terms_and_their_targets():
    """Two problems of one structure (the same term) with different targets, batched on one
    device: each solve equals its single FDDP solve (status, iterations, cost). Slow: the
    batched structure compiles for about two minutes."""
    from trajopt import batched
    from trajopt.engine import fddp
    from trajopt.solver import initial_guess

    base = trajopt.make_problem("solo12", "trot", 0.2, duration=0.06, dt=0.02, substeps=2)
    term = Term("reach_y", base_y, weight=1e3, target=[0.01], terminal=True)
    problems = [base.with_terms(term), base.with_terms(term).with_target("reach_y", [-0.01])]
    us0 = np.stack([np.asarray(initial_guess(p)[1]) for p in problems])
    single = [fddp.solve_fddp(p, None, u, max_iterations=6, verbose=False)
              for p, u in zip(problems, us0)]  # fmt: skip
    together = batched.solve_batched(problems, us0, max_iterations=6)
    for a, b in zip(single, together):
        assert (a.status, a.iterations) == (b.status, b.iterations)
        assert a.cost == pytest.approx(b.cost, rel=1e-9)
    assert single[0].term_costs["reach_y"] != single[1].term_costs["reach_y"]
