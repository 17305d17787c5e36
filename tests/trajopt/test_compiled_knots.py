"""The knots' Jacobians in generated C (`derivatives="compiled"`, `trajopt.engine.compiled_knots`)
against JAX's `jacfwd` with the implicit rule (`shooting.knot_dynamics`, derivatives="implicit"),
which `tests/contact/test_implicit_derivatives.py` checks against central differences.

The states cover every contact mode of the implicit rule: sticking, sliding (on the cone's rim),
separated (zero impulse) and pressed in (touchdown), under the smooth model (the MPC's) and the
hard one.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import monitoring

from native import c_library
from trajopt import problem as P
from trajopt.engine import (
    compiled_iteration,
    compiled_knots,
    fddp,
    fddp_step,
    generated_code,
    knot_backends,
    shooting,
)
from trajopt.gaits import make_problem
from trajopt.solver import initial_guess, solve

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.skipif(
        not c_library.compiler_available(),
        reason=f"no C compiler ({c_library.compiler()!r}) for the generated code",
    ),
]


def _problem(contact="smooth", substeps=2, derivatives="compiled", horizon=0.2):
    return make_problem(
        "go2", "trot", 0.5, duration=horizon, dt=0.02, substeps=substeps, contact=contact,
        derivatives=derivatives,
    )  # fmt: skip


def _states(problem):
    """The trot guess's rollout, and the same states sliding sideways at 1 m/s, pressed 1 cm
    into the ground moving down at 0.5 m/s, and lifting off at 0.5 m/s:
    `(q (N, nq), v (N, nv), u (N, nu))`."""
    fn = knot_backends.for_problem(problem.replace(derivatives="implicit"))
    _, us = initial_guess(problem)
    xs = fn.rollout(problem.data, us)
    xs = xs[0] if isinstance(xs, tuple) else xs
    T = problem.horizon
    q, v, u = np.asarray(xs.q[:T]), np.asarray(xs.v[:T]), np.array(us)
    # 0.1 um lower: the standing pose touches the ground exactly (gap 0 to rounding), the kink
    # of the hard model's opening max(gap, 0), where each implementation's rounding of the gap
    # picks the side
    q = q.copy()
    q[:, 2] -= 1e-7
    sliding_v = v.copy()
    sliding_v[:, 1] += 1.0
    pressed_q, pressed_v = q.copy(), v.copy()
    pressed_q[:, 2] -= 0.01
    pressed_v[:, 2] -= 0.5
    lifting_v = v.copy()
    lifting_v[:, 2] += 0.5
    return (
        np.concatenate(a)
        for a in ((q, q, pressed_q, q), (v, sliding_v, pressed_v, lifting_v), (u, u, u, u))
    )


def _modes(problem, q, v, u):
    """Counts of the contact modes at the states' first substep: sticking, sliding, separated."""
    functions = generated_code.substep_functions(problem)
    forward, _ = functions.mapped(q.shape[0])
    p = forward(q, v, u)["p"][..., 0].reshape(-1, 3)
    mu = functions.plane["friction"]
    loaded = p[:, 2] > 1e-9
    rim = loaded & (np.linalg.norm(p[:, :2], axis=1) > (1 - 1e-9) * mu * p[:, 2])
    return {"sticking": int(np.sum(loaded & ~rim)), "sliding": int(np.sum(rim)),
            "separated": int(np.sum(~loaded))}  # fmt: skip


def _random_step(seed):
    """The smooth problem, its backend, the trot guess and random gains `k`, `K` and defects
    around it: `(problem, fn, xs, us, k, K, defects)`."""
    problem = _problem()
    fn = knot_backends.for_problem(problem)
    xs, us = initial_guess(problem)
    T, nu, nx = problem.horizon, problem.nu, problem.nx
    rng = np.random.default_rng(seed)
    k = 0.05 * rng.normal(size=(T, nu))
    K = 0.05 * rng.normal(size=(T, nu, nx))
    return problem, fn, xs, us, k, K, 1e-3 * rng.normal(size=(T + 1, nx))


