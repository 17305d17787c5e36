"""A differentiable velocity-tracking environment: `reset`, `step`, `observe` as pure functions.

    env = LocomotionEnv(EnvConfig(robot="go2"))
    state = env.reset(key)                                   # one environment (vmap for many)
    state, obs, reward, done, info = env.step(state, action)

`LocomotionEnv` is the training environment of an `EnvConfig`: the core (`env_core`:
physics, reward, observation, termination; its module docstring has the actuator and reward
equations) inside the wrappers of `env_wrappers` (domain randomisation, pushes, observation
noise, auto-reset), assembled by `env_wrappers.wrap`. Its own interface carries the
environment's state `EnvState` and returns a tuple (what the trainers and the evaluation use);
`LocomotionEnv.wrapped` is the same environment in the contract of `env_contract`
(`reset(key) -> EnvStep`, `step(EnvStep, action) -> EnvStep`, Brax's shape).

Everything random is a traced per-environment value sampled at `reset` (`Randomization`), so
one compiled function serves every environment: a payload added to the base (its mass, and its
rotational inertia scaled by the same factor: a load distributed like the base body), the
ground friction, the PD gain scales, the action latency and the push strength. Pushes are
base-velocity kicks `dv_xy` (world frame) at random policy steps.

`info["tracking_error"]` is `|v_xy - c_xy|` [m/s] in the heading frame: the velocity-tracking
error that training and evaluation report. An episode ends when the base drops below
`min_height_fraction` of the standing height or tilts beyond `max_tilt` (fell), or after
`episode_length` steps (truncated); `step` then resets that environment itself
(`lax.stop_gradient` across the reset), so a batched rollout is one `lax.scan`. The state
before the reset is reported in `info["terminal_obs"]` (for a critic's bootstrap).

Pure JAX: `jit`, `vmap` and `grad` (with respect to actions, states and anything upstream,
e.g. policy parameters) pass through; with `contact="smooth"` or `"penalty"` the gradients
are informative (the hard model's are zero through contact switches).

`make_env(config)` is the one `LocomotionEnv` of a config in this process (cached), so the
trainers and the evaluation share its compiled functions.
"""

from __future__ import annotations

import functools

from .env_config import EnvConfig, ObservationNoise, Randomization, RewardWeights
from .env_contract import Environment, EnvStep, Wrapper
from .env_core import (
    OBSERVATION_NOISE_STREAM,
    EnvParams,
    EnvState,
    LocomotionCore,
    heading_frame_velocity,
)
from .env_wrappers import wrap

__all__ = [
    "OBSERVATION_NOISE_STREAM",
    "EnvConfig",
    "EnvParams",
    "EnvState",
    "EnvStep",
    "Environment",
    "LocomotionCore",
    "LocomotionEnv",
    "ObservationNoise",
    "Randomization",
    "RewardWeights",
    "Wrapper",
    "compile_options",
    "heading_frame_velocity",
    "make_env",
]


class LocomotionEnv:
    """The training environment of one `EnvConfig` (module docstring), on ONE environment
    (`jax.vmap` for a batch). Attributes not defined here (`nu`, `model`, `dtype`,
    `observation_size`, `sample_command`, `sample_params`, `step_params`, ...) are those of the
    wrapped stack, and through it of the core.

    core: the `LocomotionCore`; wrapped: the core in its wrappers (`env_wrappers.wrap`)."""

    def __init__(self, config: EnvConfig):
        self.config = config
        self.core = LocomotionCore(config)
        self.wrapped = wrap(self.core, config)

    def reset(self, key) -> EnvState:
        """A fresh environment: standing pose with joint and velocity noise, a new command and
        new randomised parameters. `key`: raw PRNG key `(2,)` uint32 (`jax.random.PRNGKey`)."""
        return self.wrapped.reset(key).env

    def observe(self, state: EnvState):
        """The policy observation `(observation_size,)` of `state` (with the configured noise)."""
        return self.wrapped.observe(state)

    def step(self, state: EnvState, action):
        """One policy step with auto-reset.

        action: `(nu,)` in policy units. Returns `(state, obs (observation_size,), reward (),
        done () bool, info)`; after `done`, `state` and `obs` are those of a fresh episode and
        `info["terminal_obs"]` is the observation before the reset. info: `tracking_error`
        [m/s], `yaw_rate_error` [rad/s], `reward_terms` (dict), `fell`, `truncated`,
        `terminal_obs`."""
        s = self.wrapped.step(EnvStep.of(state), action)
        return s.env, s.obs, s.reward, s.done, s.info

    def __getattr__(self, name):
        if name.startswith("__") or name in ("core", "wrapped", "config"):
            raise AttributeError(name)
        return getattr(self.wrapped, name)


@functools.lru_cache(maxsize=8)
def make_env(config: EnvConfig) -> LocomotionEnv:
    """One `LocomotionEnv` per config (its compiled functions are shared)."""
    return LocomotionEnv(config)


def compile_options(fast_compile: bool) -> dict:
    """Keyword arguments of `jax.jit`/`eqx.filter_jit` for functions that step the environment:
    XLA's backend optimisation level 0 with `fast_compile` (compiles sooner, runs slower)."""
    return {"compiler_options": {"xla_backend_optimization_level": 0}} if fast_compile else {}
