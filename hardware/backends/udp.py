"""A remote robot over UDP (the controller's side): `UdpRobot` implements `RobotInterface`.

    robot = UdpRobot(("127.0.0.1", port), joint_map)     # subscribes, waits for a measurement
    m = robot.read(); robot.write(command); robot.close()

Message layout: `hardware.backends.wire` (versioned, CRC32-checked). `read()` drains the
socket without blocking and returns the newest valid measurement; every datagram that is
malformed, truncated, of another version or joint count, out of order (sequence not above the
last accepted) or stale (estimated age above `max_measurement_age`, see `wire.ClockOffset`)
is rejected and counted in `counters`, never returned. Lost datagrams are counted from the
gaps in the sequence numbers. `now()` is the robot's clock estimated from the stream
(`wire.ClockOffset`), so the safety layer can compare measurement timestamps with it.

`write()` sends one COMMAND datagram per call with the client's own strictly increasing
sequence number (the `JointCommand.sequence` is not sent). The robot answers nothing; its
counters are in `status()`.
"""

from __future__ import annotations

import json
import select
import socket
import time

from ..interface import JointCommand, JointMap, Measurement
from . import wire

MAX_DATAGRAM = 65535


class UdpRobot:
    """The controller's end of the UDP link (see module docstring).

    Args:
        address: the robot process's `(host, port)`.
        joint_map: the robot's joints (its `nu` is checked against every message).
        max_measurement_age: [s] measurements estimated older are rejected as stale.
        connect_timeout: [s] wait for the first measurement after HELLO (0: do not wait).
        bind: local address; loopback by default.
    """

    def __init__(
        self,
        address,
        joint_map: JointMap,
        *,
        max_measurement_age: float = 0.05,
        connect_timeout: float = 2.0,
        bind=("127.0.0.1", 0),
    ):
        self.address = tuple(address)
        self.joint_map = joint_map
        self.max_measurement_age = max_measurement_age
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(bind)
        self.sock.setblocking(False)
        self.clock = wire.ClockOffset()
        self.measurements = wire.SequenceFilter()
        self.latest: Measurement | None = None
        self.last_status: dict | None = None
        self.sequence = 0
        self.counters = {k: 0 for k in ("received", "accepted", "sent", *wire.REJECTIONS)}
        self.counters["nonfinite"] = 0
        self.counters["other_types"] = 0
        if connect_timeout > 0:
            self.connect(connect_timeout)

    # ------------------------------------------------------------- link
    def _send(self, kind, payload=b"", flags=0, timestamp=0.0, num_joints=None) -> None:
        self.sequence += 1
        nu = self.joint_map.nu if num_joints is None else num_joints
        data = wire.encode(kind, self.sequence, timestamp, payload, flags, nu)
        self.sock.sendto(data, self.address)
        self.counters["sent"] += 1

    def connect(self, timeout: float) -> Measurement:
        """Send HELLO (repeated every 0.1 s) until a measurement arrives; raises TimeoutError."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            self._send(wire.MessageType.HELLO)
            stop = min(deadline, time.perf_counter() + 0.1)
            while time.perf_counter() < stop:
                m = self.read()
                if m is not None:
                    return m
                time.sleep(0.002)
        raise TimeoutError(f"no measurement from {self.address} within {timeout} s")

    def _handle(self, data: bytes, local: float) -> None:
        self.counters["received"] += 1
        try:
            packet = wire.decode(data)
            if packet.type is wire.MessageType.STATUS:
                self.last_status = json.loads(packet.payload.decode("utf-8"))
                return
            if packet.type is not wire.MessageType.MEASUREMENT:
                self.counters["other_types"] += 1
                return
            if packet.num_joints != self.joint_map.nu:
                raise wire.WireError("wrong_joint_count", str(packet.num_joints))
            m = wire.decode_measurement(packet)
            if not m.is_finite():
                self.counters["nonfinite"] += 1
                return
            if self.measurements.last is not None and packet.sequence <= self.measurements.last:
                raise wire.WireError("out_of_order")
            self.clock.update(local, packet.timestamp)
            if self.clock.age(local, packet.timestamp) > self.max_measurement_age:
                raise wire.WireError("stale")
            self.measurements.accept(packet.sequence)
        except wire.WireError as err:
            self.counters[err.kind] += 1
            return
        except (ValueError, UnicodeDecodeError):  # a STATUS whose JSON does not parse
            self.counters["bad_length"] += 1
            return
        self.counters["accepted"] += 1
        self.latest = m

    def _drain(self) -> None:
        while True:
            try:
                data, _ = self.sock.recvfrom(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionRefusedError:  # ICMP port unreachable from an earlier send
                continue
            self._handle(data, time.perf_counter())

    @property
    def lost(self) -> int:
        """Measurements lost in transit (gaps in the accepted sequence numbers)."""
        return self.measurements.lost

    # ------------------------------------------------------------- RobotInterface
    def read(self) -> Measurement | None:
        self._drain()
        return self.latest

    def write(self, command: JointCommand) -> None:
        self.sequence += 1
        self.sock.sendto(wire.encode_command(command, self.sequence), self.address)
        self.counters["sent"] += 1

    def now(self) -> float:
        """The robot's clock, estimated; before any measurement, the local clock."""
        local = time.perf_counter()
        return local if self.clock.offset is None else self.clock.remote_now(local)

    def estop(self, repeats: int = 3) -> None:
        """Latch the robot's ESTOP (sent `repeats` times: UDP may lose one)."""
        for _ in range(repeats):
            self._send(wire.MessageType.ESTOP)

    def status(self, timeout: float = 1.0) -> dict:
        """The robot process's counters and mode (STATUS_REQ, then wait for the STATUS)."""
        self.last_status = None
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            self._send(wire.MessageType.STATUS_REQ)
            stop = min(deadline, time.perf_counter() + 0.1)
            while time.perf_counter() < stop:
                self._drain()
                if self.last_status is not None:
                    return self.last_status
                time.sleep(0.001)
        raise TimeoutError(f"no STATUS from {self.address} within {timeout} s")

    def shutdown_robot(self) -> None:
        """Ask a simulated robot process to exit."""
        for _ in range(3):
            self._send(wire.MessageType.SHUTDOWN)

    def close(self) -> None:
        self.sock.close()


