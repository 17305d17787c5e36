"""The shipped policies (Go2's `go2_omni_proprio`; Solo12's `solo12_proprio`, Go1's
`go1_proprio` and ANYmal C's `anymal_c_proprio`, made by `examples/make_policy.py`) on what the
robot measures: MuJoCo through the interface, Go2-like sensor noise, no ground truth (the state
estimator in its place), the start-up sequence and the safety layer, under
`DisturbanceRanges` (payload, friction, command latency, pushes): `learning.deployment.run_tour`
and `tour_check`, what `examples/deploy_policy.py --commands omni --randomize SEED --estimator`
runs.

Walking is `learning.deployment.walk_failures`'s: the policy took over from the start-up
sequence (the estimator had started), the true base never fell below 0.6 of its standing
height (Go2: 0.2 m of 0.335 m), the safety layer never damped (no watchdog, tilt, joint limit
or estimator fault), and the tour's mean linear tracking error stayed below
`WALKED_LINEAR_ERROR` (0.1 m/s).
"""

import os

import pytest

from learning.deployment import OMNI_TOUR, run_tour, tour_check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POLICIES = ("go2_omni_proprio", "solo12_proprio", "go1_proprio", "anymal_c_proprio")


def shipped(name: str) -> str:
    return os.path.join(ROOT, "examples", "policies", name)


@pytest.mark.parametrize("name", POLICIES)
def test_the_shipped_policy_walks_on_the_estimator_under_randomisation(name):
    """One draw, the first three commands of Go2's tour (8 s), scaled to the policy's box.

    The estimator's velocity comes from leg odometry, `v = -(J qd + omega x r)`: the joint
    velocity noise reaches it through the leg's Jacobian, which grows with the leg's length,
    so Go2's bound (0.08 m/s) scales with the standing height."""
    from dynamics import load_robot
    from learning.deployment import tour_commands
    from learning.policy_export import command_ranges, load_numpy_policy

    config = load_numpy_policy(shipped(name)).config
    commands = tour_commands(command_ranges(config))[:3]
    heights = [float(load_robot(robot).q_standing[2]) for robot in (config["robot"], "go2")]
    length_ratio = heights[0] / heights[1]
    if name == "go2_omni_proprio":  # Go2's box is the tour's own
        assert (commands == OMNI_TOUR[:3]).all()
    result = run_tour(shipped(name), 3, commands=commands)
    assert result["seconds"] == 8.0
    assert result["startup_phases"] == ["passive", "stand_up", "hold", "controller"]
    assert result["walked"], result["why_not"]
    estimate = result["estimate"]
    assert estimate["fault"] is None and estimate["valid_share"] > 0.9
    assert estimate["velocity_rms_m_per_s"] < 0.08 * length_ratio
    assert estimate["height_rms_m"] < 0.015


@pytest.mark.slow
@pytest.mark.parametrize("name", POLICIES)
def test_the_shipped_policy_walks_the_randomised_tour_on_7_of_8_seeds(name):
    """The whole 28 s tour, seeds 0-7."""
    check = tour_check(shipped(name), range(8))
    assert check["of"] == 8
    assert check["walked"] >= 7, [(r["seed"], r["why_not"]) for r in check["seeds"]]
    assert all(r["estimate"]["fault"] is None for r in check["seeds"] if r["walked"])
