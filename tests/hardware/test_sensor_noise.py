"""Sensor noise: the statistics of `apply_noise`, the bias, the IMU latency, and the wrapper."""

from __future__ import annotations

import numpy as np
import pytest

import dynamics
from hardware.backends.mujoco_sim import MuJoCoRobot
from hardware.interface import measurement_from_state
from hardware.sensor_noise import NoisySensors, SensorBias, SensorNoise, apply_noise


def sample(model, t=0.0, sequence=1):
    q = np.asarray(model.q_standing, dtype=float)
    v = np.zeros(model.nv)
    v[3:6] = (0.1, -0.2, 0.3)
    m = measurement_from_state(q, v, timestamp=t, sequence=sequence)
    return m.replace(foot_force=np.full(4, 40.0))


@pytest.fixture(scope="module")
def model():
    return dynamics.load_robot("go2")


def test_noise_has_the_stated_std_and_the_bias_is_constant(model):
    noise = SensorNoise.go2()
    rng = np.random.default_rng(1)
    bias = SensorBias(np.array([0.01, 0.02, -0.03]), np.array([0.1, -0.1, 0.05]))
    m = sample(model)
    out = [apply_noise(m, noise, rng, bias) for _ in range(4000)]
    gyro = np.array([o.base_angular_velocity for o in out]) - m.base_angular_velocity
    accel = np.array([o.base_linear_acceleration for o in out]) - m.base_linear_acceleration
    q = np.array([o.joint_q for o in out]) - m.joint_q
    qd = np.array([o.joint_qd for o in out]) - m.joint_qd
    force = np.array([o.foot_force for o in out]) - m.foot_force
    for err, std, mean in ((gyro, noise.gyro_std, bias.gyro),
                           (accel, noise.accelerometer_std, bias.accelerometer),
                           (q, noise.joint_position_std, 0.0),
                           (qd, noise.joint_velocity_std, 0.0),
                           (force, noise.foot_force_std, 0.0)):  # fmt: skip
        np.testing.assert_allclose(err.std(axis=0), std, rtol=0.06)
        np.testing.assert_allclose(err.mean(axis=0), mean, atol=4 * std / np.sqrt(len(out)))
    # what the estimator must provide is left as it is
    np.testing.assert_array_equal(out[0].base_linear_velocity, m.base_linear_velocity)
    np.testing.assert_array_equal(out[0].base_position, m.base_position)
    np.testing.assert_array_equal(out[0].base_quat, m.base_quat)
    assert out[0].base_state_source == "ground_truth" and out[0].timestamp == m.timestamp


def test_no_noise_is_the_identity(model):
    m = sample(model)
    out = apply_noise(m, SensorNoise.none(), np.random.default_rng(0), SensorBias.zero())
    for name, value in m.arrays().items():
        np.testing.assert_array_equal(getattr(out, name), value)


def test_bias_draw_has_the_stated_std():
    noise = SensorNoise.go2()
    rng = np.random.default_rng(2)
    draws = [SensorBias.draw(noise, rng) for _ in range(3000)]
    gyro = np.array([d.gyro for d in draws])
    accel = np.array([d.accelerometer for d in draws])
    np.testing.assert_allclose(gyro.std(axis=0), noise.gyro_bias_std, rtol=0.07)
    np.testing.assert_allclose(accel.std(axis=0), noise.accelerometer_bias_std, rtol=0.07)


def test_bad_noise_is_rejected():
    with pytest.raises(ValueError, match="gyro_std"):
        SensorNoise(gyro_std=-1.0)
    with pytest.raises(ValueError, match="imu_latency"):
        SensorNoise(imu_latency=float("nan"))


def test_imu_fields_come_from_the_sample_latency_older(model):
    robot = MuJoCoRobot(model, timestep=0.002)
    noisy = NoisySensors(robot, SensorNoise(imu_latency=0.004), seed=0)
    truth = []
    for _ in range(10):
        robot.advance(0.002)
        m = noisy.read()
        truth.append(noisy.imu_buffer[-1])
    # the newest output's IMU fields are those of the sample two steps (4 ms) earlier
    inner_times = [s.timestamp for s in noisy.imu_buffer]
    assert m.timestamp - 0.004 in [pytest.approx(t) for t in inner_times]
    older = next(s for s in noisy.imu_buffer if abs(s.timestamp - (m.timestamp - 0.004)) < 1e-9)
    np.testing.assert_array_equal(m.base_linear_acceleration, older.base_linear_acceleration)
    assert not np.array_equal(m.base_linear_acceleration, truth[-1].base_linear_acceleration)
    np.testing.assert_array_equal(m.joint_q, truth[-1].joint_q)  # the joints are not late


def test_wrapper_passes_the_robot_through(model):
    robot = MuJoCoRobot(model, timestep=0.002)
    noisy = NoisySensors(robot, SensorNoise.go2(), seed=3)
    assert noisy.joint_map is robot.joint_map
    assert noisy.advance == robot.advance
    noisy.advance(0.004)
    assert noisy.now() == pytest.approx(robot.now())
    a = noisy.read()
    assert a.base_linear_velocity is not None and a.base_state_source == "ground_truth"
    same = NoisySensors(MuJoCoRobot(model, timestep=0.002), SensorNoise.go2(), seed=3)
    same.advance(0.004)
    np.testing.assert_array_equal(same.read().joint_q, a.joint_q)  # seeded
