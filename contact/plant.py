"""The plant: the joint drivers' PD law and the contact step, over the sub-steps of one held
command. Every simulation of a commanded robot (the optimiser's knots, the closed loop, the
training environment, the simulated robot) steps it here.

Sub-step `k` (length `params.dt`), with the command held:

    q*_k  = q*                                              (held target), or
    q*_k  = q*_{k-1} + clip(q* - q*_{k-1}, -r dt, r dt)      (rate-limited toward it, r (nu,))
    tau_k = clip(Kp (q*_k - q_k) + Kd (qd* - qd_k) + tau_ff, -tau_max, tau_max)
    x_{k+1} = contact.step(model, params, x_k, tau_k)

Joint damping `params.joint_damping` stays inside `contact.step` (implicit), so the torque a
motor delivers over sub-step `k` is `tau_k - d qd_{k+1}` (`delivered_torque`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from dynamics.actuator import pd_torque
from dynamics.configuration import State
from dynamics.model import Model

from .params import StepParams
from .step import StepInfo, step


class JointPD(NamedTuple):
    """A held joint command: targets `q_target (nu,)` [rad], `qd_target (nu,)` [rad/s], gains
    `kp`, `kd` (scalars or `(nu,)`) and the feed-forward torque `tau_ff (nu,)` [N m]."""

    q_target: jax.Array
    kp: jax.Array | float
    kd: jax.Array | float = 0.0
    qd_target: jax.Array | float = 0.0
    tau_ff: jax.Array | float = 0.0


class PlantStep(NamedTuple):
    """One sub-step (stacked over the sub-steps by `simulate_pd`, leading axis `K`)."""

    state: State  # the state the sub-step started from
    q_target: jax.Array  # (nu,) the sub-step's PD target
    torque: jax.Array  # (nu,) the actuator torque tau_k (clipped PD)
    velocity: jax.Array  # (nv,) the velocity after the sub-step, qd_{k+1}
    info: StepInfo  # the contact step's report (forces, residual, bad-state flags)


def pd_substep(model: Model, params: StepParams, state: State, command: JointPD, **step_options):
    """One sub-step of the plant: `(next_state, PlantStep)`. `step_options` go to
    `contact.step` (`contact`, `num_sweeps`, `derivatives`, `rigid_body_derivatives`)."""
    tau = pd_torque(
        model, state, command.q_target, command.kp, command.kd, command.qd_target, command.tau_ff
    )
    nxt, info = step(model, params, state, tau, **step_options)
    return nxt, PlantStep(state, command.q_target, tau, nxt.v, info)


def simulate_pd(
    model: Model,
    params: StepParams,
    state: State,
    command: JointPD,
    num_steps: int,
    *,
    target_rate=None,
    previous_target=None,
    observe=None,
    **step_options,
):
    """`num_steps` (static) sub-steps under `command`: `(final_state, PlantStep stacked (K, ...))`.

    `observe(step: PlantStep) -> pytree`: what to keep of each sub-step (stacked instead of the
    whole `PlantStep`; a caller under `jacfwd` keeps only what it reads).

    With `target_rate (nu,)` [rad/s] the PD target moves from `previous_target (nu,)` toward
    `command.q_target` by at most `target_rate * params.dt` per sub-step (see the module
    docstring); without it the target is held. Differentiable (a `lax.scan`)."""
    rate_limited = target_rate is not None
    if rate_limited and previous_target is None:
        raise ValueError("simulate_pd: target_rate needs previous_target, the last PD target")
    max_step = None if not rate_limited else target_rate * params.dt
    keep = (lambda out: out) if observe is None else observe

    if not rate_limited:  # the state alone is carried

        def held(s, _):
            nxt, out = pd_substep(model, params, s, command, **step_options)
            return nxt, keep(out)

        return jax.lax.scan(held, state, None, length=num_steps)

    def body(carry, _):
        s, last = carry
        target = last + jnp.clip(command.q_target - last, -max_step, max_step)
        nxt, out = pd_substep(model, params, s, command._replace(q_target=target), **step_options)
        return (nxt, target), keep(out)

    (final, _), trace = jax.lax.scan(body, (state, previous_target), None, length=num_steps)
    return final, trace


def hold_pd(
    model: Model, params: StepParams, state: State, command: JointPD, num_steps, **step_options
):
    """`num_steps` sub-steps under the held `command`, where `num_steps` may be traced (a robot
    simulator whose watchdog cuts a command short): `(state_before_last, final_state,
    torque_of_last (nu,))`. Forward only (a `fori_loop` of `pd_substep`)."""

    def body(_, carry):
        s, _, _ = carry
        nxt, out = pd_substep(model, params, s, command, **step_options)
        return nxt, s, out.torque

    tau0 = jnp.zeros(model.nu, dtype=state.v.dtype)
    final, before, tau = jax.lax.fori_loop(0, num_steps, body, (state, state, tau0))
    return before, final, tau


def delivered_torque(model: Model, params: StepParams, trace: PlantStep):
    """`tau_k - d qd_{k+1}` per sub-step (`(nu,)`, or `(K, nu)` stacked): the actuator torque
    plus the step's implicit joint damping (`params.joint_damping`), what the motors deliver."""
    nvb = model.nv - model.nu
    return trace.torque - params.joint_damping * trace.velocity[..., nvb:]


def peak_torque(torques):
    """The signed torque of largest magnitude per joint over the sub-steps: `(K, nu) -> (nu,)`."""
    index = jnp.argmax(jnp.abs(torques), axis=0)[None]
    return jnp.take_along_axis(torques, index, axis=0)[0]


def went_bad(trace: PlantStep):
    """True if any sub-step received or produced an invalid state (`StepInfo.bad_state`,
    `bad_result`: NaN, infinity, a non-unit base quaternion)."""
    return jnp.any(trace.info.bad_state | trace.info.bad_result)
