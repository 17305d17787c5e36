"""Go2 messages <-> this project's `Measurement` and `JointCommand` (conventions of
`hardware.interface`).

Joint order: the SDK numbers the 12 motors FR, FL, RR, RL (each hip, thigh, calf) in slots 0-11
of the 20-slot motor arrays; the model's order is FL, FR, RL, RR. `SDK_JOINT_NAMES` lists the
slots by the model's joint names and `JointMap.permutation` maps: `ours = sdk[perm]`,
`sdk[perm] = ours`. Slots 12-19 stay zero (mode 0: off).

LowState_ -> `Measurement` (`measurement_from_lowstate`):
    joint_q, joint_qd, joint_tau   <- motor_state[slot].q, dq, tau_est
    base_quat [x, y, z, w]         <- imu_state.quaternion [w, x, y, z] (base to world)
    base_angular_velocity          <- imu_state.gyroscope (base frame)
    base_linear_acceleration       <- imu_state.accelerometer (specific force, base frame)
    foot_force (N, model foot order)  <- foot_force [counts] * FOOT_FORCE_NEWTONS_PER_COUNT
    motor_temperature [deg C]       <- motor_state[slot].temperature
SportModeState_ -> base position (world frame) and linear velocity `R^T velocity` (world to
base frame) (`base_from_sport_state`).

Foot forces. The Go2's foot sensors report a raw int16 per foot, FR, FL, RR, RL like the legs
(`SDK_FOOT_NAMES`), with no published calibration; `foot_force_est` is documented by Unitree as
the same data (or zero). We take 1 count = `FOOT_FORCE_NEWTONS_PER_COUNT` = 0.5 N: a standing
Go2 (about 40 N a foot) then reads about 80 counts, above the contact thresholds that the
Go2 configuration of Leg-KILO uses on these raw readings (40 / 60 counts, hysteresis), and
zero in swing; int16 saturates at 16 kN, far above any load; the 0.5 N step is well below the
sensor's noise. The simulated Go2 writes `round(F / 0.5)` of the true normal force; the real
sensor drifts and can read below zero unloaded, so on a real robot this scale is only a guess
to be calibrated (stand still, divide the weight by the counts' sum).

`JointCommand` -> LowCmd_ (`lowcmd_from_command`): q_target, qd_target, tau_ff, kp, kd ->
`motor_cmd[slot]` q, dq, tau, kp, kd with mode 0x01 on slots 0-11, `head` 0xFE 0xEF,
`level_flag` 0xFF, the CRC set last. The other directions (`lowstate_from_measurement`,
`sport_state_from_measurement`, `command_arrays`) are the simulated Go2's.

`wireless_remote`: 40 bytes, the button bits (`Buttons`) at bytes 2-3 (little-endian uint16),
the sticks lx, rx, ry, ly as float32 at bytes 4, 8, 12, 20.
"""

from __future__ import annotations

import enum

import numpy as np

from ..interface import JointCommand, JointMap, Measurement, rotation_from_quat
from . import messages as msgs
from .codec import zero
from .crc import set_crc

SDK_JOINT_NAMES = tuple(
    f"{leg}_{part}_joint" for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf")
)
NUM_JOINTS = len(SDK_JOINT_NAMES)
SDK_FOOT_NAMES = ("FR_foot", "FL_foot", "RR_foot", "RL_foot")  # LowState_.foot_force order
FOOT_FORCE_NEWTONS_PER_COUNT = 0.5  # [N] per count of LowState_.foot_force (module docstring)
TOPIC_GROUND_TRUTH = "rt/diffloco/ground_truth"  # ours: the simulated Go2's true base state
_INT16 = (-(2**15), 2**15 - 1)


class Buttons(enum.IntFlag):
    """Button bits of `wireless_remote` bytes 2-3 (little-endian uint16)."""

    R1 = 1 << 0
    L1 = 1 << 1
    START = 1 << 2
    SELECT = 1 << 3
    R2 = 1 << 4
    L2 = 1 << 5
    F1 = 1 << 6
    F3 = 1 << 7
    A = 1 << 8
    B = 1 << 9
    X = 1 << 10
    Y = 1 << 11
    UP = 1 << 12
    RIGHT = 1 << 13
    DOWN = 1 << 14
    LEFT = 1 << 15


def sdk_permutation(joint_map: JointMap) -> np.ndarray:
    """`perm (12,)`: `ours = sdk[perm]`, `sdk[perm] = ours` (raises for another robot)."""
    return joint_map.permutation(SDK_JOINT_NAMES)


def foot_permutation(foot_names) -> np.ndarray:
    """`perm (4,)` with `ours = sdk[perm]`, `sdk[perm] = ours` for feet `foot_names` (the
    model's order, e.g. FL, FR, RL, RR); raises ValueError for other feet."""
    foot_names = tuple(foot_names)
    if sorted(foot_names) != sorted(SDK_FOOT_NAMES):
        raise ValueError(f"foot_names must be the Go2's {SDK_FOOT_NAMES}, got {foot_names}")
    return np.array([SDK_FOOT_NAMES.index(n) for n in foot_names])


