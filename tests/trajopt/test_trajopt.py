"""Trajectory optimisation: solver derivatives, solver behaviour, persistence and bad inputs.

The end-to-end trot acceptance tests live in `test_trajopt_gaits.py`.
"""

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import contact
from trajopt import problem as P
from trajopt.engine import fddp, knot_backends, riccati, shooting
from trajopt.gaits import make_problem
from trajopt.solver import initial_guess, solve
from trajopt.trajectory import Trajectory


@pytest.fixture(scope="module")
def short_problem():
    """Solo12 trot, 3 knots of 20 ms: small enough to differentiate numerically."""
    return make_problem("solo12", "trot", 0.3, duration=0.06, dt=0.02, substeps=2)


@pytest.fixture(scope="module")
def smooth_short_problem(short_problem):
    """`short_problem` on the paper's fixed 10 sweeps, differentiated through them: a smooth
    step (central differences apply) and a smooth minimum, where FDDP's full-step rule is met
    (solved to the tolerance, exact Coulomb contact's kinks stop it by the no-step clause or
    not at all within 30 iterations)."""
    return short_problem.replace(contact_tolerance=None, num_sweeps=10, derivatives="unrolled")


@pytest.fixture(scope="module")
def short_solution(short_problem):
    return solve(short_problem, max_iterations=3, verbose=False)


def test_linearization_matches_central_differences(smooth_short_problem):
    """A, B and the residual Jacobians used by FDDP against central differences in the tangent
    space (h = 1e-6; error budget h^2 f''' + eps/h, ~1e-6 of the Jacobian's scale)."""
    problem = smooth_short_problem
    fn = knot_backends.for_problem(problem)
    data = problem.data
    xs, us = initial_guess(problem)
    xs, _, _ = fn.rollout(data, us)
    t = 1
    x, u = shooting.index_knots(xs, t), us[t] + 0.05
    A, B, r, Rx, Ru = (np.asarray(a) for a in fn.linearize(data, x, u, t))

    @jax.jit
    def outputs(dx, du):
        nominal, _, _ = P.transition(problem, data, x, u)
        xp = P.retract(problem, x, dx)
        nxt, forces, taus = P.transition(problem, data, xp, u + du)
        res = P.running_residuals(
            problem, data, xp, u + du, forces, taus, P.reference_at(data.reference, t)
        )
        return P.local(problem, nominal, nxt), P.weighted(res, data.weights)

    h = 1e-6
    dx0, du0 = jnp.zeros(problem.nx), jnp.zeros(problem.nu)
    for jac_next, jac_res, n, arg in ((A, Rx, problem.nx, 0), (B, Ru, problem.nu, 1)):
        num_next, num_res = [], []
        for i in range(n):
            e = jnp.zeros(n).at[i].set(h)
            plus = outputs(dx0 + e, du0) if arg == 0 else outputs(dx0, du0 + e)
            minus = outputs(dx0 - e, du0) if arg == 0 else outputs(dx0, du0 - e)
            num_next.append((plus[0] - minus[0]) / (2 * h))
            num_res.append((plus[1] - minus[1]) / (2 * h))
        for ours, num in ((jac_next, np.stack(num_next, 1)), (jac_res, np.stack(num_res, 1))):
            err = np.max(np.abs(ours - num)) / np.max(np.abs(num))
            assert err < 1e-5, f"Jacobian vs central differences: relative error {err:.2e}"
    np.testing.assert_allclose(r, outputs(dx0, du0)[1], atol=1e-12)


def test_solver_decreases_cost_and_reports_terms(short_problem, short_solution):
    traj = short_solution
    assert traj.status in ("converged", "max_iterations")
    costs = [h["cost"] for h in traj.history]
    assert all(b <= a + 1e-12 for a, b in zip(costs, costs[1:]))
    assert set(traj.term_costs) == set(short_problem.data.weights)
    assert np.isclose(sum(traj.term_costs.values()), traj.cost)
    assert np.all(np.isfinite(traj.q)) and np.all(np.isfinite(traj.u))


