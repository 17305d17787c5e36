"""The locomotion environment's configuration: the task, the reward weights, the ranges of the
domain randomisation and the observation noise (all hashable: a config keys the compiled
functions of `learning.env.make_env`).

`EnvConfig` holds the environment core's settings (robot, contact model, time step, commands,
termination) and, as fields, the settings of the wrappers the training environment is assembled
with (`Randomization`: `learning.env_wrappers.DomainRandomization` and `Pushes`;
`ObservationNoise`: `learning.env_wrappers.NoisyObservations`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from contact.terrain_tiles import TileLayout

from .policy import CONTROL_DT


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
class TerrainConfig:
    """Rough ground for training (`learning.env_terrain.TerrainCurriculum`): the tiles of
    `layout` (`contact.terrain_tiles.TileLayout`: kinds along y, difficulty levels along x) in
    one height field drawn with `seed`, its distance query searching `window` cells around a
    point (`contact.terrain.heightfield`; 1 is exact for gaps below one cell). A reset spawns at
    a random kind and a level in `[0, max_initial_level]`; the curriculum
    (`learning.terrain_curriculum`) moves an environment's level when its episode ends.
    `normal_reach` [m]: half the patch over which the reward's ground normal is averaged
    (`learning.env_ground.ground_normal`)."""

    layout: TileLayout = field(default_factory=TileLayout)
    seed: int = 0
    window: int = 1
    max_initial_level: int = 2
    normal_reach: float = 0.3

    def __post_init__(self):
        if not 0 <= self.max_initial_level < self.layout.num_levels:
            raise ValueError(
                f"max_initial_level must be in [0, num_levels {self.layout.num_levels}), "
                f"got {self.max_initial_level}"
            )
        if not self.normal_reach > 0:
            raise ValueError(f"normal_reach must be > 0 m, got {self.normal_reach}")


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
    terrain: None (default), flat ground; else a `TerrainConfig`: the environments walk the
    tiles of one height field under a terrain curriculum, blind (the observation is
    unchanged), with the termination's height and the reward's vertical velocity and
    orientation taken relative to the ground under the base (`learning.env_core`).
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
    terrain: TerrainConfig | None = None

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
        "command_extremes", "observe_base_velocity", "observation_noise" and "terrain" at their
        defaults,
        so a configuration without them has the dict it had before they existed (SHAC's
        `--resume` compares it with the one in the checkpoints)."""
        d = dataclasses.asdict(self)
        for name, default in (("gait_period", None), ("command_interval", None),
                              ("command_extremes", 0.0), ("observe_base_velocity", True),
                              ("observation_noise", None), ("terrain", None)):  # fmt: skip
            if d[name] == default:
                del d[name]
        return d


def _bounds(name: str, bounds) -> tuple:
    """`(low, high)` as floats with `low <= high`, else a ValueError naming `name`."""
    values = tuple(float(b) for b in bounds)
    if len(values) != 2 or values[0] > values[1]:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {bounds}")
    return values
