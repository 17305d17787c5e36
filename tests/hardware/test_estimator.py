"""The state estimator against MuJoCo's ground truth, with Go2 sensor noise.

The robot walks under the shipped omnidirectional policy (`examples/policies/go2_omni`) fed
with MuJoCo's TRUE base state (the estimator is under test, not the policy): it stands for
`STAND` s under the standing pose (the estimator starts once all feet are down), then the
policy runs. Velocity errors are RMS over time of the norm of the 3-vector (all three
base-frame components together).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import dynamics
from hardware import control_loop
from hardware.backends.mujoco_sim import MuJoCoRobot
from hardware.estimated_robot import EstimatedRobot
from hardware.estimator import (
    NY,
    EstimatorConfig,
    StateEstimator,
    phase_contact_weight,
)
from hardware.interface import RobotMode
from hardware.leg_kinematics import (
    CompiledLegKinematics,
    NumpyLegKinematics,
    PinocchioLegKinematics,
    kinematic_tree,
)
from hardware.pose import PoseController
from hardware.safety import Mode, SafetyConfig, SafetyLayer
from hardware.sensor_noise import NoisySensors, SensorNoise

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POLICY = os.path.join(ROOT, "examples", "policies", "go2_omni")
STAND = 0.5  # [s] standing pose before the policy starts
OMNI_TOUR = ((0.5, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 0.5, 0.0), (-1.0, 0.0, 0.0),
             (0.0, -0.5, 0.0), (0.0, 0.0, 1.0), (0.0, 0.0, -1.0), (1.0, 0.5, 1.0),
             (-1.0, -0.5, -1.0), (0.5, -0.3, 0.5), (0.0, 0.0, 0.0))  # fmt: skip


@pytest.fixture(scope="module")
def model():
    return dynamics.load_robot("go2")


# --------------------------------------------------------------------------- kinematics
def test_numpy_kinematics_matches_pinocchio(model):
    numpy_kin, pin_kin = NumpyLegKinematics(model), PinocchioLegKinematics(model)
    rng = np.random.default_rng(0)
    q0 = np.asarray(model.q_standing)[7:]
    for _ in range(5):
        q = q0 + rng.uniform(-0.5, 0.5, model.nu)
        p_a, j_a = numpy_kin(q)
        p_b, j_b = pin_kin(q)
        np.testing.assert_allclose(p_a, p_b, atol=1e-9)
        np.testing.assert_allclose(j_a, j_b, atol=1e-9)


@pytest.mark.parametrize("robot", ["go2", "anymal_c", "solo12", "hyq"])
def test_compiled_kinematics_match_pinocchio(robot):
    """`leg_kinematics.c` against Pinocchio's C++ on robots whose joint axes and placements
    differ (x/y axes, rotated hips), over the joints' whole range: equal to rounding."""
    from native import c_library

    if not c_library.compiler_available():
        pytest.skip("no C compiler")
    m = dynamics.load_robot(robot)
    compiled, pin_kin = CompiledLegKinematics(m), PinocchioLegKinematics(m)
    rng = np.random.default_rng(2)
    for _ in range(10):
        q = rng.uniform(-np.pi, np.pi, m.nu)
        for a, b in zip(compiled(q), pin_kin(q)):
            np.testing.assert_allclose(a, b, atol=1e-14)


def test_the_compiled_kinematics_refuse_a_model_without_a_floating_base(model):
    fixed = model.replace(joint_types=("revolute",) + tuple(model.joint_types[1:]))
    with pytest.raises(ValueError, match="no floating base"):
        kinematic_tree(fixed)


def test_foot_jacobian_is_the_derivative_of_the_foot_position(model):
    kin = PinocchioLegKinematics(model)
    q = np.asarray(model.q_standing)[7:] + 0.1
    _, jac = kin(q)
    h = 1e-6
    for k in range(model.nu):
        dq = np.zeros(model.nu)
        dq[k] = h
        fd = (kin(q + dq)[0] - kin(q - dq)[0]) / (2 * h)
        np.testing.assert_allclose(jac[:, 0:3, k], fd, atol=1e-8)


def test_phase_contact_weight_is_cheetahs_trust():
    w = phase_contact_weight([0.1, 0.5, 0.95, -1.0], trust_window=0.2)
    np.testing.assert_allclose(w, [0.5, 1.0, 0.25, 0.0])


