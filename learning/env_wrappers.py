"""What a training run adds around the locomotion core, one wrapper each (Brax's
`brax/envs/wrappers/training.py`), every one an `env_contract.Environment` around another:

- `DomainRandomization`: per-environment parameters (`EnvParams`) drawn at each reset.
- `Pushes`: base-velocity kicks at random policy steps.
- `NoisyObservations`: uniform noise on the observation the policy sees.
- `AutoReset`: a finished episode restarts inside `step`, so a batched rollout is one scan.

`wrap(core, config)` stacks them in the order the training environment uses; a terrain
curriculum goes in its slot there. Wrappers draw from the named random streams of
`learning.env_core` (`StepKeys`, `ResetKeys`, `OBSERVATION_NOISE_STREAM`), never from a split of
their own, so adding one leaves the others' numbers unchanged.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dynamics import spatial
from dynamics.backend import JaxOps
from dynamics.configuration import State

from .env_config import EnvConfig, ObservationNoise, Randomization
from .env_contract import Environment, EnvStep, Wrapper
from .env_core import OBSERVATION_NOISE_STREAM, EnvParams, reset_keys, step_keys
from .env_terrain import TerrainCurriculum
from .policy import CONTROL_DT


class DomainRandomization(Wrapper):
    """Each reset draws the environment's `EnvParams` uniformly from `ranges`: a payload on
    the base (fraction of the total mass), the ground friction, the PD gain scales, the action
    latency, the push strength bound (uniform in `(0, ranges.push_velocity)`), from the reset's
    `ResetKeys.params` stream."""

    def __init__(self, env: Environment, ranges: Randomization):
        super().__init__(env)
        self.ranges = ranges

    def sample_params(self, key) -> EnvParams:
        """Uniform draws `()` each from `ranges` with `key (2,)`."""
        r = self.ranges
        keys = jax.random.split(key, 6)

        def uniform(k, bounds):
            return jax.random.uniform(k, (), self.dtype, bounds[0], bounds[1])

        return EnvParams(
            payload=uniform(keys[0], r.payload),
            friction=uniform(keys[1], r.friction),
            kp_scale=uniform(keys[2], r.kp_scale),
            kd_scale=uniform(keys[3], r.kd_scale),
            latency=uniform(keys[4], r.latency),
            push_velocity=uniform(keys[5], (0.0, r.push_velocity)),
        )

    def reset(self, key) -> EnvStep:
        s = self.env.reset(key)
        env = s.env.replace(params=self.sample_params(reset_keys(key).params))
        return s.replace(env=env, obs=self.env.observe(env))


class Pushes(Wrapper):
    """After each step, with probability `CONTROL_DT / interval`, a world-frame xy kick to the
    base velocity, uniform in the disk of radius `params.push_velocity` [m/s]:

        v_B[0:3] += R^T [r cos(phi), r sin(phi), 0],  r = push_velocity sqrt(u), phi ~ U(0, 2 pi)

    (`R`: base-to-world rotation). The kick follows the physics and the reward of the step and
    precedes its observation; it is a disturbance, so it carries no gradient."""

    def __init__(self, env: Environment, interval: float):
        if not interval > 0.0:
            raise ValueError(f"interval must be > 0 s, got {interval!r}")
        super().__init__(env)
        self.interval = float(interval)

    def kick(self, sim: State, push_velocity, key) -> State:
        """`sim` with the kick (class docstring) drawn from `key (2,)` added."""
        k_when, k_dir, k_mag = jax.random.split(key, 3)
        happens = jax.random.uniform(k_when, (), self.dtype) < CONTROL_DT / self.interval
        angle = jax.random.uniform(k_dir, (), self.dtype, 0.0, 2 * jnp.pi)
        magnitude = push_velocity * jnp.sqrt(jax.random.uniform(k_mag, (), self.dtype))
        kick_world = magnitude * jnp.stack([jnp.cos(angle), jnp.sin(angle), jnp.zeros_like(angle)])
        quat = sim.q[3:7] / jnp.linalg.norm(sim.q[3:7])
        rotation = spatial.quat_to_rotation(JaxOps(self.dtype), quat)
        kick = jnp.where(happens, rotation.T @ jax.lax.stop_gradient(kick_world), 0.0)
        return State(sim.q, sim.v.at[0:3].add(kick))

    def step(self, state: EnvStep, action) -> EnvStep:
        s = self.env.step(state, action)
        sim = self.kick(s.env.sim, state.env.params.push_velocity, step_keys(state.env.key).push)
        env = s.env.replace(sim=sim)
        return s.replace(env=env, obs=self.env.observe(env))


class NoisyObservations(Wrapper):
    """Uniform observation noise in the legged_gym manner (`ObservationNoise`):

        obs = obs_exact + u * scale,  u ~ U(-1, 1)^(observation_size,)

    drawn from the state's key folded with `OBSERVATION_NOISE_STREAM`, so `observe` of the same
    state gives the same noise; no gradient flows through the noise."""

    def __init__(self, env: Environment, noise: ObservationNoise):
        super().__init__(env)
        self.noise = noise
        self.noise_scale = jnp.asarray(
            noise.scales(env.nu, env.clock, env.base_velocity), env.dtype
        )

    def observe(self, env_state):
        obs = self.env.observe(env_state)
        key = jax.random.fold_in(env_state.key, OBSERVATION_NOISE_STREAM)
        u = jax.random.uniform(key, obs.shape, self.dtype, -1.0, 1.0)
        return obs + jax.lax.stop_gradient(u * self.noise_scale)

    def reset(self, key) -> EnvStep:
        s = self.env.reset(key)
        return s.replace(obs=self.observe(s.env))

    def step(self, state: EnvStep, action) -> EnvStep:
        s = self.env.step(state, action)
        return s.replace(obs=self.observe(s.env))


class AutoReset(Wrapper):
    """After `done`, the step's state and observation are those of a fresh episode, reset from
    the step's `StepKeys.reset` stream with `lax.stop_gradient` across the reset, with what
    outlives the episode carried over (`restart`); `info["terminal_obs"]` is the observation
    before it (a critic's bootstrap):

        env', obs' = (restart(env, reset(k).env), reset(k).obs) if done else (env, obs)

    `where` on every leaf, so a diverged state leaks no NaN into the reset one (the gradient of
    the unselected branch is zero, not its value)."""

    def step(self, state: EnvStep, action) -> EnvStep:
        s = self.env.step(state, action)
        fresh = jax.lax.stop_gradient(self.env.reset(step_keys(state.env.key).reset))
        following = self.env.restart(jax.lax.stop_gradient(s.env), fresh.env)
        env = jax.tree.map(lambda a, b: jnp.where(s.done, a, b), following, s.env)
        obs = jnp.where(s.done, fresh.obs, s.obs)
        return s.replace(env=env, obs=obs, info={**s.info, "terminal_obs": s.obs})


def wrap(core: Environment, config: EnvConfig) -> Environment:
    """The training environment of `config` around `core`:

        AutoReset(NoisyObservations(Pushes(DomainRandomization(core))))

    without `Pushes` when `randomization.push_interval` is 0 and without `NoisyObservations`
    when `observation_noise` is None. With `config.terrain`, a `TerrainCurriculum` wraps
    `DomainRandomization`'s result (it picks each environment's tile at reset, as the
    randomisation picks its parameters, and reads the episode's outcome from `step`), below the
    pushes and the noise."""
    r = config.randomization
    env = DomainRandomization(core, r)
    if config.terrain is not None:
        env = TerrainCurriculum(env, config.terrain)
    if r.push_interval > 0.0:
        env = Pushes(env, r.push_interval)
    if config.observation_noise is not None:
        env = NoisyObservations(env, config.observation_noise)
    return AutoReset(env)
