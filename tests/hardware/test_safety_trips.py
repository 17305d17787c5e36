"""The safety layer's base-tilt and motor-temperature trips (`hardware.safety`).

Roll and pitch are checked against SciPy's Euler angles of the same quaternion; the trips on
measurements whose attitude / temperatures are set just inside and just beyond the limits."""

import logging

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import dynamics
from hardware.interface import JointCommand, JointMap, Measurement, RobotMode
from hardware.safety import Mode, SafetyConfig, SafetyLayer, hot_motors, roll_pitch, tilt_error


@pytest.fixture(scope="module")
def joint_map():
    return JointMap.from_model(dynamics.load_robot("go2"))


def quat(roll=0.0, pitch=0.0, yaw=0.0) -> np.ndarray:
    """`[x, y, z, w]` of `R = Rz(yaw) Ry(pitch) Rx(roll)` (SciPy, intrinsic Z-Y-X)."""
    return Rotation.from_euler("ZYX", [yaw, pitch, roll]).as_quat()


def measurement(joint_map, t, quat_xyzw=(0, 0, 0, 1), temperature=None) -> Measurement:
    nu = joint_map.nu
    return Measurement(
        timestamp=t, sequence=int(t * 500), joint_q=joint_map.q_default.copy(),
        joint_qd=np.zeros(nu), base_quat=np.asarray(quat_xyzw, float),
        base_angular_velocity=np.zeros(3), base_linear_acceleration=np.array([0, 0, 9.81]),
        robot_mode=RobotMode.ACTIVE,
        motor_temperature=None if temperature is None else np.asarray(temperature, float),
    )  # fmt: skip


def run_layer(joint_map, config, measurements, dt=0.002):
    """Start a layer at t = 0 on a level, cool robot, then feed `measurements(t)`; returns it."""
    safety = SafetyLayer(joint_map, config)
    hold = JointCommand.create(joint_map.q_default, joint_map.kp_default, joint_map.kd_default)
    safety.start(0.0, measurement(joint_map, 0.0))
    t = 0.0
    for m in measurements:
        t += dt
        m = m.replace(timestamp=t)
        assert safety.observe(t, m)
        safety.command(t, hold)
    return safety


@pytest.mark.parametrize("roll, pitch, yaw", [(0.3, -0.2, 1.0), (-2.5, 0.4, -2.0), (0.1, 1.3, 0.0)])
def test_roll_pitch_match_scipys_euler_angles(roll, pitch, yaw):
    got = roll_pitch(quat(roll, pitch, yaw))
    np.testing.assert_allclose(got, (roll, pitch), atol=1e-12)
    # not normalised: the same angles
    np.testing.assert_allclose(roll_pitch(3.0 * quat(roll, pitch, yaw)), got, atol=1e-12)
    # upside down: |roll| near pi whatever the yaw
    assert abs(roll_pitch(quat(np.pi - 0.01, 0.0, yaw))[0]) > 3.0


def test_tilt_beyond_the_limit_damps_and_records_the_angle(joint_map):
    config = SafetyConfig(soft_start_duration=0.01, max_roll=0.5, max_pitch=0.7)
    # just inside both limits, for 50 ticks, at any yaw: normal
    inside = [measurement(joint_map, 0, quat(0.49, -0.69, 2.0))] * 50
    safety = run_layer(joint_map, config, inside)
    assert safety.mode is Mode.NORMAL and "base_tilt_violation" not in safety.log.kinds()

    # roll beyond: damping on the first such tick, the angle in the event
    safety = run_layer(joint_map, config, inside[:10] + [measurement(joint_map, 0, quat(-0.6))])
    assert safety.mode is Mode.DAMPING
    event = safety.log.first("base_tilt_violation")
    assert event.detail.startswith("roll -0.600 rad (-34.4 deg)")
    assert safety.log.first("damping").detail == "after base_tilt_violation"
    assert tilt_error(quat(-0.6), 0.5, 0.7) == event.detail

    # pitch beyond (nose down), roll within
    safety = run_layer(joint_map, config, [measurement(joint_map, 0, quat(0.2, 0.75))])
    assert safety.mode is Mode.DAMPING
    assert safety.log.first("base_tilt_violation").detail.startswith("pitch +0.750 rad")

    # a disabled angle is not checked
    off = SafetyConfig(soft_start_duration=0.01, max_roll=None, max_pitch=0.7)
    safety = run_layer(joint_map, off, [measurement(joint_map, 0, quat(1.5, 0.0))] * 5)
    assert safety.mode is Mode.NORMAL


