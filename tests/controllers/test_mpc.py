"""MPC: the receding-horizon logic (with a scripted solver, no compilation) and, marked slow,
the closed loop with the real FDDP in this project's simulator and on MuJoCo.

Logic: each cycle's problem starts at the measured state with `u_prev` = the last targets, its
references carry the current command and the gait phase at the cycle's time, the warm start is
the previous plan shifted by the elapsed knots; a failed cycle keeps the shifted plan, three in
a row switch to the safe stand; command and gait changes never change the problem structure
(nothing recompiles).
"""

import dataclasses
import functools

import jax.numpy as jnp
import numpy as np
import pytest

import controllers.mpc as mpc_module
from controllers.mpc import MPC
from dynamics.configuration import State
from trajopt.engine import shooting
from trajopt.gaits import gait_reference, gait_weights
from trajopt.trajectory import Trajectory

ROBOT = "solo12"


class ScriptedSolver:
    """Stands in for `trajopt.solver.solve`: records its inputs and returns a plan whose
    controls are `init.u + 0.01` (or the standing targets), or a diverged one on request."""

    def __init__(self):
        self.calls = []
        self.fail = False

    def __call__(
        self, problem, init=None, *, max_iterations, time_budget=None, verbose=True, guess=None,
        linearize_threads=1,
    ):  # fmt: skip
        self.calls.append({"problem": problem, "init": init, "max_iterations": max_iterations,
                           "linearize_threads": linearize_threads})  # fmt: skip
        T, nu = problem.horizon, problem.nu
        if init is None:
            u = np.tile(np.asarray(problem.data.x0.u_prev), (T, 1))
        else:
            u = np.asarray(init.u) + 0.01
        q = np.tile(np.asarray(problem.data.x0.q), (T + 1, 1))
        v = np.zeros((T + 1, problem.model.nv))
        status, cost = ("diverged", float("inf")) if self.fail else ("max_iterations", 1.0)
        # distinct controls per knot, so a shift is visible
        u = u + 1e-3 * np.arange(T)[:, None] * np.ones((1, nu)) if init is None else u
        return Trajectory(q=q, v=v, u=u, dt=problem.dt_knot, cost=cost, status=status)


@pytest.fixture
def scripted(monkeypatch):
    solver = ScriptedSolver()
    monkeypatch.setattr(mpc_module, "solve", solver)
    return solver


@pytest.fixture
def standing():
    mpc = MPC(ROBOT, "trot", (0.3, 0.0, 0.0), horizon=0.2, dt=0.02, substeps=1)
    m = mpc.model
    return mpc, State(jnp.asarray(m.q_standing), jnp.zeros(m.nv))


def test_first_cycle_solves_from_the_measured_state(scripted, standing):
    mpc, state = standing
    q = np.asarray(state.q).copy()
    q[0] += 0.7
    targets = mpc.reset(State(jnp.asarray(q), state.v), t=0.0)
    call = scripted.calls[-1]
    assert call["init"] is None and call["max_iterations"] == mpc.warmup_iterations
    np.testing.assert_array_equal(np.asarray(call["problem"].data.x0.q), q)
    np.testing.assert_array_equal(np.asarray(call["problem"].data.x0.u_prev), mpc.stand_targets)
    np.testing.assert_array_equal(targets, mpc.plan.u[0])


def test_warm_start_is_the_previous_plan_shifted_by_the_elapsed_knots(scripted, standing):
    mpc, state = standing
    mpc.reset(state, t=0.0)
    previous = mpc.plan
    first_targets = mpc.last_targets.copy()
    targets = mpc.update(state, t=0.04)  # two knots later
    init = scripted.calls[-1]["init"]
    np.testing.assert_array_equal(init.u, previous.shifted(2).u)
    assert mpc.stats.cycles[-1].shift == 2
    problem = scripted.calls[-1]["problem"]
    np.testing.assert_array_equal(np.asarray(problem.data.x0.u_prev), first_targets)
    np.testing.assert_allclose(targets, previous.shifted(2).u[0] + 0.01)


