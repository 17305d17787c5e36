"""LowState_ read and LowCmd_ written as bytes at fixed offsets, without message objects.

    decoder = LowStateDecoder(perm)
    data = decoder.readable(data)                # data: a serialized LowState_ (header + body)
    m = decoder.measurement(data, timestamp=t, sequence=k, robot_mode=mode)
    tick_ms, remote = decoder.tick(data), decoder.remote(data)
    packer = LowCmdPacker(perm)
    data = packer.pack(command)                  # XCDR1 bytes, CRC set (`dds.write_serialized`)
    sport = SportStateDecoder()
    data = sport.readable(data)                  # a serialized SportModeState_
    position, velocity = sport.base_state(data)  # world; base frame

The 500 Hz path handles one LowState and one LowCmd a tick. Cyclone's Python objects for them
hold a few hundred attributes each; building them, walking them again for the CRC and once more
for the wire costs more than everything the path does with the numbers. Here a message is its
bytes, and the fields the path uses are gathered from, or scattered into, their byte offsets
(`codec.leaf_offsets`) with one NumPy index each:

- `LowStateDecoder` reads XCDR1 little endian, what Cyclone writes by default (`accepts`;
  `readable` hands any other encoding through Cyclone's decoder and our encoder first).
  Its `measurement` equals `measurement_from_lowstate` of the deserialized message, field for
  field, and is None where a number is not finite or the quaternion is degenerate, as
  `Measurement.is_finite`.
- `SportStateDecoder` reads a SportModeState_'s base position and velocity the same way:
  `base_state` equals `conversions.base_from_sport_state` of the deserialized message, and
  `stamp` its `stamp` [s].
- `LowCmdPacker` keeps one LowCmd_ twice, as its C struct (what the CRC is computed over,
  `crc`) and as its XCDR1 serialization, both made from `conversions.new_lowcmd()`: `pack`
  writes the five command arrays into SDK slots 0-11 of both (model order in, `perm`), the CRC
  into both, and returns the serialization: the bytes `lowcmd_from_command(...).serialize()`
  gives.

Slot order: `ours = sdk[perm]`, `sdk[perm] = ours` (`conversions.sdk_permutation`).
"""

from __future__ import annotations

import numpy as np

from ..interface import JointCommand, Measurement, rotation_from_quat
from . import messages as msgs
from .codec import CDR_LE_HEADER, c_bytes, leaf_offsets
from .conversions import (
    FOOT_FORCE_NEWTONS_PER_COUNT,
    GO2_FOOT_PERM,
    NUM_JOINTS,
    new_lowcmd,
    quat_xyzw,
)
from .crc import crc32_words

_HEADER = len(CDR_LE_HEADER)  # bytes before the XCDR1 body


def _offsets(cls, layout: str, start: int = 0) -> dict:
    """`{path: (struct char, byte offset)}` of `cls`'s numbers, the offsets counted from
    `start` (the body's start in a serialization: after its header)."""
    return {path: (char, start + offset) for path, char, offset in leaf_offsets(cls, layout)}


