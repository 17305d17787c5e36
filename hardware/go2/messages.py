"""Unitree SDK 2 message types for Go2's low level over DDS, written here.

The types match the `unitree_go` and `unitree_api` IDL field for field, in the same order, with
the same DDS type names (`unitree_go::msg::dds_::LowCmd_`, ...) and the same extensibility
(`@final`, sequential ids), so Cyclone DDS 0.10.2 peers (the robot, `unitree_mujoco`, Unitree's
own SDKs) match our readers and writers and decode our samples. Topics (names in `dds`):

    rt/lowcmd          LowCmd_          controller -> robot, 500 Hz
    rt/lowstate        LowState_        robot -> controller, 500 Hz
    rt/sportmodestate  SportModeState_  robot -> controller: the sport service's state estimate
                                        (unitree_mujoco: the simulator's true base state)
    rt/api/motion_switcher/request|response   Request_ / Response_ (JSON RPC of the services)
    rt/diffloco/step   Step_            ours: lockstep with our simulated Go2 only

LowCmd_, LowState_ and SportModeState_ encode and decode through `codec.fast_cdr`; the CRC of
LowCmd_ and LowState_ is `crc`'s.

Needs `cyclonedds==0.10.2` (the `go2` extra; see the README for the system package). No
`from __future__ import annotations` here: Cyclone DDS reads the field types at run time.
"""

from dataclasses import dataclass

from cyclonedds.idl import IdlStruct, types
from cyclonedds.idl import annotations as annotate

from .codec import fast_cdr

u8, u16, u32, i16, i32, i64, f32 = (
    types.uint8, types.uint16, types.uint32, types.int16, types.int32, types.int64, types.float32
)  # fmt: skip
array, sequence = types.array, types.sequence

HEAD = (0xFE, 0xEF)  # LowCmd_.head
LEVEL_LOW = 0xFF  # LowCmd_.level_flag: low-level control
MOTOR_SERVO = 0x01  # MotorCmd_.mode: PD servo; 0x00: motor off (no torque)
NUM_MOTORS = 20  # slots in the motor arrays; Go2 uses 0-11


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