def test_the_tangent_solve_is_the_pseudo_inverse_of_regular_near_and_exactly_singular_maps():
    """`tangent_solve` equals `pinv(a, rcond=TANGENT_RCOND) @ b` (what the JAX implicit branch
    applies) for a regular map (taken by the inverse), maps whose smallest singular value is just
    above and just below the cutoff, one numerically singular and one exactly singular (a zero
    column: `np.linalg.inv` raises for the batch)."""
    from contact.coulomb import TANGENT_RCOND

    rng = np.random.default_rng(3)
    m, n = 12, 5

    def with_singular_values(values):
        u, _ = np.linalg.qr(rng.normal(size=(m, m)))
        v, _ = np.linalg.qr(rng.normal(size=(m, m)))
        return u @ np.diag(values) @ v.T

    regular = np.linspace(1.0, 0.3, m)
    a = np.stack(
        [with_singular_values(regular)]
        + [with_singular_values(np.r_[regular[:-1], s]) for s in (1e-3, 5e-5, 0.0)]
    )
    b = rng.normal(size=(len(a), m, n))
    expected = np.linalg.pinv(a, rcond=TANGENT_RCOND) @ b
    np.testing.assert_allclose(compiled_knots.tangent_solve(a, b), expected, atol=1e-9)
    # below the cutoff the inverse is another answer: the bound must send that one to the SVD
    assert not np.allclose(np.linalg.inv(a[2]) @ b[2], expected[2], atol=1e-3)
    zero_column = a[0].copy()
    zero_column[:, 4] = 0.0
    a_exact = np.concatenate([a, zero_column[None]])
    b_exact = np.concatenate([b, b[:1]])
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.inv(a_exact)
    np.testing.assert_allclose(
        compiled_knots.tangent_solve(a_exact, b_exact),
        np.linalg.pinv(a_exact, rcond=TANGENT_RCOND) @ b_exact,
        atol=1e-9,
    )


@pytest.mark.parametrize(
    "contact, substeps", [("smooth", 2), pytest.param("hard", 1, marks=pytest.mark.slow)]
)
def test_compiled_knot_jacobians_equal_the_implicit_jacfwd(contact, substeps):
    problem = _problem(contact, substeps)
    q, v, u = _states(problem)
    modes = _modes(problem, q, v, u)
    assert min(modes.values()) > 0, modes  # every mode is exercised
    out = compiled_knots.knot_dynamics(problem, generated_code.substep_functions(problem), q, v, u)
    implicit = problem.replace(derivatives="implicit")
    reference = jax.jit(lambda x, uu: shooting.knot_dynamics(implicit, implicit.data, x, uu))
    nv = problem.model.nv
    worst = {}
    for i in range(q.shape[0]):
        d = reference(P.KnotState(q[i], v[i], u[i]), u[i])
        # the torque is the per-joint peak over the substeps: where a joint's torque is zero in
        # both (the standing state at rest), rounding picks the substep, so its row is compared
        # only where the torque is not zero
        peak = np.abs(np.asarray(d.taus)) > 1e-6
        pairs = {
            "A": (d.A[: 2 * nv, : 2 * nv], out["state"][i][:, : 2 * nv]),
            "B": (d.B[: 2 * nv], out["state"][i][:, 2 * nv :]),
            "forces": (d.forces, out["forces"][i]),
            "forces_x": (d.forces_x, out["forces_jac"][i][:, : 2 * nv]),
            "forces_u": (d.forces_u, out["forces_jac"][i][:, 2 * nv :]),
            "taus": (d.taus, out["taus"][i]),
            "taus_x": (d.taus_x[peak], out["taus_jac"][i][peak, : 2 * nv]),
            "taus_u": (d.taus_u[peak], out["taus_jac"][i][peak, 2 * nv :]),
        }
        for name, (a, b) in pairs.items():
            a = np.asarray(a)
            error = np.max(np.abs(a - b), initial=0.0) / max(np.max(np.abs(a), initial=0.0), 1.0)
            worst[name] = max(worst.get(name, 0.0), error)
        np.testing.assert_allclose(out["residual"][i], d.contact_residual, rtol=1e-6, atol=1e-12)
    assert max(worst.values()) < 1e-8, worst


