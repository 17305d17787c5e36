"""The UDP transport: a robot process (`python -m hardware.robot_server`, MuJoCo Go2) on
loopback, the controller's side (`UdpRobot`), and what each rejects, counts and never applies.

These run in wall-clock time on a shared machine, so the stand tests use tolerant timeouts
(0.3 s) and timing claims are made on the robot's clock (the watchdog trips at a physics step
of the robot process, whatever the scheduling noise). Every process and socket is closed in a
`finally`/fixture teardown, with timeouts.
"""

import json
import socket
import subprocess
import time

import numpy as np
import pytest

import dynamics
from hardware import control_loop, robot_server
from hardware.backends import wire
from hardware.backends.mujoco_sim import MuJoCoRobot
from hardware.backends.udp import LockstepUdpRobot, UdpRobot
from hardware.faults import FaultyController, UdpFaultProxy, stall
from hardware.interface import JointCommand, JointMap, RobotMode, measurement_from_state
from hardware.pose import PoseController
from hardware.safety import Mode, SafetyConfig, SafetyLayer

pytest.importorskip("mujoco")

DT = 0.002  # the robot process's MuJoCo step [s]
TOLERANT = SafetyConfig(soft_start_duration=0.5, command_timeout=0.3, measurement_timeout=0.3)


@pytest.fixture(scope="module")
def joint_map():
    return JointMap.from_model(dynamics.load_robot("go2"))


def robot_process(*args, startup_timeout=60.0):
    """A `hardware.robot_server` subprocess; yields `(process, port)`; always
    stopped."""
    args = ["--robot", "go2", "--max-lifetime", "60", *args]
    return robot_server.spawn(args, startup_timeout=startup_timeout, stderr=subprocess.DEVNULL)


def stand_command(joint_map, m, **changes):
    c = JointCommand.create(joint_map.q_default, joint_map.kp_default, joint_map.kd_default)
    return c.replace(timestamp=m.timestamp, arm=True, **changes)


def test_go2_stands_over_udp(joint_map):
    with robot_process("--command-timeout", "0.3", "--max-command-age", "0.3") as (proc, port):
        robot = UdpRobot(("127.0.0.1", port), joint_map, max_measurement_age=0.3)
        try:
            result = control_loop.run(
                robot, PoseController.standing(joint_map), SafetyLayer(joint_map, TOLERANT),
                duration=2.5, control_dt=0.02, command_dt=DT,
            )  # fmt: skip
            status = robot.status()
            # then the controller hangs for 0.8 s (its own thread): the command loop keeps
            # ticking, times the controller out and damps
            stalled = FaultyController(PoseController.standing(joint_map), stall(0.8), 0.2)
            safety = SafetyLayer(joint_map, TOLERANT)
            hung = control_loop.run(robot, stalled, safety, duration=1.0, command_dt=DT)
        finally:
            robot.shutdown_robot()
            robot.close()
        proc.wait(timeout=5)
        final = json.loads(proc.stdout.readline())["final_status"]  # printed on exit
    z, stamp = result.log["base_position"][:, 2], result.log["stamp"]
    measured = np.isfinite(z)
    z, stamp = z[measured], stamp[measured]
    # Robot time starts when the client subscribes; on a loaded machine (a CI worker compiling
    # beside it) the first command has landed up to ~0.1 s later, and the unpowered robot had
    # sagged to 0.29 m by then (CI, 2026-12-02). The stand is judged once the controller has
    # held it for 0.5 s; before that it must only not fall.
    held = stamp > stamp[0] + 0.5
    assert z.size > 500 and held.sum() > 300  # ticks run (of 1250)
    assert 0.31 < z[held].min() and z.max() < 0.34 and z.min() > 0.25
    assert result.safety.mode is Mode.NORMAL and "damping" not in result.safety.log.kinds()
    assert status["mode"] == "ACTIVE" and status["watchdog_trips"] == []
    assert status["driver"]["armed"] == 1 and status["driver"]["accepted"] > 500
    assert all(status["transport"][k] == 0 for k in wire.REJECTIONS if k != "stale")
    assert all(robot.counters[k] == 0 for k in wire.REJECTIONS if k != "stale")
    assert final["driver"]["accepted"] >= status["driver"]["accepted"]
    timing = result.timing["command"]
    assert abs(timing["interval_median_s"] - DT) < 0.5e-3  # the loop keeps its period
    assert result.timing["controller"]["ticks"] > 60  # ~125 at 50 Hz, fewer under load

    damping = hung.safety.log.first("damping")
    assert damping.detail == "after command_timeout"
    stall_start = 0.2 + hung.log["stamp"][0] - 0.02  # last controller output before the stall
    assert 0.25 < damping.start - stall_start < 0.3 + 0.1  # the timeout, + scheduling slack
    during = (hung.log["t"] > 0.3) & (hung.log["t"] < 0.9)
    assert during.sum() > 100  # the command loop kept running while the controller hung
    assert hung.timing["controller"]["compute_max_s"] >= 0.8


