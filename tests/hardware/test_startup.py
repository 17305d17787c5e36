"""The start-up sequence (`hardware.startup`) and the sport-mode release
(`hardware.go2.motion_switcher`, `hardware.go2.sport_client`).

Pure logic first (the transition table, the buttons, every transition of `StartupSequence` on
synthetic measurements), then the sequence standing a lying Go2 up in MuJoCo, then, over DDS
against the simulated Go2 process (skipped without the go2 extra), Unitree's release order
(StandDown, then ReleaseMode until CheckMode reports no mode) and a stand-up started by a
remote button press on the wire."""

import json
import logging
import os
import subprocess

import numpy as np
import pytest

import dynamics
from hardware import control_loop
from hardware.interface import (
    JointCommand,
    JointMap,
    RobotMode,
    VelocityCommand,
    measurement_from_state,
)
from hardware.pose import PoseController
from hardware.safety import Mode, SafetyConfig, SafetyLayer
from hardware.startup import (
    MissingInputsError,
    Phase,
    RemoteButtons,
    Request,
    StartupSequence,
    decide,
    missing_inputs,
    requests_from_buttons,
    stand_up_command,
)

B = RemoteButtons()
LYING = (0.0, 1.36, -2.65)  # [rad] hip, thigh, calf of each leg (Unitree's stand example)


@pytest.fixture(scope="module")
def model():
    return dynamics.load_robot("go2")


@pytest.fixture(scope="module")
def joint_map(model):
    return JointMap.from_model(model)


def lying_q(model):
    q = np.asarray(model.q_standing, dtype=float).copy()
    q[2], q[7:] = 0.12, np.tile(LYING, 4)
    return q


def fake_measurement(model, t, joint_q=None, robot_mode=RobotMode.ACTIVE, **changes):
    q = np.asarray(model.q_standing, dtype=float).copy()
    if joint_q is not None:
        q[7:] = joint_q
    m = measurement_from_state(q, np.zeros(model.nv), timestamp=t, sequence=int(t * 50),
                               robot_mode=robot_mode)  # fmt: skip
    return m.replace(**changes) if changes else m


class Remote:
    """The remote's button bits, set by the test."""

    def __init__(self):
        self.bits = 0

    def __call__(self):
        return self.bits


class Inner:
    """An inner controller that records its resets and returns a recognisable command."""

    def __init__(self, joint_map):
        self.resets = []
        self.command = JointCommand.create(joint_map.q_default + 0.05, 33.0, 1.5)

    def reset(self, measurement):
        self.resets.append(measurement)

    def __call__(self, measurement, t, command):
        return self.command


class Driver:
    """Calls a sequence at 50 Hz on synthetic measurements, pressing buttons for one call."""

    def __init__(self, model, seq, remote):
        self.model, self.seq, self.remote, self.t = model, seq, remote, 0.0
        self.joint_q = lying_q(model)[7:]
        seq.reset(self.measurement())

    def measurement(self, **changes):
        return fake_measurement(self.model, self.t, self.joint_q, **changes)

    def step(self, bits=0, **changes):
        self.t += 0.02
        self.remote.bits = bits
        m = self.measurement(**changes)
        out = self.seq(m, self.t, VelocityCommand())
        self.remote.bits = 0
        return m, out

    def press(self, bits, **changes):
        """Press and release: two calls."""
        m, out = self.step(bits, **changes)
        self.step(0, **changes)
        return m, out


def sequence(joint_map, **kwargs):
    remote = Remote()
    inner = Inner(joint_map)
    seq = StartupSequence(inner, joint_map, buttons=remote, stand_duration=1.0, **kwargs)
    return seq, inner, remote


