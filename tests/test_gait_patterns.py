"""Gait patterns: the references of the gait library and the checks that recognise a gait
from its contacts (fast; the solved gaits are in test_gait_library.py, slow)."""

import numpy as np

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
