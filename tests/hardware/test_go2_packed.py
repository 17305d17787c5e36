"""`hardware.go2.packed`: LowState_ and LowCmd_ read and written at byte offsets agree with
Cyclone's own encoder and decoder and with the message-object path of `conversions`."""

import numpy as np
import pytest

import dynamics

pytest.importorskip("cyclonedds", reason="the go2 extra is not installed (README, Go2)")

from cyclonedds.idl import IdlStruct  # noqa: E402
from cyclonedds.idl._support import Endianness  # noqa: E402

from hardware.go2 import codec, conversions  # noqa: E402
from hardware.go2 import messages as msgs  # noqa: E402
from hardware.go2.crc import crc_ok  # noqa: E402
from hardware.go2.packed import LowCmdPacker, LowStateDecoder, SportStateDecoder  # noqa: E402
from hardware.interface import JointCommand, JointMap, RobotMode  # noqa: E402

ARRAYS = ("joint_q", "joint_qd", "base_quat", "base_angular_velocity",
          "base_linear_acceleration", "joint_tau", "foot_force", "motor_temperature")  # fmt: skip


@pytest.fixture(scope="module")
def perm():
    return conversions.sdk_permutation(JointMap.from_model(dynamics.load_robot("go2")))


def f32(rng, n):
    """`n` random numbers exactly representable in float32."""
    return [float(v) for v in rng.normal(size=n).astype(np.float32)]


def random_lowstate(rng):
    """A LowState_ with every field the decoder reads set to a distinct random value."""
    msg = codec.zero(msgs.LowState_)
    msg.imu_state.quaternion = f32(rng, 4)
    msg.imu_state.gyroscope = f32(rng, 3)
    msg.imu_state.accelerometer = f32(rng, 3)
    for motor in msg.motor_state:
        motor.q, motor.dq, motor.tau_est, motor.ddq = f32(rng, 4)
        motor.temperature = int(rng.integers(0, 256))
    msg.foot_force = [int(v) for v in rng.integers(-(2**15), 2**15, 4)]
    msg.tick = int(rng.integers(0, 2**32))
    msg.wireless_remote = [int(v) for v in rng.integers(0, 256, 40)]
    return msg


def at_path(sample, path: str):
    """The value at `path` ("motor_cmd[3].q") of a message object."""
    value = sample
    for part in path.split("."):
        name, _, index = part.partition("[")
        value = getattr(value, name)
        if index:
            value = value[int(index[:-1])]
    return value


@pytest.mark.parametrize("cls", [msgs.LowCmd_, msgs.LowState_, msgs.SportModeState_])
def test_leaf_offsets_put_every_number_where_cyclone_reads_it_and_the_c_struct_has_it(cls):
    """A distinct small integer written at each leaf's XCDR1 offset is what Cyclone's own
    decoder finds at that leaf's path; the C struct of that sample has it at the C offset."""
    rng = np.random.default_rng(0)
    reference = IdlStruct.serialize(codec.zero(cls))  # Cyclone's own encoder: the header, size
    data = bytearray(reference)
    leaves = codec.leaf_offsets(cls, "cdr")
    values = rng.integers(1, 100, size=len(leaves))
    for (_, char, offset), value in zip(leaves, values):
        data[4 + offset : 4 + offset + np.dtype("<" + char).itemsize] = np.array(
            value, dtype="<" + char
        ).tobytes()
    sample = IdlStruct.deserialize.__func__(cls, bytes(data))  # Cyclone's own decoder
    assert [float(at_path(sample, path)) for path, _, _ in leaves] == values.tolist()
    c = codec.c_bytes(sample)
    for (path, char, offset), value in zip(codec.leaf_offsets(cls, "c"), values):
        assert np.frombuffer(c, "<" + char, 1, offset)[0] == value, path


def test_leaf_offsets_refuse_an_unknown_layout():
    with pytest.raises(ValueError, match="layout"):
        codec.leaf_offsets(msgs.LowCmd_, "xcdr2")


