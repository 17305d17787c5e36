"""Re-simulate a solved `Trajectory` open loop: its controls applied to the contact simulator.

Independent of the optimiser's knot function: the PD targets (or torques) are held for each
knot and `contact.step` is scanned sub-step by sub-step from the trajectory's first state, so a
single-shooting solution must be reproduced to round-off and a multiple-shooting one up to its
remaining defects.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from contact import ContactModel, StepParams
from contact import step as contact_step
from dynamics.configuration import State
from dynamics.model import Model

from .problem import CONTACT_TOLERANCE, MAX_SWEEPS


def resimulate(
    model: Model,
    params: StepParams,
    traj,
    *,
    substeps: int,
    contact: ContactModel = "smooth",
    num_sweeps: int = 10,
    control: str = "pd",
    kp: float = 0.0,
    tolerance: float | None = None,
):
    """Replay `traj.u` from `(traj.q[0], traj.v[0])`, the impulse solve as `contact.step`'s
    (`num_sweeps` sweeps, to `tolerance` when one is given).

    Returns `(q (T+1, nq), v (T+1, nv), force (T, nfeet, 3), tau (T, nu))`: knot states, mean
    contact forces per knot and the largest motor torque per knot and joint (PD: clipped
    `Kp (u - q)` plus the implicit damping `-params.joint_damping qd`; torque: `tanh`-squashed).
    """
    nvb, nqb = model.nv - model.nu, model.nq - model.nu
    limit = jnp.asarray(model.effort_limit)[nvb:]

    def motor(state, u):
        if control == "pd":
            return jnp.clip(kp * (u - state.q[nqb:]), -limit, limit)
        return limit * jnp.tanh(u / limit)

    def sub(state, u):
        tau = motor(state, u)
        nxt, info = contact_step(model, params, state, tau, contact=contact, num_sweeps=num_sweeps,
                                 tolerance=tolerance)  # fmt: skip
        return nxt, (info.force, tau - params.joint_damping * nxt.v[nvb:])

    def knot(state, u):
        state, (forces, taus) = jax.lax.scan(lambda s, _: sub(s, u), state, None, length=substeps)
        peak = jnp.take_along_axis(taus, jnp.argmax(jnp.abs(taus), axis=0)[None], axis=0)[0]
        return state, (state.q, state.v, jnp.mean(forces, axis=0), peak)

    run = jax.jit(lambda s, us: jax.lax.scan(knot, s, us))
    s0 = State(jnp.asarray(traj.q[0]), jnp.asarray(traj.v[0]))
    _, (q, v, force, tau) = run(s0, jnp.asarray(traj.u))
    q = np.concatenate([np.asarray(traj.q[:1]), np.asarray(q)])
    v = np.concatenate([np.asarray(traj.v[:1]), np.asarray(v)])
    return q, v, np.asarray(force), np.asarray(tau)


def resimulate_problem(problem, traj):
    """`resimulate` with the settings of the problem that produced `traj`."""
    return resimulate(
        problem.model,
        problem.data.params,
        traj,
        substeps=problem.substeps,
        contact=problem.contact,
        num_sweeps=problem.num_sweeps,
        control=problem.control,
        kp=float(problem.data.gains[0]),
        tolerance=problem.contact_tolerance,
    )


def resimulate_finer(problem, traj, *, step: float = 0.002, contact: ContactModel = "hard",
                     num_sweeps: int = MAX_SWEEPS,
                     tolerance: float | None = CONTACT_TOLERANCE):  # fmt: skip
    """`resimulate` of the plan's controls at a contact step of about `step` [s] (the knot
    split into `round(dt_knot / step)` sub-steps), with `contact` and the impulse solve to
    `tolerance` (at most `num_sweeps` sweeps): finer than the planner's, so that a plan which
    holds does not rely on its approximation."""
    if not (np.isfinite(step) and 0.0 < step <= problem.dt_knot):
        raise ValueError(f"step must be in (0, dt_knot = {problem.dt_knot}] s, got {step}")
    substeps = max(int(round(problem.dt_knot / step)), 1)
    params = dataclasses.replace(problem.data.params, dt=problem.dt_knot / substeps)
    return resimulate(problem.model, params, traj, substeps=substeps, contact=contact,
                      num_sweeps=num_sweeps, control=problem.control,
                      kp=float(problem.data.gains[0]), tolerance=tolerance)  # fmt: skip