def test_solution_resimulates_open_loop(short_problem, short_solution):
    """The knot states are what the contact simulator produces from the controls (single
    shooting), re-simulated here with `contact.step` and the same PD, sub-step by sub-step."""
    problem, traj = short_problem, short_solution
    model, data = problem.model, problem.data
    state = dynamics_state(traj.q[0], traj.v[0])
    kp = float(data.gains[0])

    @jax.jit
    def pd_step(state, target):  # one compiled program, not one dispatch per operation
        tau = jnp.clip(kp * (target - state.q[7:]), -model.effort_limit[6:],
                       model.effort_limit[6:])  # fmt: skip
        return contact.step(model, data.params, state, tau, contact=problem.contact,
                            num_sweeps=problem.num_sweeps,
                            tolerance=problem.contact_tolerance)[0]  # fmt: skip

    for t in range(problem.horizon):
        for _ in range(problem.substeps):
            state = pd_step(state, jnp.asarray(traj.u[t]))
        np.testing.assert_allclose(state.q, traj.q[t + 1], atol=1e-9)


def dynamics_state(q, v):
    from dynamics import State

    return State(jnp.asarray(q), jnp.asarray(v))


def test_multiple_shooting_closes_defects(short_problem):
    traj = solve(short_problem, shooting="multiple", max_iterations=6, verbose=False)
    assert traj.meta["defects"] < 1e-6, "a full FDDP step closes the gaps"
    single = solve(short_problem, max_iterations=6, verbose=False)
    assert traj.cost < 1.05 * single.cost + 1e-6


@pytest.mark.slow  # ~80-130 s of compilation (fast suite under 15 min)
def test_lbfgs_reduces_cost(short_problem):
    xs, us = initial_guess(short_problem)
    fn = knot_backends.for_problem(short_problem)
    start = float(fn.evaluate(short_problem.data, fn.rollout(short_problem.data, us)[0], us)[0])
    traj = solve(short_problem, solver="lbfgs", max_iterations=15, verbose=False)
    assert traj.cost < 0.9 * start
    assert traj.status in ("converged", "max_iterations", "line_search_failed")
    # a spent time budget stops at the last accepted iterate, with its status
    timed = solve(short_problem, solver="lbfgs", max_iterations=15, time_budget=0.0, verbose=False)
    assert timed.status == "time_budget" and timed.iterations == 1
    assert timed.cost < start and np.all(np.isfinite(timed.u))


def test_warm_start_and_shift(short_problem, short_solution):
    shifted = short_solution.shifted(1)
    np.testing.assert_allclose(shifted.u[:-1], short_solution.u[1:])
    np.testing.assert_allclose(shifted.u[-1], short_solution.u[-1])
    warm = solve(short_problem, init=short_solution, max_iterations=2, verbose=False)
    assert warm.cost <= short_solution.cost + 1e-9


def test_save_load_roundtrip(tmp_path, short_solution):
    npz, js = short_solution.save(str(tmp_path / "trot"))
    loaded = Trajectory.load(npz)
    np.testing.assert_array_equal(loaded.q, short_solution.q)
    np.testing.assert_array_equal(loaded.u, short_solution.u)
    assert loaded.status == short_solution.status
    assert loaded.meta["robot"] == "solo12" and loaded.meta["solver"] == "fddp-single"
    assert loaded.term_costs.keys() == short_solution.term_costs.keys()
    np.testing.assert_array_equal(loaded.feedback, short_solution.feedback)
    with pytest.raises(FileNotFoundError):
        Trajectory.load(str(tmp_path / "missing"))


