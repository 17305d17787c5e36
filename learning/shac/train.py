"""SHAC's training: configuration, state, the compiled iteration and the training loop.

    from learning.shac import train as shac
    result = shac.train(shac.SHACConfig(env=EnvConfig(robot="go2"), num_envs=64, horizon=32),
                        iterations=500, checkpoint_dir="runs/go2", checkpoint_every=10,
                        resume=True, progress_fn=MetricsLog("runs/go2"))
    result.policy, result.metrics

One iteration (one compiled function, `compiled_iteration`):

1. Actor. The actor loss of an H-step rollout of the N environments and its gradient
   (`losses.rollout_loss`, `losses.actor_loss_and_grad`), clipped to a global norm, Adam. Only
   `policy.mlp` is trained (`eqx.partition`): the observation normaliser is data. A step
   whose gradient is not finite is skipped (and counted).
2. Critic. TD(lambda) targets from the rollout's rewards and the target critic's values
   (`losses.td_lambda_targets`; the last step bootstraps), then `critic_iterations` epochs of
   minibatch Adam on the squared error (`losses.critic_loss`); the target critic follows by
   Polyak averaging `V' <- alpha V' + (1 - alpha) V`.
3. The observation normaliser (shared by policy and critic) absorbs the rollout's observations.

The environments carry over between iterations (their episodes continue); their initial
episode progress is randomised so truncations do not all come at once.
`train` reports each iteration's metrics (to `progress_fn(step, metrics)`, Brax's convention,
and in the result), shows a tqdm progress bar and writes atomic checkpoints
(`learning.checkpoint`) from which a killed run resumes bit for bit.

Devices (`train(devices=D)`, `trajopt.sharding`): the N environments (the global batch) are
split over D devices, N / D each, and everything else is replicated; the iteration is the same
jitted program on these global arrays, so the actor loss's mean over all environments makes
the gradient the devices' average (XLA inserts the all-reduce) and the result is the
one-device result up to the order of the reductions. Checkpoints hold the gathered global
state: a run written on N devices resumes on M. Several processes (`jax.distributed`,
`sharding.initialize_distributed`) share one mesh; process 0 writes the files and calls
`progress_fn`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from dataclasses import dataclass, field

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from tqdm.auto import tqdm

from trajopt import sharding

from .. import checkpoint
from ..env import EnvConfig, EnvState, compile_options, make_env
from ..policy import HIDDEN, Normalizer, Policy, without_base_velocity
from .losses import actor_loss_and_grad, critic_loss, rollout_loss, td_lambda_targets
from .networks import Critic


@dataclass(frozen=True)
class SHACConfig:
    """SHAC hyper-parameters (hashable: it keys the compiled iteration).

    num_envs N, horizon H [policy steps]; gamma, lam: discount and TD(lambda);
    actor_lr, critic_lr: Adam step sizes; adam_betas: SHAC's (0.7, 0.95); grad_clip: global
    norm of the actor gradient; critic_iterations epochs of critic_minibatches minibatches;
    target_alpha: Polyak factor of the target critic; critic_hidden, policy_hidden: MLP widths
    (ELU); update_normalizer: False freezes the policy's normaliser (e.g. a distilled one);
    normalizer_min_std: floor of the normaliser's standard deviation. Near-constant features
    (projected gravity z, a command within an episode) otherwise get a tiny std, and the
    policy's and the critic's input Jacobians, which the actor gradient flows through at
    every step, grow by its inverse: the gradient norm jumps after the first normaliser
    update and training lowers the return;
    seed: PRNG seed of the environments and of fresh networks.
    fast_compile: compile with XLA's backend optimisation level 0 (the iteration compiles
    sooner and runs slower; for tests and short runs).
    critic_bootstrap: add the target critic's `V'` at each segment's end to the actor loss
    (SHAC proper). Off by default, i.e. short-horizon backpropagation of the H-step return
    alone (the critic still trains, and its loss is reported): with the bootstrap the actor
    gradient norm grows within tens of iterations and the return falls below its start;
    without it the gradient norm stays of order one and the policy learns to track.
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


def init_state(config: SHACConfig, policy: Policy | None = None) -> TrainState:
    """A fresh training state: `policy` (or a new one), a new critic, N reset environments with
    their episode progress spread uniformly over `[0, episode_length)`."""
    env = make_env(config.env)
    key = jax.random.PRNGKey(config.seed)
    k_policy, k_critic, k_env, k_progress, k_train = jax.random.split(key, 5)
    if policy is None:
        policy = Policy.create(k_policy, env.nu, config.policy_hidden, clock=env.clock,
                               base_velocity=env.base_velocity)  # fmt: skip
    if policy.base_velocity and not env.base_velocity:
        policy = without_base_velocity(policy)  # a start from a policy that observed it
    if policy.nu != env.nu:
        raise ValueError(f"the policy has {policy.nu} actions, {config.env.robot} has {env.nu}")
    if policy.base_velocity != env.base_velocity:
        raise ValueError("the policy does not observe the base velocity, the environment's "
                         "observe_base_velocity is True")  # fmt: skip
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


def _critic_update(critic, critic_opt, normalized_obs, targets, key, config: SHACConfig):
    """`critic_iterations` epochs of minibatch Adam on `losses.critic_loss`."""
    optimizer = _optimizer(config.critic_lr, config.adam_betas, None)
    params, static = eqx.partition(critic, eqx.is_inexact_array)
    total = normalized_obs.shape[0]
    batch = total // config.critic_minibatches

    def loss_fn(p, o, y):
        return critic_loss(eqx.combine(p, static), o, y)

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
                          **compile_options(config.fast_compile))  # fmt: skip


def compiled_actor_loss(config: SHACConfig):
    """`(policy, target_critic, envs) -> L` jitted (forward only: finite-difference checks)."""
    return _compiled_actor_loss(_rollout_config(config))


@functools.lru_cache(maxsize=8)
def _compiled_actor_loss(config: SHACConfig):
    return eqx.filter_jit(lambda p, c, e: rollout_loss(p, c, e, config)[0],
                          **compile_options(config.fast_compile))  # fmt: skip


@functools.lru_cache(maxsize=8)
def compiled_iteration(config: SHACConfig, mesh=None):
    """`iteration(state) -> (state, stats)`: the actor gradient (`compiled_actor_gradient`),
    then one jitted update of actor, critic, normaliser and statistics. Cached per config (and
    mesh), so all `train` calls with one config (a resumed run too) use the very same compiled
    code. With a `mesh`, `state` must be placed by `shard_state` (it stays so)."""
    gradient = compiled_actor_gradient(config, mesh)
    update = eqx.filter_jit(functools.partial(_update, config=config, mesh=mesh),
                            **compile_options(config.fast_compile))  # fmt: skip

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
    critic, critic_opt, value_loss = _critic_update(
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
        "critic_loss": value_loss,
        "grad_norm": grad_norm,
        "skipped": ~finite,
        "mean_reward": jnp.mean(traj["reward"]),
        "horizon_return": jnp.mean(jnp.sum(traj["reward"], axis=0)),
        "tracking_error": jnp.mean(traj["tracking_error"]),
        "falls": jnp.sum(traj["fell"], dtype=jnp.int32),
        "episodes_done": done_count,
        "episode_return": done_sum / jnp.maximum(done_count, 1),
    }
    if envs.terrain is not None:  # the terrain curriculum's levels (learning.env_terrain)
        stats["terrain_level"] = jnp.mean(envs.terrain.level.astype(jnp.float32))
        stats["terrain_level_max"] = jnp.max(envs.terrain.level)
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


def _replay(history: list, progress_fn) -> None:
    """The records of a resumed run's history, to `progress_fn` in order."""
    for record in history:
        progress_fn(record["env_steps"], record)


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
    progress_fn=None,
) -> TrainResult:
    """Train with SHAC until `iterations` iterations in total are done (module docstring).

    policy: start from this policy (e.g. distilled), else a fresh `Policy.create`.
    checkpoint_dir: write a checkpoint every `checkpoint_every` iterations and at the end
        (the newest `keep` are kept); each holds the metrics so far in its header.
    resume: continue from the newest valid checkpoint in `checkpoint_dir` (its iteration
        counts toward `iterations`); without one, start fresh. A resumed run is bit-for-bit
        the uninterrupted one (same compiled function, same state).
    quiet: no progress bar.
    devices: split the `config.num_envs` environments (the global batch) over this many
        devices, `num_envs / devices` each (`sharding.make_mesh`: the same number from every
        process of a `jax.distributed` run); None: all devices JAX sees, or the plain one-device
        path when it sees one. A checkpoint holds the global state, so a run written with N
        devices resumes with M. In a multi-process run only process 0 writes files and calls
        `progress_fn`; every process returns the same result.
    progress_fn: `progress_fn(step, metrics)` after every iteration, `step` the environment
        steps so far and `metrics` the iteration's record (`TrainResult.metrics`); a resumed
        run first passes it the checkpoint's records, so it sees the whole run
        (`learning.metrics_log.MetricsLog` writes them to `metrics.json` / `metrics.csv`).
    """
    mesh = sharding.default_mesh(devices)
    if mesh is not None:
        sharding.per_device_batch(config.num_envs, mesh)
    main = sharding.is_main_process()
    report = progress_fn if main else None
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
    if report is not None:
        _replay(metrics, report)
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
            if report is not None:
                report(record["env_steps"], record)
    finally:
        bar.close()
    if mesh is not None:  # ordinary arrays on this process's default device
        state = sharding.to_local(state)
    return TrainResult(state.policy, state, metrics, last_checkpoint)
