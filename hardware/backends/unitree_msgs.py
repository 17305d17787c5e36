"""Unitree SDK 2 message types for Go2's low level over DDS, written here, and the LowCmd CRC.

The types match the `unitree_go` and `unitree_api` IDL field for field, in the same order, with
the same DDS type names (`unitree_go::msg::dds_::LowCmd_`, ...) and the same extensibility
(`@final`, sequential ids), so Cyclone DDS 0.10.2 peers (the robot, `unitree_mujoco`, Unitree's
own SDKs) match our readers and writers and decode our samples. Topics:

    rt/lowcmd          LowCmd_          controller -> robot, 500 Hz
    rt/lowstate        LowState_        robot -> controller, 500 Hz
    rt/sportmodestate  SportModeState_  robot -> controller: the sport service's state estimate
                                        (unitree_mujoco: the simulator's true base state)
    rt/api/motion_switcher/request|response   Request_ / Response_ (JSON RPC of the services)

The CRC. Every LowCmd carries `crc` = CRC-32 (polynomial 0x04C11DB7, initial value 0xFFFFFFFF,
bits taken most significant first, no reflection, no final XOR) over the message laid out as the
C struct of the same IDL on a little-endian machine (natural alignment, padding bytes zero),
read as little-endian 32-bit words, all but the last (the CRC itself):

    words = unpack("<N I", c_struct_bytes)[: N - 1],   N = sizeof(LowCmd_) / 4 = 812 / 4

`c_layout` computes that layout from the dataclass fields (LowCmd_ 812 bytes, LowState_ 1180),
`crc32_words` the CRC, through zlib: the same polynomial run reflected equals ours on
bit-reversed bytes, bit-reversed back (`tests/test_go2_dds.py` checks it against a bit-by-bit
implementation of the definition and against a value from Unitree's own library).

Needs `cyclonedds==0.10.2` (the `go2` extra; see the README for the system package). No
`from __future__ import annotations` here: Cyclone DDS reads the field types at run time.
"""

import functools
import struct
import typing
import zlib
from dataclasses import dataclass, fields

import numpy as np
from cyclonedds.idl import IdlStruct, types
from cyclonedds.idl import annotations as annotate

u8, u16, u32, i16, i32, i64, f32 = (
    types.uint8, types.uint16, types.uint32, types.int16, types.int32, types.int64, types.float32
)  # fmt: skip
array, sequence = types.array, types.sequence

HEAD = (0xFE, 0xEF)  # LowCmd_.head
LEVEL_LOW = 0xFF  # LowCmd_.level_flag: low-level control
MOTOR_SERVO = 0x01  # MotorCmd_.mode: PD servo; 0x00: motor off (no torque)
NUM_MOTORS = 20  # slots in the motor arrays; Go2 uses 0-11


def fast_cdr(cls):
    """Give a fixed-size IdlStruct an encoder and decoder of one `struct` call each instead of
    Cyclone's per-field Python machinery (LowState_: about 10x faster): XCDR1 little-endian,
    what Cyclone writes by default for these final types. `cdr_layout` gives the body layout;
    the tests compare the bytes with Cyclone's own encoder. Anything else (XCDR2, big endian, a
    buffer) goes to Cyclone's. Methods are set on the class, not inherited: Cyclone reads a
    base class as IDL inheritance."""

    def serialize(self, buffer=None, endianness=None, use_version_2=None) -> bytes:
        if buffer is not None or endianness is not None or use_version_2:
            return IdlStruct.serialize(self, buffer, endianness, use_version_2)
        packer, flatten, _ = _cdr_codec(type(self))
        return CDR_LE_HEADER + packer.pack(*flatten(self))

    def deserialize(klass, data, has_header=True, use_version_2=None):
        data = bytes(data)
        if not has_header or use_version_2 or data[:2] != CDR_LE_HEADER[:2]:
            return IdlStruct.deserialize.__func__(klass, data, has_header, use_version_2)
        packer, _, build = _cdr_codec(klass)
        return build(packer.unpack_from(data, 4))

    cls.serialize = serialize
    cls.deserialize = classmethod(deserialize)
    return cls


