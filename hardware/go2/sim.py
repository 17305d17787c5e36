"""A simulated Go2 behind Unitree SDK 2's DDS topics: the robot side for tests on loopback.

    python -m hardware.go2.sim --domain 1 --interface lo --backend mujoco

It speaks what the robot speaks (`messages`, `crc`, `conversions`): it reads
LowCmd_ on `rt/lowcmd`, and at every physics step (`--timestep`, 2 ms: 500 Hz) it publishes
LowState_ on `rt/lowstate`. Physics: MuJoCo (`--backend mujoco`, `hardware.backends.mujoco_sim`,
whose trunk and legs touch the floor) or this project's simulator (`--backend sim`, feet-only
contact and no joint limits: a damped robot there folds and sinks through the floor), in real
time (late steps run back to back, at most `MAX_CATCH_UP`, and are counted as overruns).
The ground is flat unless `--terrain` names a preset of `contact.terrain_presets` (stairs,
slope, rough, blocks: level at the start, the feature 1 m ahead along +x) or a JSON file of
`contact.terrain.terrain_to_dict`; both backends use it (MuJoCo through `contact.mjcf_terrain`).

The physics runs from the start, as on a robot that is switched on: the drivers start in
damping (`Kp = 0`, `Kd = --damping-kd`), so a robot started standing (`--q0`, default the
standing pose) sags to the floor until a client commands it, and one started `--lying` (legs
folded, resting on its shins: `LYING_JOINTS`) stays there; its accelerometer reads gravity
before any command. `--freeze` never runs the physics (tests of the message contents).
`--lockstep` does not follow the wall clock: it simulates up to the robot time of each `Step_`
on `rt/diffloco/step` (ours; `robot.LockstepGo2Robot` is the client), so a controller slower
than real time drives it over the same messages.

What LowState_ carries, like a Go2's:
    motor_state[slot] q, dq, tau_est, temperature (`MotorHeat`), mode 0x01;
    imu_state: quaternion, gyroscope, accelerometer, rpy; with `--imu-noise` the gyro and
        accelerometer get the white noise, per-run bias and latency of
        `hardware.sensor_noise.SensorNoise.go2()` (IMU part only, seed `--noise-seed`);
    foot_force, foot_force_est: each foot's normal contact force in counts
        (`conversions.FOOT_FORCE_NEWTONS_PER_COUNT`);
    tick [ms]: running from the start (robot time; in lockstep the time of the Step_);
    power_v, power_a, bms_state.soc: `Battery`;
    wireless_remote: the buttons of `--press`, the sticks of `--sticks`.

Sport service. A Go2 starts with its sport service running, which publishes its state estimate
on `rt/sportmodestate` and drives the motors; `--sport-mode` models it: the true base state as
SportModeState_ on `rt/sportmodestate`, LowCmds ignored (counted), until a client releases it
through the motion-switcher service (`rt/api/motion_switcher/request`, CheckMode 1001 answers
`{"name": "normal"}` then `{"name": ""}`, ReleaseMode 1003); after the release (and without
`--sport-mode`) no sport state is published, as on the robot. `--ground-truth-topic` publishes
the true base state (SportModeState_) on `rt/diffloco/ground_truth`
(`conversions.TOPIC_GROUND_TRUTH`) at every step, for logs and tests only: no Go2 has it.

The motors (`LowCmdDrivers`) apply, at every physics step, from the latest accepted LowCmd,

    tau = clip(tau_ff + kp (q* - q) + kd (dq* - dq), -tau_max, tau_max)   on slots in mode 0x01

(0 on slots in mode 0), in the SDK's slot order mapped to the model's joints. A LowCmd whose
CRC does not match, whose `head`/`level_flag` are not the low-level ones or whose numbers are
not finite is rejected and counted, never applied. When no command was accepted for
`--command-timeout` the motors damp (`Kp = 0`, `Kd = --damping-kd`) until the next valid
LowCmd. In `--sport-mode` (above) the sport service
(`rt/api/sport/request`) answers StandDown 1005 with 0 while in sport mode (counted as
`stand_down`; the robot stays as it is) and nothing after the release. `--press T D BITS`
holds remote buttons (`wireless_remote` bytes 2-3) down from sim time T for D seconds (with
`--press-after-command`, T counts from the first accepted LowCmd, status `first_command_at`).
`--sticks T D LX RX RY LY` (repeatable) holds the remote's sticks at those values
(`wireless_remote` float32 at bytes 4, 8, 12, 20: right and up positive, nominally in [-1, 1])
from T for D seconds, T counted as `--press`'s, with the buttons `--press` holds; where holds
overlap the last one given wins, and outside them the sticks read zero (released).

Prints one JSON line `{"ready": true, ...}` on stdout once it publishes, and a last line
`{"final_status": ...}` (counters, watchdog trips, the last applied command by joint and by SDK
slot, a history every 10 steps) on exit: SIGTERM/SIGINT or `--max-lifetime` seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import signal
import sys
import time

import numpy as np

from ..collection_pauses import frozen_heap
from ..interface import JointCommand, JointMap, RobotMode
from ..safety import TIME_EPS
from ..sensor_noise import NoisySensors, SensorNoise
from . import codec, conversions, crc, dds, motion_switcher, sport_client
from . import messages as msgs

MAX_CATCH_UP = 20  # physics steps run back to back when the process is late
HISTORY_EVERY = 10  # physics steps between history samples
LYING_JOINTS = (0.0, 1.19, -2.72)  # hip, thigh, calf [rad]: folded, calf at its limit
LYING_HEIGHT = 0.1109  # [m] base height at LYING_JOINTS with the feet on the floor
logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- battery, heat
@dataclasses.dataclass
class Battery:
    """The Go2's battery as LowState_ reports it: `power_v` [V], `power_a` [A], `soc` [%].

    An 8-cell lithium pack (28.8 V nominal, 33.6 V full) of 15 Ah (the Go2's standard battery,
    15000 mAh): open-circuit voltage linear in the state of charge between 3.0 and 4.2 V a
    cell, `V_oc = 24.0 + 9.6 soc`, an internal resistance `R`, and a load of the electronics
    `P_idle` plus what the motors draw, their mechanical power and copper losses
    (`MotorHeat.LOSS_PER_NM2 tau^2`), never regenerating:

        P = P_idle + sum_j (max(tau_j qd_j, 0) + c tau_j^2)      [W]
        I = P / V,   V = V_oc(soc) - R I,   d soc / dt = -I / (3600 capacity)

    It starts at `soc` 0.5 (28.8 V, the pack's nominal voltage) and falls slowly (about 0.5 %
    of charge a minute at 60 W). The figures are assumptions of the right order."""

    soc: float = 0.5  # state of charge, 0..1
    capacity_ah: float = 15.0
    resistance: float = 0.05  # [ohm]
    idle_power: float = 60.0  # [W] computer, drivers, sensors
    current: float = 0.0  # [A]

    def voltage(self) -> float:
        return 24.0 + 9.6 * self.soc - self.resistance * self.current

    def step(self, tau, qd, dt: float) -> None:
        """Draw the power of joint torques `tau (nu,)` [N m] at rates `qd (nu,)` [rad/s] for
        `dt` [s]."""
        tau, qd = np.asarray(tau, float), np.asarray(qd, float)
        motors = np.sum(np.maximum(tau * qd, 0.0) + MotorHeat.LOSS_PER_NM2 * tau**2)
        self.current = (self.idle_power + float(motors)) / max(self.voltage(), 1.0)
        self.soc = max(self.soc - self.current * dt / (3600.0 * self.capacity_ah), 0.0)

    def report(self) -> dict:
        return {"power_v": self.voltage(), "power_a": self.current, "soc": 100.0 * self.soc}


class MotorHeat:
    """Each motor's winding temperature [deg C]: a first-order thermal model heated by its
    copper losses (torque squared) and cooled toward the ambient air,

        C dT/dt = c tau^2 - (T - T_ambient) / R_th,     time constant R_th C = `time_constant`

    integrated exactly for a torque held over `dt`. The steady rise `R_th c tau^2` is
    `RISE_PER_NM2` = 0.4 K per (N m)^2: 40 K at a sustained 10 N m, reached over minutes
    (`time_constant` 300 s, so about 0.13 K/s at first), so standing warms the calves by a few
    degrees and a long hard run approaches a driver's limit. Assumptions of the right order for
    the Go2's motors (no thermal data is published); LowState_ carries whole degrees."""

    LOSS_PER_NM2 = 0.1  # [W / (N m)^2] copper loss per motor (`Battery`)
    RISE_PER_NM2 = 0.4  # [K / (N m)^2] steady temperature rise

    def __init__(self, nu: int, ambient: float = 30.0, time_constant: float = 300.0):
        self.ambient = float(ambient)
        self.time_constant = float(time_constant)
        self.temperature = np.full(nu, self.ambient)

    def step(self, tau, dt: float) -> None:
        """Heat for `dt` [s] under joint torques `tau (nu,)` [N m]."""
        steady = self.ambient + self.RISE_PER_NM2 * np.asarray(tau, float) ** 2
        decay = np.exp(-dt / self.time_constant)
        self.temperature = steady + (self.temperature - steady) * decay


