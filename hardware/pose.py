"""The simplest `Controller`: hold a fixed joint pose with PD gains.

    controller = PoseController.standing(joint_map)        # Go2's SRDF standing pose, 80/2
    command = controller(measurement, t, VelocityCommand())

It ignores the velocity command. With the safety layer's soft start in front of it, it is the
"stand up and hold" routine of a real robot. `StandUpController` stands up over a chosen time
from wherever the legs are (a robot lying down), then holds the pose.
"""

from __future__ import annotations

import numpy as np

from .interface import JointCommand, JointMap, Measurement, VelocityCommand


class PoseController:
    """Holds `q_target (nu,)` with gains `kp`, `kd` (scalars or `(nu,)`); `qd* = 0`, no
    feed-forward."""

    def __init__(self, q_target, kp, kd):
        self.template = JointCommand.create(q_target, kp, kd)

    @classmethod
    def standing(cls, joint_map: JointMap, kp=None, kd=None) -> PoseController:
        """The model's standing pose with its default standing gains."""
        return cls(
            joint_map.q_default,
            joint_map.kp_default if kp is None else kp,
            joint_map.kd_default if kd is None else kd,
        )

    def reset(self, measurement: Measurement) -> None:
        if measurement.nu != self.template.nu:
            raise ValueError(f"robot has {measurement.nu} joints, pose has {self.template.nu}")

    def __call__(
        self, measurement: Measurement, t: float, command: VelocityCommand
    ) -> JointCommand:
        return self.template.replace(timestamp=measurement.timestamp)


def interpolate_pose(q_start, q_end, s: float) -> np.ndarray:
    """`q_start + smoothstep(s) (q_end - q_start)`, `s` clipped to [0, 1] (zero end slopes)."""
    s = float(np.clip(s, 0.0, 1.0))
    w = s * s * (3.0 - 2.0 * s)
    return np.asarray(q_start, dtype=float) + w * (
        np.asarray(q_end, dtype=float) - np.asarray(q_start, dtype=float)
    )


class StandUpController:
    """Stand up from the measured pose: `q* = interpolate_pose(q_0, q_stand, (t - t_0) / duration)`
    with `q_0` the joint angles at `reset` and `t_0` the first call, then hold `q_stand` (`(nu,)`,
    default the model's standing pose) with gains `kp`, `kd` (default the standing gains)."""

    def __init__(self, joint_map: JointMap, duration: float = 2.0, q_stand=None, kp=None, kd=None):
        self.duration = float(duration)
        q_stand = joint_map.q_default if q_stand is None else q_stand
        self.template = JointCommand.create(
            q_stand,
            joint_map.kp_default if kp is None else kp,
            joint_map.kd_default if kd is None else kd,
        )
        self.q_start: np.ndarray | None = None
        self.t_start: float | None = None

    def reset(self, measurement: Measurement) -> None:
        if measurement.nu != self.template.nu:
            raise ValueError(f"robot has {measurement.nu} joints, pose has {self.template.nu}")
        self.q_start = measurement.joint_q.copy()
        self.t_start = None

    def __call__(
        self, measurement: Measurement, t: float, command: VelocityCommand
    ) -> JointCommand:
        if self.t_start is None:
            self.t_start = t
        s = (t - self.t_start) / self.duration if self.duration > 0 else 1.0
        q = interpolate_pose(self.q_start, self.template.q_target, s)
        return self.template.replace(q_target=q, timestamp=measurement.timestamp)
