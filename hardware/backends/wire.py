"""The UDP message layout between a controller and a robot process, version 1.

Every datagram is one message: a 32-byte header, a payload, a CRC32 trailer, little-endian.

    offset  size  field
    0       4     magic           b"DLRB"
    4       2     version         uint16, 1
    6       1     type            uint8 (below)
    7       1     flags           uint8 (per type, below)
    8       2     num_joints      uint16, nu of the sender's robot (0 where it does not apply)
    10      2     reserved        uint16, 0
    12      4     payload_length  uint32, bytes of payload
    16      8     sequence        uint64, per sender and type stream, strictly increasing
    24      8     timestamp       float64 [s], robot clock (below)
    32      L     payload
    32 + L  4     crc32           uint32, zlib.crc32 of bytes [0, 32 + L)

Types and payloads (float64 arrays, each `(nu,)` unless stated, joint order of `JointMap`):

    1 MEASUREMENT  robot -> controller. timestamp: robot time of the sample.
                   payload: joint_q, joint_qd, joint_tau, base_quat (4, xyzw), gyro (3),
                   accelerometer (3), base_linear_velocity (3), base_position (3): 3 nu + 16.
                   flags: bits 0-1 robot mode (0 DAMPING, 1 ACTIVE, 2 ESTOP), bit 2 joint_tau
                   present, bit 3 base velocity present, bit 4 base position present (absent
                   fields are sent as NaN).
    2 COMMAND      controller -> robot. timestamp: robot time of the measurement the command
                   was computed from (the robot rejects it if older than its max age).
                   payload: q_target, qd_target, kp, kd, tau_ff: 5 nu. flags: bit 0 ARM.
    3 HELLO        controller -> robot: subscribe this address to the measurement stream.
                   num_joints: the controller's nu (must match). No payload.
    4 ESTOP        controller -> robot: latch the drivers' ESTOP (damping). No payload.
    5 STATUS_REQ   controller -> robot: ask for a STATUS. No payload.
    6 STATUS       robot -> controller: payload UTF-8 JSON object (counters, mode, times).
    7 SHUTDOWN     controller -> robot: stop the robot process (simulated robots only).
    8 STEP         controller -> robot, lockstep simulation only (`robot_server --lockstep`):
                   timestamp: the robot time to simulate up to; no payload. Idempotent (a
                   target already reached only re-sends the newest measurement), so a lost
                   STEP is simply sent again. A real-time robot counts and ignores it.

A receiver rejects and counts, and never applies: datagrams shorter than header + trailer or
than their declared length (`truncated`), longer than declared (`bad_length`), wrong magic
(`bad_magic`), other versions (`bad_version`), CRC mismatch (`bad_crc`), unknown types
(`bad_type`), payloads of the wrong size for their type (`bad_length`), another joint count
(`wrong_joint_count`), a sequence not above the last accepted one of that stream
(`out_of_order`, which includes duplicates), and stale messages (`stale`: commands older than
the robot's max age; measurements whose estimated age exceeds the controller's max age).
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from ..interface import JointCommand, Measurement, RobotMode

MAGIC = b"DLRB"
VERSION = 1
HEADER = struct.Struct("<4sHBBHHIQd")
TRAILER = struct.Struct("<I")
assert HEADER.size == 32

FLAG_ARM = 0x01
_MODE_MASK = 0x03
FLAG_HAS_TAU = 0x04
FLAG_HAS_BASE_VELOCITY = 0x08
FLAG_HAS_BASE_POSITION = 0x10


class MessageType(enum.IntEnum):
    MEASUREMENT = 1
    COMMAND = 2
    HELLO = 3
    ESTOP = 4
    STATUS_REQ = 5
    STATUS = 6
    SHUTDOWN = 7
    STEP = 8


REJECTIONS = (
    "truncated",
    "bad_length",
    "bad_magic",
    "bad_version",
    "bad_crc",
    "bad_type",
    "wrong_joint_count",
    "out_of_order",
    "stale",
)


class WireError(ValueError):
    """A datagram that must be rejected; `kind` is one of `REJECTIONS`."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


@dataclass(frozen=True)
class Packet:
    type: MessageType
    flags: int
    num_joints: int
    sequence: int
    timestamp: float
    payload: bytes


def payload_size(kind: MessageType, nu: int) -> int | None:
    """Bytes of the payload of a message type for `nu` joints (None: variable, STATUS)."""
    doubles = {MessageType.MEASUREMENT: 3 * nu + 16, MessageType.COMMAND: 5 * nu}
    if kind is MessageType.STATUS:
        return None
    return 8 * doubles.get(kind, 0)


def encode(kind, sequence: int, timestamp: float, payload: bytes = b"", flags=0, num_joints=0):
    """One datagram (see the module docstring for the layout)."""
    header = HEADER.pack(
        MAGIC, VERSION, int(kind), flags, num_joints, 0, len(payload), sequence, timestamp
    )
    body = header + payload
    return body + TRAILER.pack(zlib.crc32(body))


