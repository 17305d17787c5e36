"""Fault injection through the interface on MuJoCo (Go2 standing): each fault, its safe outcome.

Controller at 50 Hz, safety layer and writes at 500 Hz, drivers' PD at MuJoCo's 2 ms step,
all in simulated time (deterministic). Default thresholds: controller command timeout 0.1 s,
measurement timeout 0.05 s, drivers' watchdog 0.1 s, max command age 0.1 s.
"""

import time

import numpy as np
import pytest

import dynamics
from controllers.state_feedback import StateFeedbackController
from dynamics.mjcf import q_from_qpos, v_from_qvel
from hardware import control_loop
from hardware.faults import (
    FaultyController,
    FaultyRobot,
    crash,
    nan_targets,
    no_command,
    offset_targets,
)
from hardware.interface import JointCommand, RobotMode, VelocityCommand
from hardware.pose import PoseController
from hardware.safety import Mode, SafetyConfig, SafetyLayer
from learning.policy_adapter import PolicyController

pytest.importorskip("mujoco")
from hardware.backends.mujoco_sim import MuJoCoRobot  # noqa: E402

DT = 0.002  # command period = MuJoCo step [s]
UP = 0.30  # [m] Go2's base above this: standing (it settles at 0.326)


def go2_robot(**driver):
    return MuJoCoRobot(dynamics.load_robot("go2"), **driver)


def run(robot, controller=None, duration=2.0, config=None, **kwargs):
    controller = controller or PoseController.standing(robot.joint_map)
    safety = SafetyLayer(robot.joint_map, config or SafetyConfig(soft_start_duration=0.5))
    return control_loop.run(robot, controller, safety, duration=duration, command_dt=DT, **kwargs)


def heights(result):
    return result.log["base_position"][:, 2]


def assert_sat_down_damped(result, since, joint_map):
    """After `since`: Kp = 0 written, the base goes down, slowly, joints within their limits.

    Only while the base is above 0.1 m: the generated MJCF collides the feet only, so once
    the legs have folded the body sinks through the floor instead of resting on its belly
    (and the feet then lift off). Measured peak speeds above 0.1 m: 0.6-1.0 m/s."""
    log = result.log
    after = log["t"] > since
    assert np.all(log["kp"][after] == 0) and np.all(log["kd"][after] > 0)
    z = heights(result)
    assert z[-1] < z[after][0] - 0.02
    new = np.flatnonzero(np.diff(log["stamp"]) > 0) + 1  # ticks with a new sample
    speed = np.abs(np.diff(z[new]) / np.diff(log["stamp"][new]))
    up = z[new][1:] > 0.1
    assert np.max(speed[up]) < 1.3  # free fall from 0.33 m: 2.5 m/s
    assert np.all(np.abs(log["joint_qd"][z > 0.1]) < joint_map.velocity_limit)


def test_command_stream_stops_drivers_watchdog_damps():
    robot = FaultyRobot(go2_robot(command_timeout=0.1), stop_commands_at=1.0)
    result = run(robot, duration=2.0)
    driver = robot.driver
    (trip,) = driver.trip_times
    assert driver.last_accepted == pytest.approx(1.0 - DT)
    assert driver.last_accepted + 0.1 < trip <= driver.last_accepted + 0.1 + DT + 1e-9
    after = result.log["t"] > trip + DT
    assert np.all(result.log["robot_mode"][after] == RobotMode.DAMPING)
    assert result.safety.mode is Mode.DAMPING
    assert result.safety.log.first("robot_not_active").start <= trip + DT + 1e-9
    assert_sat_down_damped(result, trip + DT, robot.joint_map)


def test_short_nan_burst_is_rejected_and_the_robot_stays_up():
    stand = PoseController.standing(go2_robot().joint_map)
    robot = go2_robot()
    result = run(robot, FaultyController(stand, nan_targets, 0.99, 1.05), duration=2.0)
    assert np.all(np.isfinite(result.log["q_target"]))  # nothing non-finite was ever written
    assert result.safety.counters["command_invalid"] == 3  # calls at t = 1.00, 1.02, 1.04
    assert robot.driver.counters["rejected_nonfinite"] == 0  # the robot never saw one
    assert result.safety.mode is Mode.NORMAL and "damping" not in result.safety.log.kinds()
    assert heights(result).min() > UP