def reach(phase, model, joint_map):
    """A driver whose sequence is in `phase` (through the buttons)."""
    seq, inner, remote = sequence(joint_map)
    d = Driver(model, seq, remote)
    path = {
        Phase.PASSIVE: [],
        Phase.STAND_UP: [B.stand],
        Phase.HOLD: [B.stand, "wait"],
        Phase.CONTROLLER: [B.stand, "wait", B.controller],
        Phase.ESTOP: [B.estop],
    }[phase]
    for bits in path:
        if bits == "wait":
            for _ in range(55):
                d.step()
        else:
            d.press(bits)
    assert seq.phase is phase
    return d, seq, inner


# --------------------------------------------------------------------------- pure logic
P, S, H, C, E = Phase.PASSIVE, Phase.STAND_UP, Phase.HOLD, Phase.CONTROLLER, Phase.ESTOP
TABLE = {  # (phase, request) -> next phase, or None: refused
    (P, Request.STAND): S, (P, Request.CONTROLLER): None, (P, Request.STOP): None,
    (S, Request.STAND): None, (S, Request.CONTROLLER): None, (S, Request.STOP): P,
    (H, Request.STAND): None, (H, Request.CONTROLLER): C, (H, Request.STOP): P,
    (C, Request.STAND): None, (C, Request.CONTROLLER): None, (C, Request.STOP): H,
    (E, Request.STAND): None, (E, Request.CONTROLLER): None, (E, Request.STOP): None,
}  # fmt: skip


@pytest.mark.parametrize("phase, req", sorted(TABLE, key=str))
def test_transition_table(phase, req):
    target, refusal = decide(phase, req)
    expected = TABLE[phase, req]
    if expected is None:
        assert target is phase and refusal
    else:
        assert target is expected and refusal is None
    # the e-stop from every phase
    assert decide(phase, Request.ESTOP) == (Phase.ESTOP, None)


def test_guards_refuse_with_their_reasons():
    assert decide(P, Request.CONTROLLER)[1].startswith("stand up first")
    assert decide(E, Request.STAND)[1] == "the e-stop is latched"
    target, why = decide(P, Request.STAND, robot_active=False)
    assert target is P and "not active" in why
    target, why = decide(H, Request.CONTROLLER, inputs_error="needs base_linear_velocity")
    assert target is H and why == "needs base_linear_velocity"


def test_buttons_make_one_request_per_press_and_l2_b_is_the_estop():
    assert requests_from_buttons(B.stand, 0, B) == [Request.STAND]
    assert requests_from_buttons(B.stand, B.stand, B) == []  # held: no new press
    assert requests_from_buttons(B.stand | B.controller, B.stand, B) == [Request.CONTROLLER]
    assert requests_from_buttons(B.stop, 0, B) == [Request.STOP]
    l2, b = 1 << 5, 1 << 9
    assert requests_from_buttons(l2, 0, B) == [] and requests_from_buttons(b, 0, B) == []
    # L2 + B, also held, also with other buttons: the e-stop alone
    assert requests_from_buttons(l2 | b, l2 | b, B) == [Request.ESTOP]
    assert requests_from_buttons(l2 | b | B.stand, 0, B) == [Request.ESTOP]


def test_the_default_buttons_are_the_go2_remotes():
    pytest.importorskip("cyclonedds", reason="hardware.go2.conversions needs the go2 extra")
    from hardware.go2.conversions import Buttons
    from hardware.go2.robot import DEFAULT_ESTOP

    assert (B.stand, B.controller, B.stop) == (Buttons.START, Buttons.A, Buttons.SELECT)
    assert B.estop == DEFAULT_ESTOP == Buttons.L2 | Buttons.B


def test_missing_inputs_names_absent_fields_and_rejects_unknown_names(model):
    m = fake_measurement(model, 0.0).replace(base_linear_velocity=None)
    need = ["base_angular_velocity", "projected_gravity", "base_linear_velocity", "joint_q"]
    assert missing_inputs(need, m) == ["base_linear_velocity"]
    assert missing_inputs(["motor_temperature", "joint_qd"], m) == ["motor_temperature"]
    with pytest.raises(ValueError, match=r"\['base_speed'\] are not Measurement fields"):
        missing_inputs(["base_speed"], m)