def test_the_cycles_solve_with_the_mpcs_linearisation_threads(scripted, standing):
    mpc, state = standing
    mpc.reset(state, t=0.0)
    mpc.update(state, t=0.02)
    assert scripted.calls[-1]["linearize_threads"] == 1  # the default
    mpc.linearize_threads = 2
    mpc.update(state, t=0.04)
    assert scripted.calls[-1]["linearize_threads"] == 2


def test_references_follow_the_command_and_the_gait_phase(scripted, standing):
    mpc, state = standing
    mpc.reset(state, t=0.0)
    mpc.set_command(0.2, -0.1, 0.4)
    mpc.update(state, t=0.06)
    ref = scripted.calls[-1]["problem"].data.reference
    np.testing.assert_array_equal(np.asarray(ref.base_velocity)[0], [0.2, -0.1, 0.4])
    expected = gait_reference(mpc.model, "trot", 0.0, mpc.problem.horizon, 0.02, start_time=0.06)
    np.testing.assert_array_equal(np.asarray(ref.stance), np.asarray(expected.stance))
    mpc.set_gait("pace")
    mpc.update(state, t=0.08)
    ref = scripted.calls[-1]["problem"].data.reference
    pace = gait_reference(mpc.model, "pace", 0.0, mpc.problem.horizon, 0.02, start_time=0.08)
    np.testing.assert_array_equal(np.asarray(ref.stance), np.asarray(pace.stance))
    # and the pace's own weights (trajopt.gaits.GAITS: load sharing), the trot's before
    weights = [float(c["problem"].data.weights["contact_force"]) for c in scripted.calls]
    assert weights[-2:] == [gait_weights(ROBOT, "trot")["contact_force"], 1.0]
    # the structure (what the compiled functions are keyed on) never changed
    keys = {shooting.structure_key(c["problem"]) for c in scripted.calls}
    assert keys == {shooting.structure_key(mpc.problem)}


def test_failed_cycles_keep_the_shifted_plan_then_stand(scripted, standing):
    mpc, state = standing
    mpc.reset(state, t=0.0)
    plan = mpc.plan
    scripted.fail = True
    targets = mpc.update(state, t=0.02)
    assert mpc.mode == "fallback"
    np.testing.assert_array_equal(targets, plan.shifted(1).u[0])
    mpc.update(state, t=0.04)
    assert mpc.mode == "fallback"
    targets = mpc.update(state, t=0.06)
    assert mpc.mode == "stand"
    np.testing.assert_array_equal(targets, mpc.stand_targets)
    calls = len(scripted.calls)
    np.testing.assert_array_equal(mpc.update(state, t=0.08), mpc.stand_targets)
    assert len(scripted.calls) == calls  # standing: no more solves until reset
    scripted.fail = False
    mpc.reset(state, t=0.1)
    assert mpc.mode == "mpc"
    modes = [c.mode for c in mpc.stats.cycles]
    assert modes == ["mpc"]  # reset starts new statistics


def test_a_success_after_a_failure_resets_the_count(scripted, standing):
    mpc, state = standing
    mpc.reset(state)
    scripted.fail = True
    mpc.update(state, 0.02)
    mpc.update(state, 0.04)
    scripted.fail = False
    mpc.update(state, 0.06)
    assert mpc.mode == "mpc" and mpc.failures == 0
    scripted.fail = True
    mpc.update(state, 0.08)
    assert mpc.mode == "fallback"


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="unknown gait 'gallop'"):
        MPC(ROBOT, "gallop")
    with pytest.raises(ValueError, match="shorter than one knot"):
        MPC(ROBOT, horizon=0.01, dt=0.02)
    with pytest.raises(ValueError, match="linearize_threads must be 1 or 2, got 4"):
        MPC(ROBOT, horizon=0.1, linearize_threads=4)
    mpc = MPC(ROBOT, horizon=0.1)
    with pytest.raises(ValueError, match="3 finite numbers"):
        mpc.set_command(float("nan"))
    with pytest.raises(ValueError, match="unknown gait"):
        mpc.set_gait("gallop")


