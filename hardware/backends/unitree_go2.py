"""A Unitree Go2 over its own low-level protocol: Unitree SDK 2's DDS topics, as a `RobotInterface`.

    robot = Go2Robot(JointMap.from_model(dynamics.load_robot("go2")), domain=0, interface="eth0")
    control_loop.run(robot, StandUpController(robot.joint_map), SafetyLayer(robot.joint_map), ...)

The same class drives the real robot (DDS domain 0, the wired network card), Unitree's
`unitree_mujoco` (domain 1, `lo`) and our simulated Go2 (`python -m hardware.go2_sim`,
any domain, `lo`). Message types and the CRC: `backends.unitree_msgs`.

Joint order: the SDK numbers the 12 motors FR, FL, RR, RL (each hip, thigh, calf) in slots 0-11
of the 20-slot motor arrays; the model's order is FL, FR, RL, RR. `SDK_JOINT_NAMES` lists the
slots by the model's joint names and `JointMap.permutation` maps: `ours = sdk[perm]`,
`sdk[perm] = ours`. Slots 12-19 stay zero (mode 0: off).

State (`rt/lowstate`, 500 Hz) -> `Measurement` (conventions of `hardware.interface`):
    joint_q, joint_qd, joint_tau   <- motor_state[slot].q, dq, tau_est
    base_quat [x, y, z, w]         <- imu_state.quaternion [w, x, y, z] (base to world)
    base_angular_velocity          <- imu_state.gyroscope (base frame)
    base_linear_acceleration       <- imu_state.accelerometer (specific force, base frame)
    base_position, base_linear_velocity  <- `rt/sportmodestate` position, R^T velocity (world to
        base), when one arrived within `state_timeout`; else None. unitree_mujoco and our
        simulator publish the true base state there; on the robot it is Unitree's estimator,
        published by the sport service, which low-level control releases: a full-state
        controller (MPC, policy) on the robot needs a state estimator of its own.
    timestamp: this computer's `time.perf_counter()` when the sample arrived (`now()` is the
        same clock; the robot's `tick` [ms] is not synchronised with it).
    robot_mode: this backend's drivers' mode (below).

Commands. `write(JointCommand)` goes to a `MotorDriver` (the same validation, arming, watchdog
and e-stop latch as the simulated robots' drivers); a writer thread sends, every 1/500 s, the
driver's active command (the latest accepted command while ACTIVE, damping `Kp = 0`,
`Kd = damping_kd` otherwise) as a LowCmd: `head` 0xFE 0xEF, `level_flag` 0xFF, mode 0x01 on
slots 0-11, the CRC set last. Watchdogs (both latch DAMPING until a command with `arm=True`):
    - stale commands: no accepted `write` for `command_timeout` [s] (the controller stopped);
    - stale state: no LowState for `state_timeout` [s] (the robot or the link went away).
Nothing is sent before the first LowState and the first accepted `write` (a controller that
compiles for a minute in `reset` leaves the robot as it was meanwhile).

E-stop: when all the buttons of `estop_buttons` (default L2 + B) are down in the LowState's
`wireless_remote`, the drivers latch ESTOP (damping until this object is discarded) and every
measurement says `RobotMode.ESTOP`, which puts the safety layer in its ESTOP. `estop()` does
the same from software.

Sport mode. On the robot, Unitree's sport service drives the motors too until it is released:
`release_sport_mode()` (or `Go2Robot(..., release_sport_mode=True)`) asks the motion-switcher
service (`rt/api/motion_switcher/request`, CheckMode 1001 / ReleaseMode 1003) until no mode is
active. If nothing answers (firmware without the service), stop the sport service by hand
before arming: lay the robot down, and in Unitree's app turn the sport-mode service off (or
run Unitree SDK 2's motion-switcher example, which calls ReleaseMode). unitree_mujoco has no
sport service; our simulated Go2 models one with `--sport-mode`.

`LockstepGo2Robot` is the same link in robot time, for our simulated Go2 with `--lockstep`
only: a controller slower than real time (the MPC here) then runs over the same messages.
"""