def test_feedback_gains_predict_the_re_solved_first_control(smooth_short_problem):
    """`Trajectory.feedback` is the Riccati law around the plan: after a small change of the
    initial state `dx0`, the re-converged plan's first control moves by about `K_0 dx0`
    (first order; the solver is the reference, not the formula). Measured: the law explains
    55 % of the change (|du - K dx0| = 0.45 |du|; the rest is the contact's nonlinearity); a
    wrong gain (transposed, another knot's, of the wrong sign) leaves |du - K dx0| >= |du|."""
    from trajopt.problem import KnotState

    short_problem = smooth_short_problem
    base = solve(short_problem, max_iterations=30, verbose=False)
    K = base.feedback
    assert K.shape == (short_problem.horizon, short_problem.nu, short_problem.nx)
    x0 = short_problem.data.x0
    nv = short_problem.model.nv
    dx0 = np.zeros(short_problem.nx)
    dx0[6:nv] = 2e-3 * np.cos(np.arange(nv - 6))  # joint positions
    dx0[nv + 6 : 2 * nv] = 2e-2 * np.sin(np.arange(nv - 6))  # joint velocities
    moved = KnotState(x0.q.at[7:].add(dx0[6:nv]), x0.v + dx0[nv : 2 * nv], x0.u_prev)
    again = solve(short_problem.replace_data(x0=moved), init=base, max_iterations=30,
                  verbose=False)  # fmt: skip
    du, predicted = again.u[0] - base.u[0], K[0] @ dx0
    assert np.linalg.norm(du) > 1e-4  # the change is visible
    assert np.linalg.norm(du - predicted) < 0.6 * np.linalg.norm(du)


def test_diverging_problem_stops_with_status_and_no_nan(short_problem):
    problem = short_problem  # shares its compiled functions
    # A simulation that produces NaN from the first knot (a NaN PD gain poisons every torque;
    # a NaN in StepParams is rejected when built): the solver stops at once with "diverged"
    # and hands back finite arrays.
    nan_gains = problem.replace_data(gains=jnp.asarray([jnp.nan, 0.0]))
    traj = solve(nan_gains, max_iterations=3, verbose=False)
    assert traj.status == "diverged"
    assert np.all(np.isfinite(traj.q)) and not np.isnan(traj.cost)
    # An absurd time step with huge gains: whatever the solver manages, nothing is NaN.
    params = problem.data.params.replace(dt=5.0, joint_damping=0.0)
    bad = problem.replace_data(params=params, gains=jnp.asarray([1e9, 0.0]))
    traj = solve(bad, max_iterations=3, verbose=False)
    assert traj.status in ("diverged", "line_search_failed", "max_iterations", "converged")
    assert np.all(np.isfinite(traj.q)) and np.all(np.isfinite(traj.u))
    assert not np.isnan(traj.cost)


def test_bad_inputs_give_clear_errors(short_problem):
    with pytest.raises(ValueError, match="unknown gait 'gallop'; available gaits: stand"):
        make_problem("go2", "gallop")
    with pytest.raises(ValueError, match="duration must be positive"):
        make_problem("go2", "trot", duration=-1.0)
    with pytest.raises(ValueError, match="horizon must be a positive number of knots"):
        short_problem.replace(horizon=-3)
    x0 = short_problem.data.x0
    nan_x0 = dataclasses.replace(x0, q=x0.q.at[0].set(jnp.nan))
    with pytest.raises(ValueError, match="initial state q contains NaN"):
        short_problem.replace_data(x0=nan_x0)
    model = short_problem.model
    no_torque = model.replace(effort_limit=np.zeros(model.nv))
    with pytest.raises(ValueError, match="infeasible torque bounds"):
        short_problem.replace(model=no_torque)
    with pytest.raises(ValueError, match="unknown cost terms"):
        short_problem.replace_data(weights={"happiness": 1.0})
    with pytest.raises(ValueError, match="solver must be one of"):
        solve(short_problem, solver="magic")
    with pytest.raises(ValueError, match="linearize_threads must be 1 or 2, got 0"):
        solve(short_problem, linearize_threads=0)
    with pytest.raises(ValueError, match="linearize_threads=2 is FDDP's; solver 'lbfgs'"):
        solve(short_problem, solver="lbfgs", linearize_threads=2)


def test_progress_callback_and_timestamps(short_problem):
    records = []
    traj = solve(short_problem, max_iterations=2, verbose=False, callback=records.append)
    assert len(records) == traj.iterations == len(traj.history)
    times = [r["time"] for r in records]
    assert all(b >= a for a, b in zip(times, times[1:]))
    assert {"iteration", "cost", "step", "defects", "mu", "terms"} <= set(records[0])


