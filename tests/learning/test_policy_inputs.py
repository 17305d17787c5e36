"""An exported policy's "inputs": the Measurement fields its observation is computed from.

Written by `export_policy` into policy.json, derived from "observation_layout" for exports from
before the key (the shipped policies, which keep loading unchanged), and checked by the
start-up sequence before the robot arms: a policy that needs the base velocity on a backend
that gives none is refused, naming the input and the backend, before anything is written."""

import json
import os

import jax
import numpy as np
import pytest

import dynamics
from hardware import control_loop
from hardware.interface import JointMap, RobotMode, measurement_from_state
from hardware.safety import SafetyLayer
from hardware.startup import MissingInputsError, StartupSequence, missing_inputs
from learning.numpy_policy_runner import NumpyPolicy, PolicyFileError, inputs_from_layout
from learning.policy import Policy
from learning.policy_adapter import PolicyController
from learning.policy_export import (
    export_policy,
    load_numpy_policy,
    observation_layout,
    policy_inputs,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = [os.path.join(ROOT, "examples", "policies", "go2_omni")]  # exported before "inputs"
PROPRIO_POLICY = os.path.join(ROOT, "examples", "policies", "go2_omni_proprio")
PROPRIO = ["base_angular_velocity", "projected_gravity", "joint_q", "joint_qd"]


@pytest.fixture(scope="module")
def model():
    return dynamics.load_robot("go2")


@pytest.fixture(scope="module")
def joint_map(model):
    return JointMap.from_model(model)


def test_inputs_follow_the_observation_layout():
    assert inputs_from_layout(observation_layout()) == ("base_linear_velocity", *PROPRIO)
    assert inputs_from_layout(observation_layout(clock=True)) == ("base_linear_velocity", *PROPRIO)
    assert inputs_from_layout(observation_layout(base_velocity=False)) == tuple(PROPRIO)
    with pytest.raises(PolicyFileError, match="'foot_contact .4.' is not one this runner knows"):
        inputs_from_layout([*observation_layout(), "foot_contact (4)"])
    # the key wins over the layout; a malformed key is refused
    assert policy_inputs({"inputs": ["joint_q"], "observation_layout": []}) == ("joint_q",)
    with pytest.raises(PolicyFileError, match='"inputs" must be a list'):
        policy_inputs({"inputs": "joint_q"})
    with pytest.raises(PolicyFileError, match='neither "inputs" nor "observation_layout"'):
        policy_inputs({})


@pytest.mark.parametrize("folder", SHIPPED, ids=os.path.basename)
def test_shipped_policies_load_and_their_inputs_come_from_the_layout(folder):
    with open(os.path.join(folder, "policy.json")) as f:
        config = json.load(f)
    assert "inputs" not in config  # exported before the key: derived, files left as shipped
    runner = load_numpy_policy(folder)  # the folder's own runner copy, checksum checked
    assert policy_inputs(runner.config) == ("base_linear_velocity", *PROPRIO)
    assert NumpyPolicy.load(folder).inputs == ("base_linear_velocity", *PROPRIO)


def test_the_shipped_proprioceptive_policy_needs_only_what_a_go2_measures():
    runner = load_numpy_policy(PROPRIO_POLICY)
    assert runner.config["inputs"] == PROPRIO
    assert runner.inputs == tuple(PROPRIO)


@pytest.mark.parametrize("base_velocity", [True, False])
def test_an_export_declares_its_inputs(tmp_path, base_velocity):
    policy = Policy.create(jax.random.key(0), 12, hidden=(8, 8), base_velocity=base_velocity)
    export_policy(policy, tmp_path, robot="go2", onnx=False)
    with open(tmp_path / "policy.json") as f:
        config = json.load(f)
    expected = (["base_linear_velocity"] if base_velocity else []) + PROPRIO
    assert config["inputs"] == expected
    assert inputs_from_layout(config["observation_layout"]) == tuple(expected)
    assert load_numpy_policy(tmp_path).inputs == tuple(expected)


class RecordingRobot:
    """Reads `measurement` always; records writes."""

    def __init__(self, joint_map, measurement):
        self.joint_map, self.m, self.writes, self.t = joint_map, measurement, [], 0.0

    def read(self):
        return self.m.replace(timestamp=self.t)

    def write(self, command):
        self.writes.append(command)

    def now(self):
        return self.t

    def advance(self, duration):
        self.t += duration

    def close(self):
        pass


def test_a_policy_needing_a_missing_input_is_refused_before_arming(model, joint_map):
    runner = load_numpy_policy(SHIPPED[0])
    inputs = policy_inputs(runner.config)
    controller = PolicyController(runner, joint_map)
    # a Go2 with its sport service released: proprioception only, no base velocity
    m = measurement_from_state(model.q_standing, np.zeros(model.nv), timestamp=0.0, sequence=0,
                               robot_mode=RobotMode.DAMPING)  # fmt: skip
    blind = m.replace(base_linear_velocity=None, base_position=None, base_state_source=None)
    assert missing_inputs(inputs, blind) == ["base_linear_velocity"]
    robot = RecordingRobot(joint_map, blind)
    startup = StartupSequence(controller, joint_map, required_inputs=inputs,
                              backend="Go2Robot (sport mode released)")  # fmt: skip
    with pytest.raises(MissingInputsError) as err:
        control_loop.run(robot, startup, _safety(joint_map), duration=0.1)
    assert "base_linear_velocity" in str(err.value)
    assert "Go2Robot (sport mode released)" in str(err.value)
    assert robot.writes == []  # nothing was sent: the drivers never armed

    # with the velocity (a simulator's ground truth) it starts, in PASSIVE (damping)
    robot = RecordingRobot(joint_map, m)
    result = control_loop.run(robot, startup, _safety(joint_map), duration=0.1)
    assert robot.writes and np.all(result.log["kp"] == 0)


def _safety(joint_map):
    return SafetyLayer(joint_map)