from __future__ import annotations

import enum
import itertools
import json
import logging
import threading
import time

import numpy as np

from ..interface import JointCommand, JointMap, Measurement, RobotMode, rotation_from_quat
from ..motor import MotorDriver
from ..timing import TimingStats
from . import unitree_msgs as msgs

logger = logging.getLogger(__name__)

SDK_JOINT_NAMES = tuple(
    f"{leg}_{part}_joint" for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf")
)
NUM_JOINTS = len(SDK_JOINT_NAMES)
COMMAND_RATE = 500.0  # [Hz] LowCmd rate of the SDK's examples and unitree_mujoco
TOPIC_LOWCMD, TOPIC_LOWSTATE, TOPIC_SPORTSTATE = "rt/lowcmd", "rt/lowstate", "rt/sportmodestate"
TOPIC_STEP = "rt/diffloco/step"  # lockstep with our simulated Go2 only (`LockstepGo2Robot`)
MOTION_SWITCHER = "rt/api/motion_switcher"
API_CHECK_MODE, API_RELEASE_MODE = 1001, 1003


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


DEFAULT_ESTOP = Buttons.L2 | Buttons.B


# --------------------------------------------------------------------------- DDS set-up
def dds_config(interface: str | None) -> str:
    """Cyclone DDS configuration XML: the named network interface (`lo`, `eth0`, ...) or, with
    None, the one Cyclone picks."""
    if interface is None:
        nic = '<NetworkInterface autodetermine="true" priority="default" multicast="default"/>'
    else:
        nic = f'<NetworkInterface name="{interface}" priority="default" multicast="default"/>'
    return (
        '<?xml version="1.0" encoding="UTF-8" ?><CycloneDDS><Domain Id="any"><General>'
        f"<Interfaces>{nic}</Interfaces></General></Domain></CycloneDDS>"
    )


def open_domain(domain: int, interface: str | None):
    """`(Domain, DomainParticipant)` on DDS domain `domain` over `interface` (keep both alive)."""
    from cyclonedds.domain import Domain, DomainParticipant

    return Domain(int(domain), dds_config(interface)), DomainParticipant(int(domain))


def make_writer(participant, topic: str, cls):
    from cyclonedds.pub import DataWriter
    from cyclonedds.topic import Topic

    return DataWriter(participant, Topic(participant, topic, cls))


def make_reader(participant, topic: str, cls, depth: int = 1, reliable: bool = False):
    """A reader keeping the newest `depth` samples; `take(reader, cls)` polls it.

    Polled, not a listener: Cyclone calls listeners from its own threads holding its locks,
    and a Python callback waiting for the GIL there deadlocked a process that was deleting
    an entity (seen once in the tests)."""
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    policies = [Policy.History.KeepLast(depth)]
    if reliable:  # only against reliable writers (Cyclone's default, and the SDK's)
        policies.append(Policy.Reliability.Reliable(max_blocking_time=0))
    qos = Qos(*policies)
    return DataReader(participant, Topic(participant, topic, cls), qos=qos)


def take(reader, cls, n: int = 64) -> list:
    """The samples waiting in `reader` (oldest first); dispose/unregister notices dropped."""
    return [s for s in reader.take(n) if isinstance(s, cls)]


# --------------------------------------------------------------------------- conversions
def sdk_permutation(joint_map: JointMap) -> np.ndarray:
    """`perm (12,)`: `ours = sdk[perm]`, `sdk[perm] = ours` (raises for another robot)."""
    return joint_map.permutation(SDK_JOINT_NAMES)


def remote_buttons(wireless_remote) -> int:
    """The button bits (bytes 2-3, little-endian) of a 40-byte `wireless_remote`."""
    b = bytes(wireless_remote)
    return b[2] | (b[3] << 8)


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
    return msgs.set_crc(msg)


def new_lowcmd():
    """An empty LowCmd_ with the header the robot expects (motors off, CRC not set)."""
    msg = msgs.zero(msgs.LowCmd_)
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


