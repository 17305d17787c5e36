"""Our locomotion environment as a `brax.envs.Env`, and Brax's PPO (the field's baseline) as a
trainer in the shape of `learning.trainer`: `train_brax_ppo(env, config, progress_fn) ->
(policy, metrics)`. Needs the `brax` extra (`pip install -e ".[brax]"`).

    from learning import brax_adapter, trainer
    policy, metrics = trainer.train(EnvConfig(robot="go2", dtype="float32"),
                                    brax_adapter.BraxPPOConfig(num_timesteps=2_000_000))

`BraxEnv` adapts the wrapped environment of `learning.env` (randomisation, pushes, noise and
our own auto-reset, which starts a fresh random episode; Brax's `AutoResetWrapper` would
restart each environment from its first state) to Brax's `State`: `pipeline_state` holds our
`EnvState`, `info` the episode bookkeeping Brax's PPO reads (`truncation`, `episode_done`,
`episode_metrics`, `steps`), `metrics` the tracking error. Brax's PPO then sees only a
`VmapWrapper` around it. Actions are Brax's tanh-squashed ones in `[-1, 1]^nu`, in our policy
units (`learning.policy.joint_targets`).
"""

from __future__ import annotations

import functools
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from brax.envs.base import Env, State
from brax.envs.wrappers.training import VmapWrapper
from brax.training.agents.ppo import networks as ppo_networks
from brax.training.agents.ppo import train as brax_ppo

from .env import EnvConfig, EnvStep, make_env
from .trainer import register


class _JaxWithReplicated(types.ModuleType):
    """`jax` plus `device_put_replicated`, which brax 0.14.2 calls and JAX 0.10 removed from
    its namespace (the implementation is still JAX's own, `jax._src.api`)."""

    def __getattr__(self, name):
        return getattr(jax, name)


def _jax_for_brax() -> None:
    """Give the two Brax modules that call `jax.device_put_replicated` a `jax` that has it;
    JAX itself, and every other module, are left as they are."""
    from brax.training import pmap
    from jax._src.api import device_put_replicated

    view = _JaxWithReplicated("jax")
    view.device_put_replicated = device_put_replicated
    for module in (brax_ppo, pmap):
        if not isinstance(module.jax, _JaxWithReplicated):
            module.jax = view


class BraxEnv(Env):
    """`env` (an `env_contract.Environment` of ONE environment, e.g. `make_env(config).wrapped`)
    as a `brax.envs.Env`: `reset(rng (2,)) -> State`, `step(State, action (nu,)) -> State`,
    float32 observations and rewards, `done` as float."""

    def __init__(self, env):
        self._env = env

    @property
    def observation_size(self) -> int:
        return int(self._env.observation_size)

    @property
    def action_size(self) -> int:
        return int(self._env.nu)

    @property
    def backend(self) -> str:
        return "diffloco"

    def _state(self, s: EnvStep, info: dict) -> State:
        metrics = {"tracking_error": jnp.asarray(info["tracking_error"], jnp.float32)}
        return State(pipeline_state=s.env, obs=s.obs.astype(jnp.float32),
                     reward=jnp.asarray(s.reward, jnp.float32),
                     done=jnp.asarray(s.done, jnp.float32), metrics=metrics,
                     info=info)  # fmt: skip

    def reset(self, rng) -> State:
        s = self._env.reset(rng)
        zero = jnp.zeros((), jnp.float32)
        sums = {"sum_reward": zero, "length": zero, "tracking_error": zero}
        info = {"steps": zero, "truncation": zero, "episode_done": zero, "tracking_error": zero,
                "episode_metrics": sums}  # fmt: skip
        return self._state(s, info)

    def step(self, state: State, action) -> State:
        """One step; the episode sums restart after a `done` (Brax's `EpisodeWrapper`)."""
        s = self._env.step(EnvStep.of(state.pipeline_state), action)
        done = jnp.asarray(s.done, jnp.float32)
        previous = state.info["episode_done"]
        error = jnp.asarray(s.info["tracking_error"], jnp.float32)
        sums = state.info["episode_metrics"]
        sums = {"sum_reward": sums["sum_reward"] * (1 - previous) + s.reward,
                "length": sums["length"] * (1 - previous) + 1.0,
                "tracking_error": sums["tracking_error"] * (1 - previous) + error}  # fmt: skip
        info = {"steps": jnp.where(done > 0, 0.0, state.info["steps"] + 1.0),
                "truncation": jnp.asarray(s.info["truncated"], jnp.float32),
                "episode_done": done, "tracking_error": error,
                "episode_metrics": jax.tree.map(lambda x: x.astype(jnp.float32), sums)}  # fmt: skip
        return self._state(s, info)


