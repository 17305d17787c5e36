"""Conventions of the hardware interface: joint order, frames, units, and the wire layout.

The MuJoCo backend reads its measurements from MuJoCo's own sensors (IMU site quaternion, gyro,
velocimeter, accelerometer, joint sensors), which we did not write: for random states they must
equal the model's state mapping `measurement_from_state(q, v)`.
"""

import struct
import zlib

import numpy as np
import pytest

import dynamics
from hardware.backends import wire
from hardware.interface import (
    GRAVITY,
    JointCommand,
    JointMap,
    RobotMode,
    measurement_from_state,
    state_from_measurement,
)

mujoco = pytest.importorskip("mujoco")

# Unitree's SDK numbers Go2's motors leg by leg FR, FL, RR, RL (hip, thigh, calf each)
GO2_SDK_ORDER = tuple(
    f"{leg}_{part}_joint" for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf")
)


@pytest.fixture(scope="module", params=("go2", "solo12"))
def robot_model(request):
    return dynamics.load_robot(request.param)


def test_joint_map_follows_the_model(robot_model):
    jm = JointMap.from_model(robot_model)
    assert jm.names == robot_model.actuated_joint_names and jm.nu == 12
    np.testing.assert_array_equal(jm.q_index, np.arange(7, 19))
    np.testing.assert_array_equal(jm.v_index, np.arange(6, 18))
    np.testing.assert_array_equal(jm.lower, np.asarray(robot_model.lower_position_limit)[7:])
    np.testing.assert_array_equal(jm.effort_limit, np.asarray(robot_model.effort_limit)[6:])
    np.testing.assert_array_equal(jm.q_default, np.asarray(robot_model.q_standing)[7:])
    assert jm.names[0] in jm.describe() and "xyzw" in jm.describe()


def test_joint_permutation_to_a_driver_order():
    jm = JointMap.from_model(dynamics.load_robot("go2"))
    perm = jm.permutation(GO2_SDK_ORDER)
    driver_values = np.arange(12.0)  # driver slot i holds the value i
    ours = driver_values[perm]
    assert jm.names[0] == "FL_hip_joint" and ours[0] == 3.0  # FL_hip is the SDK's motor 3
    assert jm.names[3] == "FR_hip_joint" and ours[3] == 0.0
    back = np.empty(12)
    back[perm] = ours
    np.testing.assert_array_equal(back, driver_values)
    with pytest.raises(ValueError, match="do not match"):
        jm.permutation(GO2_SDK_ORDER[:-1] + ("tail_joint",))


