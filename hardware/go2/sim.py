"""A simulated Go2 behind Unitree SDK 2's DDS topics: the robot side for tests on loopback.

    python -m hardware.go2.sim --domain 1 --interface lo --backend mujoco

It speaks what the robot speaks (`messages`, `crc`, `conversions`): it reads
LowCmd_ on `rt/lowcmd`, and at every physics step (`--timestep`, 2 ms: 500 Hz) it publishes
LowState_ on `rt/lowstate` and the true base state as SportModeState_ on `rt/sportmodestate`
(as `unitree_mujoco` does). Physics: MuJoCo (`--backend mujoco`,
`hardware.backends.mujoco_sim`) or this project's simulator (`--backend sim`), in real time
(late steps run back to back, at most `MAX_CATCH_UP`, and are counted as overruns). Simulated
time starts with the first accepted LowCmd; until then the robot stands still in its initial
state (`--q0`, default the standing pose) and LowState is published at the same rate.
`--freeze` never starts the physics (tests of the message contents). `--lockstep` does not
follow the wall clock: it simulates up to the robot time of each `Step_` on `rt/diffloco/step`
(ours; `robot.LockstepGo2Robot` is the client), so a controller slower than real time drives
it over the same messages.

The motors (`LowCmdDrivers`) apply, at every physics step, from the latest accepted LowCmd,

    tau = clip(tau_ff + kp (q* - q) + kd (dq* - dq), -tau_max, tau_max)   on slots in mode 0x01

(0 on slots in mode 0), in the SDK's slot order mapped to the model's joints. A LowCmd whose
CRC does not match, whose `head`/`level_flag` are not the low-level ones or whose numbers are
not finite is rejected and counted, never applied. When no command was accepted for
`--command-timeout` the motors damp (`Kp = 0`, `Kd = --damping-kd`) until the next valid
LowCmd. `--sport-mode` models the sport service: LowCmds are ignored (counted) until a client
releases it through the motion-switcher service (`rt/api/motion_switcher/request`, CheckMode
1001 answers `{"name": "normal"}` then `{"name": ""}`, ReleaseMode 1003). `--press T D BITS`
holds remote buttons (`wireless_remote` bytes 2-3) down from sim time T for D seconds.

Prints one JSON line `{"ready": true, ...}` on stdout once it publishes, and a last line
`{"final_status": ...}` (counters, watchdog trips, the last applied command by joint and by SDK
slot, a history every 10 steps) on exit: SIGTERM/SIGINT or `--max-lifetime` seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import time

import numpy as np

from ..interface import JointCommand, JointMap, RobotMode
from ..safety import TIME_EPS
from . import codec, conversions, crc, dds, motion_switcher
from . import messages as msgs

MAX_CATCH_UP = 20  # physics steps run back to back when the process is late
HISTORY_EVERY = 10  # physics steps between history samples
logger = logging.getLogger(__name__)


class LowCmdDrivers:
    """The Go2's motor drivers acting on LowCmd_ (see module docstring); the `driver` of a
    simulated robot (`active_command`, `torque`, `deadline`, `mode`)."""

    def __init__(self, joint_map: JointMap, *, command_timeout=0.1, damping_kd=None):
        self.joint_map = joint_map
        self.perm = conversions.sdk_permutation(joint_map)
        self.command_timeout = float(command_timeout)
        kd = joint_map.kd_default if damping_kd is None else damping_kd
        self.damping_kd = np.broadcast_to(np.asarray(kd, float), (joint_map.nu,)).copy()
        self.mode = RobotMode.DAMPING
        self.command: JointCommand | None = None
        self.slots: dict | None = None  # the last accepted command by SDK slot
        self.last_accepted = -np.inf
        self.sport_mode = False
        self.trip_times: list = []
        keys = ("received", "accepted", "bad_crc", "bad_header", "nonfinite", "sport_mode")
        self.counters = {k: 0 for k in keys}

    def submit(self, msg, now: float) -> str | None:
        """Check and take a LowCmd_ at robot time `now`; returns the rejection or None."""
        self.counters["received"] += 1
        reason = None
        if not crc.crc_ok(msg):
            reason = "bad_crc"
        elif tuple(msg.head) != msgs.HEAD or msg.level_flag != msgs.LEVEL_LOW:
            reason = "bad_header"
        else:
            a = conversions.command_arrays(msg, self.perm)
            if not all(np.all(np.isfinite(a[k])) for k in ("q", "dq", "tau", "kp", "kd")):
                reason = "nonfinite"
            elif self.sport_mode:
                reason = "sport_mode"
        if reason is not None:
            self.counters[reason] += 1
            return reason
        on = (a["mode"] == msgs.MOTOR_SERVO).astype(float)
        self.command = JointCommand(a["q"], on * a["dq"], on * a["kp"], on * a["kd"], on * a["tau"])
        motors = msg.motor_cmd[: conversions.NUM_JOINTS]
        self.slots = {k: [float(getattr(m, k)) for m in motors] for k in ("q", "kp", "kd")}
        self.last_accepted = now
        self.mode = RobotMode.ACTIVE
        self.counters["accepted"] += 1
        return None

    def deadline(self) -> float:
        return (
            self.last_accepted + self.command_timeout if self.mode is RobotMode.ACTIVE else np.inf
        )

    def active_command(self, q, now: float) -> JointCommand:
        if self.mode is RobotMode.ACTIVE and now > self.deadline() + TIME_EPS:
            self.mode = RobotMode.DAMPING
            self.trip_times.append(now)
            logger.warning(
                "t=%.4f no LowCmd for %.0f ms: damping", now, 1e3 * (now - self.last_accepted)
            )
        if self.mode is RobotMode.ACTIVE:
            return self.command
        return JointCommand.damping(q, self.damping_kd)

    def torque(self, q, qd, now: float) -> np.ndarray:
        return self.active_command(q, now).torque(q, qd, self.joint_map.effort_limit)


class Go2Sim:
    """A simulated robot (`MuJoCoRobot` or `SimRobot`) on the Go2's DDS topics."""

    def __init__(
        self, robot, participant, *, freeze=False, press=None, sport_mode=False, lockstep=False
    ):
        self.robot = robot
        self.drivers = robot.driver
        self.perm = self.drivers.perm
        self.freeze = freeze
        self.press = press  # (start [s], duration [s], buttons) in sim time
        self.drivers.sport_mode = sport_mode
        self.state_writer = dds.make_writer(participant, dds.TOPIC_LOWSTATE, msgs.LowState_)
        self.sport_writer = dds.make_writer(participant, dds.TOPIC_SPORTSTATE, msgs.SportModeState_)
        # reliable: every LowCmd of a reliable writer (Cyclone's default, the SDK's) is counted
        self.cmd_reader = dds.make_reader(participant, dds.TOPIC_LOWCMD, msgs.LowCmd_, 64, True)
        self.rpc_writer = dds.make_writer(
            participant, f"{dds.MOTION_SWITCHER}/response", msgs.Response_
        )
        self.rpc_reader = dds.make_reader(
            participant, f"{dds.MOTION_SWITCHER}/request", msgs.Request_, 16
        )
        self.lockstep = lockstep
        self.step_reader = dds.make_reader(participant, dds.TOPIC_STEP, msgs.Step_, 16, True)
        self._state = codec.zero(msgs.LowState_)  # filled in place at every publish
        self._sport = codec.zero(msgs.SportModeState_)
        self.running = True
        self.started = False
        self.history: dict = {k: [] for k in ("t", "z", "mode", "kp_max", "buttons")}
        self.counters = {"published": 0, "overruns": 0, "rpc": 0, "steps": 0, "late_commands": 0}

    # ------------------------------------------------------------- incoming
    def drain(self) -> None:
        for msg in dds.take(self.cmd_reader, msgs.LowCmd_):
            if self.drivers.submit(msg, self.robot.now()) is None:
                self.started = self.started or not self.freeze
        for request in dds.take(self.rpc_reader, msgs.Request_):
            self._answer(request)

    def _answer(self, request) -> None:
        self.counters["rpc"] += 1
        api = int(request.header.identity.api_id)
        data, code = "", 0
        if api == motion_switcher.API_CHECK_MODE:
            data = json.dumps({"name": "normal" if self.drivers.sport_mode else "", "form": "0"})
        elif api == motion_switcher.API_RELEASE_MODE:
            self.drivers.sport_mode = False
        else:
            code = 3203  # RPC_ERR_SERVER_API_NOT_IMPL
        header = msgs.ResponseHeader_(request.header.identity, msgs.ResponseStatus_(code))
        self.rpc_writer.write(msgs.Response_(header, data, []))

    # ------------------------------------------------------------- outgoing
    def buttons(self) -> int:
        if self.press is None:
            return 0
        start, duration, bits = self.press
        return int(bits) if start <= self.robot.now() < start + duration else 0

    def publish(self) -> None:
        m = self.robot.read()
        now = self.robot.now()
        buttons = self.buttons()
        conversions.lowstate_from_measurement(m, self.perm, round(1e3 * now), buttons, self._state)
        self.state_writer.write(self._state)
        self.sport_writer.write(conversions.sport_state_from_measurement(m, now, self._sport))
        self.counters["published"] += 1
        if self.counters["published"] % HISTORY_EVERY == 0:
            command = self.drivers.command
            h = self.history
            h["t"].append(now)
            h["z"].append(float(m.base_position[2]))
            h["mode"].append(int(self.drivers.mode))
            active = self.drivers.mode is RobotMode.ACTIVE and command is not None
            h["kp_max"].append(float(np.max(command.kp)) if active else 0.0)
            h["buttons"].append(buttons)

    # ------------------------------------------------------------- loop
    def serve(self, max_lifetime: float) -> dict:
        """Publish and simulate in real time (or lockstep) until stopped or `max_lifetime` [s]
        of wall time."""
        if self.lockstep:
            return self._serve_lockstep(time.perf_counter() + max_lifetime)
        dt = self.robot.dt
        born = start = time.perf_counter()
        ticks = 0
        while self.running and time.perf_counter() - born < max_lifetime:
            self.drain()
            due = int((time.perf_counter() - start) / dt) - ticks
            if due > MAX_CATCH_UP:
                self.counters["overruns"] += 1
            for _ in range(min(max(due, 0), MAX_CATCH_UP)):
                self.drain()  # commands that arrived while late count at their own step
                if self.started:
                    self.robot.advance(dt)
                self.publish()
                ticks += 1
            if due > MAX_CATCH_UP:  # too late to catch up: drop the backlog
                start = time.perf_counter() - ticks * dt
            delay = start + (ticks + 1) * dt - time.perf_counter()
            if delay > 0:
                time.sleep(min(delay, dt))
        return self.status()

    def _serve_lockstep(self, end: float) -> dict:
        """Simulate to each `Step_` target once its LowCmds arrived, publishing every step;
        until the first step, publish the initial state every 20 ms (for discovery)."""
        dt, last_publish = self.robot.dt, 0.0
        while self.running and time.perf_counter() < end:
            self.drain()
            steps = dds.take(self.step_reader, msgs.Step_)
            if not steps:
                if not self.counters["steps"] and time.perf_counter() - last_publish > 0.02:
                    self.publish()
                    last_publish = time.perf_counter()
                time.sleep(0.0002)
                continue
            self.counters["steps"] += len(steps)
            target = max(s.target for s in steps)
            needed = max(s.commands for s in steps)
            wait = time.perf_counter() + 1.0
            while self.drivers.counters["received"] < needed and time.perf_counter() < wait:
                time.sleep(0.0002)
                self.drain()
            if self.drivers.counters["received"] < needed:
                self.counters["late_commands"] += 1
            self.started = not self.freeze
            moved = False
            while self.started and self.robot.now() < target - 0.5 * dt:
                self.robot.advance(dt)
                self.publish()
                moved = True
            if not moved:
                self.publish()  # the state at the target again (a repeated step)
        return self.status()

    def status(self) -> dict:
        d, command = self.drivers, self.drivers.command
        return {
            "robot_time": self.robot.now(),
            "mode": RobotMode(d.mode).name,
            "started": self.started,
            "sport_mode": d.sport_mode,
            "watchdog_trips": list(d.trip_times),
            "last_command_accepted_at": d.last_accepted,
            "drivers": dict(d.counters),
            "transport": dict(self.counters),
            "applied": None
            if command is None
            else {k: getattr(command, k).tolist() for k in JointCommand.ARRAYS},
            "applied_slots": d.slots,
            "history": self.history,
        }