CDR_LE_HEADER = b"\x00\x01\x00\x00"  # encapsulation: plain CDR (XCDR1), little endian


# --------------------------------------------------------------------------- unitree_go
@dataclass
@annotate.final
@annotate.autoid("sequential")
class MotorCmd_(IdlStruct, typename="unitree_go.msg.dds_.MotorCmd_"):
    mode: u8
    q: f32
    dq: f32
    tau: f32
    kp: f32
    kd: f32
    reserve: array[u32, 3]


@dataclass
@annotate.final
@annotate.autoid("sequential")
class BmsCmd_(IdlStruct, typename="unitree_go.msg.dds_.BmsCmd_"):
    off: u8
    reserve: array[u8, 3]


@fast_cdr
@dataclass
@annotate.final
@annotate.autoid("sequential")
class LowCmd_(IdlStruct, typename="unitree_go.msg.dds_.LowCmd_"):
    head: array[u8, 2]
    level_flag: u8
    frame_reserve: u8
    sn: array[u32, 2]
    version: array[u32, 2]
    bandwidth: u16
    motor_cmd: array[MotorCmd_, 20]
    bms_cmd: BmsCmd_
    wireless_remote: array[u8, 40]
    led: array[u8, 12]
    fan: array[u8, 2]
    gpio: u8
    reserve: u32
    crc: u32


@dataclass
@annotate.final
@annotate.autoid("sequential")
class IMUState_(IdlStruct, typename="unitree_go.msg.dds_.IMUState_"):
    quaternion: array[f32, 4]  # [w, x, y, z], base to world
    gyroscope: array[f32, 3]  # [rad/s], base frame
    accelerometer: array[f32, 3]  # [m/s^2], specific force, base frame
    rpy: array[f32, 3]  # [rad]
    temperature: u8


@dataclass
@annotate.final
@annotate.autoid("sequential")
class MotorState_(IdlStruct, typename="unitree_go.msg.dds_.MotorState_"):
    mode: u8
    q: f32
    dq: f32
    ddq: f32
    tau_est: f32
    q_raw: f32
    dq_raw: f32
    ddq_raw: f32
    temperature: u8
    lost: u32
    reserve: array[u32, 2]


@dataclass
@annotate.final
@annotate.autoid("sequential")
class BmsState_(IdlStruct, typename="unitree_go.msg.dds_.BmsState_"):
    version_high: u8
    version_low: u8
    status: u8
    soc: u8
    current: i32
    cycle: u16
    bq_ntc: array[u8, 2]
    mcu_ntc: array[u8, 2]
    cell_vol: array[u16, 15]


@fast_cdr
@dataclass
@annotate.final
@annotate.autoid("sequential")
class LowState_(IdlStruct, typename="unitree_go.msg.dds_.LowState_"):
    head: array[u8, 2]
    level_flag: u8
    frame_reserve: u8
    sn: array[u32, 2]
    version: array[u32, 2]
    bandwidth: u16
    imu_state: IMUState_
    motor_state: array[MotorState_, 20]
    bms_state: BmsState_
    foot_force: array[i16, 4]
    foot_force_est: array[i16, 4]
    tick: u32  # [ms] robot clock
    wireless_remote: array[u8, 40]
    bit_flag: u8
    adc_reel: f32
    temperature_ntc1: u8
    temperature_ntc2: u8
    power_v: f32
    power_a: f32
    fan_frequency: array[u16, 4]
    reserve: u32
    crc: u32


@dataclass
@annotate.final
@annotate.autoid("sequential")
class TimeSpec_(IdlStruct, typename="unitree_go.msg.dds_.TimeSpec_"):
    sec: i32
    nanosec: u32


@dataclass
@annotate.final
@annotate.autoid("sequential")
class PathPoint_(IdlStruct, typename="unitree_go.msg.dds_.PathPoint_"):
    t_from_start: f32
    x: f32
    y: f32
    yaw: f32
    vx: f32
    vy: f32
    vyaw: f32