def test_an_mpc_plans_a_problem_it_is_given(scripted):
    """`MPC(problem)` plans with that problem's structure: a gait-library problem keeps the
    gait's moving references and the command; a problem of one's own keeps its references."""
    from trajopt.gaits import make_problem

    problem = make_problem(ROBOT, "walk", 0.2, duration=0.12, dt=0.03, substeps=1)
    mpc = MPC(problem)
    assert mpc.problem is problem and mpc.gait == "walk" and mpc.dt == pytest.approx(0.03)
    state = State(jnp.asarray(mpc.model.q_standing), jnp.zeros(mpc.model.nv))
    mpc.reset(state)
    planned = scripted.calls[-1]["problem"]
    assert planned.horizon == 4 and planned.substeps == 1
    np.testing.assert_array_equal(np.asarray(planned.data.reference.base_velocity)[0],
                                  [0.5, 0.0, 0.0])  # fmt: skip
    own = problem.replace(name="my_balance_task")
    mpc = MPC(own)
    assert mpc.gait is None and mpc.command is None
    mpc.reset(state)
    planned = scripted.calls[-1]["problem"]
    for field_name in ("base_velocity", "stance", "base_height"):
        np.testing.assert_array_equal(
            np.asarray(getattr(planned.data.reference, field_name)),
            np.asarray(getattr(own.data.reference, field_name)),
        )
    np.testing.assert_array_equal(mpc.commanded_velocity(), [0.2, 0.0, 0.0])
    mpc.set_command(0.1)
    mpc.update(state, 0.03)
    ref = scripted.calls[-1]["problem"].data.reference
    np.testing.assert_array_equal(np.asarray(ref.base_velocity)[-1], [0.1, 0.0, 0.0])
    with pytest.raises(ValueError, match="no gait"):
        mpc.gait_clock(0.0)
    with pytest.raises(ValueError, match="horizon, substeps come from the problem"):
        MPC(problem, horizon=0.2, substeps=2)


def test_cycle_statistics_summarise_wall_times():
    stats = mpc_module.MPCStats(
        [
            mpc_module.CycleRecord(0.02 * i, w, "max_iterations", 1, 1.0, 1, "mpc")
            for i, w in enumerate([0.01, 0.02, 0.03, 0.04])
        ]
    )
    s = stats.summary()
    assert s["cycles"] == 4 and s["median_s"] == pytest.approx(0.025)
    assert s["max_s"] == 0.04 and s["rate_hz_at_median"] == pytest.approx(40.0)
    assert dataclasses.asdict(stats.cycles[0])["mode"] == "mpc"


# ----------------------------------------------------------------------------- closed loop
@pytest.mark.slow
@pytest.mark.parametrize("robot,iterations", [("go2", 1), ("solo12", 3)])
def test_trots_at_the_command_in_our_simulator_for_10_s(robot, iterations):
    """The issue's acceptance: commanded speed within 15 %, no fall, 10 s of closed loop
    (measured: see BENCHMARKS.md, `benchmarks/bench_mpc.py`). Solo12 needs three FDDP
    iterations per cycle at 0.5 m/s: with one it fell (measured 2026-11-30, mean 0.05 m/s);
    with three: 0.497 m/s, mean abs error 0.015 m/s (this test, 26 min on a loaded machine)."""
    from controllers.closed_loop import run_mpc

    mpc = MPC(robot, "trot", (0.5, 0.0, 0.0), horizon=0.5, iterations=iterations)
    result = run_mpc(mpc, 10.0, progress=False)
    summary = result.summary(settle=1.0)
    print(summary)
    assert not summary["fell"]
    assert abs(summary["mean_forward_velocity"] - 0.5) <= 0.15 * 0.5
    assert abs(summary["average_speed_from_displacement"] - 0.5) <= 0.15 * 0.5
    flags = result.force[50:, :, 2] > 1.0  # a trot: diagonal pairs agree most of the time
    assert np.mean(flags[:, 0] == flags[:, 3]) > 0.7 and np.mean(flags[:, 1] == flags[:, 2]) > 0.7
    assert np.mean(flags[:, 0] != flags[:, 1]) > 0.5


