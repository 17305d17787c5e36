"""The shipped blind rough-ground policy (`examples/policies/go2_rough_proprio`) in MuJoCo, as
`examples/deploy_policy.py --terrain NAME --estimator --randomize SEED` runs it
(`learning.terrain_check.crossing`): Go2-like sensor noise, the state estimator in place of
the true base state, the start-up sequence, the safety layer and one draw of
`DisturbanceRanges`, 16 s at 0.5 m/s forward over a preset (about 7 m of command). Crossed:
never fell, never damped, the true base past the feature's end (the stairs: five 10 cm risers
up, the landing and five down, past `Terraces.edges[-1]`). The fast test walks the stairs on
one seed; the slow ones hold the policy to 7 of 8 seeds on every preset, and to the flat-ground
policy's result on the flat randomised tour."""

import os

import pytest

from contact.terrain_presets import PRESETS, preset
from learning.terrain_check import crossing, feature_end

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROUGH = os.path.join(ROOT, "examples", "policies", "go2_rough_proprio")
FLAT = os.path.join(ROOT, "examples", "policies", "go2_omni_proprio")
SEEDS = range(8)


def test_feature_ends_are_the_presets_last_change_of_height():
    assert feature_end(preset("stairs")) == pytest.approx(float(preset("stairs").edges[-1]))
    for name in PRESETS:
        end = feature_end(preset(name))
        assert 1.0 < end < 8.0, name  # each is level for its first metre and ends in reach


def test_the_rough_policy_walks_up_and_down_the_stairs():
    row = crossing(ROUGH, "stairs", seed=0)
    assert row["crossed"], row
    assert row["safety_mode"] == "normal" and row["x_end"] > row["feature_end"]


@pytest.mark.slow
@pytest.mark.parametrize("terrain", ["stairs", "slope", "rough", "blocks"])
def test_the_rough_policy_crosses_each_preset_on_7_of_8_seeds(terrain):
    rows = [crossing(ROUGH, terrain, seed) for seed in SEEDS]
    print(terrain, [(r["crossed"], round(r["x_end"], 2)) for r in rows])
    assert sum(r["crossed"] for r in rows) >= 7, rows


@pytest.mark.slow
def test_on_the_flat_tour_it_walks_as_often_as_the_flat_policy():
    rough = [crossing(ROUGH, "flat", seed) for seed in SEEDS]
    flat = [crossing(FLAT, "flat", seed) for seed in SEEDS]
    print("tracking", [round(r["linear_error"], 3) for r in rough],
          [round(r["linear_error"], 3) for r in flat])  # fmt: skip
    assert sum(r["crossed"] for r in rough) >= sum(r["crossed"] for r in flat)


@pytest.mark.slow
def test_the_flat_policy_stops_at_the_first_riser():
    """The stairs walk with the flat-ground policy: what the check above tells apart."""
    row = crossing(FLAT, "stairs", seed=0)
    assert row["x_end"] < float(preset("stairs").edges[0]) and not row["fell"]
