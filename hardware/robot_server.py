"""A simulated robot behind the UDP interface: the robot-side process for tests on loopback.

    python -m hardware.robot_server --robot go2 --backend mujoco --port 0 \
        --max-lifetime 60

Prints one JSON line `{"ready": true, "port": ..., ...}` on stdout once it serves (port 0 picks
a free port), then runs the simulation in real time: every physics step (`--backend mujoco`:
MuJoCo at its `timestep`; `--backend sim`: this project's `contact.step`) the drivers' PD
(`hardware.motor.MotorDriver`) acts on the latest accepted command, and a MEASUREMENT is
sent to every subscribed controller each `--measurement-every` steps. Simulated time follows
the wall clock; when the process falls behind it catches up with bursts of at most
`MAX_CATCH_UP` steps, each run as one `advance` that publishes one measurement at its end
(counted as `late_bursts`; a backlog longer than a burst counts as an `overrun`). On this
project's simulator a 20-step burst costs ~0.2 ms a step against ~0.5 ms for a step alone
(Go2, one core), so a process that fell behind on a loaded machine catches up. Simulated time
starts when the first controller subscribes (HELLO).

With `--lockstep` the simulation does not follow the wall clock: it waits for STEP messages
(`wire.MessageType.STEP`, "simulate up to robot time T") and then runs the physics to T,
publishing measurements as above and always one at T. A controller slower than real time
(an MPC on this CPU) then drives the robot over the same transport, checks and drivers as a
real-time one, deterministically; `backends.udp.LockstepUdpRobot` is its client end.

Incoming datagrams (layout: `hardware.backends.wire`) are checked in this order, and
rejected ones are counted and never applied: layout errors (truncated, bad length, magic,
version, CRC, type), joint count, then per sender: sequence (out of order), command age
(`--max-command-age` on the robot clock: stale), then the drivers' own checks (non-finite,
negative gains). A STATUS_REQ is answered with the counters, the drivers' mode and watchdog
trips, the applied command's targets, and the robot time. The process exits on SHUTDOWN,
SIGTERM/SIGINT, or after `--max-lifetime` seconds (so that a forgotten process ends), and
prints its final status as a last JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time

import numpy as np

from .backends import wire
from .collection_pauses import frozen_heap
from .interface import RobotMode

MAX_CATCH_UP = 20  # physics steps run back to back when the process is late
MAX_DATAGRAM = 65535
logger = logging.getLogger(__name__)


class RobotServer:
    """Serves a simulated robot (`SimRobot` or `MuJoCoRobot`) over a bound UDP socket."""

    def __init__(
        self,
        robot,
        sock: socket.socket,
        *,
        max_command_age: float = 0.1,
        measurement_every: int = 1,
        lockstep: bool = False,
    ):
        self.robot = robot
        self.lockstep = lockstep
        self.step_target = -np.inf  # lockstep: simulate up to this robot time
        self.sock = sock
        self.sock.setblocking(False)
        self.max_command_age = max_command_age
        self.measurement_every = measurement_every
        self.nu = robot.joint_map.nu
        self.subscribers: list = []
        self.filters: dict = {}  # (address, type) -> SequenceFilter
        self.sequence = 0
        self.running = True
        keys = (
            "received",
            "commands",
            "hello",
            "estop",
            "status",
            "sent",
            "overruns",
            "late_bursts",
            "steps",
            "ignored_steps",
        )
        self.counters = {k: 0 for k in (*keys, *wire.REJECTIONS)}

    # ------------------------------------------------------------- incoming
    def handle(self, data: bytes, address) -> None:
        self.counters["received"] += 1
        try:
            packet = wire.decode(data)
            if packet.type in (wire.MessageType.COMMAND, wire.MessageType.HELLO):
                if packet.num_joints != self.nu:
                    raise wire.WireError("wrong_joint_count", str(packet.num_joints))
            stream = self.filters.setdefault((address, packet.type), wire.SequenceFilter())
            if not stream.accept(packet.sequence):
                raise wire.WireError("out_of_order", f"{packet.sequence} <= {stream.last}")
        except wire.WireError as err:
            self.counters[err.kind] += 1
            return
        kind = packet.type
        if kind is wire.MessageType.COMMAND:
            self._command(packet)
        elif kind is wire.MessageType.HELLO:
            self.counters["hello"] += 1
            if address not in self.subscribers:
                self.subscribers.append(address)
        elif kind is wire.MessageType.ESTOP:
            self.counters["estop"] += 1
            self.robot.estop()
        elif kind is wire.MessageType.STATUS_REQ:
            self.counters["status"] += 1
            payload = json.dumps(self.status()).encode("utf-8")
            self._send(wire.encode(wire.MessageType.STATUS, 0, self.robot.now(), payload), address)
        elif kind is wire.MessageType.SHUTDOWN:
            self.running = False
        elif kind is wire.MessageType.STEP:
            if not self.lockstep or not np.isfinite(packet.timestamp):
                self.counters["ignored_steps"] += 1
                return
            self.counters["steps"] += 1
            self.step_target = max(self.step_target, packet.timestamp)

    def _command(self, packet: wire.Packet) -> None:
        now = self.robot.now()
        if now - packet.timestamp > self.max_command_age or not np.isfinite(packet.timestamp):
            self.counters["stale"] += 1
            return
        self.counters["commands"] += 1
        self.robot.driver.submit(wire.decode_command(packet), now)  # counts its own rejections

    def _send(self, data: bytes, address) -> None:
        try:
            self.sock.sendto(data, address)
            self.counters["sent"] += 1
        except OSError:  # a vanished subscriber must not stop the robot
            pass

    def drain(self) -> None:
        while True:
            try:
                data, address = self.sock.recvfrom(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError, ConnectionRefusedError):
                return
            self.handle(data, address)

    # ------------------------------------------------------------- status
    def status(self) -> dict:
        driver = self.robot.driver
        command = driver.command
        return {
            "robot_time": self.robot.now(),
            "mode": RobotMode(driver.mode).name,
            "watchdog_trips": list(driver.trip_times),
            "last_command_accepted_at": driver.last_accepted,
            "transport": dict(self.counters),
            "lost_commands": sum(
                f.lost for (_, k), f in self.filters.items() if k is wire.MessageType.COMMAND
            ),
            "driver": dict(driver.counters),
            "applied_q_target": None if command is None else command.q_target.tolist(),
            "applied_kp": None if command is None else command.kp.tolist(),
        }

    # ------------------------------------------------------------- real-time loop
    def serve(self, max_lifetime: float = 600.0) -> dict:
        """Run in real time (or lockstep) until SHUTDOWN or `max_lifetime` [s] of wall time,
        with no full collection pass in the loop (`frozen_heap`); returns the final status.

        Simulated time starts with the first subscriber (a simulated robot waits for its
        controller instead of sitting down in its drivers' damping mode meanwhile)."""
        with frozen_heap():
            return self._serve(max_lifetime)

    def _serve(self, max_lifetime: float) -> dict:
        dt = self.robot.dt
        born = time.perf_counter()
        while self.running and not self.subscribers and time.perf_counter() - born < max_lifetime:
            self.drain()
            time.sleep(0.001)
        if self.lockstep:
            return self._serve_lockstep(born + max_lifetime)
        start = time.perf_counter()
        steps = 0
        if self.subscribers:
            self._publish()
        while self.running and time.perf_counter() - born < max_lifetime:
            self.drain()
            due = int((time.perf_counter() - start) / dt) - steps
            if due > MAX_CATCH_UP:
                self.counters["overruns"] += 1
            burst = min(max(due, 0), MAX_CATCH_UP)
            if burst > 0:
                # a late process runs its backlog as one advance (one call costs far less than
                # one per step) and publishes once at its end, when any measurement was due
                self.robot.advance(burst * dt)
                published = steps // self.measurement_every
                steps += burst
                if burst > 1:
                    self.counters["late_bursts"] += 1
                if steps // self.measurement_every > published:
                    self._publish()
            if due <= 0:
                delay = start + (steps + 1) * dt - time.perf_counter()
                if delay > 0:
                    time.sleep(min(delay, dt))
        return self.status()

    def _serve_lockstep(self, end: float) -> dict:
        """Simulate up to each STEP's target robot time; sleep in `select` meanwhile."""
        dt = self.robot.dt
        if self.subscribers:
            self._publish()
        while self.running and time.perf_counter() < end:
            ready, _, _ = select.select(
                [self.sock], [], [], min(0.1, max(end - time.perf_counter(), 0))
            )
            if not ready:
                continue
            self.drain()
            if self.step_target == -np.inf:
                continue
            steps = 0
            while self.robot.now() < self.step_target - 0.5 * dt:
                self.robot.advance(dt)
                steps += 1
                if steps % self.measurement_every == 0:
                    self._publish()
            if steps % self.measurement_every != 0 or steps == 0:
                self._publish()  # the measurement at the target (again, for a repeated STEP)
            self.step_target = -np.inf
        return self.status()

    def _publish(self) -> None:
        if not self.subscribers:
            return
        self.sequence += 1
        data = wire.encode_measurement(self.robot.read(), self.sequence)
        for address in self.subscribers:
            self._send(data, address)


def make_robot(robot: str, backend: str, timestep: float = 0.002, **driver):
    """A simulated robot by name: backend "mujoco" or "sim" (this project's simulator), its
    physics (and drivers' PD) step `timestep` [s]."""
    import dynamics

    model = dynamics.load_robot(robot)
    if backend == "mujoco":
        from .backends.mujoco_sim import MuJoCoRobot

        return MuJoCoRobot(model, timestep=timestep, **driver)
    if backend == "sim":
        import contact

        from .backends.jax_sim import SimRobot

        params = contact.StepParams(terrain=contact.flat(friction=0.8), dt=timestep)
        robot = SimRobot(model, params=params, **driver)
        robot.compile()  # now, not at the first physics step
        return robot
    raise ValueError(f"backend must be 'mujoco' or 'sim', got {backend!r}")


@contextlib.contextmanager
def spawn(
    args=(),
    *,
    startup_timeout: float = 60.0,
    stderr=None,
    module="hardware.robot_server",
):
    """Start `python -m <module> *args` (this server by default) and wait for its ready line;
    yields `(process, port)`. The process is always stopped (terminate, then kill) on exit.

    Raises `TimeoutError` when no ready line arrives within `startup_timeout` [s]."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-m", module, *args]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], startup_timeout)
        if not ready:
            raise TimeoutError(f"the robot process did not start within {startup_timeout} s")
        line = json.loads(proc.stdout.readline())
        if not line.get("ready"):
            raise RuntimeError(f"the robot process did not report ready: {line}")
        yield proc, line["port"]
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        proc.stdout.close()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2")
    parser.add_argument("--backend", default="mujoco", choices=("mujoco", "sim"))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--command-timeout", type=float, default=0.1, help="watchdog [s]")
    parser.add_argument("--max-command-age", type=float, default=0.1, help="[s]")
    parser.add_argument("--measurement-every", type=int, default=1, help="physics steps")
    parser.add_argument("--max-lifetime", type=float, default=600.0, help="[s]")
    parser.add_argument("--timestep", type=float, default=0.002, help="physics step [s]")
    parser.add_argument(
        "--lockstep", action="store_true", help="simulate on STEP messages, not in real time"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    robot = make_robot(
        args.robot,
        args.backend,
        command_timeout=args.command_timeout,
        max_command_age=args.max_command_age,
        timestep=args.timestep,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((args.host, args.port))
    server = RobotServer(
        robot,
        sock,
        max_command_age=args.max_command_age,
        measurement_every=args.measurement_every,
        lockstep=args.lockstep,
    )

    def stop(*_):
        server.running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    port = sock.getsockname()[1]
    ready = {"ready": True, "port": port, "robot": args.robot, "backend": args.backend,
             "lockstep": args.lockstep}  # fmt: skip
    print(json.dumps(ready), flush=True)
    try:
        final = server.serve(args.max_lifetime)
    finally:
        sock.close()
    print(json.dumps({"final_status": final}), flush=True)
    return final


if __name__ == "__main__":
    main()
