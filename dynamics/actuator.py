"""The joint PD actuator model with torque limits, shared by simulation, trajectory optimisation
and hardware (the drivers' PD).

    tau = clip(Kp (q* - q) + Kd (qd* - qd) + tau_ff, -tau_max, tau_max)

over the actuated joints (`q[7:]`, `v[6:]` for a floating base). Pure JAX: usable inside
`contact.simulate`, `jit` and `grad`.
"""

from __future__ import annotations

import jax.numpy as jnp

from dynamics.configuration import State
from dynamics.model import Model
from dynamics.robots import record_of


def default_gains(model: Model) -> tuple[float, float]:
    """`(Kp, Kd)` standing gains of a robot: its record's (`dynamics.robots.record_of`; given
    or derived by `dynamics.robot_rules.standing_gains`)."""
    record = record_of(model)
    return record.kp, record.kd


def joint_state(model: Model, state: State):
    """Actuated joint positions and velocities `(nu,), (nu,)`."""
    nq_base = model.nq - model.nu
    return state.q[nq_base:], state.v[model.nv - model.nu :]


def pd_torque(model: Model, state: State, q_target, kp, kd, qd_target=0.0, tau_ff=0.0):
    """Clipped PD torques `(nu,)` toward `q_target (nu,)`; gains scalar or `(nu,)`."""
    q, qd = joint_state(model, state)
    tau = kp * (q_target - q) + kd * (qd_target - qd) + tau_ff
    limit = jnp.asarray(model.effort_limit)[model.nv - model.nu :]
    return jnp.clip(tau, -limit, limit)


def standing_controller(model: Model, kp=None, kd=None, q_target=None):
    """A `controller(state) -> tau` that holds `q_target` (default: the standing pose)."""
    default_kp, default_kd = default_gains(model)
    kp = default_kp if kp is None else kp
    kd = default_kd if kd is None else kd
    target = jnp.asarray(model.q_standing)[model.nq - model.nu :] if q_target is None else q_target
    return lambda state: pd_torque(model, state, target, kp, kd)