def test_solver_reports_unconverged_contact_solves_at_its_linearisation_points(
    short_problem, capsys
):
    """Bad input: with the paper's fixed sweeps a linearisation point whose impulse solves have
    not converged still gives finite derivatives, and the solver reports the residual. The
    first iteration's report is the largest residual of the knots' solves at the start (every
    knot linearised in one call). At 10 sweeps the trot's later iterates are such points."""
    problem = short_problem.replace(contact_tolerance=None, num_sweeps=10)
    fn = knot_backends.for_problem(problem)
    fixed_solution = solve(problem, max_iterations=3, verbose=True)
    assert "had not converged in 10 sweeps" in capsys.readouterr().out
    _, us = initial_guess(problem)
    xs, _, _ = fn.rollout(problem.data, us)
    lin = jax.device_get(fn.linearize_all(problem.data, xs, us))
    assert lin.contact_residual.shape == (problem.horizon,)
    first = fixed_solution.history[0]["contact_residual"]
    assert first == pytest.approx(float(np.max(lin.contact_residual)), rel=1e-12)
    recorded = [h["contact_residual"] for h in fixed_solution.history]
    unconverged = sum(r > fddp.CONTACT_RESIDUAL_TOLERANCE for r in recorded)
    assert fixed_solution.meta["contact_residual"] >= max(recorded)
    assert fixed_solution.meta["unconverged_linearizations"] >= unconverged >= 1
    named = fixed_solution.meta["unconverged_knots"]
    per_knot = np.asarray(fixed_solution.meta["knot_contact_residuals"])
    assert per_knot.shape == (problem.horizon,)
    assert named == [t for t in range(problem.horizon)
                     if per_knot[t] > fddp.CONTACT_RESIDUAL_TOLERANCE]  # fmt: skip

    # the solution itself is such a point: its derivatives are finite
    xs, us = initial_guess(problem, fixed_solution)
    at_solution = jax.device_get(fn.linearize_all(problem.data, xs, us))
    assert float(np.max(at_solution.contact_residual)) > fddp.CONTACT_RESIDUAL_TOLERANCE


def test_a_converged_contact_solve_reports_every_knot_below_its_tolerance(short_solution):
    """The default problem solves its contacts to `contact_tolerance`: every linearisation
    point and every knot of the last one is below it, and nothing is named. Capped at too few
    sweeps, the same solve names the knots that did not reach it."""
    meta = short_solution.meta
    tolerance = meta["contact_tolerance"]
    assert tolerance == P.CONTACT_TOLERANCE
    assert meta["unconverged_linearizations"] == 0 and meta["unconverged_knots"] == []
    assert max(meta["knot_contact_residuals"]) <= tolerance
    assert all(h["contact_residual"] <= tolerance for h in short_solution.history)
    problem = make_problem("solo12", "trot", 0.3, duration=0.06, dt=0.02, substeps=2,
                           num_sweeps=2)  # fmt: skip
    capped = solve(problem, max_iterations=1, verbose=False)
    residuals = capped.meta["knot_contact_residuals"]
    assert capped.meta["unconverged_knots"] == [t for t, r in enumerate(residuals)
                                                if r > tolerance]  # fmt: skip
    assert capped.meta["unconverged_knots"], "2 sweeps reach the tolerance at no knot of a trot"


def test_a_bad_contact_tolerance_or_sweep_count_is_refused_by_name(short_problem):
    for bad in (0.0, -1e-6, float("nan"), 2.0, "1e-6"):
        with pytest.raises(ValueError, match="contact_tolerance"):
            short_problem.replace(contact_tolerance=bad)
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match="num_sweeps"):
            short_problem.replace(num_sweeps=bad)


