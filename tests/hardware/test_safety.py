"""The safety layer and the robot-side drivers on synthetic measurements (no simulation).

Each test drives `SafetyLayer.observe/command` (or `MotorDriver`) tick by tick with a Go2 joint
map and checks the safe outcome of one fault: what is written, the mode, the event log.
"""

import logging

import numpy as np
import pytest

import dynamics
from hardware.interface import JointCommand, JointMap, RobotMode, measurement_from_state
from hardware.motor import MotorDriver
from hardware.safety import (
    Mode,
    SafetyConfig,
    SafetyLayer,
    limit_torque,
    rate_limit,
)

DT = 0.002  # command period of these tests [s]


@pytest.fixture(scope="module")
def joint_map():
    return JointMap.from_model(dynamics.load_robot("go2"))


@pytest.fixture(scope="module")
def q_stand():
    return np.asarray(dynamics.load_robot("go2").q_standing, dtype=float)


def measure(q_full, t, qd=None, mode=RobotMode.ACTIVE, seq=0):
    v = np.zeros(18)
    if qd is not None:
        v[6:] = qd
    return measurement_from_state(q_full, v, timestamp=t, sequence=seq, robot_mode=mode)


def stand_command(joint_map, **changes):
    c = JointCommand.create(joint_map.q_default, joint_map.kp_default, joint_map.kd_default)
    return c.replace(**changes)


def started(joint_map, q_stand, config=None, t0=0.0):
    """A layer past its soft start (NORMAL), having run `stand_command` until t0 + 0.1 s."""
    safety = SafetyLayer(joint_map, config or SafetyConfig(soft_start_duration=0.05))
    safety.start(t0, measure(q_stand, t0))
    t = t0
    for _ in range(50):
        safety.observe(t, measure(q_stand, t))
        safety.command(t, stand_command(joint_map))
        t += DT
    assert safety.mode is Mode.NORMAL
    return safety, t


def test_soft_start_blends_from_the_measured_pose_and_arms(joint_map, q_stand):
    q0 = q_stand.copy()
    q0[7:] += 0.2  # the robot starts away from the pose the controller wants
    cfg = SafetyConfig(soft_start_duration=0.5, max_target_rate=100.0)
    safety = SafetyLayer(joint_map, cfg)
    safety.start(0.0, measure(q0, 0.0))
    targets, arms = [], []
    for k in range(400):
        t = k * DT
        safety.observe(t, measure(q0, t))
        out = safety.command(t, stand_command(joint_map))
        targets.append(out.q_target)
        arms.append(out.arm)
    targets = np.array(targets)
    np.testing.assert_allclose(targets[0], q0[7:])  # starts at the measured pose
    np.testing.assert_allclose(targets[-1], joint_map.q_default)  # ends at the command
    mid = targets[125]  # t = 0.25 s, half way: smoothstep(0.5) = 0.5
    np.testing.assert_allclose(mid, 0.5 * (q0[7:] + joint_map.q_default), atol=1e-9)
    assert all(arms[:250]) and not any(arms[251:])  # arm only during the soft start
    assert safety.mode is Mode.NORMAL


def test_nan_command_is_never_written_and_the_last_valid_one_is_held(joint_map, q_stand):
    safety, t = started(joint_map, q_stand)
    before = safety.command(t, None)
    bad = stand_command(joint_map)
    q_bad = bad.q_target.copy()
    q_bad[4] = np.nan
    for field in ("q_target", "kp", "tau_ff"):
        value = getattr(bad, field).copy()
        value[2] = np.inf if field == "kp" else np.nan
        out = safety.command(t, bad.replace(**{field: value}))
        assert out.is_finite()
        np.testing.assert_allclose(out.q_target, before.q_target)
        np.testing.assert_allclose(out.kp, before.kp)
    assert safety.counters["command_invalid"] == 3
    assert "non-finite" in safety.log.first("command_invalid").detail
    assert safety.mode is Mode.NORMAL


