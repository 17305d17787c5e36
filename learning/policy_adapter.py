"""A neural policy as a `Controller`: the observation of `learning.policy` in, joint
position offsets out.

    controller = PolicyController(policy, joint_map)

`policy(observation) -> action` is any callable on NumPy arrays (a jitted JAX/equinox policy,
an ONNX session wrapper, `learning.policy_export.NumpyPolicy`). The observation
layout, action scaling, rates and gains are defined once, in `learning.policy` (see
its docstring):

    observation (12 + 3 nu,) = [ base_linear_velocity (3), base_angular_velocity (3),
                                 projected_gravity (3), velocity_command (3),
                                 joint_q - q_default (nu), joint_qd (nu), last_action (nu) ]
    q_target = q_default + action_scale * clip(action, +-ACTION_CLIP),  qd* = 0,  tau_ff = 0

With a gait clock (`gait_period`, or the `gait_period` of an exported `NumpyPolicy`), the
observation ends with `trajopt.gait_clock.gait_clock(t, gait_period)` `(3,)`, where `t` [s] is the
measurement's timestamp minus the timestamp of the measurement `reset` received: the time
since the reset on the robot's clock, at which the observed state was sampled (the training
environment's clock is the observed state's time since its reset, `t * CONTROL_DT`). The
loop's `t` argument is not used for it: it is host time, later than the state by the
transport's delay and jitter.

The base linear velocity must be in the measurement (simulation, or a state estimator on
hardware). A policy trained with another layout wraps its own `observation_fn`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hardware.interface import JointCommand, JointMap, Measurement, VelocityCommand
from trajopt.gait_clock import check_gait_period, gait_clock

from .numpy_policy_runner import policy_inputs
from .policy import ACTION_CLIP, ACTION_SCALE


def observation(
    measurement: Measurement,
    command: VelocityCommand,
    last_action,
    joint_map: JointMap,
    clock=None,
    base_velocity: bool = True,
) -> np.ndarray:
    """The observation vector `(12 + 3 nu,)` of `learning.policy` from a measurement,
    `(15 + 3 nu,)` with `clock`, the gait clock `(3,)` (appended); 3 entries fewer without
    `base_velocity` (a policy that does not observe it).

    Raises ValueError when the policy observes the base linear velocity and the measurement
    has none."""
    m = measurement
    if base_velocity and m.base_linear_velocity is None:
        raise ValueError(
            "the policy observes the base linear velocity, and the measurement has none: a "
            "state estimator must fill Measurement.base_linear_velocity"
        )
    parts = [m.base_linear_velocity] if base_velocity else []
    parts += [
        m.base_angular_velocity,
        m.projected_gravity,
        command.as_array()[:3],
        m.joint_q - joint_map.q_default,
        m.joint_qd,
        np.asarray(last_action, dtype=float),
    ]
    if clock is not None:
        parts.append(np.asarray(clock, dtype=float))
    return np.concatenate(parts)


def observes_base_velocity(policy) -> bool:
    """Whether `policy` observes the base linear velocity: a `learning.policy.Policy`'s
    `base_velocity`, an exported policy's inputs (`policy_inputs` of its `config`), else
    True."""
    flag = getattr(policy, "base_velocity", None)
    if flag is not None:
        return bool(flag)
    config = getattr(policy, "config", None)
    return config is None or "base_linear_velocity" in policy_inputs(config)


class PolicyController:
    """`Controller` around `policy(observation (12 + 3 nu,)) -> action (nu,)`.

    gait_period [s]: the policy observes the gait clock with this period (module docstring);
    None: the policy's own `gait_period` attribute if it has one (an exported `NumpyPolicy`),
    else no clock. `observation_fn` is then called with `clock=` `(3,)` as a keyword, and
    with `base_velocity=False` for a policy that does not observe the base velocity
    (`observes_base_velocity`)."""

    def __init__(
        self,
        policy: Callable,
        joint_map: JointMap,
        *,
        action_scale: float = ACTION_SCALE,
        kp=None,
        kd=None,
        observation_fn: Callable = observation,
        gait_period: float | None = None,
    ):
        if gait_period is None:
            gait_period = getattr(policy, "gait_period", None)
        self.gait_period = (
            None if gait_period is None else check_gait_period(gait_period, "gait_period")
        )
        self.clock_start: float | None = None  # [s] the reset measurement's timestamp
        self.policy = policy
        self.joint_map = joint_map
        self.action_scale = action_scale
        self.kp = joint_map.kp_default if kp is None else kp
        self.kd = joint_map.kd_default if kd is None else kd
        self.observation_fn = observation_fn
        self.base_velocity = observes_base_velocity(policy)
        self.last_action = np.zeros(joint_map.nu)

    def reset(self, measurement: Measurement) -> None:
        """Clears the action history and calls the policy once (a JAX policy compiles here)."""
        self.last_action = np.zeros(self.joint_map.nu)
        self.clock_start = float(measurement.timestamp)
        obs = self.observe(measurement, VelocityCommand())
        action = np.asarray(self.policy(obs), dtype=float)
        if action.shape != (self.joint_map.nu,):
            nu = self.joint_map.nu
            raise ValueError(f"policy returned shape {action.shape}, expected ({nu},)")

    def __call__(
        self, measurement: Measurement, t: float, command: VelocityCommand
    ) -> JointCommand:
        obs = self.observe(measurement, command)
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

    def clock(self, measurement: Measurement) -> np.ndarray | None:
        """The gait clock `(3,)` at the measurement's time since the reset, or None without
        one. Raises RuntimeError before `reset`."""
        if self.gait_period is None:
            return None
        if self.clock_start is None:
            raise RuntimeError("the gait clock starts at reset(measurement): call reset first")
        return gait_clock(measurement.timestamp - self.clock_start, self.gait_period)

    def observe(self, measurement: Measurement, command: VelocityCommand) -> np.ndarray:
        """The policy's observation of `measurement` (with the clock, if any)."""
        args = (measurement, command, self.last_action, self.joint_map)
        options = {} if self.base_velocity else {"base_velocity": False}
        clock = self.clock(measurement)
        if clock is not None:
            options["clock"] = clock
        return self.observation_fn(*args, **options)
