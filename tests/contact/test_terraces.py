"""Terraces (`contact.terraces`): a flight up, a landing and down, against an independent
NumPy reference, central differences, and its checks.

Reference distance: the ground is the union of the solid columns `[x_lo_i, x_hi_i] x
(-inf, levels_i]` (the boxes MuJoCo gets, the outer ones unbounded), the air the union of
`[x_lo_i, x_hi_i] x [levels_i, inf)`. A point in the air is `min_i |p - clip(p, solid_i)|`
from the ground, a point in the ground `min_i |p - clip(p, air_i)|` from the air: exact
distances to a union of rectangles, sharing no code with the window search under test.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from contact import terrain as T
from contact.terraces import WINDOW, flight, terraces
from contact.terrain_presets import FEATURE_X, stairs

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(1)
_distance = jax.jit(jax.vmap(T.signed_distance, in_axes=(None, 0)))
_gradient = jax.jit(jax.vmap(jax.grad(lambda t, p: T.signed_distance(t, p)[0], argnums=1),
                             in_axes=(None, 0)))  # fmt: skip
_signed_distance = jax.jit(T.signed_distance)
_jacobians = jax.jit(jax.jacrev(lambda p, t: T.signed_distance(t, p)[0], argnums=(0, 1)))


def _columns(t):
    """`(x_lo (m+1,), x_hi (m+1,), top (m+1,))` of the terraces' columns, outer ones unbounded."""
    edges = np.asarray(t.edges)
    return (np.concatenate([[-np.inf], edges]), np.concatenate([edges, [np.inf]]),
            np.asarray(t.levels))  # fmt: skip


def _rectangle_distance(p, lo, hi):
    """`(distance (n, k), closest (n, k, 2))` of the points `p (n, 2)` to the rectangles
    `[lo_k, hi_k]` (each `(k, 2)`, infinite bounds allowed)."""
    closest = np.clip(p[:, None, :], lo[None], hi[None])
    return np.linalg.norm(p[:, None, :] - closest, axis=-1), closest


def reference(t, points):
    """`(gap (n,), normal (n, 3))` of `points (n, 3)`: module docstring."""
    x_lo, x_hi, top = _columns(t)
    p = np.asarray(points)[:, [0, 2]]
    inf = np.full_like(top, np.inf)
    d_solid, c_solid = _rectangle_distance(p, np.stack([x_lo, -inf], 1), np.stack([x_hi, top], 1))
    d_air, c_air = _rectangle_distance(p, np.stack([x_lo, top], 1), np.stack([x_hi, inf], 1))
    rows = np.arange(len(p))
    in_air = d_solid.min(1) > 0.0
    nearest = np.where(in_air[:, None], c_solid[rows, d_solid.argmin(1)],
                       c_air[rows, d_air.argmin(1)])  # fmt: skip
    gap = np.where(in_air, d_solid.min(1), -d_air.min(1))
    normal_xz = (p - nearest) / gap[:, None]
    return gap, np.stack([normal_xz[:, 0], np.zeros(len(p)), normal_xz[:, 1]], 1)


def _irregular():
    edges = 0.5 + np.cumsum(RNG.uniform(0.2, 0.5, 10))
    return terraces(edges, RNG.uniform(-0.2, 0.2, 11), friction=0.7)


TERRAINS = {
    "preset": stairs,
    "pit": lambda: flight(-0.12, 0.25, 0.5, 5, 0.4),
    "irregular": _irregular,
}


def test_the_preset_goes_up_five_along_a_landing_and_down_five():
    t = stairs()
    up = FEATURE_X + 0.3 * np.arange(5)
    down = up[-1] + 1.0 + 0.3 * np.arange(5)
    np.testing.assert_allclose(t.edges, np.concatenate([up, down]), atol=1e-15)
    middles = np.concatenate([[0.0], up[:-1] + 0.15, [up[-1] + 0.5], down[:-1] + 0.15, [6.0]])
    expected = 0.1 * np.array([0, 1, 2, 3, 4, 5, 4, 3, 2, 1, 0])
    np.testing.assert_allclose(T.height(t, jnp.asarray(middles), 0.0), expected, atol=1e-15)
    np.testing.assert_allclose(T.height(t, jnp.asarray(down), 0.0), expected[6:], atol=1e-15)
    assert float(T.friction(t, jnp.zeros(3))) == 0.8


