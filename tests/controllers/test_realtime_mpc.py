"""Real-time MPC (`controllers.realtime_mpc.RealTimeMPC`) with a scripted solver (no compilation):
the solver thread solves from the newest measurement, the plan's time origin is that
measurement's time (a late plan is used from the knot that contains the current time), the
Riccati feedback equals `K_k (x (-) x_k)` computed here by hand, a solver bug stops the thread
and makes calls raise, `close` stops it. The end-to-end run over UDP against MuJoCo is the slow
test in tests/controllers/test_mpc.py."""

import threading
import time

import numpy as np
import pytest

import controllers.mpc as mpc_module
from controllers.mpc import MPC
from controllers.realtime_mpc import RealTimeMPC
from hardware.interface import JointMap, VelocityCommand, measurement_from_state
from trajopt.trajectory import Trajectory

ROBOT = "solo12"


class SlowScriptedSolver:
    """Stands in for `trajopt.solver.solve`: takes `delay` seconds, records the problems, and
    returns a plan whose knot k has the controls `x0.u_prev + 0.01 (k + 1)` (distinct per
    knot, so the knot in use is visible), knot states equal to `x0`, and `feedback` gains."""

    def __init__(self, delay=0.0, feedback=None):
        self.delay, self.feedback = delay, feedback
        self.calls = []
        self.options = []
        self.raise_error = None
        self.started = threading.Event()

    def __call__(self, problem, init=None, *, max_iterations, time_budget=None, verbose=True,
                 guess=None, linearize_threads=1):  # fmt: skip
        self.started.set()
        if self.raise_error is not None:
            raise self.raise_error
        time.sleep(self.delay)
        self.calls.append(problem)
        self.options.append({"init": init, "max_iterations": max_iterations})
        T, nu = problem.horizon, problem.nu
        x0 = problem.data.x0
        u = np.asarray(x0.u_prev)[None] + 0.01 * (np.arange(T)[:, None] + 1.0) * np.ones((1, nu))
        q = np.tile(np.asarray(x0.q), (T + 1, 1))
        v = np.tile(np.asarray(x0.v), (T + 1, 1))
        return Trajectory(q=q, v=v, u=u, dt=problem.dt_knot, cost=1.0, status="max_iterations",
                          u_prev0=np.asarray(x0.u_prev), feedback=self.feedback)  # fmt: skip


@pytest.fixture
def setup(monkeypatch):
    def make(delay=0.0, feedback=None, **kwargs):
        solver = SlowScriptedSolver(delay, feedback)
        monkeypatch.setattr(mpc_module, "solve", solver)
        mpc = MPC(ROBOT, "trot", (0.0, 0.0, 0.0), horizon=0.2, dt=0.02, substeps=1)
        joint_map = JointMap.from_model(mpc.model)
        kwargs.setdefault("lookahead", 0.0)  # the latency compensation has its own tests
        return solver, mpc, RealTimeMPC(mpc, joint_map, **kwargs), joint_map

    return make


def measurement(mpc, t, dq_joints=0.0, x=0.0):
    q = np.asarray(mpc.model.q_standing, dtype=float).copy()
    q[0] += x
    q[7:] += dq_joints
    return measurement_from_state(q, np.zeros(mpc.model.nv), timestamp=t, sequence=int(1e3 * t))


def wait_for(predicate, timeout=5.0):
    deadline = time.perf_counter() + timeout
    while not predicate():
        assert time.perf_counter() < deadline, "timed out"
        time.sleep(0.002)


def test_the_solver_thread_solves_from_the_newest_measurement(setup):
    solver, mpc, ctrl, _ = setup(feedback=None, min_period=0.0)
    ctrl.reset(measurement(mpc, 0.0))
    try:
        ctrl(measurement(mpc, 0.02, x=0.5), 0.02, VelocityCommand(0.3, 0.0, 0.1))
        wait_for(lambda: mpc.plan_time == pytest.approx(0.02))
        problem = solver.calls[-1]
        assert float(problem.data.x0.q[0]) == pytest.approx(0.5)  # the measured base position
        np.testing.assert_allclose(np.asarray(problem.data.reference.base_velocity)[0],
                                   [0.3, 0.0, 0.1])  # fmt: skip
        calls = len(solver.calls)
        time.sleep(0.05)
        assert len(solver.calls) == calls  # nothing newer: no new solve
    finally:
        ctrl.close()
    assert ctrl._thread is None