class BraxPolicy(eqx.Module):
    """Brax's deterministic PPO policy, `obs (observation_size,) -> action (nu,)` in `[-1, 1]`
    (the tanh of the Gaussian's mean). normalizer: Brax's running observation statistics
    (`.mean (observation_size,)`); policy_params: the policy network's parameters."""

    normalizer: Any
    policy_params: Any
    make_policy: Callable = eqx.field(static=True)

    def __call__(self, obs):
        act = self.make_policy((self.normalizer, self.policy_params), deterministic=True)
        with jax.numpy_rank_promotion("allow"):  # Brax's code broadcasts implicitly
            return act(obs.astype(jnp.float32), jax.random.PRNGKey(0))[0]


@dataclass(frozen=True)
class BraxPPOConfig:
    """Arguments of `brax.training.agents.ppo.train` (its names; see its docstring).
    num_timesteps: environment steps in all; num_evals: times `progress_fn` is called (and
    `policy_params_fn` beside it, after each training epoch); hidden: the policy's and the
    value network's MLP widths. Brax's evaluator is off: `progress_fn` gets the training
    metrics and the trainers' evaluation is ours (`learning.evaluation`)."""

    num_timesteps: int = 1_000_000
    num_envs: int = 256
    unroll_length: int = 20
    batch_size: int = 256
    num_minibatches: int = 8
    num_updates_per_batch: int = 4
    learning_rate: float = 3e-4
    entropy_cost: float = 1e-2
    discounting: float = 0.97
    reward_scaling: float = 1.0
    normalize_observations: bool = True
    hidden: tuple = (128, 128)
    num_evals: int = 10
    seed: int = 0


def train_brax_ppo(env: EnvConfig, config: BraxPPOConfig, progress_fn=None,
                   policy_params_fn=None):  # fmt: skip
    """Brax's PPO on the training environment of `env` (`make_env(env).wrapped` through
    `BraxEnv`). Returns `(BraxPolicy, metrics)`, metrics the list of `progress_fn` records
    (dicts with `env_steps`, `wall_time` [s] and Brax's training metrics, floats).
    progress_fn(step, record): after each of `num_evals` epochs; policy_params_fn(step,
    policy): the `BraxPolicy` after each epoch (e.g. for our evaluation)."""
    if not isinstance(env, EnvConfig):
        raise TypeError(f"env must be a learning.env.EnvConfig, got {type(env).__name__}")
    _jax_for_brax()
    brax_env = BraxEnv(make_env(env).wrapped)
    network_factory = functools.partial(ppo_networks.make_ppo_networks,
                                        policy_hidden_layer_sizes=tuple(config.hidden),
                                        value_hidden_layer_sizes=tuple(config.hidden))  # fmt: skip
    records: list = []
    start = time.perf_counter()

    def report(step, metrics):
        record = {"env_steps": int(step), "wall_time": time.perf_counter() - start}
        record.update({k: float(v) for k, v in metrics.items() if jnp.ndim(v) == 0})
        records.append(record)
        if progress_fn is not None:
            progress_fn(int(step), record)

    def params_fn(step, make_policy, params):
        if policy_params_fn is not None:
            policy_params_fn(int(step), BraxPolicy(params[0], params[1], make_policy))

    with jax.numpy_rank_promotion("allow"):  # Brax's normaliser broadcasts (N, n) with (n,)
        make_policy, params, _ = brax_ppo.train(
            environment=brax_env, num_timesteps=config.num_timesteps, num_envs=config.num_envs,
            episode_length=env.episode_length, wrap_env_fn=lambda e, **_: VmapWrapper(e),
            unroll_length=config.unroll_length, batch_size=config.batch_size,
            num_minibatches=config.num_minibatches,
            num_updates_per_batch=config.num_updates_per_batch,
            learning_rate=config.learning_rate, entropy_cost=config.entropy_cost,
            discounting=config.discounting, reward_scaling=config.reward_scaling,
            normalize_observations=config.normalize_observations, network_factory=network_factory,
            num_evals=config.num_evals, run_evals=False,
            seed=config.seed, progress_fn=report, policy_params_fn=params_fn,
        )  # fmt: skip
    return BraxPolicy(params[0], params[1], make_policy), records


register(BraxPPOConfig, train_brax_ppo)
