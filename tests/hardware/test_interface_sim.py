"""Go2 through the hardware interface on this project's simulator and on MuJoCo (sim-to-sim).

The stand controller runs at 50 Hz, the safety layer and writes at 500 Hz, the drivers' PD at
every 2 ms physics step. Our simulator compiles once for this module (about 10-15 s); both runs
are cached and shared by the tests.
"""

import functools

import numpy as np
import pytest

import dynamics
from hardware import control_loop
from hardware.backends.jax_sim import SimRobot
from hardware.faults import FaultyRobot
from hardware.interface import GRAVITY, RobotMode, SimulatedRobot
from hardware.pose import PoseController
from hardware.safety import Mode, SafetyLayer

pytest.importorskip("mujoco")

HEIGHT_BAND = (0.31, 0.34)  # [m] Go2's base while standing (SRDF pose at 0.335, settles 0.326)
COMMAND_DT = 0.002
BACKENDS = ("sim", "mujoco")


@functools.cache
def go2():
    return dynamics.load_robot("go2")


def stand(robot, duration):
    controller = PoseController.standing(robot.joint_map)
    return control_loop.run(
        robot, controller, SafetyLayer(robot.joint_map), duration=duration, command_dt=COMMAND_DT
    )


@functools.cache
def run_backend(backend: str):
    if backend == "sim":
        robot = SimRobot(go2(), contact="hard")
    else:
        from hardware.backends.mujoco_sim import MuJoCoRobot

        robot = MuJoCoRobot(go2())
    return robot, stand(robot, 2.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_go2_stands_through_the_interface(backend):
    robot, result = run_backend(backend)
    assert isinstance(robot, SimulatedRobot)
    z = result.log["base_position"][:, 2]
    assert HEIGHT_BAND[0] < z.min() and z.max() < HEIGHT_BAND[1], (z.min(), z.max())
    assert result.safety.mode is Mode.NORMAL
    assert result.safety.log.kinds() == {"soft_start", "soft_start_done"}  # no intervention
    assert robot.driver.counters["accepted"] == 1000 and robot.driver.trip_times == []
    assert np.all(result.log["robot_mode"][1:] == RobotMode.ACTIVE)
    timing = result.timing
    assert timing["command"]["ticks"] == 1000 and timing["controller"]["ticks"] == 100
    assert timing["command"]["interval_median_s"] == pytest.approx(COMMAND_DT)
    assert result.controller_calls == 100 and result.controller_errors == 0
    # the summary's peak joint speed is the log's, per joint limit; standing, far below it
    speed = np.abs(result.log["joint_qd"]) / np.asarray(robot.joint_map.velocity_limit)
    peak = result.summary()["peak_joint_speed_fraction"]
    assert peak == pytest.approx(np.nanmax(speed)) and 0 < peak < 0.2, peak


def test_both_engines_settle_at_the_same_height():
    """Same model, same commands, two engines: the settled base heights agree (measured within
    0.1 mm; test_mujoco_crosscheck compares the engines in depth)."""
    heights = {b: run_backend(b)[1].log["base_position"][-100:, 2].mean() for b in BACKENDS}
    assert abs(heights["sim"] - heights["mujoco"]) < 2e-3, heights


def test_our_sim_accelerometer_reads_specific_force_at_rest():
    robot, _ = run_backend("sim")
    m = robot.read()
    np.testing.assert_allclose(m.base_linear_acceleration, -GRAVITY * m.projected_gravity, atol=0.1)
    assert np.linalg.norm(m.joint_tau) > 1.0  # the drivers hold the weight


def test_command_stream_stops_on_our_sim():
    """The loop's commands stop reaching the robot at t = 0.5 s: the drivers' watchdog fires
    within its timeout (checked at every physics step) and the legs yield, damped."""
    timeout, stop_at = 0.1, 0.5
    sim = SimRobot(go2(), contact="hard", command_timeout=timeout)
    robot = FaultyRobot(sim, stop_commands_at=stop_at)
    result = stand(robot, 1.0)
    (trip,) = sim.driver.trip_times
    last = sim.driver.last_accepted
    assert last == pytest.approx(stop_at - COMMAND_DT)
    assert last + timeout < trip <= last + timeout + sim.dt + 1e-9
    log = result.log
    after = log["t"] > trip + COMMAND_DT
    assert np.all(log["robot_mode"][after] == RobotMode.DAMPING)
    # the safety layer follows the robot into damping at its next tick
    assert result.safety.log.first("robot_not_active").start <= trip + COMMAND_DT + 1e-9
    assert np.all(log["kp"][after] == 0)
    z = log["base_position"][:, 2]
    assert z[-1] < z[after][0] - 0.02  # sitting down ...
    vz = np.diff(z) / COMMAND_DT
    assert np.max(np.abs(vz)) < 1.5  # ... damped, far from a free fall (2.6 m/s from 0.33 m)
    assert np.all(np.abs(log["joint_qd"]) < robot.joint_map.velocity_limit)