# --------------------------------------------------------------------------- walking
class TruthFedPolicy:
    """Stands for `STAND` s, then runs the policy on the true base state of the robot's
    `ground_truth` (the estimate is not used)."""

    def __init__(self, policy, robot):
        self.policy, self.robot = policy, robot
        self.stand = PoseController.standing(robot.joint_map)
        self.started = False

    def truth(self, m):
        g = self.robot.ground_truth
        return m.replace(base_linear_velocity=g.base_linear_velocity,
                         base_position=g.base_position, base_state_source=g.source)  # fmt: skip

    def reset(self, m):
        self.stand.reset(m)
        self.started = False

    def __call__(self, m, t, command):
        if t < STAND - 1e-9:
            return self.stand(m, t, command)
        if not self.started:
            self.policy.reset(self.truth(m))
            self.started = True
        return self.policy(self.truth(m), t, command)


def command_source(commands, segment: float, accel: float = 2.0):
    """Rest until `STAND`, then each command for `segment` s, ramped at `accel` [m/s^2]
    (and [rad/s^2] for the yaw rate)."""
    from hardware.interface import VelocityCommand

    commands = np.asarray(commands, dtype=float)

    def source(t):
        value, start = np.zeros(3), STAND
        for target in commands:
            end = start + segment
            if t < start:
                break
            elapsed = min(t, end) - start
            step = np.clip(target - value, -accel * elapsed, accel * elapsed)
            value = value + step
            start = end
        return VelocityCommand(*value)

    return source


def walk(model, seconds, commands, segment, *, noise=None, seed=0, slip=None):
    """Run the truth-fed policy on MuJoCo behind NoisySensors and EstimatedRobot; returns the
    EstimatedRobot and the loop result. `slip=(start, end, foot, mu)`: the floor's and that
    foot's friction are `mu` in [start, end) (MuJoCo takes the larger of the two geoms', so
    only that foot slides)."""
    from learning.policy_adapter import PolicyController
    from learning.policy_export import load_numpy_policy

    policy = load_numpy_policy(POLICY)
    config = policy.config
    inner = MuJoCoRobot(model, timestep=0.002)
    noise = SensorNoise.go2() if noise is None else noise
    robot = EstimatedRobot(NoisySensors(inner, noise, seed=seed), StateEstimator(model))
    controller = TruthFedPolicy(
        PolicyController(policy, inner.joint_map, action_scale=config["action_scale"],
                         kp=np.asarray(config["kp"]), kd=np.asarray(config["kd"])),
        robot,
    )  # fmt: skip
    nominal = inner.mj.geom_friction[:, 0].copy()

    def on_tick(t, safety, r):
        if slip is None:
            return
        start, end, foot, mu = slip
        friction = inner.mj.geom_friction
        friction[:, 0] = nominal
        if start <= t < end:
            for name in ("floor", foot):
                friction[inner.mj.geom(name).id, 0] = mu

    safety = SafetyLayer(inner.joint_map, SafetyConfig(soft_start_duration=0.2))
    result = control_loop.run(robot, controller, safety, duration=seconds,
                              control_dt=config["control_dt"], command_dt=0.002,
                              command_source=command_source(commands, segment),
                              on_tick=on_tick)  # fmt: skip
    return robot, result


def errors(history, start, end):
    """RMS velocity error (norm of the 3-vector) [m/s], max |height error| [m], over the valid
    samples in [start, end)."""
    keep = history["valid"] & (history["t"] >= start) & (history["t"] < end)
    dv = history["velocity"][keep] - history["true_velocity"][keep]
    dz = history["position"][keep, 2] - history["true_position"][keep, 2]
    return float(np.sqrt(np.mean(np.sum(dv**2, axis=1)))), float(np.max(np.abs(dz)))


@pytest.fixture(scope="module")
def trot(model):
    return walk(model, 4.0, [(0.5, 0.0, 0.0)], 10.0)


def test_trot_velocity_and_height_track_mujoco(trot):
    robot, result = trot
    h = robot.history_arrays()
    assert robot.fault is None
    assert result.safety.mode is Mode.NORMAL
    assert h["valid"][h["t"] > 0.3].all()  # started while standing, never lost
    rms, dz = errors(h, 0.3, 4.0)
    assert rms < 0.08
    assert dz < 0.015
    walking = h["t"] > STAND + 1.5
    assert np.mean(h["true_velocity"][walking, 0]) > 0.3  # it did walk forward
    # the velocity is in the base frame: forward walking shows up in x, not in y
    assert abs(np.mean(h["velocity"][walking, 0]) - np.mean(h["true_velocity"][walking, 0])) < 0.05