def test_only_invalid_commands_time_out_into_damping(joint_map, q_stand):
    cfg = SafetyConfig(soft_start_duration=0.05, command_timeout=0.1)
    safety, t = started(joint_map, q_stand, cfg)
    last_valid = t - DT
    nan = stand_command(joint_map, kd=np.full(12, np.nan))
    outs = []
    while t < last_valid + 0.2:
        safety.observe(t, measure(q_stand, t))
        outs.append((t, safety.command(t, nan)))
        t += DT
    damped = [tt for tt, o in outs if np.all(o.kp == 0)]
    # damping from the first tick past the timeout, within one command period of it
    assert last_valid + 0.1 < damped[0] <= last_valid + 0.1 + DT + 1e-12
    assert all(np.all(o.kd == joint_map.kd_default) for tt, o in outs if tt >= damped[0])
    assert safety.mode is Mode.DAMPING
    assert safety.log.first("damping").detail == "after command_timeout"


def test_targets_beyond_joint_limits_are_clipped(joint_map, q_stand):
    safety, t = started(joint_map, q_stand, SafetyConfig(soft_start_duration=0.05))
    wild = stand_command(joint_map, q_target=joint_map.q_default + np.array([5.0, -5.0, 5.0] * 4))
    for _ in range(2000):  # 4 s: the rate limiter lets the target travel all the way
        safety.observe(t, measure(q_stand, t))
        out = safety.command(t, wild)
        assert np.all(out.q_target >= joint_map.lower) and np.all(out.q_target <= joint_map.upper)
        t += DT
    bounds = np.where(wild.q_target > joint_map.upper, joint_map.upper, joint_map.lower)
    # the torque limit keeps the target near the (unmoving) measured pose, never beyond limits
    assert np.all(np.abs(out.q_target - q_stand[7:]) <= np.abs(bounds - q_stand[7:]) + 1e-12)
    assert set(safety.log.first("position_clipped").joints) == set(range(12))
    assert "torque_limited" in safety.log.kinds()


def test_rate_limit_on_targets(joint_map, q_stand):
    cfg = SafetyConfig(soft_start_duration=0.05, max_target_rate=2.0)
    safety, t = started(joint_map, q_stand, cfg)
    step_cmd = stand_command(joint_map, q_target=joint_map.q_default + 0.5, kp=np.ones(12))
    previous = safety.command(t, None).q_target
    for _ in range(10):
        t += DT
        safety.observe(t, measure(q_stand, t))
        out = safety.command(t, step_cmd)
        np.testing.assert_allclose(out.q_target - previous, 2.0 * DT, rtol=1e-9)
        previous = out.q_target
    assert safety.log.first("rate_limited").count == 10
    for bad in (0.0, -1.0, np.r_[np.ones(11), 0.0]):  # a zero rate would freeze the targets
        with pytest.raises(ValueError, match="max_target_rate"):
            SafetyConfig(max_target_rate=bad)


def test_rate_limit_and_torque_limit_functions():
    q, step = rate_limit(np.array([1.0, -1.0, 0.05]), np.zeros(3), 0.1)
    np.testing.assert_allclose(q, [0.1, -0.1, 0.05])
    np.testing.assert_array_equal(step, [True, True, False])
    kp = np.array([100.0, 100.0, 0.0])  # joint 2: feed-forward only, q* cannot fix it
    c = JointCommand.create(np.array([1.0, -1.0, 0.0]), kp, 1.0, tau_ff=np.array([0, 0, 50.0]))
    limited, over = limit_torque(c, np.zeros(3), np.zeros(3), np.full(3, 20.0))
    np.testing.assert_allclose(limited.torque(np.zeros(3), np.zeros(3)), [20.0, -20.0, 50.0])
    np.testing.assert_allclose(limited.q_target, [0.2, -0.2, 0.0])
    np.testing.assert_array_equal(over, [True, True, True])  # flagged (the drivers clip it)


def test_gains_are_bounded_and_negative_gains_rejected(joint_map, q_stand):
    safety, t = started(joint_map, q_stand)
    out = safety.command(t, stand_command(joint_map, kp=np.full(12, 1e6)))
    np.testing.assert_allclose(out.kp, 4.0 * joint_map.kp_default)
    out = safety.command(t, stand_command(joint_map, kd=-np.ones(12)))
    assert safety.log.first("command_invalid").detail == "negative gains"
    np.testing.assert_allclose(out.kd, joint_map.kd_default)  # the previous valid command