def decode(data: bytes) -> Packet:
    """Parse and check a datagram; raises `WireError` with the rejection kind."""
    if len(data) < HEADER.size + TRAILER.size:
        raise WireError("truncated", f"{len(data)} bytes")
    magic, version, kind, flags, nu, _, length, sequence, timestamp = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise WireError("bad_magic", repr(magic))
    if version != VERSION:
        raise WireError("bad_version", str(version))
    expected = HEADER.size + length + TRAILER.size
    if len(data) < expected:
        raise WireError("truncated", f"{len(data)} of {expected} bytes")
    if len(data) > expected:
        raise WireError("bad_length", f"{len(data)} bytes, header says {expected}")
    (crc,) = TRAILER.unpack_from(data, HEADER.size + length)
    if crc != zlib.crc32(data[: HEADER.size + length]):
        raise WireError("bad_crc")
    try:
        kind = MessageType(kind)
    except ValueError:
        raise WireError("bad_type", str(kind)) from None
    size = payload_size(kind, nu)
    if size is not None and length != size:
        raise WireError("bad_length", f"{kind.name} payload {length} bytes, expected {size}")
    payload = bytes(data[HEADER.size : HEADER.size + length])
    return Packet(kind, flags, nu, sequence, timestamp, payload)


def _doubles(arrays) -> bytes:
    return np.concatenate([np.asarray(a, dtype="<f8").ravel() for a in arrays]).tobytes()


def encode_measurement(m: Measurement, sequence: int) -> bytes:
    nu = m.nu
    nan3, nan_j = np.full(3, np.nan), np.full(nu, np.nan)
    flags = int(m.robot_mode) & _MODE_MASK
    flags |= FLAG_HAS_TAU if m.joint_tau is not None else 0
    flags |= FLAG_HAS_BASE_VELOCITY if m.base_linear_velocity is not None else 0
    flags |= FLAG_HAS_BASE_POSITION if m.base_position is not None else 0
    payload = _doubles(
        [
            m.joint_q,
            m.joint_qd,
            nan_j if m.joint_tau is None else m.joint_tau,
            m.base_quat,
            m.base_angular_velocity,
            m.base_linear_acceleration,
            nan3 if m.base_linear_velocity is None else m.base_linear_velocity,
            nan3 if m.base_position is None else m.base_position,
        ]
    )
    return encode(MessageType.MEASUREMENT, sequence, m.timestamp, payload, flags, nu)


def decode_measurement(packet: Packet) -> Measurement:
    nu = packet.num_joints
    x = np.frombuffer(packet.payload, dtype="<f8").astype(float)
    parts = np.split(x, np.cumsum([nu, nu, nu, 4, 3, 3, 3]))
    q, qd, tau, quat, gyro, accel, vel, pos = parts
    mode = packet.flags & _MODE_MASK
    return Measurement(
        timestamp=packet.timestamp,
        sequence=packet.sequence,
        joint_q=q,
        joint_qd=qd,
        base_quat=quat,
        base_angular_velocity=gyro,
        base_linear_acceleration=accel,
        joint_tau=tau if packet.flags & FLAG_HAS_TAU else None,
        base_linear_velocity=vel if packet.flags & FLAG_HAS_BASE_VELOCITY else None,
        base_position=pos if packet.flags & FLAG_HAS_BASE_POSITION else None,
        robot_mode=RobotMode(mode) if mode in (0, 1, 2) else RobotMode.ESTOP,
    )


def encode_command(c: JointCommand, sequence: int) -> bytes:
    payload = _doubles([getattr(c, k) for k in JointCommand.ARRAYS])
    flags = FLAG_ARM if c.arm else 0
    return encode(MessageType.COMMAND, sequence, c.timestamp, payload, flags, c.nu)


def decode_command(packet: Packet) -> JointCommand:
    x = np.frombuffer(packet.payload, dtype="<f8").astype(float)
    q_t, qd_t, kp, kd, tau_ff = np.split(x, 5)
    return JointCommand(
        q_t,
        qd_t,
        kp,
        kd,
        tau_ff,
        timestamp=packet.timestamp,
        sequence=packet.sequence,
        arm=bool(packet.flags & FLAG_ARM),
    )


class SequenceFilter:
    """Accepts strictly increasing sequence numbers; counts the gaps (lost datagrams)."""

    def __init__(self):
        self.last: int | None = None
        self.lost = 0

    def accept(self, sequence: int) -> bool:
        if self.last is not None and sequence <= self.last:
            return False
        if self.last is not None:
            self.lost += sequence - self.last - 1
        self.last = sequence
        return True


class ClockOffset:
    """Offset `local - remote` of two clocks, from one-way messages stamped by the remote.

    The offset is estimated as the running minimum of `local receive time - remote stamp`
    (the stamp plus the smallest transit time seen), allowed to rise by `drift` seconds per
    second so that clock drift (and a remote clock running slow) is followed. The estimated
    age of a message is `receive time - stamp - offset`: 0 for the fastest message seen, its
    extra delay for a later one. A delay present from the first message on is
    indistinguishable from an offset; the robot's own check of command age (round trip on
    one clock) catches it.
    """

    def __init__(self, drift: float = 1e-3):
        self.drift = drift
        self.offset: float | None = None
        self._last_local = 0.0

    def update(self, local: float, remote: float) -> None:
        sample = local - remote
        if self.offset is None:
            self.offset = sample
        else:
            allowed = self.offset + self.drift * max(local - self._last_local, 0.0)
            self.offset = min(sample, allowed)
        self._last_local = local

    def age(self, local: float, remote: float) -> float:
        return local - remote - self.offset

    def remote_now(self, local: float) -> float:
        return local - self.offset
