"""A neural policy as a `Controller`: a fixed observation layout in, joint position offsets out.

    controller = PolicyController(policy, joint_map, action_scale=0.25)

`policy(observation) -> action` is any callable on NumPy arrays (a jitted JAX/flax/equinox
apply with its parameters bound, an ONNX session wrapper, NumPy weights). Layout, the common
one of locomotion policies trained in simulation (no base linear velocity: on hardware it
needs an estimator):

    observation (9 + 3 nu,) = [ base_angular_velocity (3)   gyro, base frame [rad/s]
                                projected_gravity (3)       R^T (0, 0, -1)
                                velocity_command (3)        vx, vy, yaw_rate
                                joint_q - q_default (nu)    [rad]
                                joint_qd (nu)               [rad/s]
                                last_action (nu) ]
    q_target = q_default + action_scale * action,   qd* = 0,   tau_ff = 0,   fixed Kp, Kd

A policy trained with another layout wraps its own `observation_fn`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .interface import JointCommand, JointMap, Measurement, VelocityCommand


def observation(
    measurement: Measurement, command: VelocityCommand, last_action, joint_map: JointMap
) -> np.ndarray:
    """The observation vector `(9 + 3 nu,)` of the layout in the module docstring."""
    m = measurement
    return np.concatenate(
        [
            m.base_angular_velocity,
            m.projected_gravity,
            command.as_array(),
            m.joint_q - joint_map.q_default,
            m.joint_qd,
            np.asarray(last_action, dtype=float),
        ]
    )


class PolicyController:
    """`Controller` around `policy(observation (9 + 3 nu,)) -> action (nu,)`."""

    def __init__(
        self,
        policy: Callable,
        joint_map: JointMap,
        *,
        action_scale: float = 0.25,
        kp=None,
        kd=None,
        observation_fn: Callable = observation,
    ):
        self.policy = policy
        self.joint_map = joint_map
        self.action_scale = action_scale
        self.kp = joint_map.kp_default if kp is None else kp
        self.kd = joint_map.kd_default if kd is None else kd
        self.observation_fn = observation_fn
        self.last_action = np.zeros(joint_map.nu)

    def reset(self, measurement: Measurement) -> None:
        """Clears the action history and calls the policy once (a JAX policy compiles here)."""
        self.last_action = np.zeros(self.joint_map.nu)
        obs = self.observation_fn(measurement, VelocityCommand(), self.last_action, self.joint_map)
        action = np.asarray(self.policy(obs), dtype=float)
        if action.shape != (self.joint_map.nu,):
            nu = self.joint_map.nu
            raise ValueError(f"policy returned shape {action.shape}, expected ({nu},)")

    def __call__(
        self, measurement: Measurement, t: float, command: VelocityCommand
    ) -> JointCommand:
        obs = self.observation_fn(measurement, command, self.last_action, self.joint_map)
        action = np.asarray(self.policy(obs), dtype=float)
        self.last_action = action
        return JointCommand.create(
            self.joint_map.q_default + self.action_scale * action,
            self.kp,
            self.kd,
            nu=self.joint_map.nu,
            timestamp=measurement.timestamp,
        )
