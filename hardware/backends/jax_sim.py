"""This project's simulator as a robot: `contact.step` with the motor drivers' PD at every step.

    robot = SimRobot(dynamics.load_robot("go2"), contact="hard")
    robot.write(command); robot.advance(0.02); measurement = robot.read()

The PD runs inside the simulation at the physics rate (`params.dt`, 2 ms by default), on the
last accepted command, like a robot's motor drivers (`hardware.motor.MotorDriver`, whose
watchdog is checked at every physics step: a chunk of steps is cut at its deadline). Between
watchdog events a command is held constant, so each `advance` is one jitted `fori_loop` over
`contact.step`. The model and the step parameters are constants of that program (compiled once
per model object, equal parameters and contact model, ~10 s for Go2 on 2 cores, shared by the
robots built on them; `SimRobot.compile` does it ahead of time): passed as
arguments, their 26 arrays made the one-step rollout call cost 0.45-0.55 ms instead of
0.25-0.43 ms (Go2, one core, four repeats), too close to a 2 ms physics step for a loaded
machine to keep real time.

Measurements are exact (no noise, no delay): joint and base states from `State(q, v)`, the
accelerometer from the base velocity change over the last step,
`R^T ((R' v'_lin - R v_lin) / dt - g)`, the torque of the last step as `joint_tau`, and each
foot's normal contact force of the last step, `p_n / dt` [N] (`contact.StepInfo.impulse[:, 2]`,
the normal impulse in the contact frame, one contact per foot in the model's foot order), as
`foot_force`; `base_state_source` is "ground_truth".
"""

from __future__ import annotations

import weakref

import jax
import jax.numpy as jnp
import numpy as np

import contact as contact_lib
from contact.plant import JointPD, pd_substep
from dynamics.configuration import State
from dynamics.model import Model

from ..interface import GRAVITY, JointCommand, JointMap, Measurement, rotation_from_quat
from ..motor import MotorDriver
from ..safety import TIME_EPS
from .driven import DrivenRobot


def _held_command_rollout(model, params, state, q_t, qd_t, kp, kd, tau_ff, num_steps, contact):
    """`num_steps` (may be traced) physics steps under the PD law of one held command
    (`contact.plant.pd_substep` in a `fori_loop`, as `contact.plant.hold_pd`).

    Returns `(state_before_last_step, final_state, tau_of_last_step (nu,),
    foot_normal_force_of_last_step (k,) [N])`, the force `p_n / dt` of each foot contact."""
    command = JointPD(q_t, kp, kd, qd_t, tau_ff)

    def body(_, carry):
        s = carry[0]
        nxt, out = pd_substep(model, params, s, command, contact=contact)
        return nxt, s, out.torque, out.info.impulse[:, 2] / params.dt

    tau0 = jnp.zeros(model.nu, dtype=state.v.dtype)
    force0 = jnp.zeros(len(model.foot_frames), dtype=state.v.dtype)
    final, before, tau, force = jax.lax.fori_loop(0, num_steps, body, (state, state, tau0, force0))
    return before, final, tau, force


_ROLLOUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {key: jitted}


def _params_key(params, contact: str) -> tuple:
    """A value key of `(params, contact)`: the tree structure and every leaf's bytes."""
    leaves, treedef = jax.tree_util.tree_flatten(params)
    arrays = [np.asarray(leaf) for leaf in leaves]
    return contact, treedef, tuple((a.dtype.str, a.shape, a.tobytes()) for a in arrays)


def _bound_rollout(model, params, contact):
    """`_held_command_rollout` jitted with `model`, `params` and `contact` fixed:
    `(state, q_t, qd_t, kp, kd, tau_ff, num_steps) -> (before, final, tau, foot_force)`.

    Shared by the robots of one model object and equal parameters (kept while the model lives,
    so the tests' robots of one model compile once)."""
    per_model = _ROLLOUTS.setdefault(model, {})
    key = _params_key(params, contact)
    if key not in per_model:
        model_ref = weakref.ref(model)  # a strong one would keep the cache's key alive

        def rollout(state, q_t, qd_t, kp, kd, tau_ff, num_steps):
            return _held_command_rollout(
                model_ref(), params, state, q_t, qd_t, kp, kd, tau_ff, num_steps, contact
            )

        per_model[key] = jax.jit(rollout)
    return per_model[key]


