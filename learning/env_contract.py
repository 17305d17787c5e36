"""The contract of an environment and of its wrappers, in Brax's shape (`brax.envs.Env`,
`brax/envs/wrappers/training.py`): `reset(key) -> step`, `step(step, action) -> step`, pure JAX,
on ONE environment (`jax.vmap` for a batch).

    core = LocomotionCore(config)                        # physics, reward, termination
    env = AutoReset(NoisyObservations(Pushes(DomainRandomization(core, r), r), noise))
    s = env.reset(key)                                   # EnvStep
    s = env.step(s, action)                              # EnvStep: s.obs, s.reward, s.done

A wrapper takes an environment and is one, with the same `reset`/`step`/`observe`; anything it
does not define is read from the environment inside it (`Wrapper.__getattr__`), so `env.nu`,
`env.model`, `env.sample_command` reach the core through any stack. A new randomisation, a
terrain curriculum or a new noise is a new wrapper, not a branch in the core. A wrapper whose
state outlives an episode keeps it in the `EnvState` and carries it into the next episode in
`restart(ended, fresh)`, which the auto-reset calls.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

import jax


@jax.tree_util.register_dataclass
@dataclass
class EnvStep:
    """What `reset` and `step` return (a pytree; batched: leading axes on every leaf).

    env: the environment's own state, `learning.env_core.EnvState` (the robot's `State(q, v)`,
        last action, PD target, command, steps since the reset, randomised `EnvParams`, PRNG
        key): everything the next `step` needs.
    obs: `(observation_size,)` the observation of `env` the policy sees (with any noise).
    reward: `()` the reward of the step that led here (0 after `reset`).
    done: `()` bool, the episode ended at this step (fell or truncated; False after `reset`).
    info: dict of `()` or `(observation_size,)` arrays about the step that led here
        (`tracking_error` [m/s], `yaw_rate_error` [rad/s], `reward_terms`, `fell`,
        `truncated`, `terminal_obs`; empty after `reset`).

    `step` reads `env` only; `obs`, `reward`, `done` and `info` are outputs.
    """

    env: Any
    obs: Any
    reward: Any
    done: Any
    info: dict

    @staticmethod
    def of(env_state) -> EnvStep:
        """A step holding only an environment state: the input of `step` for a caller that
        carries `EnvState`s (`learning.env.LocomotionEnv.step`)."""
        return EnvStep(env=env_state, obs=None, reward=None, done=None, info={})

    def replace(self, **changes) -> EnvStep:
        return replace(self, **changes)


@runtime_checkable
class Environment(Protocol):
    """An environment: pure functions of one environment's state, jit/vmap/grad-able.

    observation_size: length of `obs`; nu: length of the action `(nu,)` (policy units:
    joint-target offsets, `learning.policy.joint_targets`); dtype: of every float leaf.
    """

    observation_size: int
    nu: int

    def reset(self, key: jax.Array) -> EnvStep:
        """A fresh episode. `key`: raw PRNG key `(2,)` uint32 (`jax.random.PRNGKey`)."""
        ...

    def step(self, state: EnvStep, action: jax.Array) -> EnvStep:
        """One policy step from `state.env` under `action (nu,)`."""
        ...

    def observe(self, env_state) -> jax.Array:
        """The observation `(observation_size,)` of an `EnvState`, as `reset`/`step` report it."""
        ...

    def restart(self, ended, fresh):
        """The `EnvState` that follows an episode that ended in `ended`, from `fresh`, a new
        episode's state (`reset(key).env`): what outlives an episode (a terrain curriculum's
        level) carried over. It must observe as `fresh` does (the reset's observation is
        kept); the core returns `fresh`."""
        ...


class Wrapper:
    """An environment around `env` (Brax's `Wrapper`): by default every method and attribute is
    the inner environment's; a wrapper overrides what it changes."""

    def __init__(self, env: Environment):
        self.env = env

    def reset(self, key) -> EnvStep:
        return self.env.reset(key)

    def step(self, state: EnvStep, action) -> EnvStep:
        return self.env.step(state, action)

    def observe(self, env_state):
        return self.env.observe(env_state)

    def restart(self, ended, fresh):
        return self.env.restart(ended, fresh)

    @property
    def unwrapped(self):
        """The environment core at the bottom of the stack."""
        return getattr(self.env, "unwrapped", self.env)

    def __getattr__(self, name):
        if name.startswith("__") or name == "env":  # copy/pickle probes; no recursion
            raise AttributeError(name)
        return getattr(self.env, name)
