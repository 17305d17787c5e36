"""The MPC expert of distillation: runs of the plant in which the MPC labels every state.

    dataset, fell = expert_run(mpc, Plant("go2"), (0.5, 0, 0), seconds=10.0, act=act,
                               clock=True)

At every policy step the MPC (`controllers.mpc.MPC`) replans from the plant's state
(`learning.plant.Plant`) and its PD targets `u` become the label

    a* = (u - q_default) / ACTION_SCALE,

while `act(obs, a*)` chooses what the plant executes: the expert plus noise (DART), a mix of
expert and student (DAgger), or the student alone (its failures). A run's name
(`rollout_name`) says everything its samples depend on, so a saved run is reused only for the
same expert.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np

import controllers.mpc
from dynamics.configuration import State

from ..plant import Plant
from ..policy import ACTION_SCALE, CONTROL_DT, joint_targets, observation_from_state
from .dataset import PLANNER, Dataset

# the default expert: `MPC` with a 0.5 s horizon on the distillation's planner (`PLANNER`)
DEFAULT_MPC_OPTIONS = {"horizon": 0.5, **PLANNER}

_OBSERVATION = jax.jit(observation_from_state)  # shared by every expert run of the process


def expert_run(mpc, plant: Plant, command, seconds: float, act, clock: bool):
    """One run from standing at rest with `mpc` as the expert: at every policy step the MPC
    replans from the plant's state (`MPC.reset` at t = 0, then `MPC.update`) and labels it with
    its action `(u - q_default) / ACTION_SCALE`; `act(obs, expert) -> executed action`. Stops
    early if the base falls below half the standing height. Returns `(Dataset of the run
    (source 0), fell)`; the observations end with `mpc.gait_clock(t)` if `clock`."""
    model, params, advance, kp, q_default = plant.parts()
    command = jnp.asarray(command, dtype=jnp.float64)  # the simulation is float64
    mpc.set_command(*np.asarray(command))
    state = State(jnp.asarray(model.q_standing), jnp.zeros(model.nv))
    last = jnp.zeros(model.nu)
    obs_rows, labels, fell = [], [], False
    for k in range(int(round(seconds / CONTROL_DT))):
        t = k * CONTROL_DT
        expert_u = mpc.reset(state, t) if k == 0 else mpc.update(state, t)
        expert = (jnp.asarray(expert_u) - q_default) / ACTION_SCALE
        phase = jnp.asarray(mpc.gait_clock(t)) if clock else None
        obs = _OBSERVATION(state.q, state.v, command, last, q_default, phase)
        obs_rows.append(np.asarray(obs))
        labels.append(np.asarray(expert))
        action = act(obs, expert)
        state = advance(params, state, joint_targets(action, q_default), kp)[0]
        last = action
        if float(state.q[2]) < 0.5 * float(model.q_standing[2]):
            fell = True
            break
    n = len(labels)
    run = Dataset(np.array(obs_rows), np.array(labels), np.tile(np.asarray(command), (n, 1)),
                  np.zeros(n, dtype=int))  # fmt: skip
    return run, fell


def rollout_name(robot, gait, command, seconds, noise, seed, mpc_options=None):
    """The saved run's name: robot, gait, command, length, noise, seed, and the expert's
    `mpc_options` that differ from the default expert's (`DEFAULT_MPC_OPTIONS`, else
    `controllers.mpc.MPC`'s defaults; sorted `_key=value`; none for the default expert), so a
    run of another expert is never reused for this one."""
    vx, vy, wz = command
    expert = "".join(f"_{k}={v}" for k, v in sorted(_non_default_mpc_options(mpc_options).items()))
    # one decimal where it is exact (the names runs were saved under), all digits otherwise:
    # runs of 0.04 s and 0.03 s must not share a name
    length = f"{seconds:.1f}" if round(seconds, 1) == seconds else f"{seconds:g}"
    return (f"dart_{robot}_{gait}_vx{vx:+.2f}_vy{vy:+.2f}_wz{wz:+.2f}_T{length}"
            f"_noise{noise:.3f}_seed{seed}{expert}")  # fmt: skip


def _non_default_mpc_options(mpc_options) -> dict:
    """The entries of `mpc_options` whose value is not the default expert's for that argument
    (`DEFAULT_MPC_OPTIONS`, else `MPC`'s default)."""
    if not mpc_options:
        return {}
    defaults = {
        name: p.default
        for name, p in inspect.signature(controllers.mpc.MPC.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    defaults.update(DEFAULT_MPC_OPTIONS)
    return {k: v for k, v in mpc_options.items() if k not in defaults or defaults[k] != v}