def make_robot(backend: str, timestep: float, q0, command_timeout: float, damping_kd):
    """A simulated Go2 (MuJoCo or ours) whose motors are `LowCmdDrivers`."""
    import dynamics

    model = dynamics.load_robot("go2")
    if backend == "mujoco":
        from ..backends.mujoco_sim import MuJoCoRobot

        robot = MuJoCoRobot(model, timestep=timestep, q0=q0)
    elif backend == "sim":
        import contact

        from ..backends.jax_sim import SimRobot

        params = contact.StepParams(terrain=contact.flat(friction=0.8), dt=timestep)
        robot = SimRobot(model, params=params, q0=q0)
        robot.compile()  # before serving
    else:
        raise ValueError(f"backend must be 'mujoco' or 'sim', got {backend!r}")
    robot.driver = LowCmdDrivers(
        robot.joint_map, command_timeout=command_timeout, damping_kd=damping_kd
    )
    return robot


@contextlib.contextmanager
def spawn(args=(), *, startup_timeout: float = 60.0, stderr=None):
    """Start `python -m hardware.go2.sim *args`, wait for its ready line; yields the
    process, always stopped on exit (terminate, then kill)."""
    from ..robot_server import spawn as spawn_module

    module = "hardware.go2.sim"
    with spawn_module(args, startup_timeout=startup_timeout, stderr=stderr, module=module) as (
        proc,
        _,
    ):
        yield proc


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", type=int, default=1, help="DDS domain id")
    parser.add_argument("--interface", default="lo", help="network interface ('' = any)")
    parser.add_argument("--backend", default="mujoco", choices=("mujoco", "sim"))
    parser.add_argument("--timestep", type=float, default=0.002, help="physics step [s]")
    parser.add_argument("--command-timeout", type=float, default=0.1, help="damping after [s]")
    parser.add_argument("--damping-kd", type=float, default=None, help="[N m s/rad]")
    parser.add_argument("--q0", default=None, help="initial configuration, JSON list (nq,)")
    parser.add_argument("--freeze", action="store_true", help="never run the physics")
    parser.add_argument("--sport-mode", action="store_true", help="start in sport mode")
    parser.add_argument("--lockstep", action="store_true", help="simulate on Step_ messages")
    parser.add_argument("--press", nargs=3, type=float, default=None, metavar=("T", "D", "BITS"))
    parser.add_argument("--max-lifetime", type=float, default=600.0, help="[s]")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    q0 = None if args.q0 is None else np.array(json.loads(args.q0), dtype=float)
    robot = make_robot(args.backend, args.timestep, q0, args.command_timeout, args.damping_kd)
    domain, participant = dds.open_domain(args.domain, args.interface or None)
    sim = Go2Sim(robot, participant, freeze=args.freeze, press=args.press,
                 sport_mode=args.sport_mode, lockstep=args.lockstep)  # fmt: skip

    def stop(*_):
        sim.running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sim.publish()
    ready = {"ready": True, "port": None, "domain": args.domain, "interface": args.interface,
             "backend": args.backend}  # fmt: skip
    print(json.dumps(ready), flush=True)
    final = sim.serve(args.max_lifetime)
    print(json.dumps({"final_status": final}), flush=True)
    return final


if __name__ == "__main__":
    main()