def lowstate_from_measurement(m: Measurement, perm, tick_ms=0, buttons=0, sample=None):
    """The LowState_ a Go2 sends for measurement `m` (model order in, SDK slots out), CRC set;
    `sample`: a LowState_ to fill in place (a new one by default)."""
    msg = sample if sample is not None else msgs.zero(msgs.LowState_)
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
    msg.tick = int(tick_ms) & 0xFFFFFFFF
    msg.wireless_remote = remote_bytes(buttons)
    return msgs.set_crc(msg)


def measurement_from_lowstate(msg, perm, *, timestamp: float, sequence: int, robot_mode):
    """The `Measurement` of a LowState_ (no base position/velocity: see `with_sport_state`)."""
    motors = msg.motor_state[:NUM_JOINTS]
    imu = msg.imu_state
    return Measurement(
        timestamp=timestamp,
        sequence=sequence,
        joint_q=np.array([m.q for m in motors], dtype=float)[perm],
        joint_qd=np.array([m.dq for m in motors], dtype=float)[perm],
        base_quat=quat_xyzw(imu.quaternion),
        base_angular_velocity=np.array(imu.gyroscope, dtype=float),
        base_linear_acceleration=np.array(imu.accelerometer, dtype=float),
        joint_tau=np.array([m.tau_est for m in motors], dtype=float)[perm],
        robot_mode=robot_mode,
    )


def sport_state_from_measurement(m: Measurement, stamp: float, sample=None):
    """The SportModeState_ of a simulated robot: its true base position and world velocity
    (`sample`: one to fill in place)."""
    msg = sample if sample is not None else msgs.zero(msgs.SportModeState_)
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


# --------------------------------------------------------------------------- motion switcher
class MotionSwitcher:
    """Client of the robot's motion-switcher service (JSON over `unitree_api` Request_/Response_):
    `check_mode()` -> the active mode's name ("" when none), `release_mode()`."""

    _ids = itertools.count(int(time.time() * 1e3))

    def __init__(self, participant, timeout: float = 1.0):
        self.timeout = timeout
        self._writer = make_writer(participant, f"{MOTION_SWITCHER}/request", msgs.Request_)
        self._reader = make_reader(participant, f"{MOTION_SWITCHER}/response", msgs.Response_, 8)

    def call(self, api_id: int, parameter: dict | None = None) -> tuple[int, dict | None]:
        """`(status code, decoded data)`; raises TimeoutError without an answer."""
        rid = next(self._ids)
        header = msgs.RequestHeader_(
            msgs.RequestIdentity_(rid, api_id), msgs.RequestLease_(0), msgs.RequestPolicy_(0, False)
        )
        self._writer.write(msgs.Request_(header, json.dumps(parameter or {}), []))
        deadline = time.perf_counter() + self.timeout
        while time.perf_counter() < deadline:
            for response in take(self._reader, msgs.Response_):
                if int(response.header.identity.id) == rid:
                    data = json.loads(response.data) if response.data else None
                    return int(response.header.status.code), data
            time.sleep(0.005)
        raise TimeoutError(f"no motion-switcher answer to API {api_id}")

    def check_mode(self) -> str:
        code, data = self.call(API_CHECK_MODE)
        if code != 0:
            raise RuntimeError(f"motion switcher CheckMode failed with code {code}")
        return (data or {}).get("name", "")

    def release_mode(self) -> int:
        return self.call(API_RELEASE_MODE)[0]


def release_sport_mode(participant, timeout: float = 10.0, poll: float = 0.5) -> str:
    """Release whatever mode the motion switcher runs (sport mode) until none is active; returns
    the mode that was released ("" if none was). Raises TimeoutError when the service does not
    answer or the mode stays active (see the module docstring for the manual way)."""
    switcher = MotionSwitcher(participant)
    deadline = time.perf_counter() + timeout
    released = ""
    while True:
        try:
            mode = switcher.check_mode()
        except TimeoutError:
            if time.perf_counter() > deadline:
                raise TimeoutError(
                    "the motion-switcher service did not answer: release sport mode by hand "
                    "(see hardware.backends.unitree_go2) before arming"
                ) from None
            continue
        if not mode:
            return released
        released = released or mode
        if time.perf_counter() > deadline:
            raise TimeoutError(f"sport mode {mode!r} is still active after {timeout} s")
        switcher.release_mode()
        time.sleep(poll)


