"""A recorded sensor stream: what a Go2's sensors give while it walks, for replays and timings.

    samples, model = record_walk(3.0)     # one Measurement per 2 ms, 3 s of simulated time

The robot is MuJoCo's Go2 behind Go2 sensor noise (`learning.deployment.sensor_noise`): it
stands up (0.2 s), holds, hands over to the shipped proprioceptive policy at 0.5 s and walks
at `velocity` from `walk_after` s on, as the start-up sequence of a deployment does. Each
`Measurement` is what the noisy sensors reported at that tick (with MuJoCo's true base state,
`base_state_source` "ground_truth", which a consumer may drop).
"""

from __future__ import annotations

import os

import numpy as np

import dynamics
from hardware import control_loop
from hardware.interface import VelocityCommand
from hardware.robot_wrapper import RobotWrapper
from hardware.safety import SafetyConfig, SafetyLayer
from hardware.sensor_noise import NoisySensors

from .deployment import load_runtime, mujoco_robot, policy_controller, sensor_noise, startup
from .policy_export import policy_inputs

SHIPPED_POLICY = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "examples", "policies", "go2_omni_proprio",
)  # fmt: skip


class _Recorder(RobotWrapper):
    """Keeps every new measurement (by `sequence`) that `read` returns."""

    def __init__(self, robot):
        super().__init__(robot)
        self.samples: list = []

    def read(self):
        m = self.robot.read()
        if m is not None and (not self.samples or m.sequence != self.samples[-1].sequence):
            self.samples.append(m)
        return m


def record_walk(seconds: float, *, velocity: float = 0.5, walk_after: float = 0.6,
                seed: int = 3, policy: str = SHIPPED_POLICY) -> tuple[list, object]:  # fmt: skip
    """`(measurements, model)`: `seconds` [s] of the Go2 walking (module docstring), noise
    seeded by `seed`."""
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds!r}")
    model = dynamics.load_robot("go2")
    runner, config = load_runtime(policy, "numpy")
    _, simulator, _ = mujoco_robot(model, seconds=seconds)
    robot = _Recorder(NoisySensors(simulator, sensor_noise(model), seed=seed))
    controller = startup(
        policy_controller(runner, config, robot.joint_map), robot.joint_map,
        stand_duration=0.2, auto=True, controller_after=0.5,
        required_inputs=policy_inputs(config), kp=np.asarray(config["kp"]),
        kd=np.asarray(config["kd"]), backend="MuJoCo",
    )  # fmt: skip
    control_loop.run(
        robot, controller, SafetyLayer(robot.joint_map, SafetyConfig(soft_start_duration=0.2)),
        duration=seconds, control_dt=config["control_dt"], command_dt=0.002,
        command_source=lambda t: VelocityCommand(velocity if t > walk_after else 0.0),
    )  # fmt: skip
    return robot.samples, model
