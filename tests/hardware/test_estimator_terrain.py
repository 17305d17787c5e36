"""The state estimator off the plane, against MuJoCo's truth: up the 15 degree slope and down
the stairs (`contact.terrain_presets`), each option of `EstimatorConfig.ground` passed
explicitly, so the tests hold whichever default the config has.

The walks are `benchmarks/bench_estimator_terrain.py`'s (`walk_run`): MuJoCo's Go2 at 500 Hz
under the shipped `go2_omni` policy, which sees MuJoCo's TRUE base state (the estimator is
under test, not the policy), the estimators on `SensorNoise.go2()` measurements of the same
walk. Errors run from 0.3 s (the filter started while standing) to the end of the walk (or
0.5 s before the safety layer damps: the flat-ground policy sometimes falls on the slope).

Bounds, from the filter's own statistics and noise model (not from a recorded run):

- height `|p_z - z_true| < 3 sqrt(foot_height_var)`: three standard deviations of one stance
  foot's height measurement as the config states it (31.6 mm with the defaults); a flat-floor
  assumption errs by the terrain's rise, 0.32 m (slope) and 0.5 m (stairs), far beyond it,
  which the same walk checks for `ground="flat"`;
- velocity: RMS over the walk of `|v - v_true|` (world frame, norm of the 3-vector) below
  three times the filter's own `sqrt(trace P_vv)` (median over the walk), the RMS a
  consistent filter's error would have;
- the NIS (28 rows): its median below 28, the chi-square mean (the filter is not
  overconfident), and above the fault gate in under 1 % of the samples.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.bench_estimator_terrain import FALL_MARGIN, START, Walk, errors, walk_run
from hardware.estimator import NY, EstimatorConfig

POLICY = "examples/policies/go2_omni"
# EstimatorConfig.ground off the plane (the benchmark's evidence; on flat ground its heights
# drift over a minute, which is why the test names it rather than relying on the default)
RECOMMENDED = "touchdown"
# 4.5 s, 5 s walks: the slope climbs 0.32 m from 0.2 m ahead; the stairs' five risers down
# start 0.6 m ahead of the landing start and end 1.5 m further on
SLOPE_UP = Walk("slope", 0.8, 0.5, 4.5)
STAIRS_DOWN = Walk("stairs", 2.9, 0.5, 5.0)


def height_bound(config: EstimatorConfig) -> float:
    return 3.0 * float(np.sqrt(config.foot_height_var))


@pytest.fixture(scope="module", params=[SLOPE_UP, STAIRS_DOWN], ids=["slope_up", "stairs_down"])
def walk(request):
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return request.param, walk_run(request.param, 0, os.path.join(root, POLICY),
                                   grounds=("flat", RECOMMENDED))  # fmt: skip


def climbed(run) -> float:
    """[m] the true base height's range over the errors' window (the terrain's rise the robot
    crossed before the end, or before a fall: `errors` stops 0.5 s before the safety layer
    damps)."""
    t, z = run["truth"]["t"], run["truth"]["position"][:, 2]
    window = (t >= START) & (t < run["end"] - FALL_MARGIN)
    return float(np.max(z[window]) - np.min(z[window]))


def test_the_walk_crosses_the_feature(walk):
    _, run = walk
    assert climbed(run) > 0.15  # up (down) the slope (stairs): 15 cm of its rise at least


def test_touchdown_heights_track_mujoco_off_the_plane(walk):
    _, run = walk
    e = errors(run, RECOMMENDED)
    bound = height_bound(EstimatorConfig(ground=RECOMMENDED))
    assert e["valid_share"] == 1.0 and run["faults"][RECOMMENDED] is None
    assert e["height_max"] < bound, (e["height_max"], bound)


def test_a_flat_floor_errs_by_the_terrains_rise(walk):
    """The same walk under `ground="flat"`: its height is the base above the stance feet, not
    MuJoCo's; the check above would catch an estimator that kept assuming a flat floor."""
    _, run = walk
    e = errors(run, "flat")
    assert e["height_max"] > max(height_bound(EstimatorConfig()), 0.5 * climbed(run))


def test_velocity_is_within_the_filters_own_covariance(walk):
    _, run = walk
    e = errors(run, RECOMMENDED)
    est = run["estimates"][RECOMMENDED]
    t = run["truth"]["t"]
    keep = est["valid"] & (t >= START) & (t < run["end"] - FALL_MARGIN)
    sigma = float(np.median(np.sqrt(np.sum(est["var"][keep, 3:6], axis=1))))
    assert e["vel_world_rms"] < 3.0 * sigma, (e["vel_world_rms"], sigma)
    assert e["vel_base_rms"] < 3.0 * sigma  # the same vector, rotated by the IMU's attitude


def test_nis_is_consistent_off_the_plane(walk):
    _, run = walk
    e = errors(run, RECOMMENDED)
    assert e["nis_median"] < NY
    assert e["nis_over_gate"] < 0.01