def _anymal_trot(derivatives="compiled", contact="smooth"):
    """`benchmarks/bench_trajopt.py`'s ANYmal C trot: Crocoddyl's example, 56 knots of 10 ms,
    one trot period, 0.2 m/s."""
    return make_problem(
        "anymal_c", "trot", 0.5 * (0.5 * 0.15 + 0.15) / 0.56, duration=0.56, dt=0.01,
        substeps=1, period=0.56, lead_in=0.0, derivatives=derivatives, contact=contact,
    )  # fmt: skip


def _relative(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1.0))


@pytest.mark.slow  # 5-8 min: both backends of four structures compile
@pytest.mark.parametrize(
    "robot, contact",
    [("go2", "smooth"), ("go2", "hard"), ("anymal_c", "smooth"), ("anymal_c", "hard")],
)
def test_every_compiled_iteration_equals_the_implicit_one(robot, contact):
    """From each iterate of a compiled solve (the MPC's Go2 problem, 25 knots, and the ANYmal
    trot), one compiled FDDP iteration and one JAX implicit iteration at the same `mu` give the
    same cost, controls and feedback gains to 1e-10 (relative to their size). Iteration by
    iteration, not over a whole solve: at mu = 1e-9 the Riccati pass amplifies rounding-level
    differences of the Jacobians (1e-13) by Q_uu's condition number, so two whole solves drift
    apart (to 1e-9 in cost after ten iterations) while every step is the same function."""
    compiled = _problem(contact, horizon=0.5) if robot == "go2" else _anymal_trot(contact=contact)
    # 0.1 um lower (as `_states`): the standing start touches the ground exactly, the kink of
    # the hard model's opening, where each implementation's rounding of the gap picks the side
    x0 = compiled.data.x0
    compiled = compiled.replace_data(x0=P.KnotState(x0.q.at[2].add(-1e-7), x0.v, x0.u_prev))
    implicit = compiled.replace(derivatives="implicit")
    xs, (_, us) = None, initial_guess(compiled)
    mu = 1e-6
    for _ in range(6):
        a = fddp.solve_fddp(compiled, xs, us, max_iterations=1, mu0=mu, verbose=False)
        b = fddp.solve_fddp(implicit, xs, us, max_iterations=1, mu0=mu, verbose=False)
        assert a.status == b.status
        if not a.history:
            break
        assert a.history[0]["step"] == b.history[0]["step"]
        assert _relative(a.cost, b.cost) < 1e-10
        assert _relative(a.us, b.us) < 1e-10
        assert _relative(a.feedback, b.feedback) < 1e-10
        xs, us, mu = a.xs, a.us, a.history[0]["mu"]


@pytest.mark.slow  # about 40 s: the ANYmal trot compiles in C and in JAX
def test_the_anymal_trot_converges_on_the_compiled_derivatives_alone():
    """The ANYmal trot, whose paper-style fixed sweeps cycle at a foot near touchdown, solves
    its contacts to the tolerance at every linearisation point: the compiled solve ends
    `converged` by the stated rule without the computed step's unrolled derivatives, and the
    JAX implicit solve takes the same iterates (the same status, iterations and cost)."""
    a = solve(_anymal_trot(), max_iterations=40, verbose=False)
    assert a.status == "converged", a.meta["reason"]
    assert a.meta["exact_derivatives_from"] is None
    assert a.meta["unconverged_linearizations"] == 0 and a.meta["unconverged_knots"] == []
    assert all(set(b) == {"library", "seconds", "cached", "units"} for b in a.meta["builds"])
    b = solve(_anymal_trot("implicit"), max_iterations=40, verbose=False)
    assert (b.status, b.iterations) == (a.status, a.iterations)
    assert _relative(b.cost, a.cost) < 1e-10