def _raw(kind, seq, stamp, payload=b"", flags=0, nu=12):
    return wire.encode(kind, seq, stamp, payload, flags, nu)


def test_malformed_stale_and_out_of_order_commands_are_rejected_never_applied(joint_map):
    with robot_process("--command-timeout", "5", "--max-command-age", "1.0") as (_, port):
        client = UdpRobot(("127.0.0.1", port), joint_map, max_measurement_age=1.0)
        attacker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        attacker.bind(("127.0.0.1", 0))
        try:
            m = client.read()
            good = stand_command(joint_map, m)
            other = good.replace(q_target=good.q_target + 0.3)  # never to be applied
            payload = wire.encode_command(other, 0)[32:-4]
            addr = ("127.0.0.1", port)

            def send(data):
                attacker.sendto(data, addr)

            send(wire.encode_command(good, 100))  # valid: applied
            valid_other = wire.encode_command(other, 101)
            send(valid_other[:-1])  # truncated
            send(valid_other[:40])  # truncated (inside the payload)
            send(valid_other + b"\0")  # bad_length
            send(b"BAD!" + valid_other[4:])  # bad_magic
            send(valid_other[:4] + b"\x02\x00" + valid_other[6:])  # bad_version
            send(valid_other[:100] + bytes([valid_other[100] ^ 4]) + valid_other[101:])  # bad_crc
            send(_raw(9, 102, m.timestamp, payload))  # bad_type
            send(_raw(wire.MessageType.COMMAND, 103, m.timestamp, payload[:-40], nu=11))
            send(wire.encode_command(other, 50))  # out_of_order (50 < 100)
            send(wire.encode_command(other.replace(timestamp=m.timestamp - 10.0), 104))  # stale
            nan = other.replace(tau_ff=np.full(12, np.nan))
            send(wire.encode_command(nan, 105))  # driver: non-finite
            send(wire.encode_command(other.replace(kd=-np.ones(12)), 106))  # driver: gains
            time.sleep(0.05)
            status = client.status()
            transport, driver = status["transport"], status["driver"]
            for kind, count in {
                "truncated": 2,
                "bad_length": 1,
                "bad_magic": 1,
                "bad_version": 1,
                "bad_crc": 1,
                "bad_type": 1,
                "wrong_joint_count": 1,
                "out_of_order": 1,
                "stale": 1,
            }.items():
                assert transport[kind] == count, (kind, transport)
            assert driver["rejected_nonfinite"] == 1 and driver["rejected_gains"] == 1
            assert driver["accepted"] == 1 and status["mode"] == "ACTIVE"
            np.testing.assert_allclose(status["applied_q_target"], good.q_target)

            # e-stop: latched, and a later arming command is not applied
            client.estop()
            time.sleep(0.05)
            client.write(stand_command(joint_map, client.read()))
            time.sleep(0.05)
            status = client.status()
            assert status["mode"] == "ESTOP" and status["driver"]["rejected_estop"] >= 1
            time.sleep(0.02)
            assert client.read().robot_mode == RobotMode.ESTOP
        finally:
            attacker.close()
            client.shutdown_robot()
            client.close()