def test_stand_up_command_interpolates_pose_and_ramps_kp(joint_map):
    q0, qs = np.zeros(joint_map.nu), joint_map.q_default
    kp, kd = joint_map.kp_default, joint_map.kd_default
    q, p, d = stand_up_command(q0, qs, kp, kd, 0.0, 0.25)
    np.testing.assert_allclose(q, q0) and np.testing.assert_allclose(p, 0.25 * kp)
    q, p, d = stand_up_command(q0, qs, kp, kd, 0.5, 0.25)  # smoothstep(0.5) = 0.5
    np.testing.assert_allclose(q, 0.5 * qs)
    np.testing.assert_allclose(p, (0.25 + 0.75 * 0.5) * kp)
    np.testing.assert_allclose(d, kd)
    q, p, _ = stand_up_command(q0, qs, kp, kd, 1.7, 0.25)
    np.testing.assert_allclose(q, qs) and np.testing.assert_allclose(p, kp)


# --------------------------------------------------------------------------- the sequence
def test_every_transition_through_the_buttons(model, joint_map):
    seq, inner, remote = sequence(joint_map)
    d = Driver(model, seq, remote)
    assert seq.phase is Phase.PASSIVE and len(inner.resets) == 1  # warm-up reset
    _, out = d.step()
    assert np.all(out.kp == 0) and np.all(out.kd > 0)  # damping

    # START: stand up from the measured pose, soft-start gains
    m, out = d.step(B.stand)
    assert seq.phase is Phase.STAND_UP
    np.testing.assert_allclose(out.q_target, m.joint_q)
    np.testing.assert_allclose(out.kp, 0.25 * joint_map.kp_default)
    t0 = d.t
    for _ in range(24):
        m, out = d.step()
    s = (d.t - t0) / 1.0
    q, kp, _ = stand_up_command(seq.q_start, joint_map.q_default, joint_map.kp_default,
                                joint_map.kd_default, s, 0.25)  # fmt: skip
    np.testing.assert_allclose(out.q_target, q) and np.testing.assert_allclose(out.kp, kp)
    assert 0 < s < 1 and not np.allclose(q, m.joint_q)
    # after the duration: HOLD by itself, the standing pose at full gains
    while seq.phase is Phase.STAND_UP:
        _, out = d.step()
    assert seq.phase is Phase.HOLD and d.t - t0 == pytest.approx(1.0, abs=0.021)
    np.testing.assert_allclose(out.q_target, joint_map.q_default)
    np.testing.assert_allclose(out.kp, joint_map.kp_default)

    # A: the controller, reset with the measurement of that moment
    m, out = d.step(B.controller)
    assert seq.phase is Phase.CONTROLLER and out is inner.command
    assert len(inner.resets) == 2 and inner.resets[-1] is m
    d.step()
    # SELECT: back to HOLD; SELECT again: PASSIVE (damping)
    _, out = d.press(B.stop)
    assert seq.phase is Phase.HOLD
    np.testing.assert_allclose(out.q_target, joint_map.q_default)
    _, out = d.press(B.stop)
    assert seq.phase is Phase.PASSIVE and np.all(out.kp == 0)
    # STAND_UP -> PASSIVE by SELECT too
    d.press(B.stand)
    d.press(B.stop)
    assert seq.phase is Phase.PASSIVE
    assert seq.phases() == [P, S, H, C, H, P, S, P] and not seq.refusals()


