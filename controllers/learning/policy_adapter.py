"""A neural policy as a `Controller`: the observation of `controllers.learning.policy` in, joint
position offsets out.

    controller = PolicyController(policy, joint_map)

`policy(observation) -> action` is any callable on NumPy arrays (a jitted JAX/equinox policy,
an ONNX session wrapper, `controllers.learning.policy_export.NumpyPolicy`). The observation
layout, action scaling, rates and gains are defined once, in `controllers.learning.policy` (see
its docstring):

    observation (12 + 3 nu,) = [ base_linear_velocity (3), base_angular_velocity (3),
                                 projected_gravity (3), velocity_command (3),
                                 joint_q - q_default (nu), joint_qd (nu), last_action (nu) ]
    q_target = q_default + action_scale * clip(action, +-ACTION_CLIP),  qd* = 0,  tau_ff = 0

The base linear velocity must be in the measurement (simulation, or a state estimator on
hardware). A policy trained with another layout wraps its own `observation_fn`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from controllers.hardware.interface import JointCommand, JointMap, Measurement, VelocityCommand

from .policy import ACTION_CLIP, ACTION_SCALE


def observation(
    measurement: Measurement, command: VelocityCommand, last_action, joint_map: JointMap
) -> np.ndarray:
    """The observation vector `(12 + 3 nu,)` of `controllers.learning.policy` from a measurement.

    Raises ValueError when the measurement has no base linear velocity."""
    m = measurement
    if m.base_linear_velocity is None:
        raise ValueError(
            "the policy observes the base linear velocity, and the measurement has none: a "
            "state estimator must fill Measurement.base_linear_velocity"
        )
    return np.concatenate(
        [
            m.base_linear_velocity,
            m.base_angular_velocity,
            m.projected_gravity,
            command.as_array()[:3],
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
        action_scale: float = ACTION_SCALE,
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
        q_target = self.joint_map.q_default + self.action_scale * np.clip(
            action, -ACTION_CLIP, ACTION_CLIP
        )
        return JointCommand.create(
            q_target,
            self.kp,
            self.kd,
            nu=self.joint_map.nu,
            timestamp=measurement.timestamp,
        )