def test_client_rejects_bad_measurements(joint_map):
    """A fake robot sends the controller's side good and bad MEASUREMENT datagrams."""
    fake = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fake.bind(("127.0.0.1", 0))
    client = UdpRobot(fake.getsockname(), joint_map, connect_timeout=0)
    try:
        q = np.asarray(dynamics.load_robot("go2").q_standing, dtype=float)

        def sample(seq, stamp, **changes):
            m = measurement_from_state(q, np.zeros(18), timestamp=stamp, sequence=seq)
            return wire.encode_measurement(m.replace(**changes), seq)

        t0 = time.perf_counter()

        def robot_clock():  # the fake robot's clock: 100 s ahead of ours, ticking with it
            return 100.0 + time.perf_counter() - t0

        good1 = sample(1, robot_clock())
        bad = [
            good1[:-3],  # truncated
            good1[:50] + bytes([good1[50] ^ 1]) + good1[51:],  # bad_crc
            sample(1, robot_clock()),  # out_of_order (duplicate sequence)
            sample(2, robot_clock() - 0.5),  # stale: stamped 0.5 s before it was sent
            wire.encode_measurement(
                measurement_from_state(
                    np.concatenate([q[:7], np.zeros(11)]),
                    np.zeros(17),
                    timestamp=robot_clock(),
                    sequence=3,
                ),
                3,
            ),  # wrong_joint_count
            sample(4, robot_clock(), joint_q=np.full(12, np.nan)),  # non-finite
        ]
        client.sock.sendto(b"", fake.getsockname())  # nothing; the client must tolerate it
        fake.sendto(good1, client.sock.getsockname())
        time.sleep(0.02)
        assert client.read().sequence == 1
        for data in bad:
            fake.sendto(data, client.sock.getsockname())
        client.read()
        stamp7 = robot_clock()
        fake.sendto(sample(7, stamp7), client.sock.getsockname())
        time.sleep(0.02)
        m = client.read()
        assert m.sequence == 7 and m.timestamp == stamp7
        for kind in ("truncated", "bad_crc", "out_of_order", "stale", "wrong_joint_count"):
            assert client.counters[kind] == 1, (kind, client.counters)
        assert client.counters["nonfinite"] == 1 and client.counters["accepted"] == 2
        assert client.lost == 5  # sequences 2..6 never accepted
        # the robot clock estimate follows the stream
        assert abs(client.now() - robot_clock()) < 0.2
    finally:
        client.close()
        fake.close()


def test_command_stream_stops_robot_watchdog_damps(joint_map):
    timeout = 0.25  # tolerant of scheduling stalls while the commands still flow
    with robot_process("--command-timeout", str(timeout)) as (proc, port):
        client = UdpRobot(("127.0.0.1", port), joint_map)
        try:
            end = time.perf_counter() + 0.6
            while time.perf_counter() < end:  # a plain 200 Hz command stream, then silence
                client.write(stand_command(joint_map, client.read()))
                time.sleep(0.005)
            time.sleep(timeout + 0.5)
            status = client.status()
            samples = []
            end = time.perf_counter() + 0.2
            while time.perf_counter() < end:
                samples.append(client.read())
                time.sleep(0.01)
        finally:
            client.close()
            proc.send_signal(15)  # SIGTERM: the process prints its final status and exits
            out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "final_status" in out
    trips = status["watchdog_trips"]
    assert len(trips) == 1 and status["mode"] == "DAMPING"
    last = status["last_command_accepted_at"]
    assert last + timeout < trips[0] <= last + timeout + DT + 1e-9  # on the robot's clock
    assert all(m.robot_mode == RobotMode.DAMPING for m in samples)
    assert samples[-1].base_position[2] < 0.3  # sitting down (standing: 0.326)