def test_controller_without_standing_up_is_refused_and_logged(model, joint_map, caplog):
    seq, inner, remote = sequence(joint_map)
    d = Driver(model, seq, remote)
    with caplog.at_level(logging.WARNING, logger="hardware.startup"):
        _, out = d.press(B.controller)
    assert seq.phase is Phase.PASSIVE and np.all(out.kp == 0)
    assert len(inner.resets) == 1  # only the warm-up: never entered
    (refusal,) = seq.refusals()
    assert refusal.source is refusal.target is Phase.PASSIVE
    assert refusal.reason.startswith("controller (remote) refused: stand up first")
    assert any("stand up first" in r.getMessage() for r in caplog.records)
    # the same from software, and while standing up
    assert not seq.request(Request.CONTROLLER, d.measurement(), d.t)
    d.press(B.stand)
    _, out = d.press(B.controller)
    assert seq.phase is Phase.STAND_UP and out is not inner.command


@pytest.mark.parametrize("phase", [P, S, H, C, E])
def test_l2_b_is_the_latched_estop_from_every_phase(phase, model, joint_map):
    d, seq, inner = reach(phase, model, joint_map)
    _, out = d.press(B.estop)
    assert seq.phase is Phase.ESTOP and np.all(out.kp == 0) and np.all(out.kd > 0)
    resets = len(inner.resets)
    for bits in (B.stand, B.controller, B.stop):  # latched: everything refused
        _, out = d.press(bits)
        assert seq.phase is Phase.ESTOP and np.all(out.kp == 0)
    assert all("latched" in r.reason for r in seq.refusals()[-3:])
    assert len(inner.resets) == resets

    class Safety:
        reasons = []

        def estop(self, now, reason):
            self.reasons.append(reason)

    class Robot:
        def now(self):
            return 1.0

    seq.on_tick(0.0, Safety(), Robot())
    assert Safety.reasons == ["start-up sequence e-stop"]


def test_the_robots_estop_and_damping_are_followed(model, joint_map):
    d, seq, _ = reach(Phase.HOLD, model, joint_map)
    d.step(robot_mode=RobotMode.DAMPING)  # the robot's own watchdog
    assert seq.phase is Phase.PASSIVE
    _, out = d.press(B.stand, robot_mode=RobotMode.DAMPING)  # drivers not armed: refused
    assert seq.phase is Phase.PASSIVE and "not active" in seq.refusals()[-1].reason
    d.step(robot_mode=RobotMode.ESTOP)
    assert seq.phase is Phase.ESTOP


def test_missing_inputs_refuse_the_controller_and_losing_one_returns_to_hold(model, joint_map):
    seq, inner, remote = sequence(joint_map, required_inputs=("base_linear_velocity", "joint_q"),
                                  backend="TestRobot")  # fmt: skip
    d = Driver(model, seq, remote)
    d.press(B.stand)
    for _ in range(55):
        d.step()
    _, out = d.press(B.controller, base_linear_velocity=None)
    assert seq.phase is Phase.HOLD and len(inner.resets) == 1
    reason = seq.refusals()[-1].reason
    assert "base_linear_velocity" in reason and "TestRobot" in reason
    d.press(B.controller)
    assert seq.phase is Phase.CONTROLLER
    _, out = d.step(base_linear_velocity=None)  # the estimate went away
    assert seq.phase is Phase.HOLD and out is not inner.command
    assert seq.transitions[-1].reason.startswith("inputs lost")


class RecordingRobot:
    """A robot that always reads `measurement` and records writes (never arms anything)."""

    def __init__(self, joint_map, measurement):
        self.joint_map, self.m, self.writes, self.t = joint_map, measurement, [], 0.0

    def read(self):
        return self.m.replace(timestamp=self.t)

    def write(self, command):
        self.writes.append(command)

    def now(self):
        return self.t

    def advance(self, duration):
        self.t += duration

    def close(self):
        pass


