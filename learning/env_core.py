"""The locomotion environment's core: physics, reward, observation and termination of ONE
environment, in the contract of `learning.env_contract` (`reset(key) -> EnvStep`,
`step(EnvStep, action) -> EnvStep`). Randomisation, pushes, observation noise and the auto-reset
are wrappers around it (`learning.env_wrappers`); the core alone runs at the nominal parameters
(`nominal_params`) and does not reset itself.

One policy step (`CONTROL_DT` = 20 ms) is `decimation = CONTROL_DT / sim_dt` physics steps of
`contact.step` under the joint PD toward the held targets of `learning.policy`:

    a_applied = (1 - latency) a_t + latency a_{t-1}          (latency in [0, 1]: 0 or 1 step, blend)
    q*        = joint_targets(a_applied, q_default)
    q*_k      = q*_{k-1} + clip(clip(q*, q_min, q_max) - q*_{k-1}, +-qd_max sim_dt)
                                                              the safety layer's target limits
    tau       = clip(Kp s_p (q*_k - q), +-tau_max)           recomputed at every physics step
    (M + dt D) v+ = ... - D v,  D = Kd s_d                    the PD damping, implicit in the step

which is the actuator of `controllers.closed_loop` and of the distillation plant
(`learning.plant.Plant`) plus the target limits the deployment safety layer applies on the
robot (`EnvConfig.safety_limits`). The per-environment values (`EnvParams`: payload, friction,
gain scales `s_p`, `s_d`, latency, push strength) are traced leaves of the state, so one
compiled function serves every environment; the payload enters as
`model.replace(body_mass=..., body_inertia=...)` inside the traced step. The plant is the
robot's: its model's rotor inertia (`Model.armature`) is in the mass matrix of every step.

Reward per policy step (terms in `info["reward_terms"]`, weights in `RewardWeights`), with the
base velocity in the heading frame (world frame rotated by the base yaw):

    r = w_xy exp(-|v_xy - c_xy|^2 / sigma) + w_yaw exp(-(omega_z - c_yaw)^2 / sigma)
        + w_tau mean_k |tau_k|^2 + w_rate |a_t - a_{t-1}|^2 + w_z v_z^2
        + w_rp (omega_x^2 + omega_y^2) + w_ori |g_xy|^2
        + w_qd mean_k sum_j max(|qd_kj| - f qd_max_j, 0)^2      (penalty weights negative)

`info["tracking_error"]` is `|v_xy - c_xy|` [m/s] in the heading frame. `done` when the base
drops below `min_height_fraction` of the standing height or tilts beyond `max_tilt` (fell), or
after `episode_length` steps (truncated).

Ground (`EnvConfig.terrain`): flat `z = 0` by default; else the tiles of one height field shared
by every environment (`learning.env_ground`, the heights closed over, the friction the
environment's own), and every ground-dependent quantity is relative to the ground under the
base: the base height `z - h(x, y)` of the termination, and, with `n` the mean ground normal
(`learning.env_ground.ground_normal`), the velocity term's `v_z -> v_W . n` and the orientation
term's `|g_xy|^2 -> |(R^T n)_xy|^2` (both exactly the flat terms when `n = e_z`).

Random streams: a state's key is split once per step into `StepKeys` (next, push, reset) and
a reset key into `ResetKeys`; the core and the wrappers draw from these named streams, so a
stack of wrappers draws the same numbers whatever its order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from contact import StepParams, flat
from contact.plant import JointPD, simulate_pd, went_bad
from contact.terrain import Heightfield
from dynamics import load_robot, spatial
from dynamics.actuator import default_gains
from dynamics.backend import JaxOps
from dynamics.configuration import State
from trajopt.gait_clock import check_gait_period, gait_clock

from .env_config import EnvConfig, Randomization
from .env_contract import EnvStep
from .env_ground import build_ground, ground_height, ground_normal, with_friction
from .policy import (
    CONTROL_DT,
    joint_targets,
    observation_from_state,
    observation_size,
    projected_gravity,
)

OBSERVATION_NOISE_STREAM = 7  # `fold_in` index of the observation noise in a state's key
COMMAND_STREAM = 1  # `fold_in` index of a resampled command in the step's reset key


class StepKeys(NamedTuple):
    """The streams of one step, `jax.random.split(state.key, 3)`: the next state's key, the
    push's and the reset's (also the command resampling's, folded with `COMMAND_STREAM`)."""

    next: jax.Array
    push: jax.Array
    reset: jax.Array


def step_keys(key) -> StepKeys:
    """`StepKeys` of a state's key `(2,)`."""
    return StepKeys(*jax.random.split(key, 3))


class ResetKeys(NamedTuple):
    """The streams of a reset, `jax.random.split(key, 5)`: the new state's key, the joint and
    velocity noise, the command, the randomised parameters."""

    next: jax.Array
    joint: jax.Array
    velocity: jax.Array
    command: jax.Array
    params: jax.Array


def reset_keys(key) -> ResetKeys:
    """`ResetKeys` of a reset key `(2,)`."""
    return ResetKeys(*jax.random.split(key, 5))


@jax.tree_util.register_dataclass
@dataclass
class EnvParams:
    """One environment's randomised values (scalars): `payload` (fraction of the total mass,
    added to the base), `friction`, `kp_scale`,
    `kd_scale`, `latency` in [0, 1], `push_velocity` [m/s]."""

    payload: jax.Array
    friction: jax.Array
    kp_scale: jax.Array
    kd_scale: jax.Array
    latency: jax.Array
    push_velocity: jax.Array


@jax.tree_util.register_dataclass
@dataclass
class EnvState:
    """One environment (batched: leading axes on every leaf).

    sim: `State(q (nq,), v (nv,))`; last_action `(nu,)` (the policy's, unclipped); target
    `(nu,)` the joint PD target of the last physics step [rad]; command
    `(3,)` = (vx [m/s], vy [m/s], yaw_rate [rad/s]) in the heading frame; t: policy steps since
    the reset (int32); params: `EnvParams`; key: raw PRNG key `(2,)` uint32; terrain: None on
    flat ground, else the terrain curriculum's per-environment state
    (`learning.env_terrain.TerrainState`), carried by every step."""

    sim: State
    last_action: jax.Array
    target: jax.Array
    command: jax.Array
    t: jax.Array
    params: EnvParams
    key: jax.Array
    terrain: Any = None

    def replace(self, **changes) -> EnvState:
        return dataclasses.replace(self, **changes)


def heading_frame_velocity(q, v):
    """Base velocity in the heading frame: `(v_xy (2,) [m/s], v_z [m/s], omega_z [rad/s])`.

    `R` = base-to-world rotation of `q[3:7]`; world velocity `v_W = R v_B`, yaw
    `psi = atan2(R_10, R_00)`, `v_xy = Rz(-psi) v_W[:2]`; `omega_z = (R omega_B)_z`."""
    quat = q[3:7] / jnp.linalg.norm(q[3:7])
    rotation = spatial.quat_to_rotation(JaxOps(q.dtype), quat)
    v_world = rotation @ v[0:3]
    yaw = jnp.arctan2(rotation[1, 0], rotation[0, 0])
    c, s = jnp.cos(yaw), jnp.sin(yaw)
    v_xy = jnp.stack([c * v_world[0] + s * v_world[1], -s * v_world[0] + c * v_world[1]])
    omega_z = (rotation @ v[3:6])[2]
    return v_xy, v_world[2], omega_z


class LocomotionCore:
    """The core of one `EnvConfig` (module docstring), an `env_contract.Environment`. Methods
    act on ONE environment; `jax.vmap` them for a batch. Holds only constants (the model,
    gains, default pose)."""

    def __init__(self, config: EnvConfig):
        if config.contact not in ("smooth", "penalty", "hard"):
            raise ValueError(f"contact must be smooth, penalty or hard, got {config.contact!r}")
        self.config = config
        self.decimation = config.decimation
        self.dtype = jnp.dtype(config.dtype)
        model = load_robot(config.robot)
        self.model = model.astype(self.dtype)
        self.nu = model.nu
        self.kp, self.kd = default_gains(model)
        self.q_standing = jnp.asarray(model.q_standing, self.dtype)
        self.q_default = self.q_standing[model.nq - model.nu :]
        # the joints' limits (URDF), as the deployment safety layer applies them
        self.lower_limit = jnp.asarray(model.lower_position_limit[-model.nu :], self.dtype)
        self.upper_limit = jnp.asarray(model.upper_position_limit[-model.nu :], self.dtype)
        self.velocity_limit = jnp.asarray(model.velocity_limit[-model.nu :], self.dtype)
        self.standing_height = float(model.q_standing[2])
        self.base_mass = float(np.asarray(model.body_mass)[0])
        self.total_mass = model.total_mass
        if config.gait_period is not None:
            check_gait_period(config.gait_period, "gait_period")
        self.clock = config.gait_period is not None
        interval = config.command_interval
        if interval is not None and not (isinstance(interval, int) and interval >= 1):
            raise ValueError(f"command_interval must be None or a whole number of policy steps "
                             f">= 1, got {interval!r}")  # fmt: skip
        if not 0.0 <= config.command_extremes <= 1.0:
            raise ValueError(f"command_extremes must be a probability in [0, 1], got "
                             f"{config.command_extremes!r}")  # fmt: skip
        self.base_velocity = bool(config.observe_base_velocity)
        self.observation_size = observation_size(model.nu, self.clock, self.base_velocity)
        # the shared ground: None (flat z = 0) or one height field of every tile
        self.ground: Heightfield | None = (
            None if config.terrain is None else build_ground(config.terrain, self.dtype)
        )

    # ------------------------------------------------------------------ parameters
    def nominal_params(self) -> EnvParams:
        """The parameters of `Randomization.none()`: no payload, friction 0.8, nominal gains,
        no latency, no pushes (the core's own; `DomainRandomization` draws others)."""
        r = Randomization.none()
        scalar = lambda value: jnp.asarray(value, self.dtype)  # noqa: E731
        return EnvParams(
            payload=scalar(r.payload[0]),
            friction=scalar(r.friction[0]),
            kp_scale=scalar(r.kp_scale[0]),
            kd_scale=scalar(r.kd_scale[0]),
            latency=scalar(r.latency[0]),
            push_velocity=scalar(r.push_velocity),
        )

    def randomized_model(self, params: EnvParams):
        """The model with the payload on the base: body 0's mass `m0 + payload m_total`, its
        inertia about the centre of mass scaled by the same factor (centre of mass unchanged)."""
        scale = 1.0 + params.payload * (self.total_mass / self.base_mass)
        mass = self.model.body_mass.at[0].multiply(scale)
        inertia = self.model.body_inertia.at[0].multiply(scale)
        return self.model.replace(body_mass=mass, body_inertia=inertia)

    def step_params(self, params: EnvParams) -> StepParams:
        """`contact.StepParams` of one environment: its friction, `sim_dt`, the PD damping."""
        if self.ground is None:
            terrain = flat(friction=params.friction)
        else:
            terrain = with_friction(self.ground, params.friction)
        step_params = StepParams(
            terrain=terrain,
            dt=self.config.sim_dt,
            kappa=self.config.kappa,
            bias=self.config.bias,
            joint_damping=self.kd * params.kd_scale,
        )
        # every leaf in the environment's dtype (float32 states must stay float32)
        return jax.tree.map(lambda x: jnp.asarray(x, self.dtype), step_params)

    # ------------------------------------------------------------------ reset
    def sample_command(self, key):
        """A command `(3,)` uniform in the configured ranges (each component at one end of its
        range with probability `command_extremes`); `|c_xy|` below `zero_command_below` becomes
        zero."""
        c = self.config
        lo = jnp.array([c.vx_range[0], c.vy_range[0], c.yaw_rate_range[0]], self.dtype)
        hi = jnp.array([c.vx_range[1], c.vy_range[1], c.yaw_rate_range[1]], self.dtype)
        command = jax.random.uniform(key, (3,), self.dtype, lo, hi)
        if c.command_extremes:  # each component at one end of its range with this probability
            k_pick, k_end = jax.random.split(jax.random.fold_in(key, 1))
            pick = jax.random.uniform(k_pick, (3,)) < c.command_extremes
            command = jnp.where(pick, jnp.where(jax.random.bernoulli(k_end, 0.5, (3,)), hi, lo),
                                command)  # fmt: skip
        small = jnp.linalg.norm(command[:2]) < c.zero_command_below
        return command.at[:2].set(jnp.where(small, 0.0, command[:2]))

    def reset(self, key) -> EnvStep:
        """A fresh episode: standing pose with joint and velocity noise, a new command, the
        nominal parameters; `obs` exact, `reward` 0, `done` False, `info` empty. `key`: raw
        PRNG key `(2,)` uint32 (`jax.random.PRNGKey`), split into `ResetKeys`."""
        c = self.config
        keys = reset_keys(key)
        joint_noise = jax.random.uniform(
            keys.joint, (self.nu,), self.dtype, -c.init_joint_noise, c.init_joint_noise
        )
        q = self.q_standing.at[7:].add(joint_noise)
        v = c.init_velocity_noise * jax.random.normal(keys.velocity, (self.model.nv,), self.dtype)
        state = EnvState(
            sim=State(q, v),
            last_action=jnp.zeros(self.nu, self.dtype),
            target=self.q_default,
            command=self.sample_command(keys.command),
            t=jnp.zeros((), jnp.int32),
            params=self.nominal_params(),
            key=keys.next,
        )
        zero = jnp.zeros((), self.dtype)
        return EnvStep(state, self.observe(state), zero, jnp.zeros((), bool), {})

    # ------------------------------------------------------------------ observation
    def observe(self, state: EnvState):
        """The exact policy observation `(12 + 3 nu,)`, `(15 + 3 nu,)` with the gait clock, 3
        fewer without the base velocity (`learning.policy.observation_from_state`)."""
        return observation_from_state(
            state.sim.q, state.sim.v, state.command, state.last_action, self.q_default,
            self.gait_clock(state), self.base_velocity,
        )  # fmt: skip

    def gait_clock(self, state: EnvState):
        """The gait clock `(3,)` at `t = state.t CONTROL_DT` [s] since the reset
        (`trajopt.gait_clock.gait_clock`), or None without `config.gait_period`.

        Computed in float64 (importing `dynamics` turns it on), then cast: `t / period` in
        float32 loses phase precision as `t` grows over an episode; the float64 clock is off by
        the final float32 rounding only."""
        if not self.clock:
            return None
        t = state.t.astype(jnp.float64) * CONTROL_DT
        return gait_clock(t, self.config.gait_period, xp=jnp).astype(self.dtype)

    # ------------------------------------------------------------------ physics
    def _physics(self, params: EnvParams, sim: State, previous_target, target):
        """`decimation` physics steps toward `target (nu,)` [rad] from `previous_target`, the
        last step's PD target (with `safety_limits`: clipped into the joint limits, each step
        within `velocity_limit * sim_dt` of the one before). Returns the final state, the last
        step's target, and means over the steps of `|tau|^2` (`tau = clip(Kp (q* - q)) -
        Kd qd`) and of `sum_j max(|qd_j| - f qd_max_j, 0)^2` (f: the soft velocity limit),
        and whether the simulator flagged a bad state on the way (`StepInfo.bad_state` or
        `bad_result`: NaN, infinity, a non-unit base quaternion)."""
        model = self.randomized_model(params)
        step_params = self.step_params(params)
        kp = self.kp * params.kp_scale
        kd = self.kd * params.kd_scale
        soft_limit = self.config.rewards.joint_velocity_soft_limit * self.velocity_limit
        rate = None
        if self.config.safety_limits:
            target = jnp.clip(target, self.lower_limit, self.upper_limit)
            rate = self.velocity_limit
        sim, trace = simulate_pd(
            model, step_params, sim, JointPD(target, kp), self.decimation,
            target_rate=rate, previous_target=previous_target, contact=self.config.contact,
            num_sweeps=self.config.num_sweeps,
        )  # fmt: skip
        applied = trace.torque - kd * trace.state.v[:, 6:]
        excess = jnp.maximum(jnp.abs(trace.velocity[:, 6:]) - soft_limit[None, :], 0.0)
        torque_sq = jnp.sum(applied**2, axis=-1)
        excess_sq = jnp.sum(excess**2, axis=-1)
        return sim, trace.q_target[-1], jnp.mean(torque_sq), jnp.mean(excess_sq), went_bad(trace)

    # ------------------------------------------------------------------ reward, termination
    def reward_terms(self, state: EnvState, sim: State, action, torque_sq, excess_sq) -> dict:
        """Weighted reward terms (module docstring) after a step from `state` to `sim`."""
        w = self.config.rewards
        v_xy, v_z, omega_z = heading_frame_velocity(sim.q, sim.v)
        cmd = state.command
        xy_error_sq = jnp.sum((v_xy - cmd[:2]) ** 2)
        gravity = projected_gravity(sim.q[3:7] / jnp.linalg.norm(sim.q[3:7]))
        if self.ground is not None:  # relative to the ground's mean normal (module docstring)
            v_z, gravity = self.ground_relative(sim)
        return {
            "tracking_xy": w.tracking_xy * jnp.exp(-xy_error_sq / w.tracking_sigma),
            "tracking_yaw": w.tracking_yaw * jnp.exp(-((omega_z - cmd[2]) ** 2) / w.tracking_sigma),
            "torque": w.torque * torque_sq,
            "action_rate": w.action_rate * jnp.sum((action - state.last_action) ** 2),
            "z_velocity": w.z_velocity * v_z**2,
            "roll_pitch_rate": w.roll_pitch_rate * jnp.sum(sim.v[3:5] ** 2),
            "orientation": w.orientation * jnp.sum(gravity[:2] ** 2),
            "joint_velocity": w.joint_velocity * excess_sq,
        }

    def ground_relative(self, sim: State):
        """`(v_W . n, -R^T n (3,))`: the base velocity along the mean ground normal `n` under
        the base [m/s] and the normal in the base frame, negated (the projected gravity on flat
        ground, `e_z`); `R` base-to-world."""
        q = sim.q
        quat = q[3:7] / jnp.linalg.norm(q[3:7])
        rotation = spatial.quat_to_rotation(JaxOps(q.dtype), quat)
        n = ground_normal(self.ground, q[0], q[1], self.config.terrain.normal_reach)
        return (rotation @ sim.v[0:3]) @ n, -(rotation.T @ n)

    def base_height(self, q):
        """The base's height [m] above the ground under it: `z` on flat ground, else
        `z - h(x, y)`."""
        if self.ground is None:
            return q[2]
        return q[2] - ground_height(self.ground, q[0], q[1])

    def restart(self, ended: EnvState, fresh: EnvState) -> EnvState:
        """The episode after `ended`: `fresh` (the core carries nothing across episodes)."""
        return fresh

    def fell(self, sim: State, diverged):
        """Base below `min_height_fraction` of the standing height above the ground under it,
        tilted beyond `max_tilt`, or `diverged`: the simulator flagged a bad state (NaN,
        infinity, a non-unit base quaternion; `StepInfo.bad_state`/`bad_result`) during the
        step."""
        q = sim.q
        quat = q[3:7] / jnp.linalg.norm(q[3:7])
        up_z = 1.0 - 2.0 * (quat[0] ** 2 + quat[1] ** 2)  # R[2, 2]: cosine of the tilt
        low = self.base_height(q) < self.config.min_height_fraction * self.standing_height
        tilted = up_z < np.cos(self.config.max_tilt)
        return low | tilted | diverged

    # ------------------------------------------------------------------ step
    def step(self, state: EnvStep, action) -> EnvStep:
        """One policy step (module docstring) from `state.env`, without a reset.

        action: `(nu,)` in policy units. Returns the `EnvStep` after it: `obs` exact, `reward`
        `()`, `done` `()` bool (fell or truncated; the state is not reset), info:
        `tracking_error` [m/s], `yaw_rate_error` [rad/s], `reward_terms` (dict), `fell`,
        `truncated`. With `command_interval`, a new command every `command_interval` steps."""
        state = state.env
        action = jnp.asarray(action, self.dtype)
        keys = step_keys(state.key)
        latency = state.params.latency
        applied = (1.0 - latency) * action + latency * state.last_action
        target = joint_targets(applied, self.q_default)
        sim, target, torque_sq, excess_sq, diverged = self._physics(
            state.params, state.sim, state.target, target
        )
        terms = self.reward_terms(state, sim, action, torque_sq, excess_sq)
        reward = sum(terms.values())
        v_xy, _, omega_z = heading_frame_velocity(sim.q, sim.v)
        command = state.command
        if self.config.command_interval:  # a new draw every command_interval steps
            due = (state.t + 1) % self.config.command_interval == 0
            new = self.sample_command(jax.random.fold_in(keys.reset, COMMAND_STREAM))
            command = jnp.where(due, new, command)
        after = EnvState(sim, action, target, command, state.t + 1, state.params, keys.next,
                         state.terrain)  # fmt: skip
        fell = self.fell(sim, diverged)
        truncated = (after.t >= self.config.episode_length) & ~fell
        info = {
            "tracking_error": jnp.linalg.norm(v_xy - state.command[:2]),
            "yaw_rate_error": jnp.abs(omega_z - state.command[2]),
            "reward_terms": terms,
            "fell": fell,
            "truncated": truncated,
        }
        return EnvStep(after, self.observe(after), reward, fell | truncated, info)
