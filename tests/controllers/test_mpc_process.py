"""The MPC's solves in a separate process (`controllers.mpc_process.SolverProcess`) behind
`RealTimeMPC`: the process's plans reach the caller's MPC (which serves them), the reset after
`prepare` starts from the prepared plan with the cycle's iterations, a cycle solves from the
newest measurement with the caller's command, errors in the process come back named, and a
stopped process is refused. The process builds its MPC with a scripted solver
(tests/scripted_mpc.py): no compilation."""

import time

import numpy as np
import pytest

from controllers.mpc import MPC
from controllers.mpc_process import SolverProcess
from controllers.realtime_mpc import RealTimeMPC
from hardware.interface import JointMap, VelocityCommand, measurement_from_state

OPTIONS = dict(robot="solo12", gait="trot", command=(0.0, 0.0, 0.0), horizon=0.2, dt=0.02,
               substeps=1)  # fmt: skip
FACTORY = "scripted_mpc:scripted_mpc"


def measurement(mpc, t, x=0.0):
    q = np.asarray(mpc.model.q_standing, dtype=float).copy()
    q[0] += x
    return measurement_from_state(q, np.zeros(mpc.model.nv), timestamp=t, sequence=int(1e3 * t))


def wait_for(predicate, timeout=10.0):
    deadline = time.perf_counter() + timeout
    while not predicate():
        assert time.perf_counter() < deadline, "timed out"
        time.sleep(0.002)


@pytest.fixture(scope="module")
def solver():
    process = SolverProcess(OPTIONS, factory=FACTORY)
    yield process
    process.close()


def test_plans_solved_in_the_process_are_served_by_the_callers_mpc(solver):
    mpc = MPC(**OPTIONS)
    ctrl = RealTimeMPC(mpc, JointMap.from_model(mpc.model), lookahead=0.0, min_period=0.0,
                       solver=solver)  # fmt: skip
    ctrl.prepare()
    assert mpc.stats.cycles[0].status == f"scripted {mpc.warmup_iterations} from guess"
    stand = mpc.stand_targets
    np.testing.assert_allclose(mpc.plan.q[0], mpc.model.q_standing)
    ctrl.reset(measurement(mpc, 0.0, x=0.3))
    try:
        # the reset: from the prepared plan, with the cycle's iterations, from the measurement
        assert mpc.stats.cycles[0].status == f"scripted {mpc.iterations} from init"
        assert mpc.plan.q[0][0] == pytest.approx(0.3 + mpc.model.q_standing[0])
        # then the warm-up cycle, from the first plan's targets: 0.01 more
        np.testing.assert_allclose(mpc.plan.u[0], stand + 0.02, atol=1e-12)
        cmd = ctrl(measurement(mpc, 0.02, x=0.5), 0.02, VelocityCommand(0.3, 0.0, 0.1))
        np.testing.assert_allclose(cmd.q_target, mpc.plan.u[1])  # the reset's plan, knot 1
        wait_for(lambda: mpc.plan_time == pytest.approx(0.02))
        with ctrl.lock:
            plan = mpc.plan
        assert plan.q[0][0] == pytest.approx(0.5 + mpc.model.q_standing[0])
        np.testing.assert_allclose(mpc.command, [0.3, 0.0, 0.1])
        summary = ctrl.summary()
        assert summary["cycles"] >= 1 and summary["error"] is None
    finally:
        ctrl.close()
    assert solver.process.is_alive()  # close stops the thread; the process serves the next reset


def test_an_error_in_the_process_comes_back_named(solver):
    with pytest.raises(RuntimeError, match="unknown request 'jump'"):
        solver._request("jump", q=np.zeros(19), v=np.zeros(18))
    assert solver.process.is_alive()


def test_bad_options_and_a_stopped_process_are_refused():
    with pytest.raises(RuntimeError, match="could not build the MPC: ValueError"):
        SolverProcess(dict(OPTIONS, gait="gallop"), factory=FACTORY)
    with pytest.raises(ValueError, match="core must be"):
        SolverProcess(OPTIONS, core=-1, factory=FACTORY)
    with pytest.raises(ValueError, match="core 4096 does not exist"):
        SolverProcess(OPTIONS, core=4096, factory=FACTORY)
    process = SolverProcess(OPTIONS, factory=FACTORY)
    process.close()
    process.close()  # twice is fine
    mpc = MPC(**OPTIONS)
    with pytest.raises(RuntimeError, match="not running"):
        process.reset(measurement_state(mpc), 0.0)


def measurement_state(mpc):
    from dynamics.configuration import State

    return State(np.asarray(mpc.model.q_standing), np.zeros(mpc.model.nv))