@fast_cdr
@dataclass
@annotate.final
@annotate.autoid("sequential")
class SportModeState_(IdlStruct, typename="unitree_go.msg.dds_.SportModeState_"):
    stamp: TimeSpec_
    error_code: u32
    imu_state: IMUState_
    mode: u8
    progress: f32
    gait_type: u8
    foot_raise_height: f32
    position: array[f32, 3]  # [m] base, world frame
    body_height: f32
    velocity: array[f32, 3]  # [m/s] base, world frame
    yaw_speed: f32
    range_obstacle: array[f32, 4]
    foot_force: array[i16, 4]
    foot_position_body: array[f32, 12]
    foot_speed_body: array[f32, 12]
    path_point: array[PathPoint_, 10]


# --------------------------------------------------------------------------- ours
@dataclass
@annotate.final
@annotate.autoid("sequential")
class Step_(IdlStruct, typename="diffloco.msg.dds_.Step_"):
    """Lockstep with our simulated Go2 only (topic `rt/diffloco/step`; no Unitree robot or
    simulator knows it): simulate up to robot time `target` [s], once `commands` LowCmds from
    this sender have arrived (DDS does not order samples across topics)."""

    target: types.float64
    commands: u32


# --------------------------------------------------------------------------- unitree_api (RPC)
@dataclass
@annotate.final
@annotate.autoid("sequential")
class RequestIdentity_(IdlStruct, typename="unitree_api.msg.dds_.RequestIdentity_"):
    id: i64
    api_id: i64


@dataclass
@annotate.final
@annotate.autoid("sequential")
class RequestLease_(IdlStruct, typename="unitree_api.msg.dds_.RequestLease_"):
    id: i64


@dataclass
@annotate.final
@annotate.autoid("sequential")
class RequestPolicy_(IdlStruct, typename="unitree_api.msg.dds_.RequestPolicy_"):
    priority: i32
    noreply: bool


@dataclass
@annotate.final
@annotate.autoid("sequential")
class RequestHeader_(IdlStruct, typename="unitree_api.msg.dds_.RequestHeader_"):
    identity: RequestIdentity_
    lease: RequestLease_
    policy: RequestPolicy_


@dataclass
@annotate.final
@annotate.autoid("sequential")
class Request_(IdlStruct, typename="unitree_api.msg.dds_.Request_"):
    header: RequestHeader_
    parameter: str
    binary: sequence[u8]


@dataclass
@annotate.final
@annotate.autoid("sequential")
class ResponseStatus_(IdlStruct, typename="unitree_api.msg.dds_.ResponseStatus_"):
    code: i32


@dataclass
@annotate.final
@annotate.autoid("sequential")
class ResponseHeader_(IdlStruct, typename="unitree_api.msg.dds_.ResponseHeader_"):
    identity: RequestIdentity_
    status: ResponseStatus_


@dataclass
@annotate.final
@annotate.autoid("sequential")
class Response_(IdlStruct, typename="unitree_api.msg.dds_.Response_"):
    header: ResponseHeader_
    data: str
    binary: sequence[u8]


# --------------------------------------------------------------------------- zero samples
_PRIMITIVES = {  # IDL name -> struct format character (size = alignment)
    "uint8": "B", "int8": "b", "uint16": "H", "int16": "h", "uint32": "I", "int32": "i",
    "uint64": "Q", "int64": "q", "float32": "f", "float64": "d",
}  # fmt: skip