def test_controller_sees_the_estimate_not_the_truth(trot):
    robot, _ = trot
    m = robot.read()
    assert m.base_state_source == "estimator"
    np.testing.assert_array_equal(m.base_linear_velocity, robot.estimate.base_linear_velocity)
    assert not np.array_equal(m.base_linear_velocity, robot.ground_truth.base_linear_velocity)


def test_nis_is_consistent_in_normal_walking(trot):
    robot, _ = trot
    h = robot.history_arrays()
    nis = h["nis"][np.isfinite(h["nis"])]
    assert np.median(nis) < NY  # chi-square with NY dof has mean NY: the filter is not
    assert np.percentile(nis, 99.9) < robot.estimator.nis_gate  # overconfident


@pytest.mark.slow
def test_omnidirectional_tour_tracks_mujoco(model):
    robot, result = walk(model, STAND + 0.5 + 11 * 1.8, OMNI_TOUR, 1.8)
    h = robot.history_arrays()
    assert robot.fault is None and result.safety.mode is Mode.NORMAL
    assert h["t"][-1] >= 20.0
    rms, dz = errors(h, 0.3, np.inf)
    assert rms < 0.08
    assert dz < 0.015


def test_a_slipping_foot_shows_in_its_innovation_and_the_error_stays_bounded(model):
    rl = list(model.foot_names).index("RL_foot")
    robot, _ = walk(model, 4.5, [(0.5, 0.0, 0.0)], 10.0, slip=(2.5, 3.5, "RL_foot", 0.1))
    h = robot.history_arrays()
    assert robot.fault is None
    t = h["t"]
    before = (t >= 1.5) & (t < 2.5)
    during = (t >= 2.5) & (t < 3.5)
    nis_before = np.nanmean(h["foot_nis"][before, rl])
    nis_during = np.nanmean(h["foot_nis"][during, rl])
    assert nis_during > 1.5 * nis_before
    rms_during, _ = errors(h, 2.5, 3.5)
    rms_after, dz = errors(h, 3.5, 4.5)
    assert rms_during < 0.2
    assert rms_after < 0.08
    assert dz < 0.015


# --------------------------------------------------------------------------- lifecycle
def settled_robot(model, height_offset=0.0):
    """MuJoCo Go2 holding its standing pose; the base raised by `height_offset` [m]."""
    q0 = np.asarray(model.q_standing, dtype=float).copy()
    q0[2] += height_offset
    robot = MuJoCoRobot(model, timestep=0.002, q0=q0)
    hold = PoseController.standing(robot.joint_map)
    m = robot.read()
    robot.write(hold(m, 0.0, None).replace(arm=True, timestamp=m.timestamp, sequence=1))
    return robot, hold


def step(robot, hold, estimator):
    robot.advance(0.002)
    m = robot.read()
    command = hold(m, 0.0, None)
    robot.write(command.replace(timestamp=m.timestamp, sequence=robot.steps + 1, arm=True))
    return m, estimator.update(m)


def test_no_estimate_before_the_feet_are_down_and_after_reset(model):
    robot, hold = settled_robot(model, height_offset=0.15)  # dropped from 15 cm
    estimator = StateEstimator(model, EstimatorConfig(startup_time=0.1))
    first_valid = None
    for _ in range(400):
        m, est = step(robot, hold, estimator)
        if est.valid and first_valid is None:
            first_valid = m.timestamp
        if first_valid is None:
            assert est.base_linear_velocity is None and est.base_position is None
    assert first_valid is not None
    assert first_valid >= 0.1 + 0.1  # a fall from 15 cm takes 0.17 s, then startup_time
    assert abs(est.base_position[2] - m.base_position[2]) < 0.01
    estimator.reset()
    m, est = step(robot, hold, estimator)
    assert not est.valid and est.base_linear_velocity is None and est.fault is None
    for _ in range(60):  # startup_time 0.1 s = 50 samples, feet down all along
        m, est = step(robot, hold, estimator)
    assert est.valid


