"""A policy alone, rolled out and scored: the one evaluation of SHAC, PPO and distillation.

    ev = evaluate(policy, EnvConfig(robot="go2"), keys, steps=150)        # training environment
    ev = evaluate_policy(policy, Plant("go2"), commands, seconds=3.0)     # distillation plant
    ev["mean_tracking_error"], ev["fell_fraction"]

Two simulators, one way of scoring them:

- `evaluate`: the training environment (`learning.env.LocomotionEnv`, with its
  randomisation) from `reset(keys[i])`, the deterministic policy for `steps` policy steps
  (`vmap` over environments, `lax.scan` over time, one compile per config and length). Used to
  score SHAC and PPO runs (the trainers' benchmarks, the training example).
- `evaluate_policy`: the distillation plant (`learning.plant.Plant`) from standing at rest,
  one run per command (`rollout_policy`, then `tracking_error` of the base velocities). Used by
  DAgger, the failure runs and the distillation example.

Each reports per run, counted after a settle time: the velocity-tracking error `|v_xy - c_xy|`
[m/s], the yaw-rate error `|omega_z - c_yaw|` [rad/s], whether it fell; and `summarize`'s
means over the runs (`mean_<name>`, `fell_fraction`).
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dynamics import load_robot
from dynamics.configuration import State
from trajopt.gait_clock import check_gait_period, gait_clock

from .env import EnvConfig, compile_options, make_env
from .plant import Plant
from .policy import CONTROL_DT, Policy, batched_actions, joint_targets, observation_from_state


def summarize(runs: dict, means) -> dict:
    """`runs` (per-run arrays, `runs["fell"]` among them) plus `mean_<name>` for each name of
    `means` and `fell_fraction` (the fraction of runs that fell), as floats."""
    out = dict(runs)
    for name in means:
        out[f"mean_{name}"] = float(np.mean(runs[name]))
    out["fell_fraction"] = float(np.mean(runs["fell"]))
    return out


# --------------------------------------------------------------------------- environment


@functools.lru_cache(maxsize=8)
def _compiled_evaluation(config: EnvConfig, steps: int, fast_compile: bool = False):
    env = make_env(config)

    def run(policy, keys, commands, settle):
        envs = jax.vmap(env.reset)(keys)
        envs = dataclasses.replace(envs, command=commands.astype(envs.command.dtype))

        def body(envs, _):
            obs = jax.vmap(env.observe)(envs)
            action = batched_actions(policy, obs, env.dtype)
            envs, _, reward, done, info = jax.vmap(env.step)(envs, action)
            errors = (info["tracking_error"], info["yaw_rate_error"])
            height = jax.vmap(env.core.base_height)(envs.sim.q)  # above the ground under it
            return envs, (reward, errors, info["fell"], height)

        _, (reward, (error, yaw_error), fell, height) = jax.lax.scan(body, envs, None,
                                                                     length=steps)  # fmt: skip
        alive = jnp.cumsum(fell, axis=0) == 0  # steps before the first fall
        counted = alive & (jnp.arange(steps) >= settle)[:, None]
        count = jnp.maximum(jnp.sum(counted, 0), 1)
        return {
            "return": jnp.sum(reward * alive, axis=0),
            "tracking_error": jnp.sum(error * counted, axis=0) / count,
            "yaw_rate_error": jnp.sum(yaw_error * counted, axis=0) / count,
            "fell": jnp.any(fell, axis=0),
            "height": height,
        }

    return eqx.filter_jit(run, **compile_options(fast_compile))


@functools.lru_cache(maxsize=8)
def _sampled_commands(config: EnvConfig):
    """`keys (N, 2) -> (N, 3)`: the commands `reset` draws (no physics: a cheap compile)."""
    env = make_env(config)
    return jax.jit(lambda keys: jax.vmap(env.reset)(keys).command)


def evaluate(policy: Policy, config: EnvConfig, keys, steps: int, fast_compile: bool = False,
             commands=None, settle: int = 0) -> dict:  # fmt: skip
    """The policy alone from `reset(keys[i])` for `steps` policy steps, per environment
    (counted until its first fall): `return` (sum of rewards), `tracking_error` (mean
    `|v_xy - c_xy|` [m/s] over the steps from `settle` on), `yaw_rate_error` (mean
    `|omega_z - c_yaw|` [rad/s], likewise), `fell`; plus their means, and the base height
    `(steps, N)` [m] above the ground under the base after each step. commands: `(N, 3)`
    `(vx, vy, yaw_rate)` in place of the sampled ones (held for the whole run; an episode must
    not end by truncation within `steps`). Deterministic for given keys (raw PRNG keys `(N, 2)`)."""
    keys = jnp.asarray(keys)
    if commands is None:
        commands = _sampled_commands(config)(keys)
    commands = jnp.asarray(commands)
    if commands.shape != (keys.shape[0], 3):
        raise ValueError(f"commands must have shape ({keys.shape[0]}, 3) (one per key), "
                         f"got {commands.shape}")  # fmt: skip
    if not 0 <= settle < steps:
        raise ValueError(f"settle must be in [0, steps = {steps}), got {settle}")
    run = _compiled_evaluation(config, steps, fast_compile)
    out = jax.device_get(run(policy, keys, commands, jnp.asarray(settle, jnp.int32)))
    out = {k: np.asarray(v) for k, v in out.items()}
    return summarize(out, ("return", "tracking_error", "yaw_rate_error"))


# --------------------------------------------------------------------------- plant


def _policy_gait_period(policy: Policy, gait_period):
    """`gait_period` checked against the policy: a float if the policy observes the clock,
    None if it does not; ValueError naming gait_period otherwise."""
    if policy.clock and gait_period is None:
        raise ValueError("the policy observes a gait clock: give its gait_period [s]")
    if not policy.clock and gait_period is not None:
        raise ValueError(f"gait_period {gait_period} given, and the policy has no gait clock")
    return None if gait_period is None else check_gait_period(gait_period, "gait_period")


def rollout_policy(policy: Policy, plant: Plant, commands, seconds: float,
                   gait_period: float | None = None):  # fmt: skip
    """The policy alone in the plant from standing at rest, one run per command.

    gait_period [s]: the clock's period, for a policy that observes it (its time is
    `k CONTROL_DT` at policy step k). commands: `(C, 3)` `(vx, vy, yaw_rate)`. Returns
    `(q (C, K+1, nq), v (C, K+1, nv), actions (C, K, nu))` for `K = seconds / CONTROL_DT`
    policy steps (vmap over commands, `lax.scan` over time, one compile per plant and
    length)."""
    period = _policy_gait_period(policy, gait_period)
    model, params, advance, kp, q_default = plant.parts()
    n = int(round(seconds / CONTROL_DT))
    q0 = jnp.asarray(model.q_standing)
    dtype = policy.normalizer.mean.dtype
    times = CONTROL_DT * np.arange(n)
    clocks = jnp.asarray(gait_clock(times, period), q0.dtype) if period else None

    def one(command):
        def body(carry, clock):
            state, last = carry
            obs = observation_from_state(state.q, state.v, command, last, q_default, clock,
                                         policy.base_velocity)  # fmt: skip
            action = policy(obs.astype(dtype)).astype(q0.dtype)
            state = advance(params, state, joint_targets(action, q_default), kp)[0]
            return (state, action), (state.q, state.v, action)

        init = (State(q0, jnp.zeros(model.nv)), jnp.zeros(model.nu))
        _, (qs, vs, actions) = jax.lax.scan(body, init, clocks, length=n)
        return (jnp.concatenate([q0[None], qs]),
                jnp.concatenate([jnp.zeros((1, model.nv)), vs]), actions)  # fmt: skip

    q, v, a = eqx.filter_jit(jax.vmap(one))(jnp.asarray(commands, dtype=q0.dtype))
    return np.asarray(q), np.asarray(v), np.asarray(a)


def tracking_error(q, v, commands, standing_height: float, settle: float = 1.0) -> dict:
    """Velocity tracking of runs `q (C, K+1, nq)`, `v (C, K+1, nv)` against `commands (C, 3)`
    after `settle` [s]: per run the mean `|v_xy - cmd_xy|` [m/s] (base frame, i.e. heading
    frame on level ground), the mean `|omega_z - cmd_yaw|` [rad/s], and whether it fell
    (base below half the standing height, or tilted beyond 60 deg)."""
    first = int(round(settle / CONTROL_DT))
    if first >= v.shape[1]:
        raise ValueError(f"settle {settle} s is longer than the runs")
    cmd = np.asarray(commands, dtype=float)[:, None, :]
    xy = np.linalg.norm(v[:, first:, 0:2] - cmd[:, :, 0:2], axis=-1).mean(axis=1)
    yaw = np.abs(v[:, first:, 5] - cmd[:, :, 2]).mean(axis=1)
    up_z = 1.0 - 2.0 * (q[..., 3] ** 2 + q[..., 4] ** 2)
    fell = np.any(q[..., 2] < 0.5 * standing_height, axis=1) | np.any(up_z < 0.5, axis=1)
    return {"velocity_error": xy, "yaw_rate_error": yaw, "fell": fell}


def evaluate_policy(policy: Policy, plant: Plant, commands, seconds: float = 3.0,
                    settle: float = 1.0, gait_period: float | None = None) -> dict:  # fmt: skip
    """`tracking_error` of `rollout_policy`, plus the means over commands."""
    q, v, _ = rollout_policy(policy, plant, commands, seconds, gait_period)
    out = tracking_error(q, v, commands, float(load_robot(plant.robot).q_standing[2]), settle)
    return summarize(out, ("velocity_error",))
