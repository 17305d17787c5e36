"""`learning.deployment`: an exported policy's conventions against the robot, the command
schedule and the tour on the policy's command box, and short MuJoCo tours (the shipped Go2
policy on the estimator under randomisation; a Solo12 export, the robot from policy.json)."""

import os

import jax
import numpy as np
import pytest

import dynamics
from hardware.estimator import EstimatorConfig
from hardware.interface import JointMap
from learning import deployment
from learning.deployment import (
    COMMAND_ACCEL,
    COMMAND_YAW_ACCEL,
    OMNI_TOUR,
    STAND_SECONDS,
    WALKED_LINEAR_ERROR,
    check_conventions,
    command_schedule,
    estimator_config,
    run_tour,
    tour_check,
    tour_commands,
    tour_ramp,
    walk_failures,
)
from learning.policy import ACTION_CLIP, Policy
from learning.policy_export import (
    DEFAULT_COMMAND_RANGES,
    PolicyFileError,
    command_ranges,
    export_policy,
    load_numpy_policy,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = os.path.join(ROOT, "examples", "policies", "go2_omni_proprio")


@pytest.fixture(scope="module")
def go2_joints():
    return JointMap.from_model(dynamics.load_robot("go2"))


def conventions(joint_map, **changes) -> dict:
    """The policy.json entries `check_conventions` reads, as an export for `joint_map` writes
    them, with `changes`."""
    config = {
        "joint_names": list(joint_map.names),
        "q_default": joint_map.q_default.tolist(),
        "action_clip": ACTION_CLIP,
    }
    return {**config, **changes}


# --------------------------------------------------------------------------- conventions
def test_conventions_of_the_robots_own_export_pass(go2_joints):
    check_conventions(conventions(go2_joints), go2_joints)
    check_conventions(load_numpy_policy(SHIPPED).config, go2_joints)


def test_conventions_name_the_joints_out_of_order(go2_joints):
    names = list(go2_joints.names)
    names[0], names[3] = names[3], names[0]  # FL_hip <-> FR_hip
    with pytest.raises(ValueError, match="another order") as err:
        check_conventions(conventions(go2_joints, joint_names=names), go2_joints)
    message = str(err.value)
    assert "0: FR_hip_joint vs FL_hip_joint" in message
    assert "3: FL_hip_joint vs FR_hip_joint" in message
    assert "1:" not in message  # only the positions that differ


def test_conventions_name_another_robots_joints(go2_joints):
    solo = JointMap.from_model(dynamics.load_robot("solo12"))
    with pytest.raises(ValueError, match="are not go2's") as err:
        check_conventions(conventions(solo), go2_joints)
    assert "only the policy's ['FL_HAA'" in str(err.value)
    assert "only the robot's ['FL_calf_joint'" in str(err.value)
    with pytest.raises(ValueError, match="11 joints against 12"):
        check_conventions(conventions(go2_joints, joint_names=list(go2_joints.names)[:11]),
                          go2_joints)  # fmt: skip


def test_conventions_name_the_joint_whose_default_differs(go2_joints):
    q = go2_joints.q_default.copy()
    q[4] += 0.1  # FR thigh
    with pytest.raises(ValueError, match="q_default differs from go2's standing pose") as err:
        check_conventions(conventions(go2_joints, q_default=q.tolist()), go2_joints)
    message = str(err.value)
    assert f"FR_thigh_joint {q[4]:+.4f} vs {go2_joints.q_default[4]:+.4f}" in message
    assert "FL_thigh_joint" not in message
    with pytest.raises(ValueError, match="11 values against 12"):
        check_conventions(conventions(go2_joints, q_default=q[:11].tolist()), go2_joints)


def test_conventions_name_both_action_clips(go2_joints):
    with pytest.raises(
        ValueError, match=f"action clip 2.5, PolicyController applies {ACTION_CLIP}"
    ):
        check_conventions(conventions(go2_joints, action_clip=2.5), go2_joints)


# --------------------------------------------------------------------------- commands
def test_the_schedule_ramps_toward_each_command_at_its_rates():
    """2 m/s^2, 1 rad/s^2 from rest to (0.6, 0.8, 0) (|dxy| = 1 m/s: 0.5 s), then to (0, 0, -1)
    (|dxy| = 1 m/s: 0.5 s; 1 rad/s of yaw rate: 1 s), by hand."""
    source, segments = command_schedule([(0.6, 0.8, 0.0), (0.0, 0.0, -1.0)], 1.0, accel=2.0,
                                        yaw_accel=1.0)  # fmt: skip
    s = STAND_SECONDS
    assert segments == [(s, s + 1.0, (0.6, 0.8, 0.0)), (s + 1.0, np.inf, (0.0, 0.0, -1.0))]
    expected = {
        0.0: (0.0, 0.0, 0.0),
        s - 1e-9: (0.0, 0.0, 0.0),
        s + 0.25: (0.3, 0.4, 0.0),  # 2 m/s^2 x 0.25 s = 0.5 m/s along (0.6, 0.8)
        s + 0.6: (0.6, 0.8, 0.0),  # arrived at 0.5 s
        s + 1.25: (0.3, 0.4, -0.25),  # 0.5 m/s back; 1 rad/s^2 x 0.25 s
        s + 1.75: (0.0, 0.0, -0.75),  # xy arrived at 0.5 s, yaw still ramping
        s + 2.0: (0.0, 0.0, -1.0),
        s + 9.0: (0.0, 0.0, -1.0),  # the last command held
    }
    for t in list(expected)[::-1] + list(expected):  # any order, any number of times
        np.testing.assert_allclose(source(t).as_array(), expected[t], atol=1e-12, err_msg=t)


def test_a_short_segment_hands_its_ramp_on():
    """Segments of 0.25 s at 2 m/s^2: vx reaches 0.5 of its 1 m/s, and the next segment
    ramps from there toward -1 (0.5 - 2 x 0.5 = -0.5 after another 0.5 s)."""
    source, _ = command_schedule([(1.0, 0.0, 0.0), (-1.0, 0.0, 0.0)], 0.25, accel=2.0)
    s = STAND_SECONDS
    assert source(s + 0.25).vx == pytest.approx(0.5)
    assert source(s + 0.25 + 0.5).vx == pytest.approx(-0.5)
    assert source(s + 0.25 + 0.75).vx == pytest.approx(-1.0)
    steps, _ = command_schedule([(1.0, 0.5, 1.0)], 1.0)  # no rates: one step
    np.testing.assert_array_equal(steps(s).as_array(), [1.0, 0.5, 1.0])
    with pytest.raises(ValueError, match="segment_seconds"):
        command_schedule([(1.0, 0.0, 0.0)], 0.0)
    with pytest.raises(ValueError, match="yaw_accel"):
        command_schedule([(1.0, 0.0, 0.0)], 1.0, yaw_accel=-1.0)


def test_the_tour_stretches_onto_the_policys_box():
    """Go2's box gives OMNI_TOUR itself and the ramp constants; another box puts the tour's
    corners on its corners (each side by its own end), a side not past zero gives zero, and
    the ramps scale with the box's (vx, vy) half-diagonal and yaw half-width."""
    np.testing.assert_array_equal(tour_commands(DEFAULT_COMMAND_RANGES), OMNI_TOUR)
    np.testing.assert_array_equal(tour_commands(None), OMNI_TOUR)
    assert tour_ramp(DEFAULT_COMMAND_RANGES) == (COMMAND_ACCEL, COMMAND_YAW_ACCEL)
    box = {"vx": (-0.5, 2.0), "vy": (-0.25, 0.25), "yaw_rate": (-2.0, 2.0)}
    tour = tour_commands(box)
    corners = {OMNI_TOUR.index((1.0, 0.5, 1.0)): (2.0, 0.25, 2.0),
               OMNI_TOUR.index((-1.0, -0.5, -1.0)): (-0.5, -0.25, -2.0),
               OMNI_TOUR.index((0.5, -0.3, 0.5)): (1.0, -0.15, 1.0),
               OMNI_TOUR.index((0.0, 0.0, 0.0)): (0.0, 0.0, 0.0)}  # fmt: skip
    for i, command in corners.items():
        np.testing.assert_allclose(tour[i], command, atol=1e-12)
    forward = tour_commands({**box, "vx": (0.0, 1.0)})
    assert forward[:, 0].min() == 0.0 and forward[:, 0].max() == 1.0
    accel, yaw_accel = tour_ramp(box)
    assert accel == pytest.approx(COMMAND_ACCEL * np.hypot(2.0, 0.25) / np.hypot(1.0, 0.5))
    assert yaw_accel == pytest.approx(2.0 * COMMAND_YAW_ACCEL)


def test_the_export_records_its_command_box(tmp_path):
    """policy.json holds the box given to export_policy; a folder without one (the shipped
    ones, exported before the key) reads as Go2's box; a malformed box is refused."""
    policy = Policy.create(jax.random.key(0), nu=12, hidden=(8,))
    box = {"vx": (-0.5, 1.5), "vy": (-0.3, 0.3), "yaw_rate": (-0.8, 0.8)}
    export_policy(policy, tmp_path / "box", robot="go2", onnx=False, command_ranges=box)
    config = load_numpy_policy(tmp_path / "box").config
    assert config["command_ranges"] == {k: list(v) for k, v in box.items()}
    assert command_ranges(config) == box
    assert "command_ranges" not in load_numpy_policy(SHIPPED).config
    assert command_ranges(load_numpy_policy(SHIPPED).config) == DEFAULT_COMMAND_RANGES
    export_policy(policy, tmp_path / "none", robot="go2", onnx=False)
    assert command_ranges(load_numpy_policy(tmp_path / "none").config) == DEFAULT_COMMAND_RANGES
    with pytest.raises(ValueError, match="missing \\['yaw_rate'\\]"):
        export_policy(policy, tmp_path / "bad", robot="go2", onnx=False,
                      command_ranges={"vx": (-1, 1), "vy": (-1, 1)})  # fmt: skip
    with pytest.raises(ValueError, match="vx must be finite with low <= high"):
        export_policy(policy, tmp_path / "bad", robot="go2", onnx=False,
                      command_ranges={**box, "vx": (1.0, -1.0)})  # fmt: skip
    with pytest.raises(PolicyFileError, match="command_ranges"):
        command_ranges({"command_ranges": {**box, "vy": "wide"}})


# --------------------------------------------------------------------------- walked
def row(**changes) -> dict:
    """A `run_tour` result that walked, with `changes`."""
    base = {"controller_started_s": 0.5, "fell": False, "min_true_base_height_m": 0.29,
            "fell_below_m": 0.2, "damped": False, "damped_at_s": None, "damped_because": [],
            "safety_mode": "normal", "mean_linear_error_m_per_s": 0.05}  # fmt: skip
    return {**base, **changes}


def test_walked_means_started_upright_undamped_and_tracking():
    assert walk_failures(row()) == []
    assert walk_failures(row(controller_started_s=None)) == [
        "the policy never took over from the start-up sequence"
    ]
    (fell,) = walk_failures(row(fell=True, min_true_base_height_m=0.12))
    assert fell.startswith("fell: base down to 0.120 m")
    tilted = row(damped=True, damped_at_s=3.25, safety_mode="damping",
                 damped_because=["damping after base_tilt_violation"])  # fmt: skip
    (damped,) = walk_failures(tilted)
    assert damped == "damped at 3.25 s (damping after base_tilt_violation)"
    assert walk_failures(row(mean_linear_error_m_per_s=WALKED_LINEAR_ERROR)) != []
    assert walk_failures(row(mean_linear_error_m_per_s=float("nan"))) != []  # never tracked


def test_tour_check_counts_the_seeds_that_walked(monkeypatch):
    """One `run_tour` per seed, in order, with the estimator flag and the segment length passed
    on; a line each."""
    calls = []

    def fake_run_tour(folder, seed, *, estimator, segment_seconds):
        calls.append((folder, seed, estimator, segment_seconds))
        out = row(fell=seed == 2, min_true_base_height_m=0.1 if seed == 2 else 0.29)
        failures = walk_failures(out)
        return {**out, "robot": "go2", "seed": seed, "walked": not failures,
                "why_not": failures, "worst_linear_error_m_per_s": 0.07,
                "mean_yaw_rate_error_rad_per_s": 0.03, "wall_seconds": 1.0}  # fmt: skip

    monkeypatch.setattr(deployment, "run_tour", fake_run_tour)
    lines = []
    check = tour_check("folder", [0, 2, 5], estimator=False, segment_seconds=1.5,
                       progress=lines.append)  # fmt: skip
    assert calls == [("folder", s, False, 1.5) for s in (0, 2, 5)]
    assert (check["walked"], check["of"]) == (2, 3)
    assert [r["seed"] for r in check["seeds"]] == [0, 2, 5]
    assert "seed 0: walked" in lines[0] and "seed 2: did not walk: fell" in lines[1]
    assert tour_check("folder", [], progress=None) == {"seeds": [], "walked": 0, "of": 0}


# --------------------------------------------------------------------------- MuJoCo
# Tracking bound of the short tour below, per command: WALKED_LINEAR_ERROR (0.1 m/s, the bound
# a whole tour's mean must stay under to have walked) on each command's mean alone, and the
# same tenth of the box's half-width (1 rad/s) on the yaw rate: 0.1 rad/s.
SHORT_TOUR = ((0.5, 0.0, 0.0), (0.0, 0.3, 0.0), (0.0, 0.0, -0.5))
YAW_RATE_BOUND = 0.1 * DEFAULT_COMMAND_RANGES["yaw_rate"][1]


def test_the_shipped_policy_walks_a_short_randomised_tour_on_the_estimator():
    """go2_omni_proprio, seed 0 (payload, friction, latency, pushes), noisy sensors and the
    state estimator, forward, sideways and turning 2 s each: the policy takes over from the
    start-up sequence, the base stays up, the safety layer never damps, and every command is
    tracked within the bounds above."""
    result = run_tour(SHIPPED, 0, commands=SHORT_TOUR, segment_seconds=2.0)
    assert result["robot"] == "go2" and result["estimator"] and result["seed"] == 0
    assert result["seconds"] == STAND_SECONDS + 3 * 2.0
    assert result["startup_phases"] == ["passive", "stand_up", "hold", "controller"]
    assert result["controller_started_s"] == pytest.approx(STAND_SECONDS, abs=0.01)
    assert not result["fell"] and result["min_true_base_height_m"] > result["fell_below_m"]
    assert not result["damped"] and result["safety_mode"] == "normal", result["damped_because"]
    assert result["estimate"]["fault"] is None
    assert [r["command"] for r in result["tracking"]] == [list(c) for c in SHORT_TOUR]
    for r in result["tracking"]:
        assert r["linear_error"] < WALKED_LINEAR_ERROR, r
        assert r["yaw_rate_error"] < YAW_RATE_BOUND, r
    assert result["walked"] and result["why_not"] == []
    assert result["randomization"]["seed"] == 0


def test_the_estimator_takes_touchdown_heights_off_a_level_floor():
    """On a level floor (at any height) a stance foot stands at the filter's ground height;
    on slopes, steps and height fields the height it touched down at."""
    from contact import terrain as T
    from contact.terrain_presets import PRESETS

    go2 = dynamics.load_robot("go2")
    for level in (None, T.flat(), T.flat(0.3)):
        assert estimator_config(go2, level).ground == "flat"
    for name, make in PRESETS.items():
        assert estimator_config(go2, make()).ground == "touchdown", name
    assert estimator_config(go2, T.incline(0.1)).ground == "touchdown"


def test_a_tour_runs_the_robot_its_policy_json_names(tmp_path):
    """A Solo12 export (random network: near-zero actions, it stands) on Solo12 with the
    estimator: Solo12's feet carry 6 N each, under Go2's 20 N contact threshold, so the
    thresholds scale with the weight and the estimator starts; the policy takes over, the
    robot stays up. The tour is the box's (Go2's when none recorded), here its first command."""
    solo = dynamics.load_robot("solo12")
    standing_foot_load = solo.total_mass * 9.81 / 4
    assert estimator_config(solo).contact_on < 0.6 * standing_foot_load
    assert estimator_config(dynamics.load_robot("go2")) == EstimatorConfig()
    export_policy(Policy.create(jax.random.key(0), nu=12, hidden=(16, 16)), tmp_path / "solo",
                  robot="solo12", onnx=False)  # fmt: skip
    result = run_tour(str(tmp_path / "solo"), 1, commands=[(0.0, 0.0, 0.0)], segment_seconds=1.5)
    assert result["robot"] == "solo12"
    assert result["controller_started_s"] is not None, result["estimate"]
    assert not result["fell"] and not result["damped"], result["damped_because"]
    assert result["fell_below_m"] == pytest.approx(0.6 * solo.q_standing[2])