@pytest.mark.slow
def test_the_same_mpc_walks_on_mujoco_through_the_interface_for_5_s():
    """Sim-to-sim: MuJoCo (a model generated from the same robot) through the hardware
    interface and the safety layer; stand still for 0.5 s, then 0.5 m/s.

    Three FDDP iterations per cycle: with one, the MPC is not robust to a plant whose contact
    differs from its smooth planning model (on MuJoCo, and on our own hard-contact simulator,
    it falls after 1.3-2.9 s; measured 2026-11-30), with three it walks on both. No wall-clock
    budget, so the outcome does not depend on this machine's load. The target rate limit is
    30 rad/s on every joint (the default, the joints' velocity limits, holds Go2's calves to
    15.7 rad/s, which the planned swing exceeds). Measured: 0.502 m/s after 1.5 s at the gait
    library's control-rate weight; 0.497 m/s (99 s) at `mpc_controller`'s (2026-12-07)."""
    pytest.importorskip("mujoco", reason="the MuJoCo plant needs the `mujoco` extra")
    import dynamics
    from controllers.state_feedback import mpc_controller, mpc_safety_config
    from hardware import control_loop
    from hardware.backends.mujoco_sim import MuJoCoRobot
    from hardware.interface import VelocityCommand
    from hardware.safety import SafetyLayer

    model = dynamics.load_robot("go2")
    robot = MuJoCoRobot(model, timestep=0.002)
    controller = mpc_controller("go2", robot.joint_map, "trot", horizon=0.5, iterations=3)
    safety = SafetyLayer(robot.joint_map, mpc_safety_config(soft_start=0.2))
    result = control_loop.run(
        robot, controller, safety, duration=5.0, control_dt=0.02, command_dt=0.002,
        command_source=lambda t: VelocityCommand(0.5 if t >= 0.5 else 0.0, 0.0, 0.0),
    )  # fmt: skip
    pos = result.log["base_position"]
    speed = control_loop.average_speed(result.log, after=1.5)
    print(f"MuJoCo: average speed {speed:.3f} m/s after 1.5 s, min height {pos[:, 2].min():.3f}")
    assert result.safety.mode.value not in ("damping", "estop"), result.safety.events
    assert pos[:, 2].min() > 0.5 * float(model.q_standing[2])  # did not fall
    assert abs(speed - 0.5) <= 0.2 * 0.5  # it walks at about the command


