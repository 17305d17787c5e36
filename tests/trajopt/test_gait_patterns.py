"""Gait patterns: the references of the gait library and the checks that recognise a gait
from its contacts (fast; the solved gaits are in test_gait_library.py, slow)."""

import numpy as np
import pytest

from trajopt import gait_metrics, gaits


def _flags_to_force(flags):
    """`(T, 4, 3)` forces [N] from 0/1 contact flags `(T, 4)`: 50 N down where flagged."""
    force = np.zeros(flags.shape + (3,))
    force[..., 2] = 50.0 * np.asarray(flags)
    return force


def test_pattern_checks_tell_the_gaits_apart():
    times = 0.02 * np.arange(40)
    patterns = {g: gaits.stance_pattern(gaits.GAITS[g], 0.4, times)[0] for g in gaits.GAITS}
    for gait in ("trot", "pace", "bound", "pronk", "walk", "stand"):
        checks = gait_metrics.pattern_checks(gait, _flags_to_force(patterns[gait]))
        assert all(ok for _, _, ok in checks.values()), (gait, checks)
    # a trot is not a pace, a bound or a pronk; a pace is not a trot; a stand does not walk
    for pattern, gait in (("trot", "pace"), ("trot", "bound"), ("trot", "pronk"),
                          ("pace", "trot"), ("stand", "walk"), ("trot", "stand")):  # fmt: skip
        checks = gait_metrics.pattern_checks(gait, _flags_to_force(patterns[pattern]))
        assert not all(ok for _, _, ok in checks.values()), (pattern, gait, checks)


def test_pronk_starts_in_stance_and_pace_after_a_lead_in():
    """A pronk from rest pushes off before its flight; pace and bound stand a quarter period
    on four feet before the pattern starts (gaits.GAITS)."""
    period = 0.4
    times = 0.02 * np.arange(41)
    pronk = gaits.GAITS["pronk"]
    stance, _ = gaits.stance_pattern(pronk, period, times)
    stance_knots = int(round(pronk.duty * period / 0.02))
    assert np.all(stance[:stance_knots] == 1.0)  # the whole first stance, to the knot
    assert np.all(stance[stance_knots] == 0.0)  # then all four lift together
    for name in ("pace", "bound"):
        stance, fraction = gaits.stance_pattern(gaits.GAITS[name], period, times)
        lead = int(round(0.25 * period / 0.02))
        assert np.all(stance[:lead] == 1.0) and np.all(fraction[:lead] == 0.0)
        assert np.sum(stance[lead] == 0.0) == 2  # then one pair swings
    stance, _ = gaits.stance_pattern(gaits.GAITS["trot"], period, times)
    assert np.sum(stance[0] == 0.0) == 2  # the trot still starts stepping at once


def test_gait_weights_and_per_robot_overrides_reach_the_problem():
    """A gait's own weights (walk, pace, bound: load sharing) and a robot's overrides
    (ANYmal C's bound at 0.6 x its period) are what `make_problem` builds; a caller's weights
    win over both."""
    trot = gaits.make_problem("solo12", "trot", 0.3, duration=0.1)
    pace = gaits.make_problem("solo12", "pace", 0.3, duration=0.1)
    mine = gaits.make_problem("solo12", "pace", 0.3, duration=0.1, weights={"contact_force": 2.0})
    assert float(trot.data.weights["contact_force"]) == gaits.DEFAULT_WEIGHTS["contact_force"]
    assert float(pace.data.weights["contact_force"]) == 1.0
    assert float(mine.data.weights["contact_force"]) == 2.0
    assert gaits.gait_spec("solo12", "bound").period_scale == 1.0
    assert gaits.gait_spec("anymal_c", "bound").period_scale == 0.6
    assert gaits.default_guess("anymal_c", "trot") == "kinematic"
    assert gaits.default_guess("go2", "trot") == "standing"
    # ANYmal C's bound: the front pair swings (1 - duty) x 0.6 x 0.6 s = 0.18 s after the
    # quarter-period lead-in
    dt = 0.005
    model = gaits.load_robot("anymal_c")
    ref = gaits.gait_reference(model, "bound", 0.3, 200, dt)
    front_swing = np.asarray(ref.stance)[:, 0] == 0.0
    first = np.argmax(front_swing)
    length = np.argmin(front_swing[first:])
    assert abs(first * dt - 0.25 * 0.36) <= dt and abs(length * dt - 0.18) <= dt


def test_anymal_c_trots_after_its_lead_in_unless_the_caller_names_another():
    """ANYmal C's record gives its trot a lead-in of 0.1 period on four feet (0.06 s of its
    0.6 s); `lead_in=0` steps at once, as the library's trot; a negative one is refused."""
    dt = 0.01
    model = gaits.load_robot("anymal_c")
    stance = np.asarray(gaits.gait_reference(model, "trot", 0.3, 30, dt).stance)
    first_swing = int(np.argmax(np.any(stance == 0.0, axis=1)))
    assert abs(first_swing * dt - 0.1 * 0.6) <= dt
    assert np.sum(stance[first_swing] == 0.0) == 2  # then a diagonal pair swings
    at_once = np.asarray(gaits.gait_reference(model, "trot", 0.3, 30, dt, lead_in=0.0).stance)
    assert np.sum(at_once[0] == 0.0) == 2
    problem = gaits.make_problem("anymal_c", "trot", 0.3, duration=0.1, dt=dt, lead_in=0.0)
    np.testing.assert_array_equal(np.asarray(problem.data.reference.stance), at_once[:11])
    with pytest.raises(ValueError, match="lead_in"):
        gaits.make_problem("anymal_c", "trot", 0.3, duration=0.1, lead_in=-0.1)
