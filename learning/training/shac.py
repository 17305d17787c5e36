"""Short-Horizon Actor-Critic (SHAC, Xu et al. 2022): policy gradients by backpropagation
through `LocomotionEnv.step`, a learned critic closing the short horizon.

    result = train(SHACConfig(env=EnvConfig(robot="go2"), num_envs=64, horizon=32),
                   iterations=500, checkpoint_dir="runs/go2", checkpoint_every=10, resume=True)
    result.policy, result.metrics

One iteration (one compiled function, `shac_iteration`):

1. Actor. From the current batch of N environments, roll the policy out for H policy steps
   (`vmap` over environments, `lax.scan` over time, auto-reset inside `step`) and minimise

       L(theta) = -1/(N H) sum_i [ sum_t gamma^(t - t0_i) r_t  +  gamma^(T_i - t0_i) V'(s_T_i) ]

   summed over each environment's segments (a segment ends at a reset or at H); `V'` is the
   target critic at the segment's last state, zero after a fall (a truncated episode keeps it),
   and only with `critic_bootstrap` (off by default, see `SHACConfig`: then `L` is the
   short-horizon return alone).
   `dL/dtheta` by reverse-mode AD through the whole rollout (contact model included), clipped
   to a global norm, Adam. Only `policy.mlp` is trained (`eqx.partition`): the observation
   normaliser is data. A step whose gradient is not finite is skipped (and counted).
2. Critic. TD(lambda) targets from the rollout's rewards and the target critic's values
   (SHAC's recursion; the last step bootstraps), then `critic_iterations` epochs of minibatch
   Adam on the squared error; the target critic follows by Polyak averaging
   `V' <- alpha V' + (1 - alpha) V`.
3. The observation normaliser (shared by policy and critic) absorbs the rollout's observations.

The environments carry over between iterations (their episodes continue); their initial
episode progress is randomised so truncations do not all come at once.
`train` adds metrics, a tqdm progress bar and atomic checkpoints (`checkpoint.py`) from which a
killed run resumes bit for bit.

Devices (`train(devices=D)`, `trajopt.sharding`): the N environments (the global batch) are
split over D devices, N / D each, and everything else is replicated; the iteration is the same
jitted program on these global arrays, so the actor loss's mean over all environments makes
the gradient the devices' average (XLA inserts the all-reduce) and the result is the
one-device result up to the order of the reductions. Checkpoints hold the gathered global
state: a run written on N devices resumes on M. Several processes (`jax.distributed`,
`sharding.initialize_distributed`) share one mesh; process 0 writes the files.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import os
import time
from dataclasses import dataclass, field

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from trajopt import sharding

from ..policy import HIDDEN, Normalizer, Policy
from . import checkpoint
from .env import EnvConfig, EnvState, LocomotionEnv

METRICS_NAME = "metrics"  # metrics.json / metrics.csv next to the checkpoints


@dataclass(frozen=True)
class SHACConfig:
    """SHAC hyper-parameters (hashable: it keys the compiled iteration).

    num_envs N, horizon H [policy steps]; gamma, lam: discount and TD(lambda);
    actor_lr, critic_lr: Adam step sizes; adam_betas: SHAC's (0.7, 0.95); grad_clip: global
    norm of the actor gradient; critic_iterations epochs of critic_minibatches minibatches;
    target_alpha: Polyak factor of the target critic; critic_hidden, policy_hidden: MLP widths
    (ELU); update_normalizer: False freezes the policy's normaliser (e.g. a distilled one);
    normalizer_min_std: floor of the normaliser's standard deviation. Near-constant features
    (projected gravity z, a command within an episode) otherwise get std ~1e-4, so the
    policy's and the critic's input Jacobians, which the actor gradient flows through at
    every step, grow by 1e4 (measured: the gradient norm jumped from 0.5 to 1.5e3 after the
    first normaliser update and training lowered the return);
    seed: PRNG seed of the environments and of fresh networks.
    fast_compile: compile with XLA's backend optimisation level 0 (measured on solo12: the
    iteration compiles in about half the time, 34 s instead of 59 s, and runs slower; for
    tests and short runs).
    critic_bootstrap: add the target critic's `V'` at each segment's end to the actor loss
    (SHAC proper). Off by default, i.e. short-horizon backpropagation of the H-step return
    alone (the critic still trains, and its loss is reported). Measured: Go2, constant
    0.5 m/s command, 32 environments x 32 steps, actor lr 1e-3: without the bootstrap the
    actor gradient norm stayed at 0.3-3 and the evaluation tracking error fell from 0.50 to
    0.047 m/s in 700 iterations with no falls; Solo12, 8 x 8 (the test configuration), with
    the bootstrap the gradient norm grew to 40-90 within 40 iterations and the return fell
    below its start, without it the return rose from 20.4 to 31.6 in 80 iterations; Go2
    forward commands 0-1 m/s with randomisation, 12 min (BENCHMARKS.md): with the bootstrap
    0.676 m/s and 91 % falls at the end, without it 0.166 m/s.
    """

    env: EnvConfig = field(default_factory=EnvConfig)
    num_envs: int = 64
    horizon: int = 32
    gamma: float = 0.99
    lam: float = 0.95
    actor_lr: float = 1e-3
    critic_lr: float = 2e-3
    adam_betas: tuple = (0.7, 0.95)
    grad_clip: float = 1.0
    critic_iterations: int = 16
    critic_minibatches: int = 4
    target_alpha: float = 0.2
    critic_hidden: tuple = (128, 128)
    policy_hidden: tuple = HIDDEN
    update_normalizer: bool = True
    normalizer_min_std: float = 0.1
    seed: int = 0
    fast_compile: bool = False
    critic_bootstrap: bool = False

    def replace(self, **changes) -> SHACConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["env"] = self.env.to_dict()  # without the clock's key when there is no clock
        return d


class Critic(eqx.Module):
    """`V(obs) -> ()`: the policy's normaliser (passed in, not owned), then an ELU MLP."""

    mlp: eqx.nn.MLP

    @staticmethod
    def create(key, obs_size: int, hidden=(128, 128), dtype=jnp.float32) -> Critic:
        return Critic(eqx.nn.MLP(obs_size, "scalar", width_size=hidden[0], depth=len(hidden),
                                 activation=jax.nn.elu, key=key, dtype=dtype))  # fmt: skip

    def __call__(self, normalized_obs):
        return self.mlp(normalized_obs)


class TrainState(eqx.Module):
    """Everything an iteration reads and writes (a checkpoint is this tree).

    policy, critic, target_critic; actor_opt, critic_opt: optax states; env: batched
    `EnvState` (N environments); key: raw PRNG key (critic minibatches); iteration: int32;
    episode_return, episode_length: `(N,)` running sums of the current episodes."""

    policy: Policy
    critic: Critic
    target_critic: Critic
    actor_opt: optax.OptState
    critic_opt: optax.OptState
    env: EnvState
    key: jax.Array
    iteration: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array


def _optimizer(learning_rate: float, betas, clip: float | None):
    adam = optax.adam(learning_rate, b1=betas[0], b2=betas[1])
    return adam if clip is None else optax.chain(optax.clip_by_global_norm(clip), adam)


@functools.lru_cache(maxsize=8)
def make_env(config: EnvConfig) -> LocomotionEnv:
    """One `LocomotionEnv` per config (its compiled functions are shared)."""
    return LocomotionEnv(config)


def init_state(config: SHACConfig, policy: Policy | None = None) -> TrainState:
    """A fresh training state: `policy` (or a new one), a new critic, N reset environments with
    their episode progress spread uniformly over `[0, episode_length)`."""
    env = make_env(config.env)
    key = jax.random.PRNGKey(config.seed)
    k_policy, k_critic, k_env, k_progress, k_train = jax.random.split(key, 5)
    if policy is None:
        policy = Policy.create(k_policy, env.nu, config.policy_hidden, clock=env.clock)
    if policy.nu != env.nu:
        raise ValueError(f"the policy has {policy.nu} actions, {config.env.robot} has {env.nu}")
    if policy.clock != env.clock:
        raise ValueError(
            f"the policy {'observes' if policy.clock else 'does not observe'} a gait clock, the "
            f"environment's gait_period is {config.env.gait_period}"
        )
    dtype = policy.normalizer.mean.dtype
    critic = Critic.create(k_critic, env.observation_size, config.critic_hidden, dtype)
    envs = jax.vmap(env.reset)(jax.random.split(k_env, config.num_envs))
    progress = jax.random.randint(k_progress, (config.num_envs,), 0, config.env.episode_length)
    envs = dataclasses.replace(envs, t=progress.astype(jnp.int32))
    actor = _optimizer(config.actor_lr, config.adam_betas, config.grad_clip)
    critic_opt = _optimizer(config.critic_lr, config.adam_betas, None)
    return TrainState(
        policy=policy,
        critic=critic,
        target_critic=critic,
        actor_opt=actor.init(eqx.filter(policy.mlp, eqx.is_inexact_array)),
        critic_opt=critic_opt.init(eqx.filter(critic, eqx.is_inexact_array)),
        env=envs,
        key=k_train,
        iteration=jnp.zeros((), jnp.int32),
        episode_return=jnp.zeros(config.num_envs, env.dtype),
        episode_length=jnp.zeros(config.num_envs, jnp.int32),
    )


def _stop_gradient(tree):
    """`lax.stop_gradient` on every array leaf of a pytree (modules hold functions too)."""
    return jax.tree.map(lambda x: jax.lax.stop_gradient(x) if eqx.is_array(x) else x, tree)


def _act(policy: Policy, obs, dtype):
    """Batched actions `(N, nu)` in the environment's dtype."""
    pdtype = policy.normalizer.mean.dtype
    return jax.vmap(policy)(obs.astype(pdtype)).astype(dtype)


def _values(critic: Critic, policy: Policy, obs):
    """Batched critic values `(N,)` of raw observations `(N, n_obs)`."""
    pdtype = policy.normalizer.mean.dtype
    return jax.vmap(lambda o: critic(policy.normalizer.normalize(o)))(obs.astype(pdtype))


def rollout_loss(policy: Policy, target_critic, envs: EnvState, config: SHACConfig, mesh=None):
    """The actor loss `L` (module docstring) of `policy` over H steps from `envs`.

    Returns `(L, (envs, traj))`: the final environments and per step `(H, N, ...)`
    observations, rewards, segment ends, next values, tracking errors, falls.
    mesh: a `sharding.make_mesh` mesh: the environments (and every per-environment value of
    each step) stay split over its devices (`sharding` module); None: no constraint."""
    batch = None if mesh is None else sharding.batch_sharding(mesh)
    env = make_env(config.env)
    gamma = config.gamma
    h = config.horizon
    envs = _stop_gradient(envs)  # the rollout starts from data
    critic = _stop_gradient(target_critic)
    frozen = _stop_gradient(policy)  # the critic reads the normaliser only

    def body(carry, t):
        envs, discount, ret, loss = carry
        envs, discount, ret = sharding.constrain((envs, discount, ret), batch)
        obs = jax.vmap(env.observe)(envs)
        action = _act(policy, obs, env.dtype)
        envs, next_obs, reward, done, info = jax.vmap(env.step)(envs, action)
        ret = ret + discount * reward
        last = t == h - 1
        # value of where each segment stops: the terminal state after a truncation, nothing
        # after a fall, the next state at the end of the horizon
        bootstrap_obs = jnp.where(done[:, None], info["terminal_obs"], next_obs)
        value = _values(critic, frozen, bootstrap_obs).astype(ret.dtype)
        value = jnp.where(info["fell"], 0.0, value)
        if not config.critic_bootstrap:  # the critic's target still needs the value
            value_in_loss = jnp.zeros_like(value)
        else:
            value_in_loss = value
        ends = done | last
        loss = loss - jnp.sum(jnp.where(ends, ret + gamma * discount * value_in_loss, 0.0))
        discount = jnp.where(done, 1.0, discount * gamma)
        ret = jnp.where(done, 0.0, ret)
        out = {
            "obs": obs,
            "reward": reward,
            "done": ends.astype(reward.dtype),
            "next_value": jax.lax.stop_gradient(value),
            "episode_done": done,
            "fell": info["fell"],
            "tracking_error": info["tracking_error"],
        }
        return (envs, discount, ret, loss), sharding.constrain(out, batch)

    n = envs.t.shape[0]
    dtype = env.dtype
    init = (envs, jnp.ones(n, dtype), jnp.zeros(n, dtype), jnp.zeros((), dtype))
    (envs, _, _, loss), traj = jax.lax.scan(body, init, jnp.arange(h))
    return loss / (n * h), (envs, traj)


def td_lambda_targets(reward, next_value, done, gamma: float, lam: float):
    """TD(lambda) value targets `(H, N)` (SHAC's recursion, backwards over t):

        lam_t = lam lam_{t+1} (1 - d_t) + d_t
        A_t   = (1 - d_t) (lam gamma A_{t+1} + gamma V_{t+1} + (1 - lam_t) / (1 - lam) r_t)
        B_t   = gamma (V_{t+1} d_t + B_{t+1} (1 - d_t)) + r_t
        y_t   = (1 - lam) A_t + lam_t B_t

    reward, next_value (`V(s_{t+1})`, 0 after a fall), done `(H, N)` (1 where a segment ends,
    including the last step)."""

    def body(carry, x):
        a, b, weight = carry
        r, v, d = x
        weight = weight * lam * (1.0 - d) + d
        a = (1.0 - d) * (lam * gamma * a + gamma * v + (1.0 - weight) / (1.0 - lam) * r)
        b = gamma * (v * d + b * (1.0 - d)) + r
        return (a, b, weight), (1.0 - lam) * a + weight * b

    zeros = jnp.zeros_like(reward[0])
    _, targets = jax.lax.scan(body, (zeros, zeros, jnp.ones_like(zeros)),
                              (reward, next_value, done), reverse=True)  # fmt: skip
    return targets


def _critic_update(critic, critic_opt, normalized_obs, targets, key, config: SHACConfig):
    """`critic_iterations` epochs of minibatch Adam on `mean (V(obs) - target)^2`."""
    optimizer = _optimizer(config.critic_lr, config.adam_betas, None)
    params, static = eqx.partition(critic, eqx.is_inexact_array)
    total = normalized_obs.shape[0]
    batch = total // config.critic_minibatches

    def loss_fn(p, o, y):
        return jnp.mean((jax.vmap(eqx.combine(p, static))(o) - y) ** 2)

    def minibatch(carry, idx):
        p, s = carry
        loss, grads = jax.value_and_grad(loss_fn)(p, normalized_obs[idx], targets[idx])
        updates, s = optimizer.update(grads, s, p)
        return (optax.apply_updates(p, updates), s), loss

    def epoch(carry, k):
        order = jax.random.permutation(k, total)[: batch * config.critic_minibatches]
        carry, losses = jax.lax.scan(minibatch, carry, order.reshape(-1, batch))
        return carry, jnp.mean(losses)

    keys = jax.random.split(key, config.critic_iterations)
    (params, critic_opt), losses = jax.lax.scan(epoch, (params, critic_opt), keys)
    return eqx.combine(params, static), critic_opt, losses[-1]


def _floored(normalizer: Normalizer, config: SHACConfig) -> Normalizer:
    """The normaliser with its variance floored at `normalizer_min_std^2` (see SHACConfig)."""
    floor = jnp.asarray(config.normalizer_min_std**2, normalizer.var.dtype)
    return Normalizer(normalizer.mean, jnp.maximum(normalizer.var, floor), normalizer.count)


def _where_tree(flag, a, b):
    return jax.tree.map(lambda x, y: jnp.where(flag, x, y), a, b)


def actor_loss_and_grad(policy: Policy, target_critic: Critic, envs: EnvState,
                        config: SHACConfig, mesh=None):  # fmt: skip
    """`((L, (envs, traj)), dL/d mlp)`: the actor loss and its gradient with respect to the
    policy's MLP leaves (the normaliser is data, not differentiated).

    With a `mesh`, the environments are split over its devices and the gradient (of the mean
    over all environments: the average of the devices' gradients) is replicated."""
    mlp, mlp_static = eqx.partition(policy.mlp, eqx.is_inexact_array)

    def loss_fn(m):
        candidate = eqx.tree_at(lambda p: p.mlp, policy, eqx.combine(m, mlp_static))
        return rollout_loss(candidate, target_critic, envs, config, mesh)

    (loss, (envs, traj)), grads = jax.value_and_grad(loss_fn, has_aux=True)(mlp)
    if mesh is not None:
        envs = sharding.constrain(envs, sharding.batch_sharding(mesh))
        traj = sharding.constrain(traj, sharding.time_major_batch_sharding(mesh))
        loss, grads = sharding.constrain((loss, grads), sharding.replicated(mesh))
    return (loss, (envs, traj)), grads


def _rollout_config(config: SHACConfig) -> SHACConfig:
    """The fields the rollout depends on (the rest, e.g. learning rates, reset to defaults):
    configs that differ only in optimiser settings share the compiled gradient."""
    return SHACConfig(env=config.env, horizon=config.horizon, gamma=config.gamma,
                      fast_compile=config.fast_compile,
                      critic_bootstrap=config.critic_bootstrap)  # fmt: skip


def compiled_actor_gradient(config: SHACConfig, mesh=None):
    """`actor_loss_and_grad` jitted (the expensive compile: the reverse pass through H steps
    of the simulator), shared by every config with the same rollout, by `train` and by the
    gradient checks; `mesh` as in `actor_loss_and_grad`."""
    return _compiled_actor_gradient(_rollout_config(config), mesh)


@functools.lru_cache(maxsize=8)
def _compiled_actor_gradient(config: SHACConfig, mesh=None):
    return eqx.filter_jit(functools.partial(actor_loss_and_grad, config=config, mesh=mesh),
                          **_compiler_options(config.fast_compile))  # fmt: skip


def compiled_actor_loss(config: SHACConfig):
    """`(policy, target_critic, envs) -> L` jitted (forward only: finite-difference checks)."""
    return _compiled_actor_loss(_rollout_config(config))


@functools.lru_cache(maxsize=8)
def _compiled_actor_loss(config: SHACConfig):
    return eqx.filter_jit(lambda p, c, e: rollout_loss(p, c, e, config)[0],
                          **_compiler_options(config.fast_compile))  # fmt: skip


@functools.lru_cache(maxsize=8)
def compiled_iteration(config: SHACConfig, mesh=None):
    """`iteration(state) -> (state, stats)`: the actor gradient (`compiled_actor_gradient`),
    then one jitted update of actor, critic, normaliser and statistics. Cached per config (and
    mesh), so all `train` calls with one config (a resumed run too) use the very same compiled
    code. With a `mesh`, `state` must be placed by `shard_state` (it stays so)."""
    gradient = compiled_actor_gradient(config, mesh)
    update = eqx.filter_jit(functools.partial(_update, config=config, mesh=mesh),
                            **_compiler_options(config.fast_compile))  # fmt: skip

    def iteration(state: TrainState):
        (loss, (envs, traj)), grads = gradient(state.policy, state.target_critic, state.env)
        return update(state, loss, grads, envs, traj)

    return iteration


def _place(state: TrainState, mesh, place) -> TrainState:
    """`place(tree, sharding)` on each field: the per-environment ones (`env`,
    `episode_return`, `episode_length`) split over the mesh, the rest replicated."""
    rep, batch = sharding.replicated(mesh), sharding.batch_sharding(mesh)
    return TrainState(
        policy=place(state.policy, rep),
        critic=place(state.critic, rep),
        target_critic=place(state.target_critic, rep),
        actor_opt=place(state.actor_opt, rep),
        critic_opt=place(state.critic_opt, rep),
        env=place(state.env, batch),
        key=place(state.key, rep),
        iteration=place(state.iteration, rep),
        episode_return=place(state.episode_return, batch),
        episode_length=place(state.episode_length, batch),
    )


def shard_state(state: TrainState, mesh) -> TrainState:
    """A host-side state (e.g. `init_state` or a loaded checkpoint, the same in every process)
    as global arrays on `mesh`: environments split, everything else replicated."""
    sharding.per_device_batch(state.episode_return.shape[0], mesh)
    return _place(state, mesh, sharding.put)


def _update(state: TrainState, loss, grads, envs, traj, config: SHACConfig, mesh=None):
    """Steps 1 (the Adam step, skipped if the gradient is not finite), 2 and 3 of the module
    docstring, and the iteration's statistics."""
    actor = _optimizer(config.actor_lr, config.adam_betas, config.grad_clip)
    mlp, mlp_static = eqx.partition(state.policy.mlp, eqx.is_inexact_array)
    grad_norm = optax.tree.norm(grads)
    finite = jnp.isfinite(grad_norm) & jnp.isfinite(loss)
    grads = jax.tree.map(lambda g: jnp.where(finite, g, 0.0), grads)
    updates, actor_opt = actor.update(grads, state.actor_opt, mlp)
    new_mlp = _where_tree(finite, optax.apply_updates(mlp, updates), mlp)
    actor_opt = _where_tree(finite, actor_opt, state.actor_opt)
    policy = eqx.tree_at(lambda p: p.mlp, state.policy, eqx.combine(new_mlp, mlp_static))

    # critic on the rollout, with the normaliser of the rollout
    targets = td_lambda_targets(traj["reward"], traj["next_value"], traj["done"],
                                config.gamma, config.lam)  # fmt: skip
    h, n = targets.shape
    pdtype = state.policy.normalizer.mean.dtype
    obs = traj["obs"].reshape(h * n, -1).astype(pdtype)
    normalized = jax.vmap(state.policy.normalizer.normalize)(obs)
    key, k_critic = jax.random.split(state.key)
    critic, critic_opt, critic_loss = _critic_update(
        state.critic, state.critic_opt, normalized, targets.reshape(-1).astype(pdtype),
        k_critic, config,
    )  # fmt: skip
    alpha = config.target_alpha
    target_critic = jax.tree.map(
        lambda t, c: alpha * t + (1.0 - alpha) * c if eqx.is_inexact_array(t) else t,
        state.target_critic, critic,
    )  # fmt: skip
    if config.update_normalizer:
        policy = policy.with_normalizer(_floored(policy.normalizer.update(obs), config))

    # episode bookkeeping (returns of episodes that ended in this rollout)
    def episodes(carry, x):
        ret, length, done_sum, done_count = carry
        r, d = x
        ret, length = ret + r, length + 1
        done_sum = done_sum + jnp.sum(jnp.where(d, ret, 0.0))
        done_count = done_count + jnp.sum(d, dtype=jnp.int32)
        length = jnp.where(d, 0, length).astype(jnp.int32)
        return (jnp.where(d, 0.0, ret), length, done_sum, done_count), None

    init = (state.episode_return, state.episode_length, jnp.zeros((), envs.sim.q.dtype),
            jnp.zeros((), jnp.int32))  # fmt: skip
    (ep_ret, ep_len, done_sum, done_count), _ = jax.lax.scan(
        episodes, init, (traj["reward"], traj["episode_done"])
    )
    stats = {
        "actor_loss": loss,
        "critic_loss": critic_loss,
        "grad_norm": grad_norm,
        "skipped": ~finite,
        "mean_reward": jnp.mean(traj["reward"]),
        "horizon_return": jnp.mean(jnp.sum(traj["reward"], axis=0)),
        "tracking_error": jnp.mean(traj["tracking_error"]),
        "falls": jnp.sum(traj["fell"], dtype=jnp.int32),
        "episodes_done": done_count,
        "episode_return": done_sum / jnp.maximum(done_count, 1),
    }
    new_state = TrainState(
        policy=policy,
        critic=critic,
        target_critic=target_critic,
        actor_opt=actor_opt,
        critic_opt=critic_opt,
        env=envs,
        key=key,
        iteration=state.iteration + 1,
        episode_return=ep_ret,
        episode_length=ep_len,
    )
    if mesh is not None:  # the next call gets the shardings this one got: no recompilation
        new_state = _place(new_state, mesh, sharding.constrain)
        stats = sharding.constrain(stats, sharding.replicated(mesh))
    return new_state, stats


def _compiler_options(fast_compile: bool) -> dict:
    return {"compiler_options": {"xla_backend_optimization_level": 0}} if fast_compile else {}


@functools.lru_cache(maxsize=8)
def _compiled_evaluation(config: EnvConfig, steps: int, fast_compile: bool = False):
    env = make_env(config)

    def run(policy, keys, commands, settle):
        envs = jax.vmap(env.reset)(keys)
        envs = dataclasses.replace(envs, command=commands.astype(envs.command.dtype))

        def body(envs, _):
            obs = jax.vmap(env.observe)(envs)
            envs, _, reward, done, info = jax.vmap(env.step)(envs, _act(policy, obs, env.dtype))
            errors = (info["tracking_error"], info["yaw_rate_error"])
            return envs, (reward, errors, info["fell"], envs.sim.q[:, 2])

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

    return eqx.filter_jit(run, **_compiler_options(fast_compile))


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
    `|omega_z - c_yaw|` [rad/s], likewise), `fell`; plus their means, and the
    base height `(steps, N)` [m] after each step. commands: `(N, 3)` `(vx, vy, yaw_rate)` in
    place of the sampled ones (held for the whole run; an episode must not end by
    truncation within `steps`). Deterministic for given keys (raw PRNG keys `(N, 2)`)."""
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
    out["mean_return"] = float(np.mean(out["return"]))
    out["mean_tracking_error"] = float(np.mean(out["tracking_error"]))
    out["mean_yaw_rate_error"] = float(np.mean(out["yaw_rate_error"]))
    out["fell_fraction"] = float(np.mean(out["fell"]))
    return out


@dataclass
class TrainResult:
    """`policy` (the trained one), the final `state` (`TrainState`), per-iteration `metrics`
    (dicts: iteration, env_steps, wall_time [s], mean_return (H-step return per
    environment), tracking_error [m/s], ...), and the last checkpoint path (or None)."""

    policy: Policy
    state: TrainState
    metrics: list
    checkpoint: str | None = None


def _header(config: SHACConfig, metrics: list) -> dict:
    return {"config": config.to_dict(), "metrics": metrics}


def write_metrics(folder: str, metrics: list) -> tuple[str, str]:
    """`metrics.json` and `metrics.csv` in `folder` (atomically replaced). Returns the paths."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    for ext in ("json", "csv"):
        path = os.path.join(folder, f"{METRICS_NAME}.{ext}")
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", newline="") as f:
            if ext == "json":
                json.dump(metrics, f, indent=1)
            elif metrics:
                writer = csv.DictWriter(f, fieldnames=list(metrics[0].keys()))
                writer.writeheader()
                writer.writerows(metrics)
        os.replace(tmp, path)
        paths.append(path)
    return paths[0], paths[1]


def train(
    config: SHACConfig,
    policy: Policy | None = None,
    *,
    iterations: int = 100,
    checkpoint_dir: str | None = None,
    checkpoint_every: int = 10,
    resume: bool = False,
    keep: int = 3,
    quiet: bool = False,
    devices: int | None = None,
) -> TrainResult:
    """Train with SHAC until `iterations` iterations in total are done (module docstring).

    policy: start from this policy (e.g. distilled), else a fresh `Policy.create`.
    checkpoint_dir: write a checkpoint every `checkpoint_every` iterations and at the end
        (the newest `keep` are kept), and `metrics.json` / `metrics.csv` beside them.
    resume: continue from the newest valid checkpoint in `checkpoint_dir` (its iteration
        counts toward `iterations`); without one, start fresh. A resumed run is bit-for-bit
        the uninterrupted one (same compiled function, same state).
    quiet: no progress bar.
    devices: split the `config.num_envs` environments (the global batch) over this many
        devices, `num_envs / devices` each (`sharding.make_mesh`: the same number from every
        process of a `jax.distributed` run); None: all devices JAX sees, or the plain one-device
        path when it sees one. A checkpoint holds the global state, so a run written with N
        devices resumes with M. In a multi-process run only process 0 writes files; every
        process returns the same result.
    """
    from tqdm.auto import tqdm

    mesh = sharding.default_mesh(devices)
    if mesh is not None:
        sharding.per_device_batch(config.num_envs, mesh)
    main = sharding.is_main_process()
    state = init_state(config, policy)
    metrics: list = []
    last_checkpoint = None
    if resume and checkpoint_dir is not None:
        loaded = checkpoint.load_latest(checkpoint_dir, state)
        if loaded is not None:
            state, header = loaded
            if header.get("config") != json.loads(json.dumps(config.to_dict())):
                raise ValueError(f"the checkpoint in {checkpoint_dir} was written with another "
                                 f"configuration: {header.get('config')}")  # fmt: skip
            metrics = list(header.get("metrics", []))
            last_checkpoint = checkpoint.checkpoint_path(checkpoint_dir, int(state.iteration))
    start = int(state.iteration)
    if mesh is not None:
        state = shard_state(state, mesh)
    iteration_fn = compiled_iteration(config, mesh)
    wall = metrics[-1]["wall_time"] if metrics else 0.0
    steps_per_iteration = config.num_envs * config.horizon
    bar = tqdm(total=iterations, initial=min(start, iterations), disable=quiet or not main,
               unit="it",
               dynamic_ncols=True)  # fmt: skip
    try:
        for it in range(start, iterations):
            began = time.perf_counter()
            state, stats = iteration_fn(state)
            stats = {k: v.item() for k, v in sharding.to_host(stats).items()}
            seconds = time.perf_counter() - began
            wall += seconds
            record = {
                "iteration": it + 1,
                "env_steps": (it + 1) * steps_per_iteration,
                "wall_time": wall,
                "mean_return": stats.pop("horizon_return"),
                "tracking_error": stats.pop("tracking_error"),
                "env_steps_per_s": steps_per_iteration / seconds,
                **{k: (bool(v) if k == "skipped" else v) for k, v in stats.items()},
            }
            metrics.append(record)
            bar.update(1)
            bar.set_postfix(reward=f"{record['mean_reward']:.3f}",
                            track=f"{record['tracking_error']:.3f}m/s",
                            sps=f"{record['env_steps_per_s']:.0f}")  # fmt: skip
            if checkpoint_dir is not None and (
                (it + 1) % checkpoint_every == 0 or it + 1 == iterations
            ):
                # the global state, gathered (every process takes part); process 0 writes it
                host = state if mesh is None else sharding.to_host(state)
                last_checkpoint = checkpoint.checkpoint_path(checkpoint_dir, it + 1)
                if main:
                    checkpoint.save(checkpoint_dir, it + 1, host, _header(config, metrics), keep)
                    write_metrics(checkpoint_dir, metrics)
    finally:
        bar.close()
    if mesh is not None:  # ordinary arrays on this process's default device
        state = sharding.to_local(state)
    return TrainResult(state.policy, state, metrics, last_checkpoint)