def test_a_lookahead_solves_from_the_predicted_state_and_starts_there(scripted, standing):
    """`plan_cycle(state, t, lookahead)`: the plan is solved from the state the planning model
    reaches after `n = round(lookahead / dt)` knots under the current plan's targets, with
    that last knot's targets as `u_prev`; it starts at `t + n dt`, and until then the previous
    plan serves `targets_at`."""
    from trajopt import problem as P

    mpc, state = standing
    mpc.reset(state, t=0.0)
    first = mpc.plan
    q = np.asarray(state.q).copy()
    q[2] -= 0.01  # a measured state the plan did not start from
    v = np.zeros(mpc.model.nv)
    v[0] = 0.2
    measured = State(jnp.asarray(q), jnp.asarray(v))
    outcome = mpc.plan_cycle(measured, 0.04, lookahead=0.04)
    assert outcome.t == pytest.approx(0.08) and outcome.shift == 4
    # the prediction by hand: knots 2 and 3 of the first plan from the measured state
    x = P.initial_knot_state(mpc.model, measured)
    for k in (2, 3):
        x = P.transition(mpc.problem, mpc.problem.data, x, jnp.asarray(first.u[k]))[0]
    x0 = scripted.calls[-1]["problem"].data.x0
    np.testing.assert_allclose(np.asarray(x0.q), np.asarray(x.q), atol=1e-12)
    np.testing.assert_allclose(np.asarray(x0.v), np.asarray(x.v), atol=1e-12)
    np.testing.assert_array_equal(np.asarray(x0.u_prev), first.u[3])
    assert np.linalg.norm(np.asarray(x.q) - q) > 1e-3  # the prediction moved the state
    np.testing.assert_array_equal(scripted.calls[-1]["init"].u, first.shifted(4).u)

    mpc.commit(outcome)
    assert mpc.plan_time == pytest.approx(0.08)
    # before the new plan's start the first plan's knot at that time, then the new plan's
    np.testing.assert_array_equal(mpc.targets_at(0.05), first.u[2])
    np.testing.assert_array_equal(mpc.targets_at(0.07), first.u[3])
    np.testing.assert_array_equal(mpc.targets_at(0.08), outcome.plan.u[0])
    np.testing.assert_array_equal(mpc.targets_at(0.10), outcome.plan.u[1])


def test_no_lookahead_is_the_plain_cycle_and_a_negative_one_is_refused(scripted, standing):
    mpc, state = standing
    mpc.reset(state, t=0.0)
    predicted, t, u_prev = mpc.predict(state, 0.04, 0.0)
    np.testing.assert_array_equal(np.asarray(predicted.q), np.asarray(state.q))
    assert t == 0.04
    np.testing.assert_array_equal(u_prev, mpc.last_targets)
    outcome = mpc.plan_cycle(state, 0.04)
    assert outcome.t == 0.04
    np.testing.assert_array_equal(
        np.asarray(scripted.calls[-1]["problem"].data.x0.q), np.asarray(state.q)
    )
    with pytest.raises(ValueError, match="lookahead must be >= 0"):
        mpc.plan_cycle(state, 0.04, lookahead=-0.02)


def test_a_reset_from_a_prepared_plan_takes_the_cycle_iterations(scripted, standing):
    mpc, state = standing
    mpc.reset(state, t=0.0)
    prepared = mpc.plan
    mpc.reset(state, t=0.0, init=prepared, iterations=1)
    call = scripted.calls[-1]
    assert call["init"] is prepared and call["max_iterations"] == 1
    with pytest.raises(ValueError, match="knots"):
        short = Trajectory(q=prepared.q[:3], v=prepared.v[:3], u=prepared.u[:2], dt=prepared.dt)
        mpc.reset(state, init=short)
    with pytest.raises(ValueError, match="iterations must be >= 1"):
        mpc.reset(state, init=prepared, iterations=0)