@functools.cache
def _field_types(cls) -> list:
    """`[(name, annotated type)]` of an IdlStruct dataclass, in declaration order."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return [(f.name, hints[f.name]) for f in fields(cls)]


def _describe(t):
    """`("prim", char)`, `("struct", cls)`, `("array", inner, n)`, `("other", t)`."""
    meta = getattr(t, "__metadata__", None)
    if meta:
        m = meta[0]
        if isinstance(m, str) and m in _PRIMITIVES:
            return ("prim", _PRIMITIVES[m])
        if isinstance(m, types.array):
            return ("array", m.subtype, m.length)
    if isinstance(t, type) and issubclass(t, IdlStruct):
        return ("struct", t)
    return ("other", t)


def zero(cls):
    """A sample of `cls` with every number 0 (arrays full length, strings empty)."""
    values = {}
    for name, t in _field_types(cls):
        values[name] = _zero_value(t)
    return cls(**values)


def _zero_value(t):
    d = _describe(t)
    if d[0] == "prim":
        return 0.0 if d[1] in "fd" else 0
    if d[0] == "struct":
        return zero(d[1])
    if d[0] == "array":
        return [_zero_value(d[1]) for _ in range(d[2])]
    if t is bool:
        return False
    if t is str:
        return ""
    return []  # sequences


# --------------------------------------------------------------------------- C layout and CRC
def c_layout(cls) -> tuple[str, int, int]:
    """`(struct format, size, alignment)` of the C struct of an IdlStruct of fixed size on a
    little-endian machine: each member at a multiple of its alignment (a primitive's size, a
    struct's largest member alignment), the size rounded up to the alignment; padding as `x`."""
    out, offset, align = [], 0, 1
    for _, t in _field_types(cls):
        fmt, size, a = _c_member(t)
        pad = -offset % a
        if pad:
            out.append(f"{pad}x")
        out.append(fmt)
        offset += pad + size
        align = max(align, a)
    tail = -offset % align
    if tail:
        out.append(f"{tail}x")
    return "".join(out), offset + tail, align


def _c_member(t) -> tuple[str, int, int]:
    d = _describe(t)
    if d[0] == "prim":
        size = struct.calcsize("<" + d[1])
        return d[1], size, size
    if d[0] == "struct":
        return c_layout(d[1])
    if d[0] == "array":
        fmt, size, a = _c_member(d[1])
        if _describe(d[1])[0] == "prim":
            return f"{d[2]}{fmt}", d[2] * size, a
        return fmt * d[2], d[2] * size, a
    raise TypeError(f"{t} has no fixed C layout")


def _flattener(cls):
    """A function `sample -> tuple` of the numbers of a `cls` sample in declaration order (the
    order of `c_layout`'s format), generated once per class: a generic walk costs ~10x more,
    and the LowCmd CRC is computed 500 times a second."""

    def expression(name: str, t, depth: int) -> str:
        d = _describe(t)
        if d[0] == "prim":
            return f"{name},"
        if d[0] == "struct":
            return "".join(expression(f"{name}.{f}", ft, depth) for f, ft in _field_types(d[1]))
        if d[0] == "array":
            if _describe(d[1])[0] == "prim":
                return f"*{name},"
            item = f"m{depth}"
            inner = expression(item, d[1], depth + 1)
            return f"*(v for {item} in {name} for v in ({inner})),"
        raise TypeError(f"{t} has no fixed C layout")

    body = "".join(expression(f"s.{f}", t, 0) for f, t in _field_types(cls))
    return eval(f"lambda s: ({body})")  # noqa: S307 (generated from the type's own fields)


_STRUCTS: dict = {}


def c_bytes(sample) -> bytes:
    """`sample` packed as its C struct (`c_layout`), little-endian, padding zero."""
    cls = type(sample)
    if cls not in _STRUCTS:
        _STRUCTS[cls] = (struct.Struct("<" + c_layout(cls)[0]), _flattener(cls))
    packer, flatten = _STRUCTS[cls]
    return packer.pack(*flatten(sample))


_REVERSE_BITS = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))