class LockstepUdpRobot(UdpRobot):
    """The controller's end of a lockstep link
    (`python -m hardware.robot_server --lockstep`): a `SimulatedRobot` over UDP, so
    `control_loop.run` drives it in simulated time.

    `advance(duration)` sends STEP (simulate up to `now() + duration`) and waits for the
    measurement stamped at that time, re-sending the STEP every `resend_every` [s] (STEP is
    idempotent, so a lost datagram costs a wait, not a double step); `TimeoutError` after
    `step_timeout` [s]. `now()` is the robot time of the newest accepted measurement: the
    robot's clock stands still while the controller computes, so the wall-clock staleness check
    of `UdpRobot` does not apply (`max_measurement_age` is infinite); ordering, layout, CRC,
    joint count and finiteness checks all do.
    """

    def __init__(
        self,
        address,
        joint_map: JointMap,
        *,
        step_timeout: float = 10.0,
        resend_every: float = 0.2,
        connect_timeout: float = 2.0,
        bind=("127.0.0.1", 0),
    ):
        inf = float("inf")
        kwargs = dict(max_measurement_age=inf, connect_timeout=connect_timeout, bind=bind)
        super().__init__(address, joint_map, **kwargs)
        self.step_timeout = step_timeout
        self.resend_every = resend_every

    def now(self) -> float:
        return 0.0 if self.latest is None else self.latest.timestamp

    def advance(self, duration: float) -> None:
        """Let the robot simulate `duration` [s] and wait for its measurement at the end."""
        target = self.now() + duration
        deadline = time.perf_counter() + self.step_timeout
        while time.perf_counter() < deadline:
            self._send(wire.MessageType.STEP, timestamp=target, num_joints=0)
            resend = min(deadline, time.perf_counter() + self.resend_every)
            while time.perf_counter() < resend:
                ready, _, _ = select.select(
                    [self.sock], [], [], max(resend - time.perf_counter(), 0)
                )
                if ready:
                    self._drain()
                if self.latest is not None and self.latest.timestamp >= target - 1e-9:
                    return
        raise TimeoutError(
            f"the robot at {self.address} did not reach robot time {target:.4f} s within "
            f"{self.step_timeout} s (is it running with --lockstep?)"
        )
