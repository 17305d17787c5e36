"""The terrain curriculum on hand-made episode results: promotion, demotion, falls, clipping and
the resampling of environments promoted past the top."""

import jax
import jax.numpy as jnp
import numpy as np

from learning import terrain_curriculum as tc

TILE = 8.0  # promotion: walked > 4 m
LEVELS = 5


def _update(levels, walked, commanded, fell, done=None, key=0):
    levels = jnp.asarray(levels)
    done = jnp.ones(levels.shape, bool) if done is None else jnp.asarray(done)
    update = jax.jit(tc.update_levels, static_argnums=(6, 7))
    results = (jnp.asarray(walked), jnp.asarray(commanded), jnp.asarray(fell), done)
    return np.asarray(update(jax.random.PRNGKey(key), levels, *results, TILE, LEVELS))


def test_promotion_and_demotion():
    """Episodes of 20 s: each row a case of the rule (walked vs half the tile, 4 m, and vs half
    the commanded distance)."""
    commanded = np.asarray(tc.commanded_distance(
        jnp.array([[1.0, 0.0, 0.3], [0.6, 0.8, 0.0], [0.3, 0.0, 0.0], [0.0, 0.0, 1.0],
                   [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]), 20.0))  # fmt: skip
    np.testing.assert_allclose(commanded, [20.0, 20.0, 6.0, 0.0, 20.0, 20.0])
    walked = np.asarray(tc.walked_distance(
        jnp.zeros((6, 2)), jnp.array([[4.5, 0.0], [3.0, 4.0], [2.9, 0.0], [0.0, 0.1],
                                      [4.01, 0.0], [9.0, 1.0]])))  # fmt: skip
    fell = np.array([False, False, False, False, True, False])
    new = _update([2, 2, 2, 2, 2, 2], walked, commanded, fell)
    # 4.5 > 4: up; 5 > 4: up (though < half of 20? promotion wins); 2.9 < 3 = half of 6:
    # down; a pure turn (commanded 0) that stayed: kept; fell after 4.01 m: down; 9.06 m: up
    np.testing.assert_array_equal(new, [3, 3, 1, 2, 1, 3])


def test_walked_enough_for_the_command_stays():
    """Walked more than half the command but not half the tile: neither up nor down."""
    new = _update([1, 3], walked=[3.5, 1.6], commanded=[6.0, 3.0], fell=[False, False])
    np.testing.assert_array_equal(new, [1, 3])


def test_levels_clipped_at_zero_and_resampled_past_the_top():
    """Demoted at level 0: stays 0. Promoted at the top (4): a uniform level in [0, 5), the
    same draw as `randint(key, ., 0, 5)`, and over many environments every level occurs."""
    n = 400
    new = _update(np.full(n, LEVELS - 1), np.full(n, 5.0), np.full(n, 4.0), np.zeros(n, bool))
    expected = jax.random.randint(jax.random.PRNGKey(0), (n,), 0, LEVELS, dtype=jnp.int32)
    np.testing.assert_array_equal(new, expected)
    assert set(new.tolist()) == set(range(LEVELS))
    low = _update([0, 0], [0.0, 5.0], [10.0, 10.0], [True, True])
    np.testing.assert_array_equal(low, [0, 0])


def test_only_finished_episodes_move():
    new = _update([2, 2], [6.0, 6.0], [1.0, 1.0], [False, False], done=[True, False])
    np.testing.assert_array_equal(new, [3, 2])


def test_initial_levels_and_kinds():
    levels = np.asarray(tc.initial_levels(jax.random.PRNGKey(1), 300, 2))
    assert set(levels.tolist()) == {0, 1, 2}
    np.testing.assert_array_equal(tc.initial_kinds(7, 3), [0, 1, 2, 0, 1, 2, 0])