def test_a_late_plan_is_used_from_the_knot_that_contains_the_current_time(setup):
    solver, mpc, ctrl, _ = setup(delay=0.1, feedback=None, min_period=0.0)
    ctrl.reset(measurement(mpc, 0.0))
    try:
        u_prev = mpc.last_targets.copy()
        ctrl(measurement(mpc, 0.10), 0.10, VelocityCommand())
        wait_for(lambda: mpc.plan_time == pytest.approx(0.10), timeout=10.0)
        plan = mpc.plan
        # 0.07 s after the plan's measurement: knot 3 (0.06-0.08 s)
        cmd = ctrl(measurement(mpc, 0.17), 0.17, VelocityCommand())
        np.testing.assert_allclose(cmd.q_target, plan.u[3])
        assert not np.allclose(plan.u[3], plan.u[0])
        assert np.all(np.isfinite(u_prev))
        summary = ctrl.summary()
        assert summary["cycles"] >= 1 and summary["overruns"] >= 1  # 0.1 s > one 20 ms knot
        assert summary["plan_age_median_s"] >= 0.1 and summary["error"] is None
    finally:
        ctrl.close()


def test_the_feedback_is_K_times_the_state_error(setup):
    """Joint-position errors only: `x (-) x_k` is then `[0 (6), dq (nu), 0 (nv), du_prev]` in
    the model's tangent order, built here without `trajopt.problem.local`."""
    probe = MPC(ROBOT, horizon=0.2, dt=0.02, substeps=1)
    nv, nu = probe.model.nv, probe.model.nu
    nx = 2 * nv + nu
    rng = np.random.default_rng(0)
    K = 0.5 * rng.standard_normal((10, nu, nx))
    solver, mpc, ctrl, _ = setup(feedback=K, min_period=100.0)  # the thread stays idle
    ctrl.feedback = True
    ctrl.reset(measurement(mpc, 0.0))
    try:
        plan = mpc.plan
        u_prev_applied = mpc.last_targets.copy()
        dq = 0.01 * rng.standard_normal(nu)
        q = np.asarray(mpc.model.q_standing, dtype=float).copy()
        q[7:] += dq
        m = measurement_from_state(q, np.zeros(nv), timestamp=0.045, sequence=45)
        cmd = ctrl(m, 0.045, VelocityCommand())
        k = 2
        dx = np.zeros(nx)
        dx[6:nv] = dq
        dx[2 * nv :] = u_prev_applied - plan.u[k - 1]
        expected = plan.u[k] + np.clip(K[k] @ dx, -mpc.feedback_limit, mpc.feedback_limit)
        np.testing.assert_allclose(cmd.q_target, expected, atol=1e-9)
    finally:
        ctrl.close()


def test_without_feedback_the_plan_is_applied_open_loop(setup):
    probe = MPC(ROBOT, horizon=0.2, dt=0.02, substeps=1)
    K = np.ones((10, probe.model.nu, 2 * probe.model.nv + probe.model.nu))
    solver, mpc, ctrl, _ = setup(feedback=K, min_period=100.0)
    ctrl.feedback = False
    ctrl.reset(measurement(mpc, 0.0))
    try:
        cmd = ctrl(measurement(mpc, 0.045, dq_joints=0.05), 0.045, VelocityCommand())
        np.testing.assert_allclose(cmd.q_target, mpc.plan.u[2])
    finally:
        ctrl.close()


def test_a_stalled_solver_degrades_to_the_stand_past_the_plans_horizon(setup):
    """A solve slower than the whole 0.2 s horizon: calls inside the plan serve its knots and
    report their age; a call past its end gets the standing targets (four feet down, not the
    last knot's swing pose) and is counted."""
    solver, mpc, ctrl, _ = setup(delay=0.0, feedback=None, min_period=0.0)
    ctrl.reset(measurement(mpc, 0.0))
    try:
        ctrl(measurement(mpc, 0.02), 0.02, VelocityCommand())
        wait_for(lambda: len(ctrl.plan_ages) == 1)  # a plan starting at 0.02 s
        plan = mpc.plan
        solver.delay = 1.0  # the next solve stalls
        inside = ctrl(measurement(mpc, 0.17), 0.17, VelocityCommand())  # knot 7 of 10
        np.testing.assert_allclose(inside.q_target, plan.u[7])
        past = ctrl(measurement(mpc, 0.25), 0.25, VelocityCommand())  # past 0.22 s
        assert mpc.plan is plan  # still solving
        np.testing.assert_allclose(past.q_target, mpc.stand_targets)
        assert not np.allclose(plan.u[-1], mpc.stand_targets)
        summary = ctrl.summary()
        assert summary["expired_calls"] == 1 and summary["calls"] == 3
        assert summary["call_plan_age_max_s"] == pytest.approx(0.23)
        assert summary["call_plan_age_median_s"] == pytest.approx(0.19)
    finally:
        ctrl.close()