def test_missing_input_is_refused_before_arming(model, joint_map):
    m = fake_measurement(model, 0.0, robot_mode=RobotMode.DAMPING, base_linear_velocity=None,
                         base_position=None, base_state_source=None)  # fmt: skip
    robot = RecordingRobot(joint_map, m)
    inner = Inner(joint_map)
    seq = StartupSequence(inner, joint_map, required_inputs=("joint_q", "base_linear_velocity"),
                          backend="RecordingRobot")  # fmt: skip
    safety = SafetyLayer(joint_map)
    with pytest.raises(MissingInputsError, match="needs base_linear_velocity, which the "
                       "backend RecordingRobot does not provide"):  # fmt: skip
        control_loop.run(robot, seq, safety, duration=0.1)
    assert robot.writes == [] and safety.mode is Mode.IDLE and inner.resets == []
    with pytest.raises(ValueError, match="not Measurement fields"):
        StartupSequence(inner, joint_map, required_inputs=("velocity",))


# --------------------------------------------------------------------------- physics
def test_stands_a_lying_go2_up_holds_runs_the_controller_and_estops_in_mujoco(model, joint_map):
    pytest.importorskip("mujoco")
    from hardware.backends.mujoco_sim import MuJoCoRobot

    robot = MuJoCoRobot(model, q0=lying_q(model))
    presses = [(0.4, B.stand), (2.2, B.controller), (3.0, B.stop), (3.6, B.estop)]

    def buttons():
        t = robot.now()
        return next((bits for start, bits in presses if start <= t < start + 0.1), 0)

    crouch = joint_map.q_default + np.tile([0.0, 0.15, -0.3], 4)  # a lower stance
    seq = StartupSequence(PoseController(crouch, joint_map.kp_default, joint_map.kd_default),
                          joint_map, buttons=buttons, stand_duration=1.2)  # fmt: skip
    safety = SafetyLayer(joint_map, SafetyConfig(soft_start_duration=0.2))
    result = control_loop.run(robot, seq, safety, duration=4.0, control_dt=0.02,
                              command_dt=0.002, on_tick=seq.on_tick)  # fmt: skip
    t, z = result.log["t"], result.log["base_position"][:, 2]
    assert seq.phases() == [P, S, H, C, H, E] and not seq.refusals()
    enter = {}
    for tr in seq.transitions:
        enter.setdefault(tr.target, tr.t)  # the first entry of each phase
    assert enter[S] == pytest.approx(0.4, abs=0.021)
    assert enter[H] == pytest.approx(enter[S] + 1.2, abs=0.021)
    lying, standing = z[t < 0.4].mean(), z[(t > 2.0) & (t < 2.2)].mean()
    crouched = z[(t > 2.8) & (t < 3.0)].mean()
    assert lying < 0.15 and standing > 0.25  # stood up
    assert 0.02 < standing - crouched < 0.1  # the inner controller's lower stance
    assert safety.mode is Mode.ESTOP and np.all(result.log["kp"][t > 3.65] == 0)
    assert z[-1] < standing - 0.03  # sinking under damping


# --------------------------------------------------------------------------- release
def test_release_sequence_follows_unitrees_order_until_no_mode_is_active():
    pytest.importorskip("cyclonedds", reason="hardware.go2 needs the go2 extra")
    from hardware.go2.motion_switcher import release_sequence

    calls, modes = [], iter(["normal", "normal", "normal", ""])

    def check():
        calls.append("CheckMode")
        return next(modes)

    def stand_down():
        calls.append("StandDown")
        return 0

    def release():
        calls.append("ReleaseMode")
        return 0

    pauses = []
    report = release_sequence(check, stand_down, release, pause=1.0, sleep=pauses.append)
    rounds = ["CheckMode", "StandDown", "ReleaseMode"]
    assert calls == rounds * 3 + ["CheckMode"] and pauses == [1.0] * 3
    assert report.released == "normal" and report.stand_down_codes == [0, 0, 0]
    # nothing active: no StandDown, no ReleaseMode
    calls.clear()
    assert release_sequence(lambda: "", stand_down, release).released == ""
    assert calls == []
    # a mode that stays: TimeoutError naming it
    clock = iter(np.arange(0.0, 100.0, 1.0))
    with pytest.raises(TimeoutError, match="'ai' is still active"):
        release_sequence(lambda: "ai", stand_down, release, timeout=3.0, sleep=lambda s: None,
                         clock=lambda: next(clock))  # fmt: skip