@pytest.mark.parametrize("latency", [0, 2])
def test_the_closed_loop_uses_a_plan_latency_periods_after_its_measurement(scripted, latency):
    """`run_mpc(..., replan_every=2, latency=L)`: the plan solved at period k is committed at
    period k + L; before that the previous plan's knots are applied. The scripted solver adds
    0.01 to the controls at each solve, so the targets applied at period k carry
    0.01 x (the solves committed by k)."""
    from controllers.closed_loop import run_mpc

    mpc = MPC(ROBOT, "trot", (0.3, 0.0, 0.0), horizon=0.2, dt=0.02, substeps=1)
    result = run_mpc(mpc, 0.2, sim_dt=0.01, replan_every=2, latency=latency, progress=False)
    first = np.asarray(mpc.stand_targets)[None] + 1e-3 * np.arange(10)[:, None]
    committed = np.array([max(0, (k - latency) // 2) for k in range(10)])
    np.testing.assert_allclose(result.targets, first + 0.01 * committed[:, None], atol=1e-12)
    with pytest.raises(ValueError, match="latency must be in"):
        run_mpc(mpc, 0.2, sim_dt=0.01, replan_every=2, latency=3, progress=False)


def test_the_lookahead_is_counted_in_sub_steps_of_the_planning_model(scripted):
    """Two sub-steps of 10 ms per 20 ms knot and a lookahead of 30 ms: three contact steps,
    under the plan's targets at t, t + 10 ms (same knot) and t + 20 ms (the next knot), each
    `trajopt.problem.transition` of a one-sub-step problem by hand."""
    from trajopt import problem as P

    mpc = MPC(ROBOT, "trot", (0.3, 0.0, 0.0), horizon=0.2, dt=0.02, substeps=2)
    state = State(jnp.asarray(mpc.model.q_standing), jnp.zeros(mpc.model.nv))
    mpc.reset(state, t=0.0)
    first = mpc.plan
    predicted, t, u_prev = mpc.predict(state, 0.04, 0.03)
    assert t == pytest.approx(0.07)
    one_step = mpc.problem.replace(substeps=1)
    x = P.initial_knot_state(mpc.model, state)
    for k in (2, 2, 3):
        x = P.transition(one_step, one_step.data, x, jnp.asarray(first.u[k]))[0]
    np.testing.assert_allclose(np.asarray(predicted.q), np.asarray(x.q), atol=1e-12)
    np.testing.assert_allclose(np.asarray(predicted.v), np.asarray(x.v), atol=1e-12)
    np.testing.assert_array_equal(u_prev, first.u[3])


def test_adopt_starts_over_with_a_plan_solved_elsewhere(scripted, standing):
    mpc, state = standing
    mpc.reset(state, t=0.0)
    plan = mpc.plan
    mpc.update(state, 0.02)
    mpc.adopt(plan, 0.5, 0.1)
    assert mpc.plan is plan and mpc.plan_time == 0.5 and mpc.mode == "mpc"
    assert len(mpc.stats.cycles) == 1 and mpc.stats.cycles[0].wall_time == 0.1
    np.testing.assert_array_equal(mpc.targets_at(0.5), plan.u[0])
    np.testing.assert_array_equal(mpc.targets_at(0.4), plan.u[0])  # no earlier plan: knot 0
    with pytest.raises(ValueError, match="knots"):
        mpc.adopt(Trajectory(q=plan.q[:3], v=plan.v[:3], u=plan.u[:2], dt=plan.dt))


def test_cycles_report_where_their_time_went(scripted, standing, monkeypatch):
    """Each cycle keeps the solve's linearisation, backward pass and line search seconds and the
    rest of the cycle (`wall - the three`); the summary gives each part's median."""
    mpc, state = standing
    # microseconds: parts of the scripted cycles' wall times (the rest is "other")
    parts = iter([(4e-6, 2e-6, 1e-6), (6e-6, 3e-6, 2e-6), (5e-6, 1e-6, 3e-6)] * 2)

    def timed(*args, **kwargs):
        plan = scripted(*args, **kwargs)
        lin, bwd, ls = next(parts)
        plan.meta["timing"] = {"linearize": lin, "backward": bwd, "line_search": ls, "other": 0.0}
        return plan

    monkeypatch.setattr(mpc_module, "solve", timed)
    mpc.reset(state, t=0.0)
    for i in range(1, 4):
        mpc.update(state, 0.02 * i)
    cycles = mpc.stats.cycles
    for c in cycles:
        assert set(c.timing) == {"linearize", "backward", "line_search", "other"}
        assert np.isclose(sum(c.timing.values()), c.wall_time)
    medians = mpc.stats.summary()["timing_median_s"]
    # the reset's solve and three cycles: the first part triple comes back for the fourth
    assert medians["linearize"] == np.median([4e-6, 6e-6, 5e-6, 4e-6])
    assert medians["backward"] == np.median([2e-6, 3e-6, 1e-6, 2e-6])
    assert medians["line_search"] == np.median([1e-6, 2e-6, 3e-6, 1e-6])
    assert medians["other"] == np.median([c.timing["other"] for c in cycles])
    plain = mpc_module.MPCStats([mpc_module.CycleRecord(0.0, 0.01, "stand", 0, 1.0, 0, "stand")])
    assert plain.summary()["timing_median_s"] is None


def test_a_cycle_keeps_the_linearisations_parts_beside_the_four_that_add_up():
    """With a solve's `linearize_parts` (one-call iterations) the cycle keeps them as parts of
    `linearize`: "other" is still the wall time less the three solver parts, and the summary's
    medians give each over the cycles that have it."""
    solver = {"linearize": 4e-3, "backward": 1e-3, "line_search": 5e-4, "other": 0.0}
    inside = {"generated_code": 2.5e-3, "elimination": 1e-3}
    timing = mpc_module.cycle_timing(8e-3, solver, inside)
    assert timing["other"] == pytest.approx(8e-3 - 5.5e-3)
    assert timing["generated_code"] == 2.5e-3 and timing["elimination"] == 1e-3
    plain = mpc_module.cycle_timing(8e-3, solver)
    assert set(plain) == {"linearize", "backward", "line_search", "other"}
    record = functools.partial(mpc_module.CycleRecord, 0.0, 8e-3, "max_iterations", 1, 1.0, 0,
                               "mpc")  # fmt: skip
    both = mpc_module.timing_medians([record(timing=timing), record(timing=dict(timing))])
    assert both["generated_code"] == 2.5e-3 and both["other"] == timing["other"]
    mixed = mpc_module.timing_medians([record(timing=timing), record(timing=plain)])
    assert mixed["generated_code"] == 2.5e-3 and mixed["elimination"] == 1e-3
    assert mpc_module.timing_medians([record(timing=plain)]).keys() == plain.keys()


@pytest.mark.slow  # compiles the Solo12 trot's knots when the disk cache does not hold them
def test_a_real_mpc_run_reports_its_cycle_timing():
    """A tiny MPC with the real FDDP (Solo12 trot, 3 knots): every cycle's parts are the
    solver's measured seconds, positive, and add up to the cycle's wall time."""
    from trajopt.gaits import make_problem

    problem = make_problem("solo12", "trot", 0.3, duration=0.06, dt=0.02, substeps=2)
    mpc = MPC(problem, warmup_iterations=3)
    m = mpc.model
    state = State(jnp.asarray(m.q_standing), jnp.zeros(m.nv))
    mpc.reset(state)
    for i in range(1, 4):
        mpc.update(state, 0.02 * i)
    for c in mpc.stats.cycles:
        assert c.timing["linearize"] > 0 and c.timing["backward"] > 0
        assert np.isclose(sum(c.timing.values()), c.wall_time)
    medians = mpc.stats.summary()["timing_median_s"]
    assert set(medians) == {"linearize", "backward", "line_search", "other"}
    assert all(v >= 0 for v in medians.values())


def test_the_summary_counts_the_iterations_each_cycle_ran():
    """`iterations_per_cycle`: cycles that solved, by their FDDP iteration count (a cycle's
    time budget may stop it early); standing cycles are not counted."""
    cycles = [mpc_module.CycleRecord(0.02 * i, 0.01, "time_budget", n, 1.0, 1, "mpc")
              for i, n in enumerate((2, 1, 2, 2))]  # fmt: skip
    cycles.append(mpc_module.CycleRecord(0.1, 0.001, "stand", 0, 1.0, 0, "stand"))
    assert mpc_module.MPCStats(cycles).summary()["iterations_per_cycle"] == {1: 1, 2: 3}