GO2_FOOT_PERM = foot_permutation(("FL_foot", "FR_foot", "RL_foot", "RR_foot"))


def foot_counts(force_newtons, perm=GO2_FOOT_PERM) -> list:
    """`foot_force (4,)` [N] (model foot order) -> LowState_ `foot_force` counts (SDK order),
    `round(F / FOOT_FORCE_NEWTONS_PER_COUNT)` clipped to int16."""
    sdk = np.empty(4)
    sdk[perm] = np.asarray(force_newtons, dtype=float)
    counts = np.clip(np.round(sdk / FOOT_FORCE_NEWTONS_PER_COUNT), *_INT16)
    return [int(c) for c in counts]


def foot_newtons(counts, perm=GO2_FOOT_PERM) -> np.ndarray:
    """LowState_ `foot_force` counts (SDK order) -> `(4,)` [N] in the model's foot order."""
    return np.asarray(counts, dtype=float)[perm] * FOOT_FORCE_NEWTONS_PER_COUNT


def remote_buttons(wireless_remote) -> int:
    """The button bits (bytes 2-3, little-endian) of a 40-byte `wireless_remote`."""
    b = bytes(wireless_remote)
    return b[2] | (b[3] << 8)


def remote_sticks(wireless_remote) -> tuple[float, float, float, float]:
    """The sticks `(lx, rx, ry, ly)` (float32 at bytes 4, 8, 12, 20, little-endian) of a 40-byte
    `wireless_remote`, as Unitree's remote reports them: nominally in [-1, 1], right and up
    positive; returned as they are (NaN, inf and values beyond 1 included). Raises ValueError
    for a `wireless_remote` that is not 40 bytes."""
    b = bytes(wireless_remote)
    if len(b) != 40:
        raise ValueError(f"wireless_remote must be 40 bytes, got {len(b)}")
    return tuple(float(np.frombuffer(b, "<f4", 1, offset)[0]) for offset in (4, 8, 12, 20))


def remote_bytes(buttons: int = 0, lx=0.0, rx=0.0, ry=0.0, ly=0.0) -> list:
    """A 40-byte `wireless_remote`: buttons at bytes 2-3, sticks lx, rx, ry, ly as float32 at
    bytes 4, 8, 12, 20."""
    out = bytearray(40)
    out[2:4] = int(buttons).to_bytes(2, "little")
    for offset, value in ((4, lx), (8, rx), (12, ry), (20, ly)):
        out[offset : offset + 4] = np.float32(value).tobytes()
    return list(out)


def quat_wxyz(quat_xyzw) -> list:
    x, y, z, w = (float(a) for a in quat_xyzw)
    return [w, x, y, z]


def quat_xyzw(quat_wxyz) -> np.ndarray:
    w, x, y, z = (float(a) for a in quat_wxyz)
    return np.array([x, y, z, w])


def rpy_from_quat(quat_xyzw) -> list:
    """Roll, pitch, yaw [rad] (Z-Y-X Euler angles, `R = Rz(yaw) Ry(pitch) Rx(roll)`)."""
    r = rotation_from_quat(quat_xyzw)
    pitch = float(np.arcsin(np.clip(-r[2, 0], -1.0, 1.0)))
    return [float(np.arctan2(r[2, 1], r[2, 2])), pitch, float(np.arctan2(r[1, 0], r[0, 0]))]


def lowcmd_from_command(command: JointCommand, perm, sample=None, mode=msgs.MOTOR_SERVO):
    """A LowCmd_ carrying `command` (model order) in SDK slots 0-11, CRC set last. `sample`: a
    LowCmd_ to fill in place (a new one by default)."""
    msg = sample if sample is not None else new_lowcmd()
    per_slot = {}
    for name in JointCommand.ARRAYS:
        slot_values = np.empty(NUM_JOINTS)
        slot_values[perm] = getattr(command, name)
        per_slot[name] = slot_values.tolist()
    for s in range(NUM_JOINTS):
        m = msg.motor_cmd[s]
        m.mode = mode
        m.q = per_slot["q_target"][s]
        m.dq = per_slot["qd_target"][s]
        m.tau = per_slot["tau_ff"][s]
        m.kp = per_slot["kp"][s]
        m.kd = per_slot["kd"][s]
    return set_crc(msg)


def new_lowcmd():
    """An empty LowCmd_ with the header the robot expects (motors off, CRC not set)."""
    msg = zero(msgs.LowCmd_)
    msg.head = list(msgs.HEAD)
    msg.level_flag = msgs.LEVEL_LOW
    return msg


def command_arrays(msg, perm) -> dict:
    """`{mode, q, dq, tau, kp, kd}` of a LowCmd_, each `(12,)` in the model's joint order."""
    motors = msg.motor_cmd[:NUM_JOINTS]
    out = {
        k: np.array([getattr(m, k) for m in motors], dtype=float)[perm]
        for k in ("q", "dq", "tau", "kp", "kd")
    }
    out["mode"] = np.array([m.mode for m in motors], dtype=int)[perm]
    return out