_DOMAINS = iter(range(232 - 3 * (os.getpid() % 19) - 3, 233))


def simulated_go2(*args):
    pytest.importorskip("cyclonedds", reason="the go2 extra is not installed")
    pytest.importorskip("mujoco")
    from hardware.go2 import sim

    argv = ["--interface", "lo", "--max-lifetime", "60", "--command-timeout", "0.3", *args]
    return sim.spawn(argv, startup_timeout=60.0, stderr=subprocess.DEVNULL)


def final_status(proc) -> dict:
    proc.send_signal(15)
    out, _ = proc.communicate(timeout=15)
    assert proc.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])["final_status"]


def test_release_against_the_simulated_go2_over_dds():
    domain = next(_DOMAINS)
    with simulated_go2("--domain", str(domain), "--sport-mode", "--freeze") as proc:
        from hardware.go2.dds import open_domain
        from hardware.go2.motion_switcher import release_sport_mode
        from hardware.go2.sport_client import RPC_ERR_CLIENT_API_TIMEOUT, SportClient

        dds_domain, participant = open_domain(domain, "lo")
        released = release_sport_mode(participant, timeout=20.0, pause=0.2, call_timeout=5.0)
        # the sport service is gone after the release: nothing answers StandDown
        late = SportClient(participant, timeout=2.0).stand_down()
        final = final_status(proc)
        del participant, dds_domain
    assert released == "normal" and late == RPC_ERR_CLIENT_API_TIMEOUT
    assert not final["sport_mode"] and final["transport"]["stand_down"] == 1
    assert [tuple(c) for c in final["rpc_log"]] == [
        ("motion_switcher", 1001, 0),  # CheckMode: "normal"
        ("sport", 1005, 0),  # StandDown, answered
        ("motion_switcher", 1003, 0),  # ReleaseMode
        ("motion_switcher", 1001, 0),  # CheckMode: ""
        ("sport", 1005, 3104),  # the late StandDown: unanswered
    ]


def test_a_start_press_on_the_remote_stands_the_simulated_go2_up_over_dds(model, joint_map):
    """START held on the simulated remote (sim time 2.0-2.5 s, after the client is up even
    when the simulated Go2 runs slower than real time on a loaded machine) reaches
    `Go2Robot.buttons` and stands it up."""
    domain = next(_DOMAINS)
    start = str(int(B.stand))
    q0 = json.dumps(lying_q(model).tolist())
    with simulated_go2("--domain", str(domain), "--q0", q0, "--press", "2.0", "0.5", start) as p:
        from hardware.go2.robot import Go2Robot

        robot = Go2Robot(joint_map, domain=domain, interface="lo", command_timeout=0.3,
                         state_timeout=0.3, max_command_age=0.3)  # fmt: skip
        try:
            seq = StartupSequence(PoseController.standing(joint_map), joint_map,
                                  buttons=lambda: robot.buttons, stand_duration=0.8,
                                  backend="Go2Robot")  # fmt: skip
            safety = SafetyLayer(joint_map, SafetyConfig(soft_start_duration=0.05,
                                 command_timeout=0.3, measurement_timeout=0.3))  # fmt: skip
            control_loop.run(robot, seq, safety, duration=6.0, on_tick=seq.on_tick)
        finally:
            robot.close()
        final = final_status(p)
    assert seq.phases() == [P, S, H] and not seq.refusals()
    assert seq.transitions[0].reason == "stand (remote)"
    h = final["history"]
    t, z, buttons = np.array(h["t"]), np.array(h["z"]), np.array(h["buttons"])
    pressed = t[buttons > 0]
    assert pressed.size and abs(pressed[0] - 2.0) < 0.03  # on the robot's clock
    assert z[t < 2.0].max() < 0.15 and z.max() > 0.25  # lying until the press, then standing
