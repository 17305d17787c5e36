"""trajopt.footholds: the `place` functions that move a nominal foothold."""

import numpy as np
import pytest

from contact.terrain import flat, steps
from trajopt import footholds


def test_nearest_point_moves_a_foothold_to_the_nearest_of_the_points():
    place = footholds.nearest_point([[0.4, 0.16], [0.56, 0.16], [0.4, -0.16]])
    np.testing.assert_allclose(place(0, np.array([0.47, 0.1, 0.0])), [0.4, 0.16, 0.0])
    np.testing.assert_allclose(place(3, np.array([0.5, 0.3, 0.0])), [0.56, 0.16, 0.0])
    np.testing.assert_allclose(place(1, np.array([0.3, -0.9, 0.0])), [0.4, -0.16, 0.0])
    for bad in ([0.4, 0.16], np.zeros((0, 2)), np.zeros((2, 3))):
        with pytest.raises(ValueError, match="points must be"):
            footholds.nearest_point(bad)


def test_away_from_risers_keeps_a_margin_on_the_nearer_side():
    place = footholds.away_from_risers(steps(0.06, 0.22, 0.35, num_steps=3), 0.05)
    np.testing.assert_allclose(place(0, np.array([0.33, 0.1, 0.0])), [0.30, 0.1, 0.0])
    np.testing.assert_allclose(place(0, np.array([0.36, 0.1, 0.0])), [0.40, 0.1, 0.0])
    np.testing.assert_allclose(place(0, np.array([0.46, 0.1, 0.0])), [0.46, 0.1, 0.0])
    with pytest.raises(ValueError, match="margin"):
        footholds.away_from_risers(steps(0.06, 0.22, 0.35), 0.2)
    with pytest.raises(TypeError, match="Steps"):
        footholds.away_from_risers(flat(), 0.05)
