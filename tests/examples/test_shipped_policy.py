"""The shipped policy on what a Go2 measures: MuJoCo through the interface, Go2-like sensor
noise, no ground truth (the state estimator in its place), the start-up sequence and the
safety layer, under `DisturbanceRanges` (payload, friction, command latency, pushes).

Walking means: the safety layer never left NORMAL (no watchdog, no tilt or estimator fault),
the true base never dropped below 0.2 m (standing: 0.33 m), the estimator started and never
faulted, and the tour's mean linear tracking error stayed below 0.1 m/s.
"""

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import deploy_policy  # noqa: E402

POLICY = os.path.join(ROOT, "examples", "policies", "go2_omni_proprio")


def walked(summary) -> bool:
    e = summary["estimator"]
    return (summary["safety_mode"] == "normal" and e["fault"] is None
            and e["valid_share"] > 0.9 and e["min_true_height_m"] > 0.2
            and summary["mean_linear_error_m_per_s"] < 0.1)  # fmt: skip


def tour(seed: int, seconds: float):
    summary, _ = deploy_policy.run(POLICY, seconds=seconds, randomize=seed, estimator=True,
                                   commands=np.asarray(deploy_policy.OMNI_TOUR))  # fmt: skip
    return summary


def test_the_shipped_policy_walks_on_the_estimator_under_randomisation():
    """One draw, the tour's first three commands (8 s)."""
    summary = tour(seed=3, seconds=8.0)
    assert summary["base_state_source"] == "estimator"
    assert summary["startup_phases"] == ["passive", "stand_up", "hold", "controller"]
    assert walked(summary), summary
    assert summary["estimator"]["velocity_rms_m_per_s"] < 0.08
    assert summary["estimator"]["height_rms_m"] < 0.015


@pytest.mark.slow
def test_the_shipped_policy_walks_the_randomised_tour_on_7_of_8_seeds():
    """The whole 28 s tour, seeds 0-7."""
    results = [tour(seed, 28.0) for seed in range(8)]
    ok = [walked(s) for s in results]
    assert sum(ok) >= 7, [(s["estimator"], s["safety_mode"]) for s in results]
