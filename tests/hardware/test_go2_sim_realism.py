"""The simulated robots read like a Go2: foot forces, base-state source, and Unitree's stand
gains on a hoisted leg, on MuJoCo (`MuJoCoRobot`) and on this project's simulator (`SimRobot`).

Independent checks: the feet of a robot at rest carry its weight `m g` (Newton's second law),
a robot in free fall touches nothing, and the explicit 2 ms PD on a joint of inertia `I`
(link + reflected rotor inertia) is stable while `kd dt / I < 2`: with the rotor inertia
removed (`armature = 0`) the calf's `kd dt / I` exceeds 2 and the same gains oscillate.
"""

import dataclasses
import functools
import os
import subprocess
import time

import numpy as np
import pytest

import dynamics
from dynamics.configuration import State
from hardware.backends.jax_sim import SimRobot
from hardware.interface import GRAVITY, JointCommand

pytest.importorskip("mujoco")

from hardware.backends.mujoco_sim import MuJoCoRobot  # noqa: E402

BACKENDS = ("sim", "mujoco")
STAND_POSE = np.tile([0.0, 0.67, -1.3], 4)  # Unitree's stand example: hip, thigh, calf [rad]
HOIST_HEIGHT = 1.0  # [m] base height of a hoisted robot: its feet far from the floor


@functools.cache
def go2():
    return dynamics.load_robot("go2")


@functools.cache
def go2_without_rotor_inertia():
    model = go2()
    return dataclasses.replace(model, armature=np.zeros(model.nv))


def make_robot(backend, model, q0=None):
    """A simulated robot whose watchdog never trips during a test (one held command)."""
    if backend == "sim":
        robot = SimRobot(model, q0=q0, command_timeout=100.0)
    else:
        robot = MuJoCoRobot(model, q0=q0, command_timeout=100.0)
    return robot


def hold(robot, q_target, kp, kd):
    robot.write(
        JointCommand.create(q_target, kp, kd, timestamp=robot.now(), sequence=1, arm=True)
    )


def hoisted_q0(model, joints):
    q = np.asarray(model.q_standing, float).copy()
    q[2], q[7:] = HOIST_HEIGHT, joints
    return q


# --------------------------------------------------------------------------- foot forces
@pytest.mark.parametrize("backend", BACKENDS)
def test_feet_carry_the_weight_in_stance(backend):
    model = go2()
    robot = make_robot(backend, model)
    jm = robot.joint_map
    hold(robot, jm.q_default, jm.kp_default, jm.kd_default)
    robot.advance(0.5)
    m = robot.read()
    weight = float(np.sum(np.asarray(model.body_mass))) * GRAVITY
    assert m.foot_force.shape == (4,) and m.base_state_source == "ground_truth"
    assert np.all(m.foot_force > 0.1 * weight / 4), m.foot_force  # every foot in stance
    assert m.foot_force.sum() == pytest.approx(weight, rel=0.03), (m.foot_force, weight)
    # standing symmetric left/right: the two feet of an axle carry about the same
    assert m.foot_force[0] == pytest.approx(m.foot_force[1], rel=0.05)
    assert m.foot_force[2] == pytest.approx(m.foot_force[3], rel=0.05)


@pytest.mark.parametrize("backend", BACKENDS)
def test_feet_in_the_air_read_zero(backend):
    model = go2()
    robot = make_robot(backend, model, q0=hoisted_q0(model, model.q_standing[7:]))
    robot.advance(0.1)  # falling, still far above the floor
    m = robot.read()
    assert m.base_position[2] > 0.8
    np.testing.assert_array_equal(m.foot_force, np.zeros(4))


# --------------------------------------------------------------------------- hoisted leg PD
def hoist(robot, base_pose):
    """Put the base back at `base_pose` (its `q[0:7]`), at rest, after every step: the legs
    move as on a robot in free fall (no gravity load on the joints), the base stays where it
    is."""
    if isinstance(robot, MuJoCoRobot):
        qpos_adr, dof_adr = robot.base_joint_addresses()
        robot.data.qpos[qpos_adr : qpos_adr + 7] = base_pose[[0, 1, 2, 6, 3, 4, 5]]
        robot.data.qvel[dof_adr : dof_adr + 6] = 0.0
    else:
        q = np.asarray(robot.state.q).copy()
        v = np.asarray(robot.state.v).copy()
        q[0:7], v[0:6] = base_pose, 0.0
        robot.state = State(q, v)