def lying_q0(model) -> np.ndarray:
    """The Go2 lying down (`LYING_JOINTS` on every leg, base `LYING_HEIGHT` above the floor,
    level): where a damped Go2 rests on MuJoCo with its trunk and legs colliding."""
    q = np.asarray(model.q_standing, dtype=float).copy()
    q[2], q[7:] = LYING_HEIGHT, np.tile(LYING_JOINTS, model.nu // 3)
    return q


def imu_noise() -> SensorNoise:
    """`SensorNoise.go2()`'s IMU part (gyro, accelerometer, biases, latency); joints and feet
    exact."""
    return dataclasses.replace(
        SensorNoise.go2(), joint_position_std=0.0, joint_velocity_std=0.0, foot_force_std=0.0
    )


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
        self, robot, participant, *, freeze=False, press=None, sport_mode=False, lockstep=False,
        ground_truth_topic=None, noise: SensorNoise | None = None, noise_seed: int = 0,
        press_after_command=False, sticks=(),
    ):  # fmt: skip
        self.robot = robot
        self.drivers = robot.driver
        self.perm = self.drivers.perm
        self.freeze = freeze
        # the LowState's sensors: the robot's own, or with `noise` (`hardware.sensor_noise`)
        self.sensors = robot if noise is None else NoisySensors(robot, noise, seed=noise_seed)
        self.battery = Battery()
        self.heat = MotorHeat(robot.joint_map.nu)
        self._heated_until = robot.now()
        self.truth_writer = None
        if ground_truth_topic:
            self.truth_writer = dds.make_writer(
                participant, ground_truth_topic, msgs.SportModeState_
            )
        self.press = press  # (start [s], duration [s], buttons) in sim time
        self.sticks = [tuple(float(v) for v in hold) for hold in sticks]  # (T, D, lx, rx, ry, ly)
        if any(len(hold) != 6 for hold in self.sticks):
            raise ValueError(f"sticks must be (T, D, lx, rx, ry, ly) holds, got {sticks!r}")
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
        # the sport service's StandDown (`sport_client`); silent once sport mode is released
        self.sport_rpc_writer = dds.make_writer(
            participant, f"{sport_client.SPORT}/response", msgs.Response_
        )
        self.sport_rpc_reader = dds.make_reader(  # reliable: no request lost to discovery
            participant, f"{sport_client.SPORT}/request", msgs.Request_, 16, True
        )
        self.rpc_log: list = []  # (service, API id, status code) of every request, in order
        self.lockstep = lockstep
        self.step_reader = dds.make_reader(participant, dds.TOPIC_STEP, msgs.Step_, 16, True)
        self._state = codec.zero(msgs.LowState_)  # filled in place at every publish
        self._sport = codec.zero(msgs.SportModeState_)
        self._truth = codec.zero(msgs.SportModeState_)
        self.running = True
        self.started = False
        self.first_command_at = None  # [s] sim time of the first accepted LowCmd
        self.press_after_command = press_after_command
        self.history: dict = {k: [] for k in ("t", "z", "mode", "kp_max", "buttons")}
        self.counters = {"published": 0, "overruns": 0, "rpc": 0, "steps": 0, "late_commands": 0,
                         "stand_down": 0}  # fmt: skip

    # ------------------------------------------------------------- incoming
    def drain(self) -> None:
        for msg in dds.take(self.cmd_reader, msgs.LowCmd_):
            if self.drivers.submit(msg, self.robot.now()) is None:
                if not self.started:
                    self.first_command_at = self.robot.now()
                self.started = True  # a command was accepted
        for request in dds.take(self.rpc_reader, msgs.Request_):
            self._answer(request)
        for request in dds.take(self.sport_rpc_reader, msgs.Request_):
            self._answer_sport(request)

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
        self.rpc_log.append(("motion_switcher", api, code))

    def _answer_sport(self, request) -> None:
        """The sport service: StandDown answered 0 and counted (the robot stays as it is) while
        in sport mode; after the release the service is gone and nothing answers (the client
        ends with RPC_ERR_CLIENT_API_TIMEOUT, as Unitree's does)."""
        api = int(request.header.identity.api_id)
        if not self.drivers.sport_mode:
            self.rpc_log.append(("sport", api, sport_client.RPC_ERR_CLIENT_API_TIMEOUT))
            return
        self.counters["rpc"] += 1
        code = 0 if api == sport_client.API_STAND_DOWN else sport_client.RPC_ERR_SERVER_API_NOT_IMPL
        if code == 0:
            self.counters["stand_down"] += 1
        header = msgs.ResponseHeader_(request.header.identity, msgs.ResponseStatus_(code))
        self.sport_rpc_writer.write(msgs.Response_(header, "", []))
        self.rpc_log.append(("sport", api, code))

    # ------------------------------------------------------------- outgoing
    def remote_time(self) -> float | None:
        """The time [s] `--press` and `--sticks` count in: sim time, or with
        `--press-after-command` since the first accepted LowCmd (None before it)."""
        if not self.press_after_command:
            return self.robot.now()
        if self.first_command_at is None:
            return None
        return self.robot.now() - self.first_command_at

    def buttons(self) -> int:
        since = self.remote_time()
        if self.press is None or since is None:
            return 0
        start, duration, bits = self.press
        return int(bits) if start <= since < start + duration else 0

    def stick_values(self) -> tuple | None:
        """`(lx, rx, ry, ly)` of the `--sticks` hold in force (the last given), or None."""
        since = self.remote_time()
        if since is None:
            return None
        holds = [h for h in self.sticks if h[0] <= since < h[0] + h[1]]
        return holds[-1][2:] if holds else None

    def clock(self) -> float:
        """The robot clock [s] of LowState_ `tick`: the physics time, or with `--freeze` the
        time since the start (one step per publish in real time)."""
        if self.freeze:
            return self.counters["published"] * self.robot.dt
        return self.robot.now()

    def publish(self) -> None:
        m = self.robot.read()  # the true state (sport state, ground truth)
        sensed = m if self.sensors is self.robot else self.sensors.read()
        now = self.robot.now()
        if now > self._heated_until:  # the torque of the last step held since the last publish
            self.heat.step(m.joint_tau, now - self._heated_until)
            self.battery.step(m.joint_tau, m.joint_qd, now - self._heated_until)
            self._heated_until = now
        sensed = sensed.replace(motor_temperature=self.heat.temperature)
        buttons = self.buttons()
        conversions.lowstate_from_measurement(
            sensed, self.perm, round(1e3 * self.clock()), buttons, self._state,
            power=self.battery.report(),
        )  # fmt: skip
        sticks = self.stick_values() if self.sticks else None
        if sticks is not None:  # the sticks too, and the CRC again
            self._state.wireless_remote = conversions.remote_bytes(buttons, *sticks)
            crc.set_crc(self._state)
        self.state_writer.write(self._state)
        if self.drivers.sport_mode:  # the sport service runs until released
            self.sport_writer.write(conversions.sport_state_from_measurement(m, now, self._sport))
        if self.truth_writer is not None:
            self.truth_writer.write(conversions.sport_state_from_measurement(m, now, self._truth))
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
        of wall time, with no full collection pass in the loop (`frozen_heap`)."""
        with frozen_heap():
            return self._serve(max_lifetime)

    def _serve(self, max_lifetime: float) -> dict:
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
                if not self.freeze:  # the physics runs from the start
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
            moved = False
            while not self.freeze and self.robot.now() < target - 0.5 * dt:
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
            "first_command_at": self.first_command_at,
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
            "rpc_log": self.rpc_log,
        }


def make_robot(
    backend: str, timestep: float, q0, command_timeout: float, damping_kd, lying: bool = False,
    terrain=None,
):  # fmt: skip
    """A simulated Go2 (MuJoCo or ours) whose motors are `LowCmdDrivers`; it starts at `q0`
    (default the standing pose, or `lying_q0` with `lying`) on `terrain` (a `contact.terrain`
    pytree; None: flat ground, friction 0.8)."""
    import dynamics

    model = dynamics.load_robot("go2")
    if lying:
        if q0 is not None:
            raise ValueError("give either q0 or lying, not both")
        q0 = lying_q0(model)
    if backend == "mujoco":
        from ..backends.mujoco_sim import MuJoCoRobot

        robot = MuJoCoRobot(model, timestep=timestep, q0=q0, terrain=terrain)
    elif backend == "sim":
        import contact

        from ..backends.jax_sim import SimRobot

        ground = contact.flat(friction=0.8) if terrain is None else terrain
        params = contact.StepParams(terrain=ground, dt=timestep)
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
    parser.add_argument("--lying", action="store_true", help="start lying, legs folded")
    parser.add_argument("--freeze", action="store_true", help="never run the physics")
    parser.add_argument("--sport-mode", action="store_true", help="start in sport mode")
    parser.add_argument("--lockstep", action="store_true", help="simulate on Step_ messages")
    parser.add_argument("--press", nargs=3, type=float, default=None, metavar=("T", "D", "BITS"))
    parser.add_argument("--press-after-command", action="store_true",
                        help="--press, --sticks: T from the first accepted LowCmd")  # fmt: skip
    parser.add_argument("--sticks", nargs=6, type=float, action="append", default=[],
                        metavar=("T", "D", "LX", "RX", "RY", "LY"),
                        help="hold the remote's sticks from T for D s (repeatable)")  # fmt: skip
    parser.add_argument("--max-lifetime", type=float, default=600.0, help="[s]")
    parser.add_argument(
        "--ground-truth-topic",
        nargs="?",
        const=conversions.TOPIC_GROUND_TRUTH,
        default=None,
        help="publish the true base state there (tests, logs)",
    )
    parser.add_argument("--imu-noise", action="store_true", help="a Go2-like IMU's noise")
    parser.add_argument("--noise-seed", type=int, default=0, help="seed of the IMU noise")
    parser.add_argument("--terrain", default=None, metavar="NAME|FILE",
                        help="ground: a preset (stairs, slope, rough, blocks) or a JSON file of "
                             "contact.terrain.terrain_to_dict (default: flat)")  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    q0 = None if args.q0 is None else np.array(json.loads(args.q0), dtype=float)
    terrain = None
    if args.terrain is not None:
        from contact.terrain_presets import terrain_from_argument

        try:
            terrain = terrain_from_argument(args.terrain)
        except ValueError as e:
            parser.error(str(e))
    robot = make_robot(args.backend, args.timestep, q0, args.command_timeout, args.damping_kd,
                       lying=args.lying, terrain=terrain)  # fmt: skip
    domain, participant = dds.open_domain(args.domain, args.interface or None)
    sim = Go2Sim(robot, participant, freeze=args.freeze, press=args.press,
                 sport_mode=args.sport_mode, lockstep=args.lockstep,
                 ground_truth_topic=args.ground_truth_topic, noise_seed=args.noise_seed,
                 press_after_command=args.press_after_command, sticks=args.sticks,
                 noise=imu_noise() if args.imu_noise else None)  # fmt: skip

    def stop(*_):
        sim.running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sim.publish()
    ready = {"ready": True, "port": None, "domain": args.domain, "interface": args.interface,
             "backend": args.backend, "terrain": args.terrain}  # fmt: skip
    print(json.dumps(ready), flush=True)
    final = sim.serve(args.max_lifetime)
    print(json.dumps({"final_status": final}), flush=True)
    return final


if __name__ == "__main__":
    main()