@pytest.mark.slow  # ~27 s: 100 unrolled sweeps compile
def test_implicit_derivatives_in_the_solvers_equal_unrolled_at_a_converged_solve():
    """`Problem(derivatives="implicit")`: the knot linearisation FDDP uses (A, B, residual
    Jacobians) equals the unrolled one where the impulse solve has converged (1e-6 relative,
    the issue's bar); the dynamics are the same, the structure (compiled functions) is not."""
    base = make_problem("solo12", "trot", 0.3, duration=0.04, dt=0.02, substeps=1,
                        num_sweeps=100, contact_tolerance=None,
                        derivatives="unrolled")  # fmt: skip
    implicit = base.replace(derivatives="implicit")
    assert shooting.structure_key(base) != shooting.structure_key(implicit)
    xs, us = initial_guess(base)
    xs, _, _ = knot_backends.for_problem(base).rollout(base.data, us)
    t = 1
    x, u = shooting.index_knots(xs, t), us[t] + 0.05
    _, _, _, residual = P.transition_with_residual(base, base.data, x, u)
    assert float(residual) < 1e-9  # converged: the two derivatives must agree
    ours = knot_backends.for_problem(implicit).linearize(implicit.data, x, u, t)
    ref = knot_backends.for_problem(base).linearize(base.data, x, u, t)
    for a, b, name in zip(ours, ref, ("A", "B", "r", "R_x", "R_u")):
        a, b = np.asarray(a), np.asarray(b)
        assert np.max(np.abs(a - b)) <= 1e-6 * np.max(np.abs(b)), name


def test_an_unknown_derivative_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="derivatives must be one of"):
        make_problem("solo12", "trot", 0.3, duration=0.04, derivatives="exact")


def test_a_solve_says_why_it_stopped_and_where_its_time_went(smooth_short_problem):
    """Converged: the reason states the rule's numbers; the timing parts (linearisation,
    Riccati passes, line searches, the rest) sum to the solve's wall time. Out of iterations:
    the reason gives the budget and the last prediction against the tolerance."""
    short_problem = smooth_short_problem
    traj = solve(short_problem, max_iterations=30, verbose=False)
    assert traj.status == "converged", traj.meta["reason"]
    assert "the model's expected decrease |dV1| = " in traj.meta["reason"]
    timing = traj.meta["timing"]
    assert tuple(timing) == fddp.TIMING_PARTS
    assert all(timing[k] > 0.0 for k in ("linearize", "backward", "line_search"))
    assert timing["other"] >= 0.0
    assert abs(sum(timing.values()) - traj.meta["wall_time_s"]) < 1e-6
    short = solve(short_problem, max_iterations=2, verbose=False)
    assert short.status == "max_iterations"
    assert short.meta["reason"].startswith("the budget of 2 iterations ran out after 2 iterations")
    assert "predicted a decrease |dV1| = " in short.meta["reason"]


def test_fddp_stops_at_the_first_iteration_that_meets_its_rule_and_not_before(
    smooth_short_problem,
):
    """The rule of `trajopt.engine.fddp` (a full step at mu <= 1e-4 on a feasible trajectory whose
    predicted decrease |dV1| is below tolerance (1 + |cost|)), checked on each iteration's
    record: the solve stops "converged" at the first iteration that meets it. With a looser
    tolerance, picked between two iterations' predictions, the same iterates stop exactly at
    the first iteration that meets the looser rule."""
    short_problem = smooth_short_problem

    def least_tolerance(record):  # the smallest tolerance at which `record` meets the rule
        if record["step"] == 1.0 and record["mu"] <= 1e-4 and record["defects"] < 1e-6:
            return abs(record["expected"]) / (1.0 + abs(record["cost"]))
        return float("inf")

    strict = solve(short_problem, max_iterations=30, tolerance=1e-4, verbose=False)
    assert strict.status == "converged", strict.meta["reason"]
    needed = [least_tolerance(r) for r in strict.history]
    assert needed[-1] < 1e-4 and all(n >= 1e-4 for n in needed[:-1])
    finite = sorted({n for n in needed[:-1] if np.isfinite(n)})
    assert finite, "no earlier iteration took a full step at mu <= 1e-4"
    loose = finite[0] * 1.01  # met first where the prediction is finite[0]
    stop = next(i for i, n in enumerate(needed) if n < loose)
    early = solve(short_problem, max_iterations=30, tolerance=loose, verbose=False)
    assert early.status == "converged" and early.iterations == stop + 1
    assert [r["cost"] for r in early.history] == [r["cost"] for r in strict.history[: stop + 1]]