def test_the_decoder_equals_cyclones_decoder_and_measurement_from_lowstate(perm):
    decoder = LowStateDecoder(perm)
    rng = np.random.default_rng(1)
    for _ in range(20):
        msg = random_lowstate(rng)
        for endianness in (Endianness.Little, Endianness.Big):
            data = IdlStruct.serialize(msg, endianness=endianness)
            assert decoder.accepts(data) == (endianness is Endianness.Little)
            readable = decoder.readable(data)
            got = decoder.measurement(readable, timestamp=2.5, sequence=7,
                                      robot_mode=RobotMode.ACTIVE)  # fmt: skip
            want = conversions.measurement_from_lowstate(
                msgs.LowState_.deserialize(data), perm, timestamp=2.5, sequence=7,
                robot_mode=RobotMode.ACTIVE,
            )  # fmt: skip
            for name in ARRAYS:
                np.testing.assert_array_equal(getattr(got, name), getattr(want, name), name)
            assert (got.timestamp, got.sequence, got.robot_mode) == (2.5, 7, RobotMode.ACTIVE)
            assert decoder.tick(readable) == msg.tick
            assert decoder.remote(readable) == bytes(msg.wireless_remote)


@pytest.mark.parametrize("field", ["q", "dq", "tau_est", "gyroscope", "quaternion"])
def test_a_non_finite_number_or_a_degenerate_quaternion_gives_no_measurement(perm, field):
    decoder = LowStateDecoder(perm)
    msg = random_lowstate(np.random.default_rng(2))
    if field in ("gyroscope", "quaternion"):
        getattr(msg.imu_state, field)[1] = float("nan")
    else:
        setattr(msg.motor_state[int(perm[3])], field, float("inf"))
    data = IdlStruct.serialize(msg)
    assert decoder.measurement(data, timestamp=0.0, sequence=0, robot_mode=None) is None
    assert not conversions.measurement_from_lowstate(
        msg, perm, timestamp=0.0, sequence=0, robot_mode=None).is_finite()  # fmt: skip
    msg = random_lowstate(np.random.default_rng(3))
    msg.imu_state.quaternion = [0.0, 0.0, 0.0, 0.0]
    data = IdlStruct.serialize(msg)
    assert decoder.measurement(data, timestamp=0.0, sequence=0, robot_mode=None) is None


def test_a_motor_the_model_does_not_use_is_not_read(perm):
    """Slots 12-19 carry no joint: a NaN there changes nothing (as the message path)."""
    decoder = LowStateDecoder(perm)
    msg = random_lowstate(np.random.default_rng(4))
    msg.motor_state[15].q = float("nan")
    m = decoder.measurement(IdlStruct.serialize(msg), timestamp=0.0, sequence=0,
                            robot_mode=None)  # fmt: skip
    assert m is not None and np.isfinite(m.joint_q).all()


def test_the_packer_writes_the_bytes_of_the_message_path_with_a_valid_crc(perm):
    packer = LowCmdPacker(perm)
    rng = np.random.default_rng(5)
    for _ in range(20):
        command = JointCommand(q_target=rng.normal(size=12), qd_target=rng.normal(size=12),
                               kp=rng.uniform(0, 80, 12), kd=rng.uniform(0, 3, 12),
                               tau_ff=rng.normal(scale=10, size=12))  # fmt: skip
        data = packer.pack(command)
        want = IdlStruct.serialize(conversions.lowcmd_from_command(command, perm))
        assert data == want.ljust(len(data), b"\0") and len(data) % 4 == 0
        back = msgs.LowCmd_.deserialize(data)
        assert crc_ok(back)
        arrays = conversions.command_arrays(back, perm)
        np.testing.assert_array_equal(arrays["kp"], command.kp.astype(np.float32))
        assert (arrays["mode"] == msgs.MOTOR_SERVO).all()


def test_the_sport_state_decoder_equals_base_from_sport_state():
    decoder = SportStateDecoder()
    rng = np.random.default_rng(6)
    for _ in range(10):
        msg = codec.zero(msgs.SportModeState_)
        msg.imu_state.quaternion = f32(rng, 4)
        msg.position, msg.velocity = f32(rng, 3), f32(rng, 3)
        msg.stamp.sec, msg.stamp.nanosec = int(rng.integers(0, 2**31)), int(rng.integers(0, 10**9))
        for endianness in (Endianness.Little, Endianness.Big):
            data = decoder.readable(IdlStruct.serialize(msg, endianness=endianness))
            want = conversions.base_from_sport_state(msg)
            for got, expected in zip(decoder.base_state(data), want):
                np.testing.assert_array_equal(got, expected)
            assert decoder.stamp(data) == msg.stamp.sec + 1e-9 * msg.stamp.nanosec