def test_projected_gravity_and_accelerometer_at_rest():
    # base rolled +90 deg about x: the base y axis points up, so gravity is along -y... in the
    # base frame gravity (0, 0, -1) world is R^T (0, 0, -1) = (0, -1, 0)
    q = np.zeros(19)
    q[3:7] = [np.sin(np.pi / 4), 0.0, 0.0, np.cos(np.pi / 4)]
    m = measurement_from_state(q, np.zeros(18), timestamp=0.0, sequence=0)
    np.testing.assert_allclose(m.projected_gravity, [0.0, -1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(m.base_linear_acceleration, [0.0, GRAVITY, 0.0], atol=1e-12)


def test_mujoco_sensors_equal_the_model_state_mapping(robot_model):
    from hardware.backends.mujoco_sim import MuJoCoRobot

    robot = MuJoCoRobot(robot_model, mjcf_options={"floor": False, "joint_limits": False})
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = np.asarray(robot_model.q_standing, dtype=float).copy()
        q[0:3] = rng.normal(size=3)
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
        q[7:] += 0.3 * rng.normal(size=12)
        v = rng.normal(size=18)
        robot.set_state(q, v)
        m = robot.read()
        expected = measurement_from_state(q, v, timestamp=0.0, sequence=0)
        assert np.dot(m.base_quat, expected.base_quat) > 0  # same sign convention (w >= 0...)
        for name in (
            "joint_q",
            "joint_qd",
            "base_quat",
            "base_angular_velocity",
            "base_linear_velocity",
            "base_position",
        ):
            np.testing.assert_allclose(getattr(m, name), getattr(expected, name), atol=1e-12)
        q_back, v_back = state_from_measurement(m)
        np.testing.assert_allclose(q_back, q, atol=1e-12)
        np.testing.assert_allclose(v_back, v, atol=1e-12)


def test_mujoco_accelerometer_reads_specific_force():
    from hardware.backends.mujoco_sim import MuJoCoRobot

    model = dynamics.load_robot("go2")
    # free fall (no floor, no torque): the accelerometer reads zero, as a real one would
    robot = MuJoCoRobot(model, mjcf_options={"floor": False})
    robot.advance(0.02)
    m = robot.read()
    assert np.linalg.norm(m.base_linear_acceleration) < 1e-6
    assert m.base_linear_velocity @ m.projected_gravity > 0  # falling along gravity
    # standing held by the drivers: +g along the base z axis (the base is nearly level)
    robot = MuJoCoRobot(model)
    stand = JointCommand.create(model.q_standing[7:], 80.0, 2.0, arm=True)
    for k in range(40):  # 2 s, a command every 50 ms (under the 0.1 s watchdog)
        robot.write(stand.replace(timestamp=robot.now(), sequence=k + 1))
        robot.advance(0.05)
    m = robot.read()
    assert m.robot_mode == RobotMode.ACTIVE
    np.testing.assert_allclose(
        m.base_linear_acceleration, -GRAVITY * m.projected_gravity, atol=0.05
    )
    assert abs(m.projected_gravity[2] + 1.0) < 1e-3  # and nearly level


# --------------------------------------------------------------------------- wire
def _measurement(nu=12, seq=7):
    rng = np.random.default_rng(0)
    q = np.concatenate([[0.1, 0.2, 0.3], [0, 0, 0, 1.0], rng.normal(size=nu)])
    return measurement_from_state(
        q, rng.normal(size=6 + nu), timestamp=12.5, sequence=seq, joint_tau=rng.normal(size=nu)
    ).replace(robot_mode=RobotMode.DAMPING)


def test_wire_layout_is_as_documented():
    c = JointCommand.create(np.arange(12.0), 80.0, 2.0, tau_ff=1.5, timestamp=3.25, arm=True)
    data = wire.encode_command(c, sequence=42)
    assert len(data) == 32 + 5 * 12 * 8 + 4
    magic, version, kind, flags, nu, reserved, length, seq, stamp = struct.unpack_from(
        "<4sHBBHHIQd", data
    )
    assert (magic, version, kind, flags, nu, reserved) == (b"DLRB", 1, 2, 1, 12, 0)
    assert (length, seq, stamp) == (480, 42, 3.25)
    np.testing.assert_array_equal(np.frombuffer(data[32:128], "<f8"), np.arange(12.0))
    assert struct.unpack("<I", data[-4:])[0] == zlib.crc32(data[:-4])


def test_wire_round_trip():
    m = _measurement()
    back = wire.decode_measurement(wire.decode(wire.encode_measurement(m, 7)))
    for name, value in m.arrays().items():
        np.testing.assert_array_equal(getattr(back, name), value)
    assert (back.timestamp, back.sequence, back.robot_mode) == (12.5, 7, RobotMode.DAMPING)
    partial = m.replace(base_position=None, base_linear_velocity=None, joint_tau=None)
    back = wire.decode_measurement(wire.decode(wire.encode_measurement(partial, 8)))
    assert back.base_position is None and back.base_linear_velocity is None
    assert back.joint_tau is None
    c = JointCommand.create(np.arange(12.0), 80.0, 2.0, qd_target=0.5, timestamp=3.0)
    back = wire.decode_command(wire.decode(wire.encode_command(c, 9)))
    for name in JointCommand.ARRAYS:
        np.testing.assert_array_equal(getattr(back, name), getattr(c, name))
    assert (back.sequence, back.timestamp, back.arm) == (9, 3.0, False)


def _reencode(data: bytes, **fields) -> bytes:
    """`data` with header fields replaced and a fresh, valid CRC."""
    names = ("magic", "version", "type", "flags", "num_joints", "reserved", "length", "seq", "ts")
    values = dict(zip(names, struct.unpack_from("<4sHBBHHIQd", data)))
    values.update(fields)
    body = struct.pack("<4sHBBHHIQd", *values.values()) + data[32:-4]
    return body + struct.pack("<I", zlib.crc32(body))


@pytest.mark.parametrize(
    "mutate, kind",
    [
        (lambda d: d[:20], "truncated"),
        (lambda d: d[:-9], "truncated"),
        (lambda d: d + b"\0", "bad_length"),
        (lambda d: b"XXXX" + d[4:], "bad_magic"),
        (lambda d: _reencode(d, version=2), "bad_version"),
        (lambda d: d[:40] + bytes([d[40] ^ 1]) + d[41:], "bad_crc"),
        (lambda d: _reencode(d, type=99), "bad_type"),
        (lambda d: _reencode(d, num_joints=11), "bad_length"),
    ],
)
def test_malformed_datagrams_raise_with_their_kind(mutate, kind):
    data = wire.encode_command(JointCommand.create(np.zeros(12), 1.0, 0.1, timestamp=0.0), 1)
    assert wire.decode(data).type is wire.MessageType.COMMAND
    with pytest.raises(wire.WireError) as err:
        wire.decode(mutate(data))
    assert err.value.kind == kind


def test_sequence_filter_and_clock_offset():
    f = wire.SequenceFilter()
    assert [f.accept(s) for s in (1, 2, 5, 5, 4, 6)] == [True, True, True, False, False, True]
    assert f.lost == 2  # 3 and 4 never arrived in order
    clock = wire.ClockOffset(drift=1e-3)
    for k in range(100):  # remote clock = local - 100 s, transit 1 ms (+ 0-2 ms noise)
        t = 0.01 * k
        clock.update(t + 100.0 + 0.001 + 0.002 * (k % 3 == 0), t)
    # the offset may rise by drift x (time between two samples, <= 12 ms) above the fastest
    # transit while later samples are slower
    assert clock.offset == pytest.approx(100.001, abs=1e-3 * 0.012 + 1e-12)
    assert clock.age(5.0 + 100.001 + 0.2, 5.0) == pytest.approx(0.2, abs=2e-5)  # 0.2 s delay