def test_the_compiled_derivatives_refuse_what_they_do_not_cover():
    with pytest.raises(ValueError, match="hard and smooth"):
        _problem(contact="penalty")
    from contact.terrain import steps

    problem = _problem()
    rough = problem.data.params.replace(terrain=steps(0.05, 0.3, 0.5))
    with pytest.raises(ValueError, match="plane terrains"):
        problem.replace_data(params=rough)
    with pytest.raises(ValueError, match="linearize_threads=2"):
        fddp.solve_fddp(problem, us=np.zeros((problem.horizon, problem.nu)),
                        linearize_threads=2, verbose=False)  # fmt: skip
    from controllers.mpc import MPC

    with pytest.raises(ValueError, match="linearize_threads=2"):
        MPC("go2", derivatives="compiled", linearize_threads=2)


def test_the_compiled_forward_pass_equals_the_jax_one():
    """FDDP's forward pass (feedback, step length, defects) in C against
    `shooting.forward_with_transitions`, at random gains and defects around the trot guess."""
    problem, fn, xs, us, k, K, defects = _random_step(seed=0)
    for alpha in (1.0, 0.25):
        ours = fn.forward_with_transitions(problem.data, xs, us, k, K, defects, alpha)
        theirs = jax.jit(shooting.forward_with_transitions, static_argnums=0)(
            problem, problem.data, xs, us, k, K, defects, alpha
        )
        for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
            np.testing.assert_allclose(a, np.asarray(b), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("contact", ["smooth", pytest.param("hard", marks=pytest.mark.slow)])
def test_the_substep_elimination_in_c_equals_numpys(contact):
    """`substep_jacobians_in_c` against `substep_jacobians` (NumPy) on the generated parts of
    the sticking, sliding, separated and pressed-in states: the next state's, the forces' and
    the torques' Jacobians to 1e-12 of their size; with `rcond = 1` no knot passes the C
    code's regularity bound and every knot takes the NumPy pseudo-inverse path."""
    problem = _problem(contact, substeps=1 if contact == "hard" else 2)
    q, v, u = _states(problem)
    functions = generated_code.substep_functions(problem)
    forward, derivative = functions.mapped(q.shape[0])
    fwd = {name: value[..., 0] for name, value in forward(q, v, u).items()}
    fwd["frame"] = functions.plane["frame"]
    parts = derivative(q, v, u, fwd["v_next"], fwd["p"], fwd["s"], fwd["steps"], fwd["q_next"])
    parts["w"] = parts["w"][..., 0]
    args = (parts, fwd, problem.model.nv, problem.nu, functions.numbers["dt"],
            functions.numbers["joint_damping"])  # fmt: skip
    reference = compiled_knots.substep_jacobians(*args)
    for rcond in (compiled_knots.TANGENT_RCOND, 1.0):
        ours = compiled_knots.substep_jacobians_in_c(*args, rcond=rcond)
        for name, a, b in zip(("state", "forces", "total"), ours, reference):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * max(np.abs(b).max(), 1.0),
                                       err_msg=name)  # fmt: skip
    assert all(count > 0 for count in _modes(problem, q, v, u).values())


def test_a_trials_costs_in_c_equal_the_jax_evaluation():
    """A forward pass's trial evaluated in C (`evaluate_forward`: the term costs by the
    generated code, the defects `(1 - alpha) f`) against `shooting.evaluate_transitions`
    (JAX, the defects by `local` of the trial's states): every term's cost to 1e-12, the
    defects to 1e-9 of their size, at a full and a partial step from random gains and defects;
    and the line search takes that evaluation."""
    problem, fn, xs, us, k, K, defects = _random_step(seed=1)
    assert not fn.terms_in_jax
    for alpha in (1.0, 0.25):
        xs_t, us_t, reached, forces, taus = fn.forward_with_transitions(
            problem.data, xs, us, k, K, defects, alpha
        )
        cost, terms, d, *_ = jax.device_get(
            fn.evaluate_transitions(problem.data, xs_t, us_t, reached, forces, taus)
        )
        trial_defects = (1.0 - alpha) * defects
        trial_defects[0] = 0.0
        cost_c, terms_c, d_c, *_ = fn.evaluate_forward(problem.data, xs_t, us_t, forces, taus,
                                                       trial_defects)  # fmt: skip
        assert set(terms_c) == set(terms) and len(terms) > 10
        for name in terms:
            assert terms_c[name] == pytest.approx(float(terms[name]), rel=1e-12, abs=1e-12), name
        assert cost_c == pytest.approx(float(cost), rel=1e-12)
        np.testing.assert_allclose(d_c, d, rtol=0, atol=1e-9 * np.abs(defects).max())
    merit_old = shooting.merit(cost, d) + 1.0
    index, _, trial = fn.line_search(problem.data, xs, us, k, K, defects, merit_old)
    assert int(index) >= 0 and trial[2] < merit_old