def test_a_solver_bug_stops_the_thread_and_later_calls_raise(setup):
    solver, mpc, ctrl, _ = setup(min_period=0.0)
    ctrl.reset(measurement(mpc, 0.0))
    solver.raise_error = KeyError("boom")
    ctrl(measurement(mpc, 0.02), 0.02, VelocityCommand())
    wait_for(lambda: ctrl.error is not None)
    with pytest.raises(RuntimeError, match="solver thread stopped: KeyError"):
        ctrl(measurement(mpc, 0.04), 0.04, VelocityCommand())
    ctrl.close()


def test_calls_before_reset_and_bad_arguments_are_named(setup):
    _, mpc, ctrl, joint_map = setup()
    with pytest.raises(RuntimeError, match="reset"):
        ctrl(measurement(mpc, 0.0), 0.0, VelocityCommand())
    with pytest.raises(ValueError, match="min_period"):
        RealTimeMPC(mpc, joint_map, min_period=-1.0)
    for bad in (-0.02, "fast"):
        with pytest.raises(ValueError, match="lookahead must be 'auto' or a time >= 0"):
            RealTimeMPC(mpc, joint_map, lookahead=bad)
    with pytest.raises(ValueError, match="feedback_limit"):
        MPC(ROBOT, horizon=0.1, feedback_limit=-0.1)


def test_prepare_solves_the_first_plan_before_the_robot_and_reset_takes_one_cycle(setup):
    """After `prepare` (the full first solve, from the standing pose, before any robot), the
    reset solves from the measurement with the prepared plan as its start and the per-cycle
    iterations: a real robot is not left passive during a long first solve."""
    solver, mpc, ctrl, _ = setup(min_period=100.0)
    ctrl.prepare()
    prepared = mpc.plan
    assert solver.options[0]["max_iterations"] == mpc.warmup_iterations
    np.testing.assert_allclose(np.asarray(solver.calls[0].data.x0.q), mpc.model.q_standing)
    first = len(solver.calls)
    ctrl.reset(measurement(mpc, 0.0, x=0.3))
    try:
        assert solver.options[first]["init"] is prepared
        assert solver.options[first]["max_iterations"] == mpc.iterations
        assert float(solver.calls[first].data.x0.q[0]) == pytest.approx(0.3)
    finally:
        ctrl.close()


def test_the_auto_lookahead_covers_the_solve_time_in_whole_knots(setup):
    """A solver that takes 50 ms: the "auto" lookahead is at least 3 knots of 20 ms, a whole
    number of knots, and the committed plan starts that long after its measurement."""
    solver, mpc, ctrl, _ = setup(delay=0.05, lookahead="auto", min_period=0.0)
    ctrl.reset(measurement(mpc, 0.0))
    try:
        ctrl(measurement(mpc, 0.10), 0.10, VelocityCommand())
        wait_for(lambda: len(ctrl.lookaheads) >= 1, timeout=10.0)
        with ctrl.lock:
            lookahead, origin = ctrl.lookaheads[0], mpc.plan_time
        assert lookahead >= 0.06 - 1e-9
        assert lookahead / mpc.dt == pytest.approx(round(lookahead / mpc.dt))
        assert origin == pytest.approx(0.10 + lookahead)
        assert ctrl.summary()["lookahead_median_s"] >= 0.06 - 1e-9
    finally:
        ctrl.close()


def test_the_real_time_planner_weighs_the_control_rate_over_the_gaits_weights():
    """`realtime_mpc_controller` plans with `REAL_TIME_WEIGHTS` over the gait's weights (the
    control rate 100x: one iteration per cycle chattered without it) and a caller's weights
    over both; `MPC` alone does the same with one iteration per cycle
    (`ONE_ITERATION_WEIGHTS`) and keeps the gait's with more."""
    from controllers.realtime_mpc import REAL_TIME_WEIGHTS, realtime_mpc_controller
    from trajopt.gaits import gait_weights

    joint_map = JointMap.from_model(MPC(ROBOT, horizon=0.1).model)
    weights = realtime_mpc_controller(ROBOT, joint_map, horizon=0.1).mpc.problem.data.weights
    library = gait_weights(ROBOT, "trot")
    assert float(weights["control_rate"]) == REAL_TIME_WEIGHTS["control_rate"]
    assert REAL_TIME_WEIGHTS["control_rate"] == 100 * library["control_rate"]
    assert float(weights["torque"]) == library["torque"]
    own = realtime_mpc_controller(
        ROBOT, joint_map, horizon=0.1, weights={"control_rate": 2e-5, "torque": 0.1}
    ).mpc.problem.data.weights
    assert float(own["control_rate"]) == 2e-5 and float(own["torque"]) == 0.1
    alone = MPC(ROBOT, horizon=0.1).problem.data.weights
    assert float(alone["control_rate"]) == REAL_TIME_WEIGHTS["control_rate"]
    two = MPC(ROBOT, horizon=0.1, iterations=2).problem.data.weights
    assert float(two["control_rate"]) == library["control_rate"]