@pytest.mark.parametrize("fault", [nan_targets, no_command, crash], ids=lambda f: f.__name__)
def test_a_controller_that_stops_producing_valid_commands_is_timed_out(fault):
    robot = go2_robot()
    stand = PoseController.standing(robot.joint_map)
    result = run(robot, FaultyController(stand, fault, start=1.0), duration=2.0)
    last_valid = 0.98
    damping = result.safety.log.first("damping")
    assert damping.detail == "after command_timeout"
    assert last_valid + 0.1 < damping.start <= last_valid + 0.1 + DT + 1e-9
    if fault is crash:
        assert result.controller_errors == 50  # every call from t = 1.0 on, caught
        assert "RuntimeError" in result.safety.log.first("controller_error").detail
    assert np.all(np.isfinite(result.log["q_target"]))
    assert robot.driver.trip_times == []  # the damping commands keep arriving
    assert_sat_down_damped(result, damping.start, robot.joint_map)


def test_targets_beyond_joint_limits_are_clipped_and_the_robot_stays_up():
    """A crouching controller (calves at -2.4 rad, thighs 1.1 rad: base at 0.14 m) whose calf
    targets are pushed 1 rad past the -2.72 rad fold stop from t = 1.5 s: the targets stop at
    the limit, the robot crouches a little lower onto it and stays up."""
    robot = go2_robot()
    jm = robot.joint_map
    calves = np.array([2, 5, 8, 11])
    crouch = jm.q_default.copy()
    crouch[calves], crouch[calves - 1] = -2.4, 1.1
    delta = np.zeros(12)
    delta[calves] = -1.0
    controller = PoseController(crouch, jm.kp_default, jm.kd_default)
    faulty = FaultyController(controller, offset_targets(delta), start=1.5)
    result = run(robot, faulty, duration=3.0, config=SafetyConfig(soft_start_duration=1.0))
    written = result.log["q_target"]
    assert np.all(written >= jm.lower) and np.all(written <= jm.upper)
    np.testing.assert_allclose(written[-1, calves], jm.lower[calves])  # at the limit
    event = result.safety.log.first("position_clipped")
    assert set(event.joints) == set(calves) and event.start == pytest.approx(1.5)
    assert robot.driver.counters["clipped_targets"] == 0  # the drivers never had to clip
    assert np.all(result.log["joint_q"] >= jm.lower - 0.02)  # MuJoCo's soft limit: < 0.02 rad
    z = heights(result)
    assert z[-1] > 0.08 and z[-1] < z[result.log["t"] < 1.5][-1] - 0.02  # lower, still up
    assert result.safety.mode is Mode.NORMAL
    assert "damping" not in result.safety.log.kinds()


def test_small_measurement_delay_is_tolerated():
    robot = FaultyRobot(go2_robot(), measurement_delay=0.02, delay_from=1.0)
    result = run(robot, duration=2.0)
    assert result.safety.mode is Mode.NORMAL
    assert "measurement_stale" not in result.safety.log.kinds()
    assert heights(result).min() > UP


def test_large_measurement_delay_is_rejected_and_damps():
    robot = FaultyRobot(go2_robot(), measurement_delay=0.2, delay_from=1.0)
    result = run(robot, duration=2.0)
    log = result.log
    assert np.all(log["accepted"][log["t"] >= 1.0] == 0)  # every delayed sample rejected
    assert result.safety.log.first("measurement_stale").start == pytest.approx(1.0)
    last_accepted = 1.0 - DT
    damping = result.safety.log.first("damping")
    assert damping.detail == "after measurement_timeout"
    assert last_accepted + 0.05 < damping.start <= last_accepted + 0.05 + DT + 1e-9
    # the damping commands carry the last accepted sample's stamp: the drivers find them
    # stale after their max age, reject them, and their own watchdog damps too
    assert robot.driver.counters["rejected_stale"] > 0 and len(robot.driver.trip_times) == 1
    assert_sat_down_damped(result, damping.start, robot.joint_map)


def test_dropped_commands_are_tolerated():
    robot = FaultyRobot(go2_robot(command_timeout=0.1), drop_commands=0.3, seed=1)
    result = run(robot, duration=2.0)
    assert 0.25 < robot.lost / (robot.lost + robot.delivered) < 0.35
    assert robot.driver.trip_times == [] and result.safety.mode is Mode.NORMAL
    assert heights(result).min() > UP