def test_a_gap_before_the_start_restarts_the_wait_and_after_it_is_a_fault(model):
    """A stalled process (a 0.1 s hole in the 500 Hz stream) before the filter has started
    only restarts its `startup_time` wait; once started the same hole is a latched fault."""
    robot, hold = settled_robot(model)
    estimator = StateEstimator(model, EstimatorConfig(startup_time=0.1, max_dt=0.05))
    for _ in range(30):  # 60 ms of the 100 ms wait
        m, est = step(robot, hold, estimator)
    robot.advance(0.1)  # samples lost
    m, est = step(robot, hold, estimator)
    assert not est.valid and est.fault is None
    for _ in range(45):  # 90 ms after the gap: still waiting
        m, est = step(robot, hold, estimator)
    assert not est.valid and est.fault is None
    for _ in range(10):
        m, est = step(robot, hold, estimator)
    assert est.valid and est.fault is None
    robot.advance(0.1)
    m, est = step(robot, hold, estimator)
    assert not est.valid and "gap of 102.0 ms" in est.fault


def test_a_nan_gyro_sample_is_a_fault_not_an_estimate(model):
    robot, hold = settled_robot(model)
    estimated = EstimatedRobot(robot, StateEstimator(model))
    for _ in range(100):
        m, _ = step(robot, hold, estimated.estimator)
    m = estimated.read()
    assert m.base_linear_velocity is not None and estimated.fault is None
    bad = robot.read()
    bad = bad.replace(base_angular_velocity=np.array([np.nan, 0.0, 0.0]))
    est = estimated.estimator.update(bad)
    assert not est.valid and est.base_linear_velocity is None
    assert "base_angular_velocity" in est.fault
    robot.advance(0.002)
    m = estimated.read()  # the fault is latched: good samples do not bring the estimate back
    assert m.base_linear_velocity is None and m.base_state_source is None
    assert estimated.fault is not None


def test_frozen_encoders_are_a_fault(model):
    robot, hold = settled_robot(model)
    estimator = StateEstimator(model, EstimatorConfig(frozen_encoder_samples=20))
    for _ in range(100):
        m, est = step(robot, hold, estimator)
    assert est.valid
    frozen_q = m.joint_q.copy()
    for k in range(25):
        robot.advance(0.002)
        m = robot.read().replace(joint_q=frozen_q)
        est = estimator.update(m)
        if k < 18:
            assert est.fault is None
    assert est.fault is not None and "frozen" in est.fault and not est.valid


def test_identical_joints_are_a_fault_only_while_active(model):
    robot, hold = settled_robot(model)
    estimator = StateEstimator(model, EstimatorConfig(frozen_encoder_samples=5))
    for _ in range(100):  # settle: the feet loaded
        m, _ = step(robot, hold, estimator)
    assert estimator.fault is None
    for mode, fault in ((RobotMode.DAMPING, False), (RobotMode.ACTIVE, True)):
        estimator.reset()
        for k in range(10):  # the joints repeat, the IMU lives, the feet are loaded
            gyro = m.base_angular_velocity + 1e-6 * k
            estimator.update(m.replace(timestamp=0.002 * (k + 1), robot_mode=mode,
                                       base_angular_velocity=gyro))  # fmt: skip
        assert (estimator.fault is not None) == fault


def test_an_estimator_fault_damps_the_robot(model):
    robot, hold = settled_robot(model)
    estimated = EstimatedRobot(robot, StateEstimator(model))
    safety = SafetyLayer(robot.joint_map)

    class NanGyroAt:
        def __init__(self, inner):
            self.inner, self.joint_map = inner, inner.joint_map

        def read(self):
            m = self.inner.read()
            if m.timestamp >= 0.3:
                m = m.replace(base_angular_velocity=np.full(3, np.nan))
            return m

        def __getattr__(self, name):
            return getattr(self.inner, name)

    estimated.robot = NanGyroAt(robot)
    result = control_loop.run(estimated, hold, safety, duration=0.5, control_dt=0.02,
                              command_dt=0.002)  # fmt: skip
    assert estimated.fault is not None
    assert result.safety.mode is Mode.DAMPING
    assert "estimator_fault" in result.safety.log.kinds()


def test_explicit_contact_weights_and_bad_ones(model):
    robot, _ = settled_robot(model)
    estimator = StateEstimator(model)
    m = robot.read().replace(foot_force=None)
    with pytest.raises(ValueError, match="foot_force"):
        estimator.update(m)
    with pytest.raises(ValueError, match="shape"):
        estimator.update(m, contact=np.ones(3))
    est = estimator.update(m, contact=np.ones(4))
    assert not est.valid and np.all(est.contact_weights == 1.0)