def _word_index(offsets: dict, paths, char: str) -> np.ndarray:
    """Indices of `paths` in the buffer read as an array of `char` items (each offset checked to
    be a whole number of items)."""
    size = np.dtype("<" + char).itemsize
    out = []
    for path in paths:
        kind, offset = offsets[path]
        if kind != char or offset % size:
            raise TypeError(f"{path} is {kind!r} at byte {offset}, not an aligned {char!r}")
        out.append(offset // size)
    return np.array(out, dtype=np.intp)


def _motor_paths(array: str, field: str, perm) -> list:
    """`array[slot].field` for the model's joints in order (`slot = perm[joint]`)."""
    return [f"{array}[{int(s)}].{field}" for s in perm]


class SerializedReader:
    """What reading serialized samples of the fixed-size `cls` shares: its numbers' offsets in
    the serialization (`offsets`, `_offsets`), its length (`size`), which encodings are read."""

    def __init__(self, cls):
        self.cls = cls
        self.offsets = offsets = _offsets(cls, "cdr", _HEADER)
        end = max(o + np.dtype("<" + c).itemsize for c, o in offsets.values())
        self.size = end + -end % 4  # bytes of a serialization: whole words, as Cyclone pads

    def accepts(self, data: bytes) -> bool:
        """`data` is a whole sample in XCDR1 little endian."""
        return len(data) >= self.size and data[:2] == CDR_LE_HEADER[:2]

    def readable(self, data: bytes) -> bytes:
        """`data` as the reader reads it: as it is where it `accepts` it, else decoded by
        Cyclone (another encoding: big endian, XCDR2) and serialized again."""
        return data if self.accepts(data) else self.cls.deserialize(data).serialize()


class LowStateDecoder(SerializedReader):
    """A serialized LowState_ -> `Measurement` (module docstring)."""

    _FLOATS = ("q", "dq", "tau_est")  # motor fields, then the IMU's

    def __init__(self, perm, foot_perm=GO2_FOOT_PERM):
        super().__init__(msgs.LowState_)
        offsets = self.offsets
        imu = [f"imu_state.quaternion[{k}]" for k in (1, 2, 3, 0)]  # [w, x, y, z] -> xyzw
        imu += [f"imu_state.gyroscope[{k}]" for k in range(3)]
        imu += [f"imu_state.accelerometer[{k}]" for k in range(3)]
        motors = [p for f in self._FLOATS for p in _motor_paths("motor_state", f, perm)]
        self._floats = _word_index(offsets, motors + imu, "f")
        self._temperature = _word_index(offsets, _motor_paths("motor_state", "temperature", perm),
                                        "B")  # fmt: skip
        feet = [f"foot_force[{int(s)}]" for s in foot_perm]
        self._feet = _word_index(offsets, feet, "h")
        self._tick = int(_word_index(offsets, ["tick"], "I")[0])
        remote = offsets["wireless_remote[0]"][1]
        self._remote = slice(remote, remote + 40)

    def tick(self, data: bytes) -> int:
        """The robot's `tick` [ms]."""
        return int(np.frombuffer(data, "<u4", 1, 4 * self._tick)[0])

    def remote(self, data: bytes) -> bytes:
        """The 40 bytes of `wireless_remote`."""
        return data[self._remote]

    def measurement(self, data: bytes, *, timestamp: float, sequence: int, robot_mode):
        """The `Measurement` of `data` (as `conversions.measurement_from_lowstate`), or None
        where it has a non-finite number or a degenerate quaternion (`Measurement.is_finite`)."""
        n = NUM_JOINTS
        words = np.frombuffer(data, "<f4", len(data) // 4)
        values = words[self._floats].astype(float)  # q, dq, tau, quat (xyzw), gyro, acc
        quat = values[3 * n : 3 * n + 4]
        if not (np.isfinite(values).all() and quat @ quat > 0.25):
            return None
        counts = np.frombuffer(data, "<i2", len(data) // 2)[self._feet]
        temperature = np.frombuffer(data, np.uint8)[self._temperature]
        return Measurement(
            timestamp=timestamp,
            sequence=sequence,
            joint_q=values[:n],
            joint_qd=values[n : 2 * n],
            base_quat=quat,
            base_angular_velocity=values[3 * n + 4 : 3 * n + 7],
            base_linear_acceleration=values[3 * n + 7 :],
            joint_tau=values[2 * n : 3 * n],
            robot_mode=robot_mode,
            foot_force=counts * FOOT_FORCE_NEWTONS_PER_COUNT,
            motor_temperature=temperature.astype(float),
        )


class SportStateDecoder(SerializedReader):
    """A serialized SportModeState_ -> its stamp and base state (module docstring)."""

    def __init__(self):
        super().__init__(msgs.SportModeState_)
        offsets = self.offsets
        paths = [f"imu_state.quaternion[{k}]" for k in range(4)]  # [w, x, y, z]
        paths += [f"position[{k}]" for k in range(3)] + [f"velocity[{k}]" for k in range(3)]
        self._floats = _word_index(offsets, paths, "f")
        self._sec = int(_word_index(offsets, ["stamp.sec"], "i")[0])
        self._nanosec = int(_word_index(offsets, ["stamp.nanosec"], "I")[0])

    def stamp(self, data: bytes) -> float:
        """`stamp.sec + 1e-9 stamp.nanosec` [s]."""
        sec = int(np.frombuffer(data, "<i4", 1, 4 * self._sec)[0])
        return sec + 1e-9 * int(np.frombuffer(data, "<u4", 1, 4 * self._nanosec)[0])

    def base_state(self, data: bytes) -> tuple[np.ndarray, np.ndarray]:
        """`(position (3,) world, linear velocity (3,) base frame)`."""
        values = np.frombuffer(data, "<f4", len(data) // 4)[self._floats].astype(float)
        rotation = rotation_from_quat(quat_xyzw(values[:4]))
        return values[4:7], rotation.T @ values[7:10]


class LowCmdPacker:
    """`JointCommand` -> the XCDR1 bytes of a LowCmd_ with its CRC (module docstring)."""

    _FIELDS = (("q_target", "q"), ("qd_target", "dq"), ("tau_ff", "tau"), ("kp", "kp"),
               ("kd", "kd"))  # fmt: skip

    def __init__(self, perm, mode=msgs.MOTOR_SERVO):
        template = new_lowcmd()
        for s in range(NUM_JOINTS):
            template.motor_cmd[s].mode = mode
        self._c = bytearray(c_bytes(template))
        wire = template.serialize()
        self._wire = bytearray(wire.ljust(-(-len(wire) // 4) * 4, b"\0"))
        c_offsets = _offsets(msgs.LowCmd_, "c")
        wire_offsets = _offsets(msgs.LowCmd_, "cdr", _HEADER)
        self._c_words = np.frombuffer(self._c, "<f4")
        self._wire_words = np.frombuffer(self._wire, "<f4")
        self._index = [
            (name, _word_index(c_offsets, paths, "f"), _word_index(wire_offsets, paths, "f"))
            for name, field in self._FIELDS
            for paths in [_motor_paths("motor_cmd", field, perm)]
        ]
        crc_offset = c_offsets["crc"][1]
        if crc_offset != len(self._c) - 4:
            raise TypeError("LowCmd_'s crc is not the last word of its C struct")
        self._crc_data = slice(0, crc_offset)  # the CRC covers every word before it
        self._wire_crc = int(_word_index(wire_offsets, ["crc"], "I")[0])

    def pack(self, command: JointCommand) -> bytes:
        """The LowCmd_ for `command` (model order), CRC set, serialized."""
        for name, c_index, wire_index in self._index:
            values = getattr(command, name)
            self._c_words[c_index] = values
            self._wire_words[wire_index] = values
        crc = crc32_words(bytes(self._c[self._crc_data]))
        np.frombuffer(self._wire, "<u4")[self._wire_crc] = crc
        return bytes(self._wire)