def test_a_failed_line_search_reports_the_prediction_the_trials_and_mu(smooth_short_problem,
                                                                       monkeypatch):  # fmt: skip
    """Residual Jacobians of the wrong sign (derivatives that are not the computed step's): the
    model predicts a decrease along an ascent direction, no step length lowers the merit at any
    `mu` up to `MU_MAX`, and the solve stops at its start with the reason in numbers: the
    predicted decrease (the first pass's, computed here again), the smallest step's change
    (positive) and the `mu` range. (Unrolled derivatives of fixed sweeps: nothing to retry
    with.)"""
    short_problem = smooth_short_problem
    fn = knot_backends.for_problem(short_problem)
    true_linearize = fn.linearize_all

    def wrong_sign(data, xs, us):
        lin = true_linearize(data, xs, us)
        return lin._replace(R_x=-lin.R_x, R_u=-lin.R_u, R_T=-lin.R_T)

    monkeypatch.setattr(fn, "linearize_all", wrong_sign)
    _, us = initial_guess(short_problem)
    xs, cost, *_ = fn.rollout_and_evaluate(short_problem.data, us)
    info = fddp.solve_fddp(short_problem, None, us, max_iterations=5, verbose=False)
    xs, us = info.xs, info.us
    assert info.status == "line_search_failed" and info.iterations == 1
    assert not info.history and info.cost == float(cost)
    lin = wrong_sign(short_problem.data, xs, us)
    _, _, dV1, _, _ = riccati.RICCATI(lin, np.zeros((short_problem.horizon + 1, short_problem.nx)),
                                   1e-6)  # fmt: skip
    reason = info.reason
    assert f"predicted a decrease of {abs(float(dV1)):.3g} for the full step" in reason
    assert "for mu from 1e-06 to 1e+10" in reason
    change = float(reason.split("changed it by ")[1].split(";")[0])
    assert change > 0.0
    assert "the cost no longer decreases where the model says it should" in reason


class WrongSignDerivatives:
    """A knot backend whose residual Jacobians have the wrong sign: derivatives that are not
    the computed step's (every other call is the wrapped backend's)."""

    def __init__(self, backend):
        self.backend = backend

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def linearize_all(self, data, xs, us):
        lin = self.backend.linearize_all(data, xs, us)
        return lin._replace(R_x=-lin.R_x, R_u=-lin.R_u, R_T=-lin.R_T)

    def linearizer(self, threads):
        return self.linearize_all