def test_the_compiled_costs_give_the_jax_costs_quadratic_model():
    """The knots' weighted residuals and their Jacobians in C (`CompiledKnots.knot_costs`)
    against `shooting.knot_costs` (and `_linearize_terminal`) with the same dynamics: the cost
    `r^T r` and the backward pass's products `R^T r`, `R^T R`, which do not depend on the
    residuals' order within a term."""
    problem = _problem()
    fn = knot_backends.for_problem(problem)
    data = problem.data
    xs, us = initial_guess(problem)
    dyn = fn.knot_dynamics(data, xs, us)
    r, R_x, R_u, r_T, R_T = fn.knot_costs(data, xs, us, dyn)
    knot_costs = jax.jit(shooting.knot_costs, static_argnums=0)
    for t in range(problem.horizon):
        d = shooting.index_knots(dyn, t)
        x = shooting.index_knots(xs, t)
        r_j, Rx_j, Ru_j = (np.asarray(a) for a in knot_costs(problem, data, x, us[t], t, d))
        R_j, R_c = np.concatenate([Rx_j, Ru_j], axis=1), np.concatenate([R_x[t], R_u[t]], axis=1)
        np.testing.assert_allclose(r[t] @ r[t], r_j @ r_j, rtol=1e-10)
        np.testing.assert_allclose(R_c.T @ r[t], R_j.T @ r_j, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(R_c.T @ R_c, R_j.T @ R_j, rtol=1e-8, atol=1e-8)
    x_T = shooting.index_knots(xs, problem.horizon)
    rT_j, RT_j = jax.jit(shooting.linearize_terminal, static_argnums=0)(problem, data, x_T)
    np.testing.assert_allclose(r_T @ r_T, np.sum(np.asarray(rT_j) ** 2), rtol=1e-10)
    np.testing.assert_allclose(R_T.T @ R_T, np.asarray(RT_j).T @ np.asarray(RT_j), atol=1e-8)


def _solve_both_ways(problem, monkeypatch, iterations=5):
    """A compiled solve of `iterations` iterations with the iteration in one C call, and the same
    solve with the Python iteration over the backend's compiled calls (`one_call` off); the
    number of C calls that returned an iteration."""
    fn = knot_backends.for_problem(problem)
    _, us = initial_guess(problem)
    calls = []
    one_call = compiled_iteration.iterate

    def counted(*args, **kwargs):
        step = one_call(*args, **kwargs)
        calls.append(step is not None)
        return step

    monkeypatch.setattr(compiled_iteration, "iterate", counted)
    a = fddp.solve_fddp(problem, None, us, max_iterations=iterations, verbose=False)
    monkeypatch.setattr(fn, "one_call", False)
    b = fddp.solve_fddp(problem, None, us, max_iterations=iterations, verbose=False)
    return a, b, sum(calls)


def test_the_one_call_iteration_equals_the_python_iteration_over_the_compiled_calls(monkeypatch):
    """FDDP's iteration in one C call (`compiled_iteration`) against the Python iteration over
    the compiled backend's calls (`fddp_step.iterate`: the knots' dynamics, costs, Riccati pass
    and line search, each its own call): five iterations from the trot guess take the same
    steps and mu, and give the same controls, gains and costs to 1e-12 of their size; every
    iteration ran in one C call, and its timing has the three parts, the linearisation's split
    into its generated code and elimination."""
    a, b, in_c = _solve_both_ways(_problem(), monkeypatch)
    assert in_c == 5 and a.iterations == 5
    for ra, rb in zip(a.history, b.history, strict=True):
        assert (ra["step"], ra["mu"]) == (rb["step"], rb["mu"])
        assert ra["expected"] == pytest.approx(rb["expected"], rel=1e-12)
        assert ra["contact_residual"] == pytest.approx(rb["contact_residual"], rel=1e-12)
    assert _relative(a.us, b.us) < 1e-12
    assert _relative(a.feedback, b.feedback) < 1e-12
    assert _relative(a.cost, b.cost) < 1e-12
    assert a.term_costs == pytest.approx(b.term_costs, rel=1e-12, abs=1e-14)
    assert all(a.timing[part] > 0 for part in fddp_step.ITERATION_PARTS)
    inside = a.linearize_parts  # the generated code's and the elimination's seconds
    assert set(inside) == set(fddp_step.LINEARIZE_PARTS) and min(inside.values()) > 0
    assert sum(inside.values()) < a.timing["linearize"]
    assert b.linearize_parts == {}  # the Python iteration does not split it


def test_the_one_call_iteration_leaves_irregular_knots_to_the_python_iteration(monkeypatch):
    """With a regularity bound no contact map meets (`rcond = 1`), the C call returns None at
    the first knot and the solve runs the Python iteration instead: the same iterates as
    `one_call` off, bitwise."""
    strict = functools.partial(compiled_iteration.iterate, rcond=1.0)
    monkeypatch.setattr(compiled_iteration, "iterate", strict)
    a, b, in_c = _solve_both_ways(_problem(), monkeypatch, iterations=2)
    assert in_c == 0 and a.iterations == 2
    np.testing.assert_array_equal(a.us, b.us)
    assert a.cost == b.cost


def test_the_one_call_iteration_reports_no_step_and_a_passed_deadline_as_python_does():
    """Where no step can lower the merit (an iterate's cost given as -1e6), the C call and
    `fddp_step.iterate` both raise mu to `MU_MAX` and report the same first prediction and the
    same rejected searches (mu, merit change of the smallest step); with a deadline already
    past, both stop before the first Riccati pass."""
    problem = _problem()
    fn = knot_backends.for_problem(problem)
    xs, us = initial_guess(problem)
    xs = jax.tree_util.tree_map(np.asarray, xs)
    _, _, defects, *_ = jax.device_get(fn.evaluate(problem.data, xs, us))
    args = (problem.data, xs, np.asarray(us), -1e6, np.asarray(defects), 1e-6)
    ours = compiled_iteration.iterate(fn, *args)
    theirs = fddp_step.iterate(fn, fn.linearize_all, *args)
    assert ours.status == theirs.status == "no_step"
    assert ours.mu == theirs.mu >= fddp_step.MU_MAX
    assert ours.first == pytest.approx(theirs.first, rel=1e-10)
    assert len(ours.trials) == len(theirs.trials) > 10
    for (mu_a, change_a), (mu_b, change_b) in zip(ours.trials, theirs.trials, strict=True):
        assert mu_a == mu_b and change_a == pytest.approx(change_b, rel=1e-10)
    assert ours.rollouts == theirs.rollouts == len(ours.trials) * len(shooting.ALPHAS)
    late = compiled_iteration.iterate(fn, *args, deadline=0.0)
    python_late = fddp_step.iterate(fn, fn.linearize_all, *args, 0.0)
    assert late.status == python_late.status == "out_of_time"
    assert late.passes == 0 and late.trial is None


def test_a_compiled_solve_traces_and_compiles_no_jax_program():
    """derivatives="compiled" runs the initial guess in NumPy and Pinocchio, the library's
    lookup on the host, and the rollout, evaluations, line search and iterations in C: with the
    loaded libraries, the knot backends and JAX's in-memory caches dropped (so any JAX
    operation would trace and compile again), solves from the kinematic and the standing guess
    record no JAX tracing or compilation event. The same counter sees the one eager JAX
    operation run after them."""
    import trajopt

    problem = _problem()
    solve(problem, max_iterations=1, verbose=False)  # the library built
    # what a new process holds: no backend, no loaded library, no JAX executable
    generated_code.unload_all()
    trajopt.clear_compiled(jax_caches=True)
    events = []

    def count(name, seconds, **kwargs):
        if name.startswith("/jax/core/compile"):
            events.append(name)

    monitoring.register_event_duration_secs_listener(count)
    try:
        for guess in ("kinematic", "standing"):
            traj = solve(problem, max_iterations=3, guess=guess, verbose=False)
            assert traj.iterations == 3 and traj.meta["unconverged_knots"] == []
        assert events == []
        jnp.sin(jnp.arange(3.0)).block_until_ready()
        assert events  # the counter counts
    finally:
        monitoring.unregister_event_duration_listener(count)


def test_both_knot_backends_implement_the_knot_model_contract():
    """The JAX and the C backend are `KnotModel`s (every call of the contract, no optional
    ones): the solver calls the same methods on both, and a model without a one-call
    iteration says so by returning None. `FDDP` returns a typed `SolveResult`."""
    from trajopt.engine.knot_model import KnotModel
    from trajopt.engine.solve_result import ContactReport, SolveResult

    compiled = _problem()
    backends = [knot_backends.for_problem(p)
                for p in (compiled, compiled.replace(derivatives="implicit"))]  # fmt: skip
    assert [type(b).__name__ for b in backends] == ["CompiledKnots", "JaxKnots"]
    assert all(isinstance(b, KnotModel) for b in backends)
    assert not isinstance(object(), KnotModel)
    fn = backends[1]
    _, us = initial_guess(compiled)
    xs = fn.rollout(compiled.data, us)[0]
    assert fn.iterate_in_one_call(compiled.data, xs, us, 0.0, None, 1e-6) is None
    assert fn.linearizer(1) == fn.linearize_all and fn.linearizer(2) == fn.linearize_in_two_threads
    with pytest.raises(ValueError, match="1 thread"):
        backends[0].linearizer(2)
    result = fddp.solve_fddp(compiled, None, us, max_iterations=2, verbose=False)
    assert isinstance(result, SolveResult) and isinstance(result.contact, ContactReport)
    assert result.iterations == 2 and len(result.history) == 2
    assert len(result.contact.knot_residuals) == compiled.horizon
    assert result.us.shape == (compiled.horizon, compiled.nu)


def test_a_built_library_is_found_again_by_its_recipe_without_its_graph(monkeypatch, tmp_path):
    """Once built, a problem's knot library is found by the index of its `recipe_key`: looked
    up again after an unload, no CasADi graph is built (`knot_functions` is not called) and the
    same library is loaded. Different PD gains are a different recipe; an index that names a
    library no longer there is no hit; a problem with its own terms has no recipe."""
    problem = _problem()
    first = generated_code.substep_functions(problem)
    generated_code.unload_all()

    def no_graph(problem):
        raise AssertionError("the symbolic graph was built")

    monkeypatch.setattr(generated_code, "knot_functions", no_graph)
    again = generated_code.substep_functions(problem)
    assert again.library == first.library and c_library.builds()[-1].units == 0
    stiffer = problem.replace_data(gains=np.asarray(problem.data.gains) * 2.0)
    assert generated_code.recipe_key(stiffer) != generated_code.recipe_key(problem)
    monkeypatch.setattr(generated_code, "library_dir", lambda: tmp_path)
    (tmp_path / "index-gone.json").write_text('{"library": "knots-gone.so", "functions": []}')
    assert generated_code.load_indexed("gone") is None
    from trajopt.terms import Term

    own = problem.with_terms(Term("lift", lambda ctx: ctx.q[2:3], weight=1.0))
    assert generated_code.recipe_key(own) is None
