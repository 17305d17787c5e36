"""A differentiable velocity-tracking environment: `reset`, `step`, `observe` as pure functions.

    env = LocomotionEnv(EnvConfig(robot="go2"))
    state = env.reset(key)                                   # one environment (vmap for many)
    state, obs, reward, done, info = env.step(state, action)

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
robot (`EnvConfig.safety_limits`), so a distilled policy starts here in the plant it was
cloned in, and a trained one meets on the robot the actuator it was trained with.

Everything random is a traced per-environment value sampled at `reset` (`Randomization`), so
one compiled function serves every environment: a payload added to the base (its mass, and its
rotational inertia scaled by the same factor: a load distributed like the base body; the
`Model` is a pytree whose arrays are leaves, so the randomised model is
`model.replace(body_mass=..., body_inertia=...)` inside the traced step), the ground friction
(a `StepParams` leaf), the PD gain scales `s_p`, `s_d`, the action latency and the push
strength. Pushes are base-velocity kicks `dv_xy` (world frame) at random policy steps. The
plant is the robot's: its model's rotor inertia (`Model.armature`) is in the mass matrix of
every physics step, as in MuJoCo's model of it and on the robot.

Reward per policy step (terms in `info["reward_terms"]`, weights in `RewardWeights`), with the
base velocity in the heading frame (world frame rotated by the base yaw):

    r = w_xy exp(-|v_xy - c_xy|^2 / sigma) + w_yaw exp(-(omega_z - c_yaw)^2 / sigma)
        + w_tau mean_k |tau_k|^2 + w_rate |a_t - a_{t-1}|^2 + w_z v_z^2
        + w_rp (omega_x^2 + omega_y^2) + w_ori |g_xy|^2
        + w_qd mean_k sum_j max(|qd_kj| - f qd_max_j, 0)^2      (penalty weights negative)

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

import dataclasses
import functools
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from contact import StepParams, flat
from contact.plant import JointPD, simulate_pd, went_bad
from dynamics import load_robot, spatial
from dynamics.actuator import default_gains
from dynamics.backend import JaxOps
from dynamics.configuration import State
from trajopt.gait_clock import check_gait_period, gait_clock

from .policy import (
    CONTROL_DT,
    joint_targets,
    observation_from_state,
    observation_size,
    projected_gravity,
)

OBSERVATION_NOISE_STREAM = 7  # `fold_in` index of the observation noise in a state's key


@dataclass(frozen=True)
class RewardWeights:
    """Weights of the reward terms (module docstring); `tracking_sigma` [m^2/s^2, rad^2/s^2].

    `joint_velocity` penalises joint speeds beyond `joint_velocity_soft_limit` of the URDF
    velocity limits (mean over the physics steps): without it a policy that tracks its
    commands in training can drive a joint beyond its velocity limit and trip the deployment
    safety layer's velocity watchdog (1.5x the limit).

    `orientation` is -5 because with -1 the short-horizon gradient does not see a slow pitch
    drift: forward-walking policies then track the command for a few seconds and pitch over."""

    tracking_xy: float = 1.0
    tracking_yaw: float = 0.5
    tracking_sigma: float = 0.25
    torque: float = -2e-5  # per (N m)^2, summed over joints
    action_rate: float = -0.01
    z_velocity: float = -2.0
    roll_pitch_rate: float = -0.05
    orientation: float = -5.0  # per |g_xy|^2; see the class docstring
    joint_velocity: float = -0.1  # per (rad/s)^2 beyond the soft limit, summed over joints
    joint_velocity_soft_limit: float = 0.9  # fraction of the joints' velocity limits


@dataclass(frozen=True)
class Randomization:
    """Ranges `(low, high)` of the per-environment randomisation, sampled uniformly at reset.

    payload: mass added to the base, as a fraction of the robot's total mass (negative:
        lighter; the default -0.05..0.15 is -0.8..2.4 kg on Go2, -0.13..0.38 kg on Solo12).
    friction: ground Coulomb coefficient.
    kp_scale, kd_scale: factors on the robot's standing PD gains (`dynamics.actuator`).
    latency: blend between this step's and the previous step's action (0: none, 1: one
        control step of delay).
    push_velocity: largest base-velocity kick [m/s] (world xy; each environment draws its own
        bound from (0, push_velocity)); push_interval: mean time between kicks [s] (0: never).
    """

    payload: tuple = (-0.05, 0.15)
    friction: tuple = (0.5, 1.25)
    kp_scale: tuple = (0.9, 1.1)
    kd_scale: tuple = (0.9, 1.1)
    latency: tuple = (0.0, 1.0)
    push_velocity: float = 0.5
    push_interval: float = 5.0

    @staticmethod
    def none() -> Randomization:
        """No randomisation: nominal mass, friction 0.8, nominal gains, no latency, no pushes."""
        return Randomization((0.0, 0.0), (0.8, 0.8), (1.0, 1.0), (1.0, 1.0), (0.0, 0.0), 0.0, 0.0)


@dataclass(frozen=True)
class ObservationNoise:
    """Uniform observation noise in the legged_gym manner: each entry of the observation gets
    `u * scale`, `u ~ U(-1, 1)` drawn per policy step, with the scale of its group (in the
    observation's own units; legged_gym's `noise_scales` at `noise_level` 1). The command,
    the last action and the gait clock are exact.

    base_linear_velocity [m/s], base_angular_velocity [rad/s], projected_gravity [-],
    joint_q [rad], joint_qd [rad/s].
    """

    base_linear_velocity: float = 0.1
    base_angular_velocity: float = 0.2
    projected_gravity: float = 0.05
    joint_q: float = 0.01
    joint_qd: float = 1.5

    def scales(self, nu: int, clock: bool, base_velocity: bool) -> np.ndarray:
        """The per-entry scale `(observation_size,)` of the layout of `learning.policy`."""
        parts = [np.full(3, self.base_linear_velocity)] if base_velocity else []
        parts += [np.full(3, self.base_angular_velocity), np.full(3, self.projected_gravity),
                  np.zeros(3), np.full(nu, self.joint_q), np.full(nu, self.joint_qd),
                  np.zeros(nu)]  # fmt: skip
        if clock:
            parts.append(np.zeros(3))
        return np.concatenate(parts)


@dataclass(frozen=True)
class EnvConfig:
    """The environment (hashable: it keys the compiled functions).

    robot: `dynamics.load_robot` name. contact: "smooth", "penalty" or "hard"; num_sweeps: prox
    sweeps of the smooth and hard solvers; kappa [1/m], bias: the smooth model's activation
    `sigmoid(-(kappa gap - bias))` (`contact.StepParams`; the paper's reimplementations train
    with kappa 300; a much stiffer activation, e.g. 3000, makes the SHAC actor gradient grow
    without bound, see `learning.shac.train.SHACConfig.critic_bootstrap`).
    sim_dt [s]: physics step; 5 ms (PD at 200 Hz) is stable for Go2 and Solo12 standing and
    trotting with all three contact models (close to a 2 ms run of an open-loop trot).
    episode_length: policy steps before truncation (500 = 10 s).
    vx_range, vy_range [m/s], yaw_rate_range [rad/s]: command sampling ranges (uniform);
    commands with `|c_xy| < zero_command_below` become zero (standing is practised too).
    min_height_fraction: fell below this fraction of the standing base height; max_tilt [rad].
    init_joint_noise [rad], init_velocity_noise [m/s, rad/s]: reset perturbations.
    safety_limits: apply the deployment safety layer's target limits in the actuator, as
    `hardware.safety.SafetyLayer` does on the robot with its defaults: targets clipped
    into the joint position limits, and each physics step's target within
    `velocity_limit * sim_dt` of the previous one (its target rate limit). Without them a
    policy learns target jumps the robot's safety layer then rate-limits every tick.
    dtype: "float64" (gradient checks) or "float32" (the model is cast; faster).
    gait_period [s]: None (default), no gait clock; else the observation ends with the gait
    clock `trajopt.gait_clock.gait_clock(t CONTROL_DT, gait_period)` `(3,)` (`EnvState.t` policy
    steps since the reset: phase 0 at every reset, as on the robot, where the controller's
    reset starts it; SHAC's spread of the episode progress at the start of training, and
    episodes ending at different steps, give every phase). Whether the clock helps pure RL
    training is an open question.
    command_interval: None (default): the command drawn at reset is held for the episode; else
    a new one is drawn every `command_interval` policy steps of the episode, so the policy
    practises changing commands (an operator's joystick; a policy that only ever held one
    command per episode can drive a joint beyond its velocity limit when the command changes,
    and trip the safety layer's velocity watchdog).
    command_extremes: the probability that each command component is drawn at one end of its
    range instead of uniformly (0: uniform). The box's corners, e.g. (1, -0.5, 1), are rare
    under uniform draws, so a policy trained on those alone may not have learned them.
    observe_base_velocity: the policy observes the base linear velocity (False: a robot that
    measures none, `learning.policy`); observation_noise: None (exact observations) or an
    `ObservationNoise` added to each observation the policy sees.
    """

    robot: str = "go2"
    contact: str = "smooth"
    num_sweeps: int = 20
    kappa: float = 300.0
    bias: float = 8.0
    sim_dt: float = 0.005
    episode_length: int = 500
    vx_range: tuple = (-1.0, 1.0)
    vy_range: tuple = (-0.5, 0.5)
    yaw_rate_range: tuple = (-1.0, 1.0)
    zero_command_below: float = 0.1
    rewards: RewardWeights = field(default_factory=RewardWeights)
    randomization: Randomization = field(default_factory=Randomization)
    min_height_fraction: float = 0.5
    max_tilt: float = 1.0
    init_joint_noise: float = 0.1
    init_velocity_noise: float = 0.1
    safety_limits: bool = True
    dtype: str = "float64"
    gait_period: float | None = None
    command_interval: int | None = None
    command_extremes: float = 0.0
    observe_base_velocity: bool = True
    observation_noise: ObservationNoise | None = None

    @property
    def decimation(self) -> int:
        """Physics steps per policy step, `CONTROL_DT / sim_dt` (an integer)."""
        n = int(round(CONTROL_DT / self.sim_dt))
        if n < 1 or abs(n * self.sim_dt - CONTROL_DT) > 1e-9:
            raise ValueError(
                f"CONTROL_DT {CONTROL_DT} s must be a multiple of sim_dt {self.sim_dt}"
            )
        return n

    def replace(self, **changes) -> EnvConfig:
        return dataclasses.replace(self, **changes)

    def with_task(self, vx=None, vy=None, yaw_rate=None, latency=None, push=None) -> EnvConfig:
        """This config with the given command ranges `(low, high)` (vx, vy [m/s], yaw_rate
        [rad/s]), latency range and largest push [m/s] of the randomisation; `None` keeps
        the current value (the command-line flags of the training example and benchmark)."""
        config = self
        for name, bounds in (("vx_range", vx), ("vy_range", vy), ("yaw_rate_range", yaw_rate)):
            if bounds is not None:
                config = config.replace(**{name: _bounds(name, bounds)})
        randomization = config.randomization
        if latency is not None:
            latency = _bounds("latency", latency)
            if not 0.0 <= latency[0] <= latency[1] <= 1.0:
                raise ValueError(f"latency must lie in [0, 1], got {latency}")
            randomization = dataclasses.replace(randomization, latency=latency)
        if push is not None:
            if push < 0:
                raise ValueError(f"push must be >= 0 m/s, got {push}")
            randomization = dataclasses.replace(randomization, push_velocity=float(push))
        return config.replace(randomization=randomization)

    def to_dict(self) -> dict:
        """The fields as a dict; without "gait_period", "command_interval",
        "command_extremes", "observe_base_velocity" and "observation_noise" at their defaults,
        so a configuration without them has the dict it had before they existed (SHAC's
        `--resume` compares it with the one in the checkpoints)."""
        d = dataclasses.asdict(self)
        for name, default in (("gait_period", None), ("command_interval", None),
                              ("command_extremes", 0.0), ("observe_base_velocity", True),
                              ("observation_noise", None)):  # fmt: skip
            if d[name] == default:
                del d[name]
        return d


def _bounds(name: str, bounds) -> tuple:
    """`(low, high)` as floats with `low <= high`, else a ValueError naming `name`."""
    values = tuple(float(b) for b in bounds)
    if len(values) != 2 or values[0] > values[1]:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {bounds}")
    return values


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
    the reset (int32); params: `EnvParams`; key: raw PRNG key `(2,)` uint32."""

    sim: State
    last_action: jax.Array
    target: jax.Array
    command: jax.Array
    t: jax.Array
    params: EnvParams
    key: jax.Array


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


class LocomotionEnv:
    """The environment of one `EnvConfig` (module docstring). Methods act on ONE environment;
    `jax.vmap` them for a batch. Holds only constants (the model, gains, default pose)."""

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
        noise = config.observation_noise
        self.noise_scale = None if noise is None else jnp.asarray(
            noise.scales(model.nu, self.clock, self.base_velocity), self.dtype
        )  # fmt: skip

    # ------------------------------------------------------------------ randomisation
    def sample_params(self, key) -> EnvParams:
        """Uniform draws from `config.randomization` (module docstring)."""
        r = self.config.randomization
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

    def randomized_model(self, params: EnvParams):
        """The model with the payload on the base: body 0's mass `m0 + payload m_total`, its
        inertia about the centre of mass scaled by the same factor (centre of mass unchanged)."""
        scale = 1.0 + params.payload * (self.total_mass / self.base_mass)
        mass = self.model.body_mass.at[0].multiply(scale)
        inertia = self.model.body_inertia.at[0].multiply(scale)
        return self.model.replace(body_mass=mass, body_inertia=inertia)

    def step_params(self, params: EnvParams) -> StepParams:
        """`contact.StepParams` of one environment: its friction, `sim_dt`, the PD damping."""
        step_params = StepParams(
            terrain=flat(friction=params.friction),
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

    def reset(self, key) -> EnvState:
        """A fresh environment: standing pose with joint and velocity noise, a new command and
        new randomised parameters. `key`: raw PRNG key `(2,)` uint32 (`jax.random.PRNGKey`)."""
        c = self.config
        k_next, k_joint, k_vel, k_cmd, k_par = jax.random.split(key, 5)
        joint_noise = jax.random.uniform(
            k_joint, (self.nu,), self.dtype, -c.init_joint_noise, c.init_joint_noise
        )
        q = self.q_standing.at[7:].add(joint_noise)
        v = c.init_velocity_noise * jax.random.normal(k_vel, (self.model.nv,), self.dtype)
        return EnvState(
            sim=State(q, v),
            last_action=jnp.zeros(self.nu, self.dtype),
            target=self.q_default,
            command=self.sample_command(k_cmd),
            t=jnp.zeros((), jnp.int32),
            params=self.sample_params(k_par),
            key=k_next,
        )

    # ------------------------------------------------------------------ observation
    def observe(self, state: EnvState):
        """The policy observation `(12 + 3 nu,)`, `(15 + 3 nu,)` with the gait clock, 3 fewer
        without the base velocity (`learning.policy.observation_from_state`), with
        `config.observation_noise` drawn from the state's key."""
        obs = observation_from_state(
            state.sim.q, state.sim.v, state.command, state.last_action, self.q_default,
            self.gait_clock(state), self.base_velocity,
        )  # fmt: skip
        if self.noise_scale is None:
            return obs
        key = jax.random.fold_in(state.key, OBSERVATION_NOISE_STREAM)
        u = jax.random.uniform(key, obs.shape, self.dtype, -1.0, 1.0)
        return obs + jax.lax.stop_gradient(u * self.noise_scale)

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

    def _push(self, state: EnvState, sim: State, key) -> State:
        """With probability `CONTROL_DT / push_interval`, add a world-frame xy velocity kick
        uniform in the disk of radius `params.push_velocity` (rotated into the base frame)."""
        interval = self.config.randomization.push_interval
        if interval <= 0.0:
            return sim
        k_when, k_dir, k_mag = jax.random.split(key, 3)
        happens = jax.random.uniform(k_when, (), self.dtype) < CONTROL_DT / interval
        angle = jax.random.uniform(k_dir, (), self.dtype, 0.0, 2 * jnp.pi)
        magnitude = state.params.push_velocity * jnp.sqrt(jax.random.uniform(k_mag, (), self.dtype))
        kick_world = magnitude * jnp.stack([jnp.cos(angle), jnp.sin(angle), jnp.zeros_like(angle)])
        quat = sim.q[3:7] / jnp.linalg.norm(sim.q[3:7])
        rotation = spatial.quat_to_rotation(JaxOps(self.dtype), quat)
        kick = jnp.where(happens, rotation.T @ jax.lax.stop_gradient(kick_world), 0.0)
        return State(sim.q, sim.v.at[0:3].add(kick))

    # ------------------------------------------------------------------ reward, termination
    def reward_terms(self, state: EnvState, sim: State, action, torque_sq, excess_sq) -> dict:
        """Weighted reward terms (module docstring) after a step from `state` to `sim`."""
        w = self.config.rewards
        v_xy, v_z, omega_z = heading_frame_velocity(sim.q, sim.v)
        cmd = state.command
        xy_error_sq = jnp.sum((v_xy - cmd[:2]) ** 2)
        gravity = projected_gravity(sim.q[3:7] / jnp.linalg.norm(sim.q[3:7]))
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

    def fell(self, sim: State, diverged):
        """Base below `min_height_fraction` of the standing height, tilted beyond `max_tilt`,
        or `diverged`: the simulator flagged a bad state (NaN, infinity, a non-unit base
        quaternion; `StepInfo.bad_state`/`bad_result`) during the step."""
        q = sim.q
        quat = q[3:7] / jnp.linalg.norm(q[3:7])
        up_z = 1.0 - 2.0 * (quat[0] ** 2 + quat[1] ** 2)  # R[2, 2]: cosine of the tilt
        low = q[2] < self.config.min_height_fraction * self.standing_height
        tilted = up_z < np.cos(self.config.max_tilt)
        return low | tilted | diverged

    # ------------------------------------------------------------------ step
    def step(self, state: EnvState, action):
        """One policy step (module docstring) with auto-reset.

        action: `(nu,)` in policy units. Returns `(state, obs (observation_size,), reward (),
        done () bool, info)`; after `done`, `state` and `obs` are those of a fresh episode and
        `info["terminal_obs"]` is the observation before the reset. info: `tracking_error`
        [m/s], `yaw_rate_error` [rad/s], `reward_terms` (dict), `fell`, `truncated`,
        `terminal_obs`."""
        action = jnp.asarray(action, self.dtype)
        key, k_push, k_reset = jax.random.split(state.key, 3)
        latency = state.params.latency
        applied = (1.0 - latency) * action + latency * state.last_action
        target = joint_targets(applied, self.q_default)
        sim, target, torque_sq, excess_sq, diverged = self._physics(
            state.params, state.sim, state.target, target
        )
        terms = self.reward_terms(state, sim, action, torque_sq, excess_sq)
        reward = sum(terms.values())
        v_xy, _, omega_z = heading_frame_velocity(sim.q, sim.v)
        sim = self._push(state, sim, k_push)
        command = state.command
        if self.config.command_interval:  # a new draw every command_interval steps
            due = (state.t + 1) % self.config.command_interval == 0
            new = self.sample_command(jax.random.fold_in(k_reset, 1))
            command = jnp.where(due, new, command)
        after = EnvState(sim, action, target, command, state.t + 1, state.params, key)
        fell = self.fell(sim, diverged)
        truncated = (after.t >= self.config.episode_length) & ~fell
        done = fell | truncated
        terminal_obs = self.observe(after)
        fresh = jax.lax.stop_gradient(self.reset(k_reset))
        # a diverged state must not leak NaN into the reset state (where() keeps the gradient
        # of the unselected branch at zero, not its value)
        after = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, after)
        info = {
            "tracking_error": jnp.linalg.norm(v_xy - state.command[:2]),
            "yaw_rate_error": jnp.abs(omega_z - state.command[2]),
            "reward_terms": terms,
            "fell": fell,
            "truncated": truncated,
            "terminal_obs": terminal_obs,
        }
        return after, self.observe(after), reward, done, info


@functools.lru_cache(maxsize=8)
def make_env(config: EnvConfig) -> LocomotionEnv:
    """One `LocomotionEnv` per config (its compiled functions are shared)."""
    return LocomotionEnv(config)


def compile_options(fast_compile: bool) -> dict:
    """Keyword arguments of `jax.jit`/`eqx.filter_jit` for functions that step the environment:
    XLA's backend optimisation level 0 with `fast_compile` (compiles sooner, runs slower)."""
    return {"compiler_options": {"xla_backend_optimization_level": 0}} if fast_compile else {}
