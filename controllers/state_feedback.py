"""A full-state planner (MPC) as a `Controller`.

    controller = StateFeedbackController(mpc, joint_map)     # mpc: controllers.mpc.MPC

The planner is duck-typed, the shape of `controllers.mpc.MPC`:

    planner.reset(state)                       # first solve (compile) from a dynamics.State
    q_target = planner.update(state, t)        # (nu,) joint PD targets for the next period
    planner.set_command(vx, vy, yaw_rate)      # optional: the operator's velocity command

The adapter builds the model's `State(q, v)` from the measurement (`state_from_measurement`:
base position and velocity must be measured or estimated), forwards the `VelocityCommand`
when it changed, and sends `q_target` with the gains given here, `qd* = 0`, `tau_ff = 0`, the
same PD the planner's model assumes between updates. A planner that raises or returns
non-finite targets makes the safety layer hold, then damp (see `Controller`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dynamics.configuration import State
from hardware.interface import (
    JointCommand,
    JointMap,
    Measurement,
    VelocityCommand,
    state_from_measurement,
)
from hardware.safety import SafetyConfig


def measured_state(measurement: Measurement) -> State:
    """The model's `State(q (nq,), v (nv,))` of a full-state measurement (JAX arrays)."""
    q, v = state_from_measurement(measurement)
    return State(jnp.asarray(q), jnp.asarray(v))


class StateFeedbackController:
    """`Controller` around a planner with `reset(state)`, `update(state, t) -> q_target`."""

    def __init__(self, planner, joint_map: JointMap, kp=None, kd=None):
        self.planner = planner
        self.joint_map = joint_map
        self.kp = joint_map.kp_default if kp is None else kp
        self.kd = joint_map.kd_default if kd is None else kd
        self.command: VelocityCommand | None = None

    def reset(self, measurement: Measurement) -> None:
        self.command = None
        self.planner.reset(measured_state(measurement))

    def __call__(
        self, measurement: Measurement, t: float, command: VelocityCommand
    ) -> JointCommand:
        if command != self.command and hasattr(self.planner, "set_command"):
            self.planner.set_command(command.vx, command.vy, command.yaw_rate)
        self.command = command
        q_target = np.asarray(self.planner.update(measured_state(measurement), t), dtype=float)
        return JointCommand.create(
            q_target, self.kp, self.kd, nu=self.joint_map.nu, timestamp=measurement.timestamp
        )


def mpc_controller(robot: str, joint_map: JointMap, gait: str = "trot", horizon: float = 0.5,
                   iterations: int = 3, **mpc_options) -> StateFeedbackController:  # fmt: skip
    """The receding-horizon planner (`controllers.mpc.MPC`, standing command until the first
    `VelocityCommand`) as a `Controller`; `mpc_options` (e.g. `derivatives="compiled"`,
    `weights`) go to `MPC`, the weights over `controllers.mpc.ONE_ITERATION_WEIGHTS` at any
    iteration count. Three FDDP iterations per cycle walk on MuJoCo in lockstep
    (`tests/controllers/test_mpc.py`); with one, the MPC is not robust to a plant whose
    contact differs from its smooth planning model.

    Why the control-rate weight of `ONE_ITERATION_WEIGHTS` (1e-3, the gait library's 1e-5):
    each cycle re-solves from a state of another plant (MuJoCo, a robot) that the last plan did
    not predict, and at the library's weight the new targets jump from knot to knot. A stiff
    joint follows a jump of its target at up to about `sqrt(Kp / I) x` the jump: HyQ's knees
    (Kp 615, I 0.026 kg m^2: 154 rad/s) passed 1.5x their 12 rad/s velocity limit on MuJoCo at
    0.4 m/s and the safety layer damped the robot after 0.85 s (with its checks off they
    reached 2.9x); at 1e-3 the peak over all joints was 1.1x and HyQ walked 10 s at 0.40 m/s.
    Go1's peak fell from 0.91x to 0.45x (0.39-0.40 m/s either way), and Go2 still walks
    (`tests/controllers/test_mpc.py`'s MuJoCo run: 0.497 m/s at 0.5 m/s, peak 0.44x)."""
    from .mpc import MPC, ONE_ITERATION_WEIGHTS

    weights = {**ONE_ITERATION_WEIGHTS, **(mpc_options.pop("weights", None) or {})}
    planner = MPC(robot, gait, (0.0, 0.0, 0.0), horizon=horizon, iterations=iterations,
                  weights=weights, **mpc_options)  # fmt: skip
    return StateFeedbackController(planner, joint_map)


def mpc_safety_config(soft_start: float = 0.2) -> SafetyConfig:
    """The safety settings the MPC runs with: a short soft start, and a target rate limit of
    30 rad/s (the default, the joint velocity limits, holds Go2's calves to 15.7 rad/s, which
    the planned swing exceeds)."""
    return SafetyConfig(soft_start_duration=soft_start, max_target_rate=30.0)