@pytest.mark.parametrize("name", TERRAINS)
def test_distance_and_normal_equal_the_reference(name):
    """300 random points within 25 cm (vertically) of the surface, inside the exact window
    (`WINDOW` shortest treads, >= 40 cm here); the normal is also the gap's gradient."""
    t = TERRAINS[name]()
    assert WINDOW * float(np.diff(t.edges).min()) >= 0.4
    x = RNG.uniform(float(t.edges[0]) - 0.8, float(t.edges[-1]) + 0.8, 300)
    z = np.asarray(T.height(t, jnp.asarray(x), 0.0)) + RNG.uniform(-0.25, 0.25, 300)
    points = jnp.asarray(np.stack([x, RNG.normal(size=300), z], 1))
    gap, normal = _distance(t, points)
    ref_gap, ref_normal = reference(t, points)
    np.testing.assert_allclose(gap, ref_gap, atol=1e-12)
    np.testing.assert_allclose(normal, ref_normal, atol=1e-9)
    np.testing.assert_allclose(_gradient(t, points), normal, atol=1e-12)


# central differences: step H, the point at least R from any edge (where the gap is |p - c|,
# whose third derivatives are at most 3 / R^2); truncation H^2 / 6 * 3 / R^2, round-off of two
# evaluations of a gap computed from coordinates of size |p| (< 4 m) over 2 H
H, R = 1e-5, 0.01
FD_TOLERANCE = H**2 / (2 * R**2) + 8 * np.finfo(float).eps * 4.0 / H
DESCENDING = {  # on the preset: the nose at (3.5, 0.4) between the treads at 0.4 and 0.3
    "off the nose": [3.5 + 0.012, 0.1, 0.4 + 0.016],
    "over the tread by the nose": [3.49, -0.2, 0.43],
    "before the riser under the nose": [3.52, 0.3, 0.37],
    "off the landing's nose": [3.2 + 0.008, 0.0, 0.5 + 0.006],
    "on a descending tread": [3.65, 0.0, 0.33],
    "just inside a descending tread": [3.65, 0.0, 0.29],
}


@pytest.mark.parametrize("where", DESCENDING)
def test_gradient_equals_central_differences_near_a_descending_nose(where):
    t = stairs()
    p = np.array(DESCENDING[where])
    steps = H * np.eye(3)
    plus = _distance(t, jnp.asarray(p + steps))[0]
    minus = _distance(t, jnp.asarray(p - steps))[0]
    central = (np.asarray(plus) - np.asarray(minus)) / (2 * H)
    gradient = np.asarray(_gradient(t, jnp.asarray(p[None])))[0]
    assert np.abs(gradient - central).max() < FD_TOLERANCE, (gradient, central)


def test_derivatives_are_finite_on_noses_corners_risers_and_landing():
    t = stairs()
    special = [[1.3, 0.0, 0.2], [1.3, 0.0, 0.1], [1.3, 0.0, 0.15], [2.2, 0.0, 0.5],
               [3.2, 0.0, 0.5], [3.2, 0.0, 0.4], [3.2, 0.0, 0.45], [4.4, 0.0, 0.0],
               [4.4, 0.0, 0.1], [1.0, 0.0, 0.0], [2.7, 0.0, 0.5], [8.0, 0.0, 0.0]]  # fmt: skip
    for p in jnp.asarray(special):
        gap, normal = _signed_distance(t, p)
        assert float(gap) == 0.0 and np.isclose(float(jnp.linalg.norm(normal)), 1.0), p
        leaves = jax.tree_util.tree_leaves(_jacobians(p, t))
        assert all(bool(jnp.all(jnp.isfinite(x))) for x in leaves), p


def test_far_gaps_are_clipped_and_continuous():
    """Beyond `WINDOW` treads the gap is clipped, so it stays 1-Lipschitz along a sweep."""
    t = stairs()
    limit = WINDOW * 0.3
    assert float(_signed_distance(t, jnp.array([2.7, 0.0, 3.0]))[0]) == pytest.approx(limit)
    xs = np.linspace(2.0, 5.0, 300)  # the landing and the flight down
    for z in (0.55, 0.9, -0.3):
        gaps, _ = _distance(t, jnp.asarray(np.stack([xs, 0 * xs, z + 0 * xs], 1)))
        assert float(jnp.max(jnp.abs(jnp.diff(gaps)))) <= xs[1] - xs[0] + 1e-12