def test_lossy_link_is_tolerated_then_cut_link_damps(joint_map):
    with robot_process("--command-timeout", "0.3", "--max-command-age", "0.3") as (_, port):
        proxy = UdpFaultProxy(("127.0.0.1", port), seed=2).start()
        for link in (proxy.to_robot, proxy.to_controller):
            link.drop, link.corrupt, link.truncate, link.jitter = 0.15, 0.05, 0.05, 0.003
        robot = UdpRobot(proxy.address, joint_map, max_measurement_age=0.3, connect_timeout=5)
        try:
            safety = SafetyLayer(joint_map, TOLERANT)
            controller = PoseController.standing(joint_map)
            result = control_loop.run(robot, controller, safety, duration=2.0, command_dt=DT)
            status = robot.status(timeout=3.0)
            # no trip while the loop ran (one may follow once it has stopped sending)
            end = np.nanmax(result.log["stamp"])
            assert all(trip > end for trip in status["watchdog_trips"]), (status, end)
            z = result.log["base_position"][:, 2]
            assert np.nanmin(z) > 0.31 and result.safety.mode is Mode.NORMAL
            # both ends saw, rejected and counted every kind of damage the link did
            t = status["transport"]
            assert t["bad_crc"] > 0 and t["truncated"] > 0 and t["out_of_order"] > 0
            assert status["lost_commands"] > 0
            c = robot.counters
            assert c["bad_crc"] > 0 and c["truncated"] > 0 and c["out_of_order"] > 0
            assert robot.lost > 0
            assert np.all(np.isfinite(result.log["q_target"]))

            # now the link to the robot goes dead: its watchdog damps, and the controller's
            # safety layer sees it in the measurements that still arrive
            proxy.to_robot.drop = 1.0
            result = control_loop.run(robot, controller, safety, duration=1.0, command_dt=DT)
            assert result.safety.log.first("robot_not_active") is not None
            assert result.log["robot_mode"][-1] == RobotMode.DAMPING
            assert np.all(result.log["kp"][-100:] == 0)
        finally:
            robot.shutdown_robot()
            robot.close()
            proxy.close()


def test_lockstep_over_udp_reproduces_the_in_process_run_exactly(joint_map):
    """`--lockstep`: the robot process simulates only on STEP, so the stand run over UDP is the
    same computation as with `MuJoCoRobot` in this process: identical logs, bit for bit (the
    wire carries float64). A STEP to a real-time robot is ignored and counted."""
    kwargs = dict(duration=0.6, control_dt=0.02, command_dt=DT)

    def stand(robot):
        return control_loop.run(
            robot, PoseController.standing(joint_map), SafetyLayer(joint_map, TOLERANT), **kwargs
        )

    local = stand(MuJoCoRobot(dynamics.load_robot("go2"), timestep=DT, command_timeout=0.1,
                              max_command_age=0.1))  # fmt: skip
    with robot_process("--lockstep") as (proc, port):
        robot = LockstepUdpRobot(("127.0.0.1", port), joint_map)
        try:
            remote = stand(robot)
            status = robot.status()
            robot.shutdown_robot()
            proc.wait(timeout=10)
        finally:
            robot.close()
    assert status["transport"]["steps"] == 300 and status["robot_time"] == pytest.approx(0.6)
    for key in ("t", "joint_q", "joint_qd", "base_position", "q_target"):
        np.testing.assert_array_equal(remote.log[key], local.log[key], err_msg=key)
    assert remote.safety.mode is Mode.NORMAL and robot.counters["accepted"] == 301

    with robot_process() as (proc, port):  # real time
        robot = UdpRobot(("127.0.0.1", port), joint_map, max_measurement_age=0.3)
        try:
            robot._send(wire.MessageType.STEP, timestamp=10.0, num_joints=0)
            status = robot.status()
            assert status["transport"]["ignored_steps"] == 1 and status["robot_time"] < 5
            robot.shutdown_robot()
        finally:
            robot.close()


class _SlowCallRobot(MuJoCoRobot):
    """MuJoCo Go2 whose every `advance` call costs `overhead` [s] of wall time, whatever its
    length (like one dispatch of a jitted rollout)."""

    overhead = 0.003  # > one 2 ms physics step

    def advance(self, duration: float) -> None:
        time.sleep(self.overhead)
        super().advance(duration)


def test_a_late_robot_process_catches_up_in_bursts():
    """A robot whose calls cost 3 ms each, against 2 ms steps, still keeps the wall clock: the
    server runs its backlog as one call (stepping once per call, it would reach only 2/3 of
    real time: 0.4 s in 0.6 s; the old loop reached 0.28 s) and publishes one measurement per
    burst."""
    robot = _SlowCallRobot(dynamics.load_robot("go2"), timestep=DT)
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        listener.bind(("127.0.0.1", 0))
        sock.bind(("127.0.0.1", 0))
        server = robot_server.RobotServer(robot, sock)
        server.subscribers.append(listener.getsockname())  # simulated time starts at once
        status = server.serve(max_lifetime=0.6)
    finally:
        listener.close()
        sock.close()
    counters = status["transport"]
    assert 0.5 <= status["robot_time"] <= 0.6 + DT, status["robot_time"]
    assert counters["late_bursts"] > 0
    # one measurement at the start and one per call, never one per step
    assert counters["sent"] < robot.steps
