"""Fault injection through the interface, for tests and robustness checks of controllers.

- `FaultyController(controller, fault, start, end)`: between `start` and `end` [s of loop
  time] the controller's output goes through `fault`: `nan_targets` (a NaN in q*),
  `no_command` (returns None: the controller stopped), `crash` (raises), `offset_targets(d)`
  (q* shifted by `d`, e.g. beyond the joint limits).
- `FaultyRobot(robot, ...)`: wraps a simulated robot. `stop_commands_at`: writes stop reaching
  the robot (the command stream stops); `drop_commands`: each write is lost with this
  probability; `measurement_delay` from `delay_from` on: `read()` returns the sample taken
  `measurement_delay` seconds earlier.
- `UdpFaultProxy(target)`: a UDP relay between a controller and a robot process that drops,
  delays (which reorders) and corrupts datagrams in each direction, with settings that can be
  changed while it runs (`proxy.to_robot.drop = 1.0` cuts the command stream).
"""

from __future__ import annotations

import heapq
import math
import random
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from .interface import JointCommand, Measurement, VelocityCommand
from .robot_wrapper import RobotWrapper


# --------------------------------------------------------------------------- controllers
def nan_targets(command: JointCommand) -> JointCommand:
    q = command.q_target.copy()
    q[0] = np.nan
    return command.replace(q_target=q)


def no_command(command: JointCommand) -> None:
    return None


def crash(command: JointCommand):
    raise RuntimeError("injected controller fault")


def stall(seconds: float):
    """A fault that blocks the controller for `seconds` [wall clock] (a hung solver)."""

    def fault(command):
        time.sleep(seconds)
        return command

    return fault


def offset_targets(delta):
    """A fault that adds `delta` (scalar or `(nu,)`) [rad] to q*."""
    return lambda command: command.replace(q_target=command.q_target + delta)


class FaultyController:
    """`controller` whose outputs pass through `fault` for loop times in `[start, end)`."""

    def __init__(self, controller, fault, start: float = 0.0, end: float = math.inf):
        self.controller, self.fault, self.start, self.end = controller, fault, start, end

    def reset(self, measurement: Measurement) -> None:
        self.controller.reset(measurement)

    def __call__(self, measurement: Measurement, t: float, command: VelocityCommand):
        out = self.controller(measurement, t, command)
        if self.start <= t < self.end and out is not None:
            return self.fault(out)
        return out


# --------------------------------------------------------------------------- robots
class FaultyRobot(RobotWrapper):
    """A simulated robot with faults between it and the loop (see module docstring).

    Times are the robot's clock. `delivered` and `lost` count the writes."""

    def __init__(
        self,
        robot,
        *,
        stop_commands_at: float = math.inf,
        drop_commands: float = 0.0,
        measurement_delay: float = 0.0,
        delay_from: float = 0.0,
        seed: int = 0,
    ):
        super().__init__(robot)
        self.stop_commands_at = stop_commands_at
        self.drop_commands = drop_commands
        self.measurement_delay = measurement_delay
        self.delay_from = delay_from
        self.rng = random.Random(seed)
        self.history: deque = deque()
        self.delivered = self.lost = 0

    def read(self) -> Measurement | None:
        m = self.robot.read()
        now = self.robot.now()
        if self.measurement_delay <= 0:
            return m
        self.history.append(m)
        # keep from the newest sample at least `measurement_delay` old (the oldest if none is);
        # the 1e-9 s slack keeps float round-off from skipping a sample
        delay_floor = self.measurement_delay - 1e-9
        while len(self.history) > 1 and now - self.history[1].timestamp >= delay_floor:
            self.history.popleft()
        return m if now < self.delay_from else self.history[0]

    def write(self, command: JointCommand) -> None:
        if self.now() >= self.stop_commands_at or self.rng.random() < self.drop_commands:
            self.lost += 1
            return
        self.delivered += 1
        self.robot.write(command)

    def advance(self, duration: float) -> None:
        self.robot.advance(duration)

    def estop(self) -> None:
        self.robot.estop()


# --------------------------------------------------------------------------- network
@dataclass
class LinkFaults:
    """Faults of one direction: drop probability, delay [s] with uniform jitter [s] (jitter
    larger than the send period reorders datagrams), corruption probability (one byte flipped),
    truncation probability (the datagram cut in half)."""

    drop: float = 0.0
    delay: float = 0.0
    jitter: float = 0.0
    corrupt: float = 0.0
    truncate: float = 0.0


class UdpFaultProxy:
    """A UDP relay `controller <-> proxy <-> target` with `LinkFaults` per direction.

    The controller sends to `proxy.address`; datagrams go to `target` from a second socket,
    and the target's replies go back to the last controller address. Runs in a daemon thread
    between `start()` and `close()` (also a context manager). `counters` per direction:
    forwarded, dropped, corrupted, truncated."""

    def __init__(self, target, *, seed: int = 0, host: str = "127.0.0.1"):
        self.target = tuple(target)
        self.to_robot = LinkFaults()
        self.to_controller = LinkFaults()
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind((host, 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.bind((host, 0))
        self.address = self.front.getsockname()
        self.controller = None
        self.rng = random.Random(seed)
        self.queue: list = []  # (due time, n, socket, data, address)
        self._n = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="udp-fault-proxy")
        keys = ("forwarded", "dropped", "corrupted", "truncated")
        self.counters = {d: {k: 0 for k in keys} for d in ("to_robot", "to_controller")}

    def start(self) -> UdpFaultProxy:
        self._thread.start()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        self.front.close()
        self.back.close()

    def _relay(self, data: bytes, direction: str, sock, address) -> None:
        faults = getattr(self, direction)
        counts = self.counters[direction]
        if self.rng.random() < faults.drop:
            counts["dropped"] += 1
            return
        if self.rng.random() < faults.corrupt:
            i = self.rng.randrange(len(data))
            data = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]
            counts["corrupted"] += 1
        if self.rng.random() < faults.truncate:
            data = data[: len(data) // 2]
            counts["truncated"] += 1
        due = time.perf_counter() + faults.delay + self.rng.uniform(0.0, faults.jitter)
        self._n += 1
        heapq.heappush(self.queue, (due, self._n, sock, data, address))

    def _flush(self) -> None:
        now = time.perf_counter()
        while self.queue and self.queue[0][0] <= now:
            _, _, sock, data, address = heapq.heappop(self.queue)
            if address is None:
                continue
            try:
                sock.sendto(data, address)
            except OSError:
                continue
            direction = "to_robot" if sock is self.back else "to_controller"
            self.counters[direction]["forwarded"] += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            timeout = 0.001 if self.queue else 0.01
            try:
                readable, _, _ = select.select([self.front, self.back], [], [], timeout)
            except (OSError, ValueError):
                return
            for sock in readable:
                try:
                    data, address = sock.recvfrom(65535)
                except OSError:
                    continue
                if sock is self.front:
                    self.controller = address
                    self._relay(data, "to_robot", self.back, self.target)
                else:
                    self._relay(data, "to_controller", self.front, self.controller)
            self._flush()