def test_stale_and_missing_measurements_lead_to_damping(joint_map, q_stand):
    cfg = SafetyConfig(soft_start_duration=0.05, measurement_timeout=0.05)
    safety, t = started(joint_map, q_stand, cfg)
    sample_time = t - DT  # the robot's samples stop advancing (a delayed or frozen stream)
    frozen = measure(q_stand, sample_time)
    accepted = []
    while t < sample_time + 0.1:
        accepted.append(safety.observe(t, frozen))
        safety.command(t, stand_command(joint_map))
        t += DT
    assert accepted[0] and not accepted[-1]
    first_damping = safety.log.first("damping").start
    assert sample_time + 0.05 < first_damping <= sample_time + 0.05 + DT + 1e-12
    assert safety.log.first("measurement_stale") is not None
    assert safety.mode is Mode.DAMPING
    # garbage measurements are rejected, not used
    nan_m = measure(q_stand, t).replace(joint_q=np.full(12, np.nan))
    assert not safety.observe(t, nan_m)
    assert not safety.observe(t, None)
    assert {"measurement_invalid", "measurement_missing"} <= safety.log.kinds()


def test_measured_state_violations_damp(joint_map, q_stand):
    safety, t = started(joint_map, q_stand)
    qd = np.zeros(12)
    qd[5] = 2.0 * joint_map.velocity_limit[5]
    safety.observe(t, measure(q_stand, t, qd=qd))
    out = safety.command(t, stand_command(joint_map))
    assert np.all(out.kp == 0) and safety.mode is Mode.DAMPING
    assert safety.log.first("joint_velocity_violation").joints == (5,)

    safety, t = started(joint_map, q_stand)
    q = q_stand.copy()
    q[7 + 2] = joint_map.lower[2] - 0.5
    safety.observe(t, measure(q, t))
    safety.command(t, stand_command(joint_map))
    assert safety.log.first("joint_position_violation").joints == (2,)


def test_robot_side_damping_is_followed_and_estop_latches(joint_map, q_stand):
    safety, t = started(joint_map, q_stand)
    safety.observe(t, measure(q_stand, t, mode=RobotMode.DAMPING))
    assert np.all(safety.command(t, stand_command(joint_map)).kp == 0)
    assert safety.log.first("robot_not_active") is not None
    safety.resume(t, measure(q_stand, t))  # operator resumes: soft start again
    assert safety.mode is Mode.SOFT_START
    safety.estop(t, "button")
    safety.resume(t, measure(q_stand, t))
    for _ in range(10):
        t += DT
        safety.observe(t, measure(q_stand, t))
        out = safety.command(t, stand_command(joint_map))
        assert np.all(out.kp == 0) and not out.arm
    assert safety.mode is Mode.ESTOP
    assert {"estop", "resume_refused"} <= safety.log.kinds()


def test_events_merge_over_ticks_and_are_logged(joint_map, q_stand, caplog):
    safety, t = started(joint_map, q_stand)
    nan = stand_command(joint_map, q_target=np.full(12, np.nan))
    with caplog.at_level(logging.WARNING, logger="hardware.safety"):
        for _ in range(5):
            safety.observe(t, measure(q_stand, t))
            safety.command(t, nan)
            t += DT
    (event,) = [e for e in safety.events if e.kind == "command_invalid"]
    assert event.count == 5 and event.end == pytest.approx(event.start + 4 * DT)
    assert sum("command_invalid" in r.getMessage() for r in caplog.records) == 1


# --------------------------------------------------------------------------- drivers
def test_driver_watchdog_trips_after_timeout_and_latches(joint_map):
    driver = MotorDriver(joint_map, command_timeout=0.1, max_command_age=0.05)
    q = joint_map.q_default
    c = stand_command(joint_map, timestamp=0.0, sequence=1, arm=True)
    assert driver.submit(c, 0.0) is None and driver.mode is RobotMode.ACTIVE
    np.testing.assert_allclose(driver.active_command(q, 0.1).kp, joint_map.kp_default)
    assert driver.mode is RobotMode.ACTIVE  # exactly at the timeout: not yet
    tau = driver.torque(q + 0.1, np.ones(12), 0.1 + 1e-6)
    assert driver.mode is RobotMode.DAMPING and driver.trip_times == [0.1 + 1e-6]
    np.testing.assert_allclose(tau, -joint_map.kd_default * 1.0)  # damping only
    # commands without arm do not leave the latched damping; with arm they do
    driver.submit(c.replace(timestamp=0.2, sequence=2, arm=False), 0.2)
    assert driver.mode is RobotMode.DAMPING
    driver.submit(c.replace(timestamp=0.2, sequence=3, arm=True), 0.2)
    assert driver.mode is RobotMode.ACTIVE