def crc32_words(data: bytes) -> int:
    """CRC-32, polynomial 0x04C11DB7, initial 0xFFFFFFFF, no reflection, no final XOR, of
    `data` read as little-endian 32-bit words, each fed most significant bit first.

    Feeding a word MSB first is feeding its big-endian bytes MSB first. zlib's CRC-32 is the
    same polynomial run LSB first (reflected) with a final XOR: on bit-reversed bytes it runs
    our register bit-reversed, so ours is `reverse32(zlib.crc32(reverse8(bytes)) ^ ~0)`."""
    if len(data) % 4:
        raise ValueError(f"{len(data)} bytes is not a whole number of 32-bit words")
    big_endian = np.frombuffer(data, dtype="<u4").astype(">u4").tobytes()
    register = zlib.crc32(big_endian.translate(_REVERSE_BITS)) ^ 0xFFFFFFFF
    return int(f"{register:032b}"[::-1], 2)


def message_crc(sample) -> int:
    """The CRC of a LowCmd_ (or LowState_): `crc32_words` of its C struct without the last
    word (the `crc` field)."""
    return crc32_words(c_bytes(sample)[:-4])


def set_crc(sample):
    """Set `sample.crc` to `message_crc(sample)` (the last field set before a write)."""
    sample.crc = message_crc(sample)
    return sample


def crc_ok(sample) -> bool:
    return int(sample.crc) == message_crc(sample)


# --------------------------------------------------------------------------- fast CDR codec
def cdr_layout(cls) -> str:
    """`struct` format of the XCDR1 body of a fixed-size IdlStruct: every primitive aligned to
    its size (at most 8) from the start of the body, nested structs inline (not aligned as a
    unit, no trailing padding, unlike the C layout)."""
    out, offset = [], 0

    def member(t) -> None:
        nonlocal offset
        d = _describe(t)
        if d[0] == "struct":
            for _, ft in _field_types(d[1]):
                member(ft)
            return
        if d[0] == "array":
            inner = _describe(d[1])
            if inner[0] == "prim":
                align(inner[1])
                out.append(f"{d[2]}{inner[1]}")
                offset += d[2] * struct.calcsize("<" + inner[1])
            else:
                for _ in range(d[2]):
                    member(d[1])
            return
        if d[0] == "prim":
            align(d[1])
            out.append(d[1])
            offset += struct.calcsize("<" + d[1])
            return
        if t is bool:
            out.append("?")
            offset += 1
            return
        raise TypeError(f"{t} has no fixed CDR layout")

    def align(char: str) -> None:
        nonlocal offset
        pad = -offset % min(struct.calcsize("<" + char), 8)
        if pad:
            out.append(f"{pad}x")
            offset += pad

    for _, t in _field_types(cls):
        member(t)
    return "".join(out)


def _builder(cls):
    """A function `values (tuple) -> cls sample`, the inverse of `_flattener(cls)`."""
    lines, counter = [], iter(range(10**6))

    def build(t, depth: int) -> str:
        d = _describe(t)
        if d[0] == "prim":
            return f"v[{next(counter)}]"
        if d[0] == "struct":
            args = ", ".join(build(ft, depth) for _, ft in _field_types(d[1]))
            name = f"C{len(lines)}"
            lines.append((name, d[1]))
            return f"{name}({args})"
        if d[0] == "array":
            inner = _describe(d[1])
            if inner[0] == "prim":
                start = next(counter)
                for _ in range(d[2] - 1):
                    next(counter)
                kind = "bytes" if inner[1] == "B" else "list"  # as Cyclone decodes them
                return f"{kind}(v[{start}:{start + d[2]}])"
            return "[" + ", ".join(build(d[1], depth + 1) for _ in range(d[2])) + "]"
        raise TypeError(f"{t} has no fixed CDR layout")

    args = ", ".join(build(t, 0) for _, t in _field_types(cls))
    namespace = {name: c for name, c in lines}
    namespace["C"] = cls
    return eval(f"lambda v: C({args})", namespace)  # noqa: S307 (from the type's own fields)


_CODECS: dict = {}


def _cdr_codec(cls):
    if cls not in _CODECS:
        packer = struct.Struct("<" + cdr_layout(cls))
        _CODECS[cls] = (packer, _flattener(cls), _builder(cls))
    return _CODECS[cls]
