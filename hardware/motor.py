"""The robot side of the interface: the motor drivers' PD law and the robot-side watchdog.

Real drivers run the joint PD at a few kHz on the latest command they received; the simulated
robots (`backends.jax_sim`, `backends.mujoco_sim`, and the network robot server around them)
run this class at their physics rate:

    tau = clip(Kp (q* - q) + Kd (qd* - qd) + tau_ff, -tau_max, tau_max)       [N m], (nu,)

Commands are checked again here (defence in depth; a network client may not run the safety
layer): wrong shape, NaN/inf, negative gains, out-of-order `sequence` and stale `timestamp`
(older than `max_command_age` on the robot clock) are rejected and counted, never applied;
targets beyond the joint limits are clipped and counted.

Watchdog: while ACTIVE, if no command was accepted for more than `command_timeout`, the drivers
switch to DAMPING (`Kp = 0`, `Kd = damping_kd`, `tau_ff = 0`) at the first PD tick past the
deadline, and stay there (latched) until a command with `arm=True` arrives. The drivers start in
DAMPING. `estop()` latches ESTOP (damping) for the life of the process.
"""

from __future__ import annotations

import logging

import numpy as np

from .interface import JointCommand, JointMap, RobotMode
from .safety import TIME_EPS

logger = logging.getLogger(__name__)

REJECTIONS = (
    "rejected_shape",
    "rejected_nonfinite",
    "rejected_gains",
    "rejected_out_of_order",
    "rejected_stale",
    "rejected_estop",
)


class MotorDriver:
    """The actuated joints' drivers of one robot (see module docstring).

    Args:
        joint_map: joint order and limits.
        command_timeout: [s] watchdog timeout.
        max_command_age: [s] commands whose `timestamp` is older are rejected (stale).
        damping_kd: [N m s/rad] Kd of the damping mode; default the standing Kd.
    """

    def __init__(
        self,
        joint_map: JointMap,
        *,
        command_timeout: float = 0.1,
        max_command_age: float = 0.1,
        damping_kd=None,
    ):
        self.joint_map = joint_map
        self.command_timeout = float(command_timeout)
        self.max_command_age = float(max_command_age)
        kd = joint_map.kd_default if damping_kd is None else damping_kd
        self.damping_kd = np.broadcast_to(np.asarray(kd, float), (joint_map.nu,)).copy()
        self.mode = RobotMode.DAMPING
        self.command: JointCommand | None = None
        self.last_accepted = -np.inf  # robot time of the last accepted command
        self.last_sequence: int | None = None
        self.trip_times: list = []  # robot times at which the watchdog fired
        self.counters = {k: 0 for k in ("accepted", "armed", "clipped_targets", *REJECTIONS)}

    # ------------------------------------------------------------- commands
    def submit(self, command: JointCommand, now: float) -> str | None:
        """Validate and take `command` at robot time `now`; returns the rejection kind or None."""
        reason = self._rejection(command, now)
        if reason is not None:
            self.counters[reason] += 1
            return reason
        jm = self.joint_map
        q_target = np.minimum(np.maximum(command.q_target, jm.lower), jm.upper)
        if (q_target != command.q_target).any():
            self.counters["clipped_targets"] += 1
            command = command.replace(q_target=q_target)
        self.command = command
        self.last_accepted = now
        self.last_sequence = command.sequence
        self.counters["accepted"] += 1
        if command.arm and self.mode is RobotMode.DAMPING:
            self.mode = RobotMode.ACTIVE
            self.counters["armed"] += 1
            logger.info("t=%.4f drivers armed", now)
        return None

    def _rejection(self, c: JointCommand, now: float) -> str | None:
        if self.mode is RobotMode.ESTOP:
            return "rejected_estop"
        if c.shape_error(self.joint_map.nu) is not None:
            return "rejected_shape"
        if not c.is_finite():
            return "rejected_nonfinite"
        if (c.kp < 0).any() or (c.kd < 0).any():
            return "rejected_gains"
        if self.last_sequence is not None and c.sequence <= self.last_sequence:
            return "rejected_out_of_order"
        if not np.isfinite(c.timestamp) or now - c.timestamp > self.max_command_age + TIME_EPS:
            return "rejected_stale"
        return None

    def estop(self, now: float) -> None:
        if self.mode is not RobotMode.ESTOP:
            self.mode = RobotMode.ESTOP
            logger.error("t=%.4f E-STOP: drivers in damping until restart", now)

    # ------------------------------------------------------------- PD
    def deadline(self) -> float:
        """Robot time after which the watchdog fires (inf unless ACTIVE)."""
        if self.mode is not RobotMode.ACTIVE:
            return np.inf
        return self.last_accepted + self.command_timeout

    def update(self, now: float) -> None:
        """Run the watchdog at robot time `now` (called at every PD tick)."""
        if self.mode is RobotMode.ACTIVE and now > self.deadline() + TIME_EPS:
            self.mode = RobotMode.DAMPING
            self.trip_times.append(now)
            logger.error(
                "t=%.4f watchdog: no command for %.1f ms, drivers in DAMPING",
                now,
                1e3 * (now - self.last_accepted),
            )

    def active_command(self, q, now: float) -> JointCommand:
        """The command the drivers apply at `now` (the damping command unless ACTIVE)."""
        self.update(now)
        if self.mode is RobotMode.ACTIVE:
            return self.command
        return JointCommand.damping(q, self.damping_kd)

    def torque(self, q, qd, now: float) -> np.ndarray:
        """Joint torques `(nu,)` [N m] at joint state `q`, `qd` (robot time `now`)."""
        return self.active_command(q, now).torque(q, qd, self.joint_map.effort_limit)