def test_driver_rejects_bad_commands_and_clips_targets(joint_map):
    driver = MotorDriver(joint_map, max_command_age=0.05)
    good = stand_command(joint_map, timestamp=1.0, sequence=10, arm=True)
    assert driver.submit(good, 1.0) is None
    cases = {
        "rejected_nonfinite": good.replace(sequence=11, tau_ff=np.full(12, np.nan)),
        "rejected_gains": good.replace(sequence=12, kp=-np.ones(12)),
        "rejected_out_of_order": good.replace(sequence=10),
        "rejected_stale": good.replace(sequence=13, timestamp=0.9),
        "rejected_shape": good.replace(sequence=14, kd=np.ones(3)),
    }
    for kind, command in cases.items():
        assert driver.submit(command, 1.0) == kind
        assert driver.counters[kind] == 1
    assert driver.command is good  # nothing rejected was applied
    beyond = good.replace(sequence=20, q_target=joint_map.upper + 1.0)
    assert driver.submit(beyond, 1.0) is None
    np.testing.assert_allclose(driver.command.q_target, joint_map.upper)
    assert driver.counters["clipped_targets"] == 1
    driver.estop(1.0)
    assert driver.submit(good.replace(sequence=21), 1.0) == "rejected_estop"
    assert np.all(driver.active_command(joint_map.q_default, 1.0).kp == 0)


def test_the_compiled_shaping_is_numpys_to_the_bit(joint_map, q_stand):
    """`arithmetic="c"` (`hardware/safety_shape.c`) and `"numpy"` fed the same commands, through
    the soft start and on: random targets beyond the limits, zero and huge gains, large
    feed-forward torques, jumps the rate limit holds back, measured joints moving: every
    output array is the same to the bit, and the same events are logged in the same order."""
    from native import c_library

    if not c_library.compiler_available():
        pytest.skip("no C compiler")
    rng = np.random.default_rng(7)
    config = dict(soft_start_duration=0.1, max_roll=None, max_pitch=None)
    compiled = SafetyLayer(joint_map, SafetyConfig(arithmetic="c", **config))
    reference = SafetyLayer(joint_map, SafetyConfig(arithmetic="numpy", **config))
    assert compiled.kernel is not None and reference.kernel is None
    nu = joint_map.nu
    t = 0.0
    for layer in (compiled, reference):
        layer.start(t, measure(q_stand, t))
    for k in range(400):
        t += DT
        q = q_stand.copy()
        q[7:] += rng.normal(0.0, 0.05, nu)
        m = measure(q, t, qd=rng.normal(0.0, 2.0, nu), seq=k + 1)
        command = JointCommand(
            q_target=joint_map.q_default + rng.normal(0.0, 1.5, nu),
            qd_target=rng.normal(0.0, 40.0, nu),
            kp=rng.choice([0.0, 30.0, 1e4], nu),  # negative gains are refused before shaping
            kd=rng.choice([0.5, 1e3], nu),
            tau_ff=rng.normal(0.0, 60.0, nu),
        )
        outputs = []
        for layer in (compiled, reference):
            assert layer.observe(t, m)
            outputs.append(layer.command(t, command if k % 3 else None))
        a, b = outputs
        for name in JointCommand.ARRAYS:
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
        assert (a.arm, a.sequence, a.timestamp) == (b.arm, b.sequence, b.timestamp)
    assert compiled.mode is reference.mode is Mode.NORMAL
    events = [[(e.kind, e.detail, e.count) for e in s.events] for s in (compiled, reference)]
    assert events[0] == events[1]
    kinds = {kind for kind, _, _ in events[0]}
    assert {"position_clipped", "velocity_clipped", "gain_clipped", "feedforward_clipped",
            "rate_limited", "torque_limited", "soft_start_done"} <= kinds  # fmt: skip
    import pickle  # a layer crosses processes with its run's result: its kernel too

    again = pickle.loads(pickle.dumps(compiled))
    t += DT
    for layer in (again, reference):
        layer.observe(t, m)
    a, b = again.command(t, command), reference.command(t, command)
    np.testing.assert_array_equal(a.q_target, b.q_target)


def test_an_unknown_safety_arithmetic_is_refused():
    with pytest.raises(ValueError, match="arithmetic"):
        SafetyConfig(arithmetic="fortran")