def test_a_failed_line_search_retries_with_the_computed_steps_derivatives(short_problem,
                                                                          monkeypatch):  # fmt: skip
    """An "implicit" problem whose derivatives are not the computed step's (the wrong sign, as
    above): its first iteration's line search fails at every mu, the solve retries that
    iteration from the same point with the unrolled derivatives and keeps them, so its iterates
    are exactly the unrolled solve's, and `exact_derivatives_from` and the reason say from
    which iteration. Under a time budget (a real-time cycle) it keeps its derivatives and stops
    line_search_failed; an unrolled problem has nothing to fall back to."""
    # a contact solve converged to a tolerance retries 100 times tighter, down to 1e-10 m/s
    converged = short_problem.replace(derivatives="implicit")
    tighter = fddp.exact_derivatives(converged)
    assert tighter.contact_tolerance == pytest.approx(1e-2 * converged.contact_tolerance)
    assert (tighter.derivatives, tighter.num_sweeps) == ("implicit", converged.num_sweeps)
    assert fddp.exact_derivatives(converged.replace(contact_tolerance=5e-11)) is None
    unrolled = short_problem.replace(contact_tolerance=None, num_sweeps=10, derivatives="unrolled")
    implicit = unrolled.replace(derivatives="implicit")
    assert fddp.exact_derivatives(unrolled) is None
    assert shooting.structure_key(fddp.exact_derivatives(implicit)) == shooting.structure_key(
        unrolled
    )
    fn = knot_backends.for_problem(unrolled)
    monkeypatch.setitem(knot_backends.CACHED, shooting.structure_key(implicit),
                        WrongSignDerivatives(fn))  # fmt: skip
    _, us0 = initial_guess(unrolled)
    info = fddp.solve_fddp(implicit, None, us0, max_iterations=3, verbose=False)
    info_u = fddp.solve_fddp(unrolled, None, us0, max_iterations=3, verbose=False)
    (xs, us), (xs_u, us_u) = (info.xs, info.us), (info_u.xs, info_u.us)
    assert info.exact_derivatives_from == 1 and info_u.exact_derivatives_from is None
    assert info.iterations == info_u.iterations == 3 and info.status == info_u.status
    np.testing.assert_array_equal(us, us_u)
    np.testing.assert_array_equal(xs.q, xs_u.q)
    assert [h["cost"] for h in info.history] == [h["cost"] for h in info_u.history]
    assert info.reason.endswith(
        "with the derivatives of the computed step (unrolled) from iteration 1, where the "
        "implicit ones predicted a decrease no step gave"
    )
    budgeted = fddp.solve_fddp(implicit, None, us0, max_iterations=3, time_budget=60.0,
                                     verbose=False)  # fmt: skip
    assert budgeted.status == "line_search_failed" and budgeted.iterations == 1
    assert budgeted.exact_derivatives_from is None and not budgeted.history


def test_a_time_budget_does_not_begin_an_iteration_it_cannot_finish(short_problem, monkeypatch):
    """With each linearisation made 0.5 s long, a 0.75 s budget runs one iteration and stops
    ("time_budget") instead of starting a second that would end past it; a 1.4 s budget runs
    two (the margins hold for up to 0.2 s of real work per iteration, a slow, loaded host).
    The rule itself: another iteration as long as the last must end within the budget."""
    assert fddp.next_iteration_overruns(0.25, 0.1, 0.3)
    assert not fddp.next_iteration_overruns(0.15, 0.1, 0.3)
    fn = knot_backends.for_problem(short_problem)
    _, us = initial_guess(short_problem)
    fddp.solve_fddp(short_problem, None, us, max_iterations=1, verbose=False)  # compiled
    true_linearize = fn.linearize_all

    def slow(*args):
        time.sleep(0.5)
        return true_linearize(*args)

    monkeypatch.setattr(fn, "linearize_all", slow)
    one = fddp.solve_fddp(short_problem, None, us, max_iterations=5, time_budget=0.75,
                              verbose=False)  # fmt: skip
    two = fddp.solve_fddp(short_problem, None, us, max_iterations=5, time_budget=1.4,
                              verbose=False)  # fmt: skip
    assert one.status == "time_budget" and one.iterations == 1 and one.wall_time < 0.75
    assert two.status == "time_budget" and two.iterations == 2


def test_the_next_iteration_starts_from_crocoddyls_regularisation_schedule():
    """`mu / 10` after a step of at least 0.5, `10 mu` after one of at most 0.01, else `mu`,
    within `[1e-9, 1e9]`; elementwise the same in NumPy and JAX (the batched solver's)."""
    from trajopt.engine.fddp_step import next_mu

    assert next_mu(1e-6, 1.0) == pytest.approx(1e-7)
    assert next_mu(1e-6, 0.5) == pytest.approx(1e-7)
    assert next_mu(1e-6, 0.25) == 1e-6 and next_mu(1e-6, 0.03125) == 1e-6
    assert next_mu(1e-6, 0.01) == pytest.approx(1e-5)
    assert next_mu(1e-9, 1.0) == 1e-9 and next_mu(1e9, 0.01) == 1e9
    mus, alphas = np.array([1e-3, 1e-3, 1e-3, 1e-9]), np.array([1.0, 0.125, 0.01, 0.5])
    np.testing.assert_allclose(np.asarray(next_mu(jnp.asarray(mus), jnp.asarray(alphas), jnp)),
                               next_mu(mus, alphas), rtol=1e-15)  # fmt: skip
