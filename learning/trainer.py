"""One training signature for every trainer (Brax's shape: the environment, the configuration
and a progress callback in; the policy and its metrics out):

    policy, metrics = train(EnvConfig(robot="go2"), SHACConfig(num_envs=64), iterations=500)
    policy, metrics = train(EnvConfig(robot="go2"), PPOConfig(num_envs=256), iterations=200)

The configuration's type picks the trainer (`register` adds one: `learning.brax_adapter`
registers Brax's PPO). Every trainer is a `Trainer`: `env` the `learning.env.EnvConfig` of the
task, `config` its own hyper-parameters, `progress_fn(step, record)` after each iteration
(`step`: environment steps so far; `record`: a dict of floats with `env_steps` and
`wall_time` [s]); it returns the trained policy (`obs (observation_size,) -> action (nu,)`)
and the list of records. Options of one trainer (`iterations`, `checkpoint_dir`, `quiet`, ...)
pass through as keywords.
"""

from __future__ import annotations

from typing import Any, Protocol

from .env import EnvConfig, make_env
from .ppo import train as ppo
from .shac import train as shac


class Trainer(Protocol):
    """`trainer(env, config, progress_fn=None, **options) -> (policy, metrics)`."""

    def __call__(self, env: EnvConfig, config: Any, progress_fn=None, **options) -> tuple: ...


def train_shac(env: EnvConfig, config: shac.SHACConfig, progress_fn=None, **options) -> tuple:
    """SHAC (`learning.shac.train.train`) on `env`: `config.env` is replaced by `env`;
    options: `iterations`, `policy`, `checkpoint_dir`, `resume`, `quiet`, `devices`, ..."""
    result = shac.train(config.replace(env=env), progress_fn=progress_fn, **options)
    return result.policy, result.metrics


def train_ppo(env: EnvConfig, config: ppo.PPOConfig, progress_fn=None, **options) -> tuple:
    """Our PPO (`learning.ppo.train.train_ppo`) on `make_env(env)`; options: `iterations`,
    `policy`, `quiet`, `callback`, `time_budget`, `devices`."""
    return ppo.train_ppo(make_env(env), config, progress_fn=progress_fn, **options)


TRAINERS: dict = {shac.SHACConfig: train_shac, ppo.PPOConfig: train_ppo}


def register(config_type: type, trainer: Trainer) -> None:
    """Make `train` run `trainer` for configurations of `config_type`."""
    TRAINERS[config_type] = trainer


def train(env: EnvConfig, config, progress_fn=None, **options) -> tuple:
    """Train a policy on `env` with the trainer of `config`'s type (module docstring).
    Returns `(policy, metrics)`."""
    if not isinstance(env, EnvConfig):
        raise TypeError(f"env must be a learning.env.EnvConfig, got {type(env).__name__}")
    trainer = TRAINERS.get(type(config))
    if trainer is None:
        known = ", ".join(t.__name__ for t in TRAINERS)
        raise TypeError(f"config must be one of {known} (learning.brax_adapter registers "
                        f"BraxPPOConfig), got {type(config).__name__}")  # fmt: skip
    return trainer(env, config, progress_fn, **options)