# --------------------------------------------------------------------------- the robot
class Go2Robot:
    """`RobotInterface` of a Go2 over DDS (see module docstring).

    Args:
        joint_map: the model's joint map (`JointMap.from_model(dynamics.load_robot("go2"))`).
        domain: DDS domain id (robot 0, unitree_mujoco 1).
        interface: network interface name (`lo`, the wired NIC), None: Cyclone's choice.
        command_timeout: [s] stale-command watchdog.
        state_timeout: [s] stale-state watchdog, and the largest age of a sport state used.
        max_command_age: [s] commands computed from older measurements are rejected.
        damping_kd: [N m s/rad] Kd of the damping command; default the standing Kd.
        estop_buttons: remote buttons that latch ESTOP when all are down (0: none).
        sport_state: subscribe to `rt/sportmodestate` for base position/velocity.
        release_sport_mode: call `release_sport_mode` before the first command goes out.
        connect_timeout: [s] wait for the first LowState (0: do not wait).
        command_rate: [Hz] LowCmd rate.
    """

    def __init__(
        self,
        joint_map: JointMap,
        *,
        domain: int = 0,
        interface: str | None = None,
        command_timeout: float = 0.1,
        state_timeout: float = 0.05,
        max_command_age: float = 0.1,
        damping_kd=None,
        estop_buttons: int = DEFAULT_ESTOP,
        sport_state: bool = True,
        release_sport_mode: bool = False,
        connect_timeout: float = 2.0,
        command_rate: float = COMMAND_RATE,
    ):
        self.joint_map = joint_map
        self.perm = sdk_permutation(joint_map)
        self.state_timeout = float(state_timeout)
        self.estop_buttons = int(estop_buttons)
        self.period = 1.0 / command_rate
        self.driver = MotorDriver(
            joint_map,
            command_timeout=command_timeout,
            max_command_age=max_command_age,
            damping_kd=damping_kd,
        )
        self.lock = threading.Lock()
        self.latest: Measurement | None = None
        self.last_state_time = -np.inf
        self.sport: tuple | None = None  # (receive time, position, velocity in base frame)
        self.buttons = 0
        self.sequence = 0
        self.state_trips: list = []  # times the stale-state watchdog fired
        self.counters = {k: 0 for k in ("states", "sport_states", "nonfinite", "sent", "estops")}
        self.timing = TimingStats(self.period)
        self.domain, self.participant = open_domain(domain, interface)
        self.cmd_writer = make_writer(self.participant, TOPIC_LOWCMD, msgs.LowCmd_)
        self.state_reader = make_reader(self.participant, TOPIC_LOWSTATE, msgs.LowState_)
        self.sport_reader = None
        if sport_state:
            self.sport_reader = make_reader(
                self.participant, TOPIC_SPORTSTATE, msgs.SportModeState_
            )
        self.released_mode = release_sport_mode_or_none(self.participant, release_sport_mode)
        self._running = True
        self._thread = None
        if self.threaded:
            self._thread = threading.Thread(target=self._write_loop, daemon=True, name="go2-lowcmd")
            self._thread.start()
        if connect_timeout > 0:
            self.wait_for_state(connect_timeout)
            self._wait_for_sport_state(min(connect_timeout, 1.0))

    threaded = True  # a writer thread repeats the command at `command_rate`

    def _stamp(self, msg, now: float) -> float:
        """The timestamp of a LowState or SportModeState taken at local time `now`."""
        return now

    # ------------------------------------------------------------- incoming (polled)
    def _poll(self, now: float) -> None:
        """Take the newest LowState (and sport state) that arrived; call with `self.lock`."""
        if self.sport_reader is not None:
            sport = take(self.sport_reader, msgs.SportModeState_)
            if sport:
                self.counters["sport_states"] += len(sport)
                self.sport = (self._stamp(sport[-1], now), *base_from_sport_state(sport[-1]))
        states = take(self.state_reader, msgs.LowState_)
        if not states:
            return
        msg = states[-1]
        self.counters["states"] += len(states)
        buttons = remote_buttons(msg.wireless_remote)
        if self.estop_buttons and buttons & self.estop_buttons == self.estop_buttons:
            if self.driver.mode is not RobotMode.ESTOP:
                self.counters["estops"] += 1
                logger.error("remote e-stop buttons 0x%04x pressed", buttons)
            self.driver.estop(now)
        self.buttons = buttons
        self.sequence += 1
        stamp = self._stamp(msg, now)
        m = measurement_from_lowstate(
            msg, self.perm, timestamp=stamp, sequence=self.sequence, robot_mode=self.driver.mode
        )
        if not m.is_finite():
            self.counters["nonfinite"] += 1
            return
        self.latest = m
        self.last_state_time = now

    def wait_for_state(self, timeout: float) -> Measurement:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            m = self.read()
            if m is not None:
                return m
            time.sleep(0.002)
        raise TimeoutError(f"no rt/lowstate within {timeout} s (domain, interface, robot on?)")

    def _wait_for_sport_state(self, timeout: float) -> bool:
        """Wait up to `timeout` [s] for a first `rt/sportmodestate` (the two topics match their
        peers separately); False when none came (the robot without its sport service)."""
        deadline = time.perf_counter() + timeout
        while self.sport_reader is not None and time.perf_counter() < deadline:
            self.read()
            if self.sport is not None:
                return True
            time.sleep(0.002)
        return self.sport is not None

    # ------------------------------------------------------------- the 500 Hz writer
    def _write_loop(self) -> None:
        deadline = time.perf_counter()
        msg = new_lowcmd()
        while self._running:
            delay = deadline - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            start = time.perf_counter()
            command = self._active_command(start)
            if command is not None:
                lowcmd_from_command(command, self.perm, msg)  # the CRC is set last
                self.cmd_writer.write(msg)
                self.counters["sent"] += 1
                self.timing.record(start, time.perf_counter() - start, deadline)
            deadline += self.period
            if time.perf_counter() - deadline > self.period:  # late: no burst to catch up
                skipped = int((time.perf_counter() - deadline) // self.period)
                self.timing.missed += skipped
                deadline += skipped * self.period

    def _active_command(self, now: float) -> JointCommand | None:
        with self.lock:
            self._poll(now)
            if self.latest is None or self.driver.command is None:
                return None
            stale = now - self.last_state_time > self.state_timeout
            if stale and self.driver.mode is RobotMode.ACTIVE:
                self.driver.mode = RobotMode.DAMPING
                self.state_trips.append(now)
                logger.error(
                    "no rt/lowstate for %.1f ms: damping", 1e3 * (now - self.last_state_time)
                )
            return self.driver.active_command(self.latest.joint_q, now)

    # ------------------------------------------------------------- RobotInterface
    def read(self) -> Measurement | None:
        with self.lock:
            self._poll(time.perf_counter())
            m, sport = self.latest, self.sport
            mode = self.driver.mode
        if m is None:
            return None
        changes = {"robot_mode": mode}
        if sport is not None and abs(sport[0] - m.timestamp) <= self.state_timeout:
            changes.update(base_position=sport[1], base_linear_velocity=sport[2])
        return m.replace(**changes)

    def write(self, command: JointCommand) -> None:
        with self.lock:
            self.driver.submit(command, self.now())

    def now(self) -> float:
        return time.perf_counter()

    def estop(self) -> None:
        with self.lock:
            self.driver.estop(self.now())

    def status(self) -> dict:
        """Counters, modes and watchdog trips of this end."""
        with self.lock:
            return {
                "mode": RobotMode(self.driver.mode).name,
                "buttons": self.buttons,
                "watchdog_trips": list(self.driver.trip_times),
                "last_command_accepted_at": self.driver.last_accepted,
                "state_trips": list(self.state_trips),
                "counters": dict(self.counters),
                "driver": dict(self.driver.counters),
                "released_mode": self.released_mode,
            }

    def close(self) -> None:
        """Stop the writer (the robot's own timeout takes over) and leave the domain."""
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        for name in ("state_reader", "sport_reader", "cmd_writer", "participant", "domain"):
            setattr(self, name, None)  # Cyclone deletes the entities with their last reference


def release_sport_mode_or_none(participant, release: bool) -> str | None:
    """`release_sport_mode(participant)` if asked (the released mode's name), else None."""
    return release_sport_mode(participant) if release else None


class LockstepGo2Robot(Go2Robot):
    """A `SimulatedRobot` over the Go2's topics, for our simulated Go2 in lockstep (`python -m
    hardware.go2_sim --lockstep`): the same messages, CRC, slot order and drivers as
    `Go2Robot`, but in robot time, so a controller slower than real time (the MPC here) runs
    through the robot's protocol deterministically.

    `write` sends the drivers' active command at once (no writer thread); `advance(duration)`
    publishes a `Step_` (`rt/diffloco/step`: simulate to `now() + duration` once the LowCmds
    sent so far arrived) and waits for the LowState of that time, re-sending every
    `resend_every` [s], `TimeoutError` after `step_timeout`. `now()` and the measurements'
    timestamps are the robot's `tick` [ms] / 1000 (the simulated Go2 publishes its time
    there). Only our simulator knows `Step_`: a real robot or unitree_mujoco never advances.
    """

    threaded = False

    def __init__(self, joint_map: JointMap, *, step_timeout=10.0, resend_every=0.05, **kwargs):
        # the clock stands while we compute; a sport state is used only at the same robot time
        kwargs.setdefault("state_timeout", 1e-6)
        super().__init__(joint_map, **kwargs)
        self.step_timeout = step_timeout
        self.resend_every = resend_every
        self.step_writer = make_writer(self.participant, TOPIC_STEP, msgs.Step_)
        self._msg = new_lowcmd()

    def _stamp(self, msg, now: float) -> float:
        if isinstance(msg, msgs.LowState_):
            return 1e-3 * msg.tick
        return msg.stamp.sec + 1e-9 * msg.stamp.nanosec

    def now(self) -> float:
        latest = self.latest
        return 0.0 if latest is None else latest.timestamp

    def write(self, command: JointCommand) -> None:
        with self.lock:
            now = self.now()
            self.driver.submit(command, now)
            if self.latest is None or self.driver.command is None:
                return
            active = self.driver.active_command(self.latest.joint_q, now)
            self.cmd_writer.write(lowcmd_from_command(active, self.perm, self._msg))
            self.counters["sent"] += 1

    def advance(self, duration: float) -> None:
        """Let the robot simulate `duration` [s] and wait for its LowState at the end."""
        target = self.now() + duration
        step = msgs.Step_(target=target, commands=self.counters["sent"])
        deadline = time.perf_counter() + self.step_timeout
        while time.perf_counter() < deadline:
            self.step_writer.write(step)
            resend = min(deadline, time.perf_counter() + self.resend_every)
            while time.perf_counter() < resend:
                m = self.read()
                if m is not None and m.timestamp >= target - 1e-6 and self._sport_at(target):
                    return
                time.sleep(0.0002)
        raise TimeoutError(
            f"the simulated Go2 did not reach robot time {target:.4f} s within "
            f"{self.step_timeout} s (is it running with --lockstep?)"
        )

    def _sport_at(self, target: float) -> bool:
        """The sport state of robot time `target` arrived (or none is subscribed)."""
        return self.sport_reader is None or (
            self.sport is not None and self.sport[0] >= target - 1e-6
        )

    def close(self) -> None:
        self.step_writer = None
        super().close()