def lowstate_from_measurement(
    m: Measurement, perm, tick_ms=0, buttons=0, sample=None, power=None
):
    """The LowState_ a Go2 sends for measurement `m` (model order in, SDK slots out), CRC set;
    `sample`: a LowState_ to fill in place (a new one by default). `m.foot_force` [N] goes to
    `foot_force` and `foot_force_est` (counts, `foot_counts`), `m.motor_temperature` [deg C] to
    `motor_state[slot].temperature` (uint8); `power`: a dict with `power_v` [V], `power_a`
    [A], `soc` [%] (`bms_state.soc`), or None (left as they are)."""
    msg = sample if sample is not None else zero(msgs.LowState_)
    msg.head = list(msgs.HEAD)
    msg.level_flag = msgs.LEVEL_LOW
    imu = msg.imu_state
    imu.quaternion = quat_wxyz(m.base_quat)
    imu.gyroscope = [float(a) for a in m.base_angular_velocity]
    imu.accelerometer = [float(a) for a in m.base_linear_acceleration]
    imu.rpy = rpy_from_quat(m.base_quat)
    tau = np.zeros(NUM_JOINTS) if m.joint_tau is None else m.joint_tau
    for name, source in (("q", m.joint_q), ("dq", m.joint_qd), ("tau_est", tau)):
        slot_values = np.empty(NUM_JOINTS)
        slot_values[perm] = source
        for s, value in enumerate(slot_values.tolist()):
            setattr(msg.motor_state[s], name, value)
    for s in range(NUM_JOINTS):
        msg.motor_state[s].mode = msgs.MOTOR_SERVO
    if m.foot_force is not None:
        msg.foot_force = foot_counts(m.foot_force)
        msg.foot_force_est = list(msg.foot_force)
    if m.motor_temperature is not None:
        slot_values = np.empty(NUM_JOINTS)
        slot_values[perm] = np.clip(np.round(m.motor_temperature), 0, 255)
        for s, value in enumerate(slot_values.tolist()):
            msg.motor_state[s].temperature = int(value)
    if power is not None:
        msg.power_v = float(power["power_v"])
        msg.power_a = float(power["power_a"])
        msg.bms_state.soc = int(np.clip(round(power["soc"]), 0, 100))
    msg.tick = int(tick_ms) & 0xFFFFFFFF
    msg.wireless_remote = remote_bytes(buttons)
    return set_crc(msg)


def measurement_from_lowstate(msg, perm, *, timestamp: float, sequence: int, robot_mode):
    """The `Measurement` of a LowState_ (no base position/velocity: see `base_from_sport_state`),
    with `foot_force` [N] (`foot_newtons`) and `motor_temperature` [deg C]."""
    imu = msg.imu_state
    # one array of the motors' fields, (4, nu) in the model's order: one conversion, not four
    motors = np.array([(m.q, m.dq, m.tau_est, m.temperature)
                       for m in msg.motor_state[:NUM_JOINTS]], dtype=float)[perm].T  # fmt: skip
    return Measurement(
        timestamp=timestamp,
        sequence=sequence,
        joint_q=motors[0].copy(),
        joint_qd=motors[1].copy(),
        base_quat=quat_xyzw(imu.quaternion),
        base_angular_velocity=np.array(imu.gyroscope, dtype=float),
        base_linear_acceleration=np.array(imu.accelerometer, dtype=float),
        joint_tau=motors[2].copy(),
        robot_mode=robot_mode,
        foot_force=foot_newtons(msg.foot_force),
        motor_temperature=motors[3].copy(),
    )


def sport_state_from_measurement(m: Measurement, stamp: float, sample=None):
    """The SportModeState_ of a simulated robot: its true base position and world velocity
    (`sample`: one to fill in place)."""
    msg = sample if sample is not None else zero(msgs.SportModeState_)
    msg.stamp.sec = int(stamp)
    msg.stamp.nanosec = int(round((stamp - int(stamp)) * 1e9)) % 1_000_000_000
    msg.imu_state.quaternion = quat_wxyz(m.base_quat)
    msg.imu_state.gyroscope = [float(a) for a in m.base_angular_velocity]
    msg.imu_state.accelerometer = [float(a) for a in m.base_linear_acceleration]
    msg.imu_state.rpy = rpy_from_quat(m.base_quat)
    rotation = rotation_from_quat(m.base_quat)
    msg.position = [float(a) for a in m.base_position]
    msg.body_height = float(m.base_position[2])
    msg.velocity = [float(a) for a in rotation @ m.base_linear_velocity]
    msg.yaw_speed = float((rotation @ m.base_angular_velocity)[2])
    return msg


def base_from_sport_state(msg) -> tuple[np.ndarray, np.ndarray]:
    """`(position (3,) world, linear velocity (3,) base frame)` of a SportModeState_."""
    rotation = rotation_from_quat(quat_xyzw(msg.imu_state.quaternion))
    position = np.array(msg.position, dtype=float)
    return position, rotation.T @ np.array(msg.velocity, dtype=float)