def test_batched_terrains_and_the_dict_round_trip():
    heights = jnp.array([0.08, 0.1, 0.12])
    batch = jax.vmap(lambda h: flight(h, 0.3, 1.0, 5, 1.0))(heights)
    assert batch.edges.shape == (3, 10) and batch.levels.shape == (3, 11)
    p = jnp.array([2.5, 0.0, 0.7])
    gaps, _ = jax.jit(jax.vmap(T.signed_distance, in_axes=(0, None)))(batch, p)
    np.testing.assert_allclose(gaps, 0.7 - 5 * heights, atol=1e-15)
    # a step height is a leaf: the landing's gap falls by 5 per metre of rise
    slope = jax.jit(jax.grad(lambda h: T.signed_distance(flight(h, 0.3, 1.0, 5, 1.0), p)[0]))(0.1)
    assert float(slope) == pytest.approx(-5.0)
    t = TERRAINS["irregular"]()
    back = T.terrain_from_dict(json.loads(json.dumps(T.terrain_to_dict(t))))
    assert back.kind == "terraces"
    points = jnp.asarray(RNG.uniform([0.0, -1, -0.2], [4.0, 1, 0.3], (300, 3)))
    for a, b in zip(_distance(t, points), _distance(back, points)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: flight(0.1, 0.0, 1.0), "flight: step_length must be > 0, got 0.0"),
        (lambda: flight(0.1, -0.3, 1.0), "flight: step_length must be > 0, got -0.3"),
        (lambda: flight(0.1, 0.3, 1.0, landing_length=-0.5),
         "flight: landing_length must be > 0, got -0.5"),
        (lambda: flight(float("nan"), 0.3, 1.0), "flight: step_height must be finite, got nan"),
        (lambda: flight(0.1, 0.3, float("inf")), "flight: start_x must be finite, got inf"),
        (lambda: flight(0.1, 0.3, 1.0, num_steps=0), "flight: num_steps must be an int >= 1"),
        (lambda: flight(0.1, 0.3, 1.0, num_steps=2.5), "flight: num_steps must be an int >= 1"),
        (lambda: flight(0.15, 0.3, 1.0, max_riser=0.12),
         r"max_riser: flight has 0.150 m risers \(step_height\); expected every riser <= "
         r"max_riser = 0.12 m"),
        (lambda: flight(0.1, 0.3, 1.0, friction=-0.1), "terraces: friction must be >= 0"),
        (lambda: terraces([1.0, 1.3, 1.3], [0, 0.1, 0.2, 0.0]),
         r"terraces: edges must increase \(every tread > 0\), got a tread of 0.0 m from edge 1 "
         "to 2"),
        (lambda: terraces([1.0, np.nan], [0, 0.1, 0.0]), "terraces: edges must be finite, got "
                                                         "nan at 1"),
        (lambda: terraces([1.0, 2.0], [0, np.inf, 0.0]), "terraces: levels must be finite, got "
                                                         "inf at 1"),
        (lambda: terraces([1.0, 2.0], [0, 0.1]), r"terraces: expected edges \(m,\), m >= 1, and "
                                                 r"levels \(m\+1,\)"),
        (lambda: terraces([1.0, 2.0], [0, 0.1, -0.1], max_riser=0.15),
         r"max_riser: terraces has a 0.200 m riser at edge 1 \(x = 2.000 m\)"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_naming_the_argument(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_a_traced_flight_is_not_checked_but_a_riser_within_max_riser_passes():
    assert flight(0.1, 0.3, 1.0, max_riser=0.1).levels.shape == (11,)
    levels = jax.jit(lambda h: flight(h, 0.3, 1.0, 2, 0.5, max_riser=0.01).levels)(0.1)
    np.testing.assert_allclose(levels, [0.0, 0.1, 0.2, 0.1, 0.0], atol=1e-15)