# --------------------------------------------------------------------------- compiled arithmetic
@pytest.mark.parametrize("ground", ["flat", "touchdown"])
def test_the_compiled_filter_computes_what_the_numpy_one_does(model, ground):
    """The same measurements through `arithmetic="c"` (`hardware/estimator_filter.c`) and
    `"numpy"`: a settled MuJoCo Go2 dropped 5 cm, its gyro and joint rates perturbed, and each
    foot in turn unloaded for 60 ms, then 10 ms (a touchdown, then a chattering one): every
    estimate and contact weight agrees to rounding (the same equations, summed in another
    order)."""
    from native import c_library

    if not c_library.compiler_available():
        pytest.skip("no C compiler")
    robot, hold = settled_robot(model, height_offset=0.05)
    rng = np.random.default_rng(1)
    compiled = StateEstimator(model, EstimatorConfig(arithmetic="c", ground=ground))
    reference = StateEstimator(model, EstimatorConfig(arithmetic="numpy", ground=ground,
                                                      kinematics="pinocchio"))  # fmt: skip
    assert compiled.core is not None and compiled.core.own_kinematics
    assert reference.core is None
    valid = 0
    for k in range(600):
        robot.advance(0.002)
        m = robot.read()
        robot.write(hold(m, 0.0, None).replace(timestamp=m.timestamp, sequence=k + 2, arm=True))
        force = np.asarray(m.foot_force, dtype=float).copy()
        if k > 200 and (k % 100 < 30 or 50 <= k % 100 < 55):
            force[(k // 100) % 4] = 0.0  # lifted 60 ms, then 10 ms (within contact_rearm)
        m = m.replace(
            foot_force=force,
            joint_qd=np.asarray(m.joint_qd) + rng.normal(0.0, 0.3, model.nu),
            base_angular_velocity=np.asarray(m.base_angular_velocity) + rng.normal(0, 0.05, 3),
        )
        a, b = compiled.update(m), reference.update(m)
        assert a.valid == b.valid and a.fault == b.fault is None
        np.testing.assert_allclose(a.contact_weights, b.contact_weights, atol=1e-15)
        if not a.valid or a.innovation is None:  # not started, or the start itself
            assert b.innovation is None
            continue
        valid += 1
        np.testing.assert_allclose(a.base_linear_velocity, b.base_linear_velocity, atol=1e-12)
        np.testing.assert_allclose(a.base_position, b.base_position, atol=1e-12)
        np.testing.assert_allclose(a.innovation, b.innovation, atol=1e-12)
        np.testing.assert_allclose([a.nis, *a.foot_nis], [b.nis, *b.foot_nis], rtol=1e-9)
    np.testing.assert_allclose(compiled.P, reference.P, atol=1e-15)
    np.testing.assert_allclose(compiled.ground_height, reference.ground_height, atol=1e-12)
    assert valid > 300


@pytest.mark.parametrize("arithmetic", ["c", "numpy"])
@pytest.mark.parametrize("field", ["base_quat", "base_angular_velocity", "base_linear_acceleration",
                                   "joint_q", "joint_qd", "foot_force"])  # fmt: skip
def test_each_non_finite_input_is_a_fault_naming_it(model, arithmetic, field):
    """A sample with one NaN (or a zero quaternion) faults the estimator, naming the input,
    in either arithmetic; an older sample before it changes nothing."""
    robot, hold = settled_robot(model)
    estimator = StateEstimator(model, EstimatorConfig(arithmetic=arithmetic))
    for _ in range(5):
        m, estimate = step(robot, hold, estimator)
    assert estimate.fault is None
    assert estimator.update(m) is estimate  # not newer: the last estimate again
    m, _ = step(robot, hold, estimator)
    robot.advance(0.002)
    bad = robot.read()
    value = np.asarray(getattr(bad, field), dtype=float).copy()
    if field == "base_quat":
        value[:] = 0.0  # degenerate, not NaN
    else:
        value[-1] = np.nan
    estimate = estimator.update(bad.replace(**{field: value}))
    assert estimate.fault == f"non-finite input: {field}"


def test_an_unknown_arithmetic_is_refused():
    with pytest.raises(ValueError, match="arithmetic"):
        EstimatorConfig(arithmetic="fortran")