def test_estop_latches_damping_on_both_sides():
    def button(t, safety, robot):
        if t >= 1.0 and safety.mode is not Mode.ESTOP:
            safety.estop(robot.now(), "operator")
            robot.estop()

    robot = go2_robot()
    result = run(robot, duration=2.0, on_tick=button)
    assert robot.driver.mode is RobotMode.ESTOP and result.safety.mode is Mode.ESTOP
    assert robot.driver.counters["rejected_estop"] > 0  # later commands are not applied
    assert np.all(result.log["robot_mode"][result.log["t"] > 1.0 + DT] == RobotMode.ESTOP)
    assert_sat_down_damped(result, 1.0, robot.joint_map)
    stand = JointCommand.create(robot.joint_map.q_default, 80.0, 2.0, arm=True)
    robot.write(stand.replace(timestamp=robot.now(), sequence=10**6))
    assert robot.driver.mode is RobotMode.ESTOP  # arm does not leave ESTOP


# --------------------------------------------------------------------------- plug-ins
def test_a_policy_plugs_in():
    """A policy through `PolicyController`: a zero-action policy holds the default pose; the
    observation carries the operator's velocity command, changed at run time."""
    seen = []

    def policy(observation):
        seen.append(observation)
        return np.zeros(12)

    def source(t):
        return VelocityCommand(0.3, 0.0, 0.1) if t >= 1.0 else VelocityCommand()

    robot = go2_robot()
    result = run(robot, PolicyController(policy, robot.joint_map), duration=1.5,
                 command_source=source)  # fmt: skip
    obs = np.array(seen)
    assert obs.shape[1] == 12 + 3 * 12  # the layout of learning.policy
    np.testing.assert_allclose(obs[-1, 9:12], [0.3, 0.0, 0.1])
    np.testing.assert_allclose(obs[1, 9:12], 0.0)
    np.testing.assert_allclose(obs[-1, 6:9], [0, 0, -1], atol=0.02)  # projected gravity, level
    assert heights(result).min() > UP
    np.testing.assert_allclose(result.log["q_target"][-1], robot.joint_map.q_default)


class RecordingPlanner:
    """A planner with MPC's interface that holds the stance and records what it is given."""

    def __init__(self, q_target, robot):
        self.q_target, self.robot = q_target, robot
        self.states, self.expected, self.commands = [], [], []

    def reset(self, state):
        self.states.append(state)

    def set_command(self, vx, vy, yaw_rate):
        self.commands.append((vx, vy, yaw_rate))

    def update(self, state, t):
        self.states.append(state)
        d = self.robot.data  # MuJoCo's own state, mapped by dynamics.mjcf
        q = q_from_qpos(self.robot.model, d.qpos)
        self.expected.append((q, v_from_qvel(self.robot.model, d.qvel, d.qpos)))
        return self.q_target


def test_a_full_state_planner_plugs_in():
    robot = go2_robot()
    planner = RecordingPlanner(robot.joint_map.q_default, robot)
    controller = StateFeedbackController(planner, robot.joint_map)

    def source(t):
        return VelocityCommand(0.5) if t >= 0.5 else VelocityCommand()

    result = run(robot, controller, duration=1.0, command_source=source)
    assert planner.commands == [(0.0, 0.0, 0.0), (0.5, 0.0, 0.0)]  # forwarded when changed
    for state, (q, v) in zip(planner.states[1:], planner.expected):
        np.testing.assert_allclose(np.asarray(state.q), q, atol=1e-12)
        np.testing.assert_allclose(np.asarray(state.v), v, atol=1e-12)
    assert heights(result).min() > UP


def test_timing_statistics_count_controller_overruns():
    class Slow(PoseController):
        def __call__(self, m, t, command):
            time.sleep(0.025)  # longer than the 20 ms control period
            return super().__call__(m, t, command)

    robot = go2_robot()
    slow = Slow(robot.joint_map.q_default, 80.0, 2.0)
    result = run(robot, slow, duration=0.2)
    timing = result.timing["controller"]
    assert timing["ticks"] == 10 and timing["overruns"] == 10
    assert timing["compute_median_s"] >= 0.025
    assert result.timing["command"]["overruns"] >= 10  # the ticks that ran the controller