class SimRobot(DrivenRobot):
    """A `SimulatedRobot` on `contact.step` (see module docstring).

    Args:
        model: the robot.
        params: `contact.StepParams` (default: flat ground, mu 0.8, dt 2 ms).
        contact: "hard", "smooth" or "penalty".
        q0, v0: initial state (default: standing pose at rest).
        joint_map: default `JointMap.from_model(model)`.
        driver: keyword arguments of `MotorDriver` (command_timeout, max_command_age, damping_kd).
    """

    def __init__(
        self,
        model: Model,
        *,
        params=None,
        contact: str = "hard",
        q0=None,
        v0=None,
        joint_map: JointMap | None = None,
        **driver,
    ):
        self.model = model
        self.params = params or contact_lib.StepParams(terrain=contact_lib.flat(friction=0.8))
        self.contact = contact
        self.dt = float(self.params.dt)
        self.joint_map = joint_map or JointMap.from_model(model)
        self.driver = MotorDriver(self.joint_map, **driver)
        q = np.asarray(model.q_standing if q0 is None else q0, dtype=float)
        v = np.zeros(model.nv) if v0 is None else np.asarray(v0, dtype=float)
        self.state = State(jnp.asarray(q), jnp.asarray(v))
        self._before = self.state
        self._tau = np.zeros(model.nu)
        self._foot_force = np.zeros(len(model.foot_frames))
        self.steps = 0
        self.sequence = 0
        self._rollout = _bound_rollout(model, self.params, contact)

    def compile(self) -> None:
        """Compile the physics now (a first `advance` would otherwise wait for it); the state
        does not change."""
        zeros = jnp.zeros(self.model.nu, dtype=self.state.v.dtype)
        jax.block_until_ready(self._rollout(self.state, *(zeros,) * 5, 1))

    # ------------------------------------------------------------- RobotInterface
    def read(self) -> Measurement:
        q, v = np.asarray(self.state.q), np.asarray(self.state.v)
        qb, vb = np.asarray(self._before.q), np.asarray(self._before.v)
        rotation, rotation_before = rotation_from_quat(q[3:7]), rotation_from_quat(qb[3:7])
        if self.steps > 0:
            accel_world = (rotation @ v[0:3] - rotation_before @ vb[0:3]) / self.dt
        else:
            accel_world = np.zeros(3)
        specific_force = rotation.T @ (accel_world + np.array([0.0, 0.0, GRAVITY]))
        self.sequence += 1
        return Measurement(
            timestamp=self.now(),
            sequence=self.sequence,
            joint_q=q[7:].copy(),
            joint_qd=v[6:].copy(),
            base_quat=q[3:7].copy(),
            base_angular_velocity=v[3:6].copy(),
            base_linear_acceleration=specific_force,
            joint_tau=self._tau.copy(),
            base_linear_velocity=v[0:3].copy(),
            base_position=q[0:3].copy(),
            robot_mode=self.driver.mode,
            foot_force=self._foot_force.copy(),
            base_state_source="ground_truth",
        )

    # ------------------------------------------------------------- SimulatedRobot
    def advance(self, duration: float) -> None:
        """Simulate `duration` [s] (a multiple of `dt`) under the drivers' PD."""
        remaining = self.steps_in(duration)
        while remaining > 0:
            now = self.now()
            q_joint = np.asarray(self.state.q)[7:]
            command = self.driver.active_command(q_joint, now)
            # steps i = 0..n-1 start at now + i dt; the watchdog trips at the first start past
            # the deadline, so the held command covers the steps up to it
            n = remaining
            deadline = self.driver.deadline()
            if np.isfinite(deadline):
                n = min(n, int(np.floor((deadline + TIME_EPS - now) / self.dt)) + 1)
            n = max(n, 1)
            self._before, self.state, tau, force = self._rollout(
                self.state, *(jnp.asarray(getattr(command, k)) for k in JointCommand.ARRAYS), n
            )
            self._tau, self._foot_force = np.asarray(tau), np.asarray(force)
            self.steps += n
            remaining -= n