def test_the_default_tilt_limits_leave_a_level_robot_alone_and_catch_one_on_its_side(joint_map):
    safety = run_layer(joint_map, SafetyConfig(soft_start_duration=0.01),
                       [measurement(joint_map, 0, quat(0.0, 0.0, 3.0))] * 20)  # fmt: skip
    assert safety.mode is Mode.NORMAL
    safety = run_layer(joint_map, SafetyConfig(soft_start_duration=0.01),
                       [measurement(joint_map, 0, quat(np.pi / 2))])  # fmt: skip
    assert safety.mode is Mode.DAMPING and safety.log.first("base_tilt_violation")


def test_motor_temperature_warns_then_damps(joint_map, caplog):
    nu = joint_map.nu
    config = SafetyConfig(soft_start_duration=0.01, motor_temperature_warning=60.0,
                          motor_temperature_limit=80.0)  # fmt: skip
    cool = np.full(nu, 40.0)
    warm = cool.copy()
    warm[[2, 5]] = [61.0, 65.0]  # FL_calf, FR_calf
    hot = warm.copy()
    hot[5] = 80.0
    ms = [measurement(joint_map, 0, temperature=cool)] * 5
    ms += [measurement(joint_map, 0, temperature=warm)] * 20
    with caplog.at_level(logging.WARNING, logger="hardware.safety"):
        safety = run_layer(joint_map, config, ms)
    assert safety.mode is Mode.NORMAL  # a warning does not change the mode
    warning = safety.log.first("motor_temperature_warning")
    assert warning.count == 20 and warning.joints == (2, 5)
    assert warning.detail == "FR_calf_joint at 65.0 deg C (limit 60.0)"
    assert joint_map.names[5] == "FR_calf_joint"
    assert any("motor_temperature_warning" in r.getMessage() for r in caplog.records)

    safety = run_layer(joint_map, config, ms + [measurement(joint_map, 0, temperature=hot)])
    assert safety.mode is Mode.DAMPING
    trip = safety.log.first("motor_temperature_violation")
    assert trip.joints == (5,) and trip.detail == "FR_calf_joint at 80.0 deg C (limit 80.0)"
    assert safety.log.first("damping").detail == "after motor_temperature_violation"
    # the damping command: Kp = 0
    out = safety.command(1.0, None)
    assert np.all(out.kp == 0) and np.all(out.kd > 0)


def test_no_temperatures_are_not_checked_and_bad_shapes_are_rejected(joint_map):
    safety = run_layer(joint_map, SafetyConfig(soft_start_duration=0.01),
                       [measurement(joint_map, 0)] * 5)  # fmt: skip
    assert safety.mode is Mode.NORMAL and not safety.log.kinds() & {
        "motor_temperature_warning", "motor_temperature_violation"}  # fmt: skip
    safety = SafetyLayer(joint_map)
    safety.start(0.0, measurement(joint_map, 0.0))
    assert not safety.observe(0.002, measurement(joint_map, 0.002, temperature=np.zeros(3)))
    assert "motor_temperature has shape (3,)" in safety.log.first("measurement_invalid").detail
    assert hot_motors(None, 80.0).size == 0
    np.testing.assert_array_equal(hot_motors([79.9, 80.0, 95.0], 80.0), [False, True, True])
    np.testing.assert_array_equal(hot_motors([95.0], None), [False])


def test_bad_trip_settings_are_refused():
    with pytest.raises(ValueError, match="max_roll must be in"):
        SafetyConfig(max_roll=0.0)
    with pytest.raises(ValueError, match="max_pitch must be in"):
        SafetyConfig(max_pitch=4.0)
    with pytest.raises(ValueError, match="motor_temperature_warning .* must not exceed"):
        SafetyConfig(motor_temperature_warning=90.0, motor_temperature_limit=80.0)
