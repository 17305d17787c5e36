"""Sensor noise, bias and IMU latency on top of any robot's measurements.

    robot = NoisySensors(MuJoCoRobot(model), SensorNoise.go2(), seed=0)
    measurement = robot.read()          # the inner measurement, made as noisy as a Go2's

For a measurement `m` (the true sample), a bias `b` drawn once per run and white noise `n ~
N(0, std^2)` drawn independently for every sample and component:

    gyro          = m_imu.base_angular_velocity    + b_gyro  + n_gyro        [rad/s], base frame
    accelerometer = m_imu.base_linear_acceleration + b_accel + n_accel       [m/s^2], base frame
    base_quat     = m_imu.base_quat                                          (not perturbed)
    joint_q       = m.joint_q  + n_q,   joint_qd = m.joint_qd + n_qd         [rad], [rad/s]
    foot_force    = m.foot_force + n_f                                       [N] (if present)

where `m_imu` is the newest inner sample at least `imu_latency` older than `m` (the IMU fields
arrive late; the joints do not). The base quaternion is passed through: an IMU's attitude
filter errs slowly (drift), not as white noise, and this module does not model it.
`base_linear_velocity` and `base_position` are left as they are: removing a simulator's true
base state is `hardware.estimated_robot.EstimatedRobot`'s job.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np

from .interface import Measurement
from .robot_wrapper import RobotWrapper


@dataclass(frozen=True)
class SensorNoise:
    """Standard deviations of the sensor errors (module docstring for the model).

    gyro_std [rad/s], accelerometer_std [m/s^2]: white noise per sample and axis.
    gyro_bias_std [rad/s], accelerometer_bias_std [m/s^2]: std of the constant bias, drawn
        once per run (`SensorBias.draw`).
    joint_position_std [rad], joint_velocity_std [rad/s]: white noise per sample and joint.
    foot_force_std [N]: white noise per sample and foot.
    imu_latency [s] >= 0: the IMU fields are those of a sample this much older.
    """

    gyro_std: float = 0.0
    accelerometer_std: float = 0.0
    gyro_bias_std: float = 0.0
    accelerometer_bias_std: float = 0.0
    joint_position_std: float = 0.0
    joint_velocity_std: float = 0.0
    foot_force_std: float = 0.0
    imu_latency: float = 0.0

    def __post_init__(self):
        for name, value in self.__dict__.items():
            if not (np.isfinite(value) and value >= 0.0):
                raise ValueError(f"SensorNoise.{name} must be finite and >= 0, got {value!r}")

    @classmethod
    def none(cls) -> SensorNoise:
        """No noise, no bias, no latency."""
        return cls()

    @classmethod
    def go2(cls) -> SensorNoise:
        """Noise typical of a Go2 and of the noise that legged_gym trains policies under.

        legged_gym (`LeggedRobotCfg.noise`, noise_level 1) adds uniform noise on
        `[-s, s]`, whose std is `s / sqrt(3)`, with `s` = 0.2 rad/s (angular velocity),
        0.01 rad (joint positions) and 1.5 rad/s (joint velocities): hence `gyro_std`,
        `joint_position_std` and `joint_velocity_std` below (per sample, here at the IMU
        rate).
        accelerometer_std: a MEMS IMU of this class (Bosch BMI088 datasheet: noise density
            175 ug/sqrt(Hz)) over a 250 Hz bandwidth (500 Hz samples): 0.027 m/s^2, rounded
            up to 0.03.
        gyro_bias_std: BMI088 zero-rate offset, +-1 deg/s, taken as 1 sigma: 0.0175 rad/s.
        accelerometer_bias_std: BMI088 zero-g offset +-20 mg (the datasheet's bound), taken
            as 2 sigma: 10 mg = 0.098 m/s^2.
        foot_force_std: a choice, not a datasheet value: a quarter of the 20 N contact
            threshold that go2_odometry applies to the Go2's foot sensors, so that noise alone
            rarely crosses it.
        imu_latency: one period of the Go2's 500 Hz `rt/lowstate`, 2 ms (an assumption: the
            IMU sample is one message older than the joint sample it ships with).
        """
        sqrt3 = np.sqrt(3.0)
        return cls(
            gyro_std=0.2 / sqrt3,
            accelerometer_std=0.03,
            gyro_bias_std=np.deg2rad(1.0),
            accelerometer_bias_std=0.098,
            joint_position_std=0.01 / sqrt3,
            joint_velocity_std=1.5 / sqrt3,
            foot_force_std=5.0,
            imu_latency=0.002,
        )


@dataclass(frozen=True)
class SensorBias:
    """The constant IMU biases of one run: gyro (3,) [rad/s], accelerometer (3,) [m/s^2],
    base frame."""

    gyro: np.ndarray
    accelerometer: np.ndarray

    @classmethod
    def zero(cls) -> SensorBias:
        return cls(np.zeros(3), np.zeros(3))

    @classmethod
    def draw(cls, noise: SensorNoise, rng: np.random.Generator) -> SensorBias:
        """`b ~ N(0, std^2 I)` for each sensor, with the stds of `noise`."""
        return cls(
            rng.normal(0.0, noise.gyro_bias_std, 3),
            rng.normal(0.0, noise.accelerometer_bias_std, 3),
        )


def _noisy(x: np.ndarray, std: float, rng: np.random.Generator) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x + rng.normal(0.0, std, x.shape) if std > 0.0 else x.copy()


def apply_noise(
    measurement: Measurement,
    noise: SensorNoise,
    rng: np.random.Generator,
    bias: SensorBias,
    imu_sample: Measurement | None = None,
) -> Measurement:
    """`measurement` with the noise and bias of the module docstring applied.

    imu_sample: the (older) true sample the IMU fields come from (latency); None: the
        measurement itself. Draws from `rng`; everything else is left as it is (base
        velocity/position, torques, temperatures, mode, timestamp, sequence).
    """
    imu = measurement if imu_sample is None else imu_sample
    changes = dict(
        base_quat=np.asarray(imu.base_quat, dtype=float).copy(),
        base_angular_velocity=_noisy(imu.base_angular_velocity, noise.gyro_std, rng) + bias.gyro,
        base_linear_acceleration=_noisy(imu.base_linear_acceleration, noise.accelerometer_std, rng)
        + bias.accelerometer,
        joint_q=_noisy(measurement.joint_q, noise.joint_position_std, rng),
        joint_qd=_noisy(measurement.joint_qd, noise.joint_velocity_std, rng),
    )
    if measurement.foot_force is not None:
        changes["foot_force"] = _noisy(measurement.foot_force, noise.foot_force_std, rng)
    return measurement.replace(**changes)


class NoisySensors(RobotWrapper):
    """A `RobotInterface` whose `read()` is the inner robot's with `apply_noise` applied.

    Args:
        robot: any `RobotInterface` (with `advance` if simulated: passed through).
        noise: the `SensorNoise`.
        seed: seeds the `numpy.random.Generator` of the bias (drawn here) and of the noise.
    `bias` is the run's `SensorBias`; `imu_buffer` the true samples kept for the latency.
    Each inner sample (by `sequence`) gets its noise once: reading twice without a new inner
    sample returns the same noisy measurement.
    """

    def __init__(self, robot, noise: SensorNoise, seed: int = 0):
        super().__init__(robot)
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.bias = SensorBias.draw(noise, self.rng)
        self.imu_buffer: collections.deque = collections.deque()  # true samples, oldest first
        self._last: Measurement | None = None  # the noisy newest sample

    def imu_sample(self, measurement: Measurement) -> Measurement:
        """The newest stored true sample at least `imu_latency` older than `measurement`
        (the oldest one if none is that old yet); drops the samples older than it."""
        history, cutoff = self.imu_buffer, measurement.timestamp - self.noise.imu_latency
        while len(history) > 1 and history[1].timestamp <= cutoff + 1e-12:
            history.popleft()
        return history[0] if history[0].timestamp <= cutoff + 1e-12 else measurement

    @property
    def last(self) -> Measurement | None:
        """The newest noisy measurement `read` returned (None before the first)."""
        return self._last

    def read(self) -> Measurement | None:
        m = self.robot.read()
        if m is None:
            return None
        if self._last is not None and m.sequence == self._last.sequence:
            return self._last
        self.imu_buffer.append(m)
        self._last = apply_noise(m, self.noise, self.rng, self.bias, self.imu_sample(m))
        return self._last
