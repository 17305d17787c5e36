"""PPO's training: configuration, the compiled iteration and the loop.

    policy, history = train_ppo(env, PPOConfig(num_envs=64, rollout_steps=32), iterations=200)

Per iteration: `num_envs` environments (`jax.vmap`) run `rollout_steps` policy steps
(`lax.scan`) with actions `a ~ N(policy(obs), diag(exp(log_std))^2)`; advantages by GAE(lambda)
(`losses.gae`); `epochs` passes of minibatch Adam on the clipped surrogate loss
(`losses.ppo_loss`) with global-norm gradient clipping. The observation normaliser inside the
policy is updated from each rollout (before the update, so old and new log-probabilities use
the same statistics).

The environment is duck-typed, the shape of `learning.env.LocomotionEnv`:
`env.reset(key) -> state`, `env.step(state, action) -> (state, obs, reward, done, info)`,
`env.observe(state) -> obs`, `env.nu`; `info["tracking_error"]` (m/s) is reported if present.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from tqdm import tqdm

from trajopt import sharding

from ..policy import Policy
from .losses import gae, ppo_loss
from .networks import ActorCritic, gaussian_log_prob, trainable


@dataclass(frozen=True)
class PPOConfig:
    num_envs: int = 64
    rollout_steps: int = 32
    epochs: int = 4
    minibatches: int = 4
    learning_rate: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    value_coef: float = 0.5
    entropy_coef: float = 1e-3
    max_grad_norm: float = 1.0
    init_log_std: float = -1.0
    hidden: tuple = (128, 128)
    seed: int = 0


def _rollout(env, model: ActorCritic, state, obs, key, steps: int, batch=None):
    """`steps` policy steps in every environment; no gradient flows through the simulator.
    batch: a `NamedSharding` the environments stay split by (None: no constraint)."""

    def body(carry, k):
        state, obs = sharding.constrain(carry, batch)
        mean = jax.vmap(model.policy)(obs)
        std = jnp.broadcast_to(jnp.exp(model.log_std), mean.shape)
        action = mean + std * jax.random.normal(k, mean.shape, mean.dtype)
        logp = gaussian_log_prob(action, mean, model.log_std)
        value = jax.vmap(model.value_of)(obs)
        state, next_obs, reward, done, info = jax.vmap(env.step)(state, action)
        error = info.get("tracking_error", jnp.zeros_like(reward))
        out = (obs, action, logp, value, reward, done.astype(reward.dtype), error)
        return (state, next_obs), sharding.constrain(out, batch)

    keys = jax.random.split(key, steps)
    (state, obs), batch = jax.lax.scan(body, (state, obs), keys)
    return state, obs, jax.lax.stop_gradient(batch)


def make_iteration(env, config: PPOConfig, optimizer, mesh=None):
    """A jitted `(model, opt_state, env_state, obs, key) -> (..., metrics)`: one rollout and its
    PPO update. mesh: the environments (`env_state`, `obs`) are split over its devices, the
    rest replicated (`sharding` module: the minibatch gradients are means over the global
    batch, so the update is the one-device update); the outputs keep those shardings."""
    split = None if mesh is None else sharding.batch_sharding(mesh)

    @eqx.filter_jit
    def iteration(model, opt_state, env_state, obs, key):
        k_roll, k_perm = jax.random.split(key)
        # normaliser from this rollout's observations, before any log-probability is taken
        env_state, last_obs, batch = _rollout(env, model, env_state, obs, k_roll,
                                              config.rollout_steps, split)  # fmt: skip
        obs_b, action, _, value, reward, done, error = batch
        normalizer = model.policy.normalizer.update(obs_b)
        model = eqx.tree_at(lambda m: m.policy.normalizer, model, normalizer)
        # recompute with the updated statistics so the ratio starts at 1
        flat_obs = obs_b.reshape(-1, obs_b.shape[-1])
        flat_act = action.reshape(-1, action.shape[-1])
        mean = jax.vmap(model.policy)(flat_obs)
        old_logp = gaussian_log_prob(flat_act, mean, model.log_std)
        values = jax.vmap(model.value_of)(flat_obs).reshape(value.shape)
        next_values = jax.vmap(model.value_of)(next_value_obs(obs_b, last_obs)).reshape(value.shape)
        adv, ret = gae(reward, values, next_values, done, config.gamma, config.gae_lambda)
        adv = adv.reshape(-1)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        data = (flat_obs, flat_act, old_logp, adv, ret.reshape(-1))
        n = flat_obs.shape[0]
        size = n // config.minibatches
        params, static = eqx.partition(model, trainable(model))

        def minibatch(carry, idx):
            params, opt_state = carry
            part = jax.tree.map(lambda x: x[idx], data)
            grads = jax.grad(lambda p: ppo_loss(eqx.combine(p, static), part, config))(params)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), None

        def epoch(carry, k):
            order = jax.random.permutation(k, n)[: size * config.minibatches]
            carry, _ = jax.lax.scan(minibatch, carry, order.reshape(config.minibatches, size))
            return carry, None

        keys = jax.random.split(k_perm, config.epochs)
        (params, opt_state), _ = jax.lax.scan(epoch, (params, opt_state), keys)
        model = eqx.combine(params, static)
        metrics = {
            "reward": jnp.mean(reward),
            "tracking_error": jnp.mean(error),
            "done_fraction": jnp.mean(done),
            "std": jnp.mean(jnp.exp(model.log_std)),
        }
        if mesh is not None:  # pinned: the next call reuses this executable
            env_state, last_obs = sharding.constrain((env_state, last_obs), split)
            model, opt_state, metrics = sharding.constrain((model, opt_state, metrics),
                                                           sharding.replicated(mesh))  # fmt: skip
        return model, opt_state, env_state, last_obs, metrics

    return iteration


def next_value_obs(obs, last_obs):
    """The observation after each step `(T * N, n)`: the rollout's observations shifted by one,
    with the final observation appended. After a termination this is the next episode's first
    observation, whose value `gae` masks out."""
    return jnp.concatenate([obs[1:], last_obs[None]]).reshape(-1, obs.shape[-1])


def train_ppo(env, config: PPOConfig = PPOConfig(), iterations: int = 100, *,
              policy: Policy | None = None, quiet: bool = False, callback=None,
              time_budget: float | None = None, devices: int | None = None,
              progress_fn=None):  # fmt: skip
    """Train with PPO; returns `(policy, history)`, history a list of per-iteration dicts
    (iteration, env_steps, wall_time [s], reward, tracking_error [m/s], done_fraction, std).
    `callback(model, record)` after each iteration (e.g. evaluation, checkpoints);
    `progress_fn(step, record)` too (`step` the environment steps so far, Brax's convention;
    process 0 alone in a multi-process run; e.g. `learning.metrics_log.MetricsLog`);
    `time_budget` [s]: stop after the iteration that exceeds it (compilation included).
    devices: split the `num_envs` environments (the global batch) over this many devices
    (`sharding.default_mesh`: None uses all devices JAX sees; the same number from each
    process of a `jax.distributed` run); the result is the one-device result up to the order
    of floating-point reductions. Every process returns the same policy. With a mesh, the
    `model` passed to `callback` holds global arrays (`sharding.to_local` copies it here)."""
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    if config.num_envs * config.rollout_steps < config.minibatches:
        raise ValueError("num_envs * rollout_steps must be at least the number of minibatches")
    mesh = sharding.default_mesh(devices)
    if mesh is not None:
        sharding.per_device_batch(config.num_envs, mesh)
    key = jax.random.key(config.seed)
    k_model, k_env, key = jax.random.split(key, 3)
    model = ActorCritic.create(k_model, env.nu, config, policy, clock=getattr(env, "clock", False))
    optimizer = optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                            optax.adam(config.learning_rate))  # fmt: skip
    opt_state = optimizer.init(eqx.filter(model, trainable(model)))
    env_state = jax.vmap(env.reset)(jax.random.split(k_env, config.num_envs))
    obs = jax.vmap(env.observe)(env_state)
    if mesh is not None:  # host values, the same in every process, as global arrays
        rep, split = sharding.replicated(mesh), sharding.batch_sharding(mesh)
        model, opt_state = sharding.put((model, opt_state), rep)
        env_state, obs = sharding.put((env_state, obs), split)
    iteration = make_iteration(env, config, optimizer, mesh)
    history = []
    start = time.perf_counter()
    steps_per_iteration = config.num_envs * config.rollout_steps
    report = progress_fn if sharding.is_main_process() else None
    progress = None
    if not quiet:
        progress = tqdm(total=iterations, desc="PPO", file=sys.stderr)
    for i in range(iterations):
        key, sub = jax.random.split(key)
        if mesh is not None:
            sub = sharding.put(sub, rep)
        model, opt_state, env_state, obs, metrics = iteration(model, opt_state, env_state, obs,
                                                              sub)  # fmt: skip
        record = {k: float(v) for k, v in sharding.to_host(metrics).items()}
        elapsed = time.perf_counter() - start
        record.update({"iteration": i + 1, "env_steps": (i + 1) * steps_per_iteration,
                       "wall_time": elapsed})  # fmt: skip
        history.append(record)
        if callback is not None:
            callback(model, record)
        if report is not None:
            report(record["env_steps"], record)
        if progress is not None:
            progress.update(1)
            progress.set_postfix(reward=f"{record['reward']:.3f}",
                                 err=f"{record['tracking_error']:.3f}",
                                 sps=f"{record['env_steps'] / elapsed:.0f}")  # fmt: skip
        if time_budget is not None and elapsed > time_budget:
            break
    if progress is not None:
        progress.close()
    if mesh is not None:
        model = sharding.to_local(model)
    return model.policy, history