def hoisted_leg_response(backend, model, kp, kd, seconds=0.5):
    """From the standing joint pose, hoisted: Unitree's stand gains toward `STAND_POSE`.
    Returns `(joint_q (K, nu), joint_tau (K, nu))` at every 2 ms step."""
    q0 = hoisted_q0(model, model.q_standing[7:])
    robot = make_robot(backend, model, q0=q0)
    hold(robot, STAND_POSE, kp, kd)
    qs, taus = [], []
    for _ in range(robot.steps_in(seconds)):
        robot.advance(robot.dt)
        hoist(robot, q0[0:7])
        m = robot.read()
        qs.append(m.joint_q)
        taus.append(m.joint_tau)
    return np.array(qs), np.array(taus)


def alternating_steps(tau, threshold=0.2):
    """Per joint, the number of steps whose torque [N m] flips sign against the step before,
    both above `threshold` in magnitude (a PD ringing at the step rate)."""
    big = np.abs(tau) > threshold
    flips = (np.sign(tau[1:]) != np.sign(tau[:-1])) & big[1:] & big[:-1]
    return flips.sum(axis=0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kd", [5.0, 3.0])
def test_unitree_stand_gains_hold_a_hoisted_leg(backend, kd):
    q, tau = hoisted_leg_response(backend, go2(), 60.0, kd)
    assert np.all(np.isfinite(q))
    assert np.max(np.abs(q[-1] - STAND_POSE)) < 0.05, q[-1] - STAND_POSE
    late = tau[len(tau) // 2 :]
    assert np.all(alternating_steps(late) == 0), alternating_steps(late)


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_rotor_inertia_the_same_gains_oscillate(backend):
    """The check that the test above can fail: the calf's own inertia about its axis is so small
    that `kd dt / I > 2` at kd 5, and the explicit PD rings at the step rate."""
    model = go2_without_rotor_inertia()
    q, tau = hoisted_leg_response(backend, model, 60.0, 5.0, seconds=0.2)
    calves = [2, 5, 8, 11]
    flips = alternating_steps(tau[:, calves])
    assert np.all(flips > 0.5 * len(tau)) or not np.all(np.isfinite(q)), flips


# --------------------------------------------------------------------------- over DDS
def _dds_available():
    try:
        import cyclonedds  # noqa: F401
    except ImportError:
        return False
    return True


needs_dds = pytest.mark.skipif(not _dds_available(), reason="the go2 extra (cyclonedds)")
_DOMAINS = iter(range(232 - 12 * (os.getpid() % 7) - 12, 232))  # apart from test_go2_dds's


def simulated_go2(*args):
    from hardware.go2 import sim

    domain = next(_DOMAINS)
    argv = ["--domain", str(domain), "--interface", "lo", "--max-lifetime", "60", *args]
    return domain, sim.spawn(argv, startup_timeout=60.0, stderr=subprocess.DEVNULL)


SETTLE_MS = 1000  # [ms] of robot time for the lying Go2 to come to rest


def settled_lowstates(domain, after_ms, count, timeout=60.0):
    """`count` LowState_ samples whose robot clock (`tick` [ms]) is past `after_ms`: the body
    has had that much simulated time to settle, however slowly a loaded host runs the
    simulation against the wall clock."""
    from hardware.go2 import dds
    from hardware.go2 import messages as msgs

    dds_domain, participant = dds.open_domain(domain, "lo")
    reader = dds.make_reader(participant, dds.TOPIC_LOWSTATE, msgs.LowState_, 64)
    out, end = [], time.perf_counter() + timeout
    while len(out) < count and time.perf_counter() < end:
        out += [s for s in dds.take(reader, msgs.LowState_) if s.tick > after_ms]
        time.sleep(0.005)
    del reader, participant, dds_domain
    assert len(out) >= count, f"{len(out)} samples past {after_ms} ms in {timeout} s"
    return out[:count]


def lowstates(domain, seconds):
    """The LowState_ samples heard on `domain` for `seconds` of wall time."""
    from hardware.go2 import dds
    from hardware.go2 import messages as msgs

    dds_domain, participant = dds.open_domain(domain, "lo")
    reader = dds.make_reader(participant, dds.TOPIC_LOWSTATE, msgs.LowState_, 64)
    out, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        out += dds.take(reader, msgs.LowState_)
        time.sleep(0.005)
    del reader, participant, dds_domain
    return out


@needs_dds
def test_a_lying_go2_reads_gravity_feet_battery_and_tick_before_any_command():
    from hardware.go2 import conversions
    from hardware.go2.crc import crc_ok

    domain, process = simulated_go2("--lying")
    with process:
        states = lowstates(domain, 1.5)
    assert len(states) > 50 and all(crc_ok(s) for s in states)
    ticks = np.array([s.tick for s in states])
    assert np.all(np.diff(ticks) >= 0) and ticks[-1] - ticks[0] > 500  # [ms], from the start
    last = states[-1]
    accel = np.array(last.imu_state.accelerometer)
    np.testing.assert_allclose(accel, [0.0, 0.0, GRAVITY], atol=0.05)  # lying level, at rest
    force = conversions.foot_newtons(last.foot_force)
    weight = float(np.sum(np.asarray(go2().body_mass))) * GRAVITY
    assert np.all(force > 0) and force.sum() <= 1.02 * weight  # resting on its folded legs
    assert list(last.foot_force_est) == list(last.foot_force)
    assert 27.0 < last.power_v < 29.0 and last.power_a > 0 and 0 < last.bms_state.soc <= 100
    temperatures = [m.temperature for m in last.motor_state[:12]]
    assert all(25 <= t <= 40 for t in temperatures)
    z = np.array([s.imu_state.quaternion for s in states])
    assert np.allclose(z[0], z[-1], atol=1e-3)  # it stays lying


@needs_dds
def test_imu_noise_gives_the_stated_noise_and_leaves_the_joints_exact():
    """`--imu-noise` on a Go2 lying at rest: the gyro's and accelerometer's sample-to-sample
    scatter is `SensorNoise.go2()`'s white noise (the difference of two independent samples
    has std sqrt(2) sigma; a constant bias cancels in it), the joint encoders are exact (the
    same as without the flag, at rest), and without the flag the IMU carries no noise.

    The samples are taken after `SETTLE_MS` of robot time (`tick`), not of wall time: on a
    loaded host the simulation runs slower than the wall clock, and 1.5 s of wall time once
    left the body still landing (0.9 m/s^2 of accelerometer scatter). Even settled the body is
    not perfectly still: the noise-free IMU may show its own motion `s_body`. Noise
    and motion are independent, so their variances add: the noisy scatter is
    `sqrt(sigma^2 + s_body^2)`, compared at 15 % (the std of 300 x 3 differences is known to
    about 3 %). Without the flag the scatter must stay below sigma / 4: white noise of the
    stated sigma could not, and the body's motion then shifts the noisy scatter by at most
    3 % (sqrt(1 + 1/16) - 1)."""
    from hardware.sensor_noise import SensorNoise

    noise = SensorNoise.go2()
    scatter = {}
    for flags in (("--lying",), ("--lying", "--imu-noise")):
        domain, process = simulated_go2(*flags)
        with process:
            states = settled_lowstates(domain, SETTLE_MS, 300)  # settled on the floor
        gyro = np.array([s.imu_state.gyroscope for s in states])
        accel = np.array([s.imu_state.accelerometer for s in states])
        joints = np.array([[m.q for m in s.motor_state[:12]] for s in states])
        scatter[flags[-1]] = (np.std(np.diff(gyro, axis=0)) / np.sqrt(2),
                              np.std(np.diff(accel, axis=0)) / np.sqrt(2),
                              np.max(np.abs(np.diff(joints, axis=0))))  # fmt: skip
    gyro_quiet, accel_quiet, _ = scatter["--lying"]
    gyro_noisy, accel_noisy, joint_step = scatter["--imu-noise"]
    assert gyro_quiet < noise.gyro_std / 4 and accel_quiet < noise.accelerometer_std / 4
    assert gyro_noisy == pytest.approx(np.hypot(noise.gyro_std, gyro_quiet), rel=0.15)
    assert accel_noisy == pytest.approx(np.hypot(noise.accelerometer_std, accel_quiet), rel=0.15)
    assert joint_step < 1e-3


@needs_dds
def test_the_sport_state_stops_at_the_release_and_the_client_reports_no_base_state():
    from hardware.go2.motion_switcher import release_sport_mode
    from hardware.go2.robot import Go2Robot
    from hardware.interface import JointMap

    joint_map = JointMap.from_model(go2())
    domain, process = simulated_go2("--sport-mode", "--lying")
    with process:
        robot = Go2Robot(joint_map, domain=domain, interface="lo", state_timeout=0.3)
        try:
            before = robot.wait_for_state(2.0)
            deadline = time.perf_counter() + 5.0
            while before.base_state_source is None and time.perf_counter() < deadline:
                time.sleep(0.01)
                before = robot.read()
            assert release_sport_mode(robot.participant) == "normal"
            time.sleep(0.6)  # longer than state_timeout
            count = robot.status()["counters"]["sport_states"]
            time.sleep(0.3)
            after = robot.read()
            still = robot.status()["counters"]["sport_states"] - count
        finally:
            robot.close()
    assert before.base_state_source == "sport_state" and before.base_linear_velocity is not None
    assert still == 0  # no sport state after the release
    assert after.base_linear_velocity is None and after.base_position is None
    assert after.base_state_source is None
    assert after.foot_force is not None and after.foot_force.sum() > 0
    assert after.motor_temperature is not None and np.all(after.motor_temperature >= 25)
