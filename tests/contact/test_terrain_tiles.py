"""Terrain tiles: each generator's geometry against its definition, the layout's tile lookup,
per-environment terrains, and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from contact import terrain
from contact import terrain_tiles as tt

jax.config.update("jax_enable_x64", True)

TILE, CELL = 4.0, 0.1  # a 40 x 40 node tile
N = 40


@pytest.mark.parametrize("difficulty", [0.0, 0.5, 1.0])
def test_stairs_risers_and_treads(difficulty):
    """Stairs up: every height is a whole number of risers r = 0.05 + 0.10 s, zero on the tile
    edge, and the first riser is one tread (3 cells) in; down is the mirror image."""
    r = 0.05 + 0.10 * difficulty
    up = tt.generate_tile("stairs_up", difficulty, 0, TILE, CELL)
    down = tt.generate_tile("stairs_down", difficulty, 0, TILE, CELL)
    assert up.shape == (N, N)
    np.testing.assert_allclose(down, -up, atol=0)
    steps = up / r
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-12)
    assert up[0].max() == 0.0 and up[:, 0].max() == 0.0
    middle = N // 2
    profile = up[:, middle]
    np.testing.assert_allclose(profile[:3], 0.0)
    np.testing.assert_allclose(profile[3:6], r)
    # D = (4 - 1) / 2 = 1.5 m = 5 treads to the platform, which is flat at 5 r
    np.testing.assert_allclose(up[middle, middle], 5 * r)
    assert tt.largest_riser(up)[0] == pytest.approx(r, abs=1e-12)


@pytest.mark.parametrize("difficulty", [0.25, 1.0])
def test_slope_angle(difficulty):
    """Slope: the pyramid's faces rise at 20 deg * s (height difference per cell tan(a) h
    along the slope), the platform is flat, down is the mirror image."""
    up = tt.generate_tile("slope_up", difficulty, 0, TILE, CELL)
    down = tt.generate_tile("slope_down", difficulty, 0, TILE, CELL)
    np.testing.assert_allclose(down, -up, atol=0)
    rise = np.tan(np.deg2rad(20.0) * difficulty) * CELL
    face = np.diff(up[:10, N // 2])
    np.testing.assert_allclose(face, rise, rtol=1e-12)
    np.testing.assert_allclose(up[18:22, 18:22], up[N // 2, N // 2])
    assert tt.largest_riser(up)[0] <= rise + 1e-12


def test_rough_amplitude_scales_with_difficulty():
    """Rough: bilinear interpolation of samples in [-a, a] stays in [-a, a]; the range grows
    with a = 0.01 + 0.04 s, and differs between seeds."""
    for s in (0.0, 1.0):
        a = 0.01 + 0.04 * s
        h = tt.generate_tile("rough", s, 3, TILE, CELL)
        assert np.abs(h).max() <= a + 1e-15
        assert np.abs(h).max() > 0.5 * a  # 441 samples: one above a/2 but with tiny chance
    assert not np.allclose(tt.generate_tile("rough", 1, 3, TILE, CELL),
                           tt.generate_tile("rough", 1, 4, TILE, CELL))  # fmt: skip


def test_blocks_heights_and_platform():
    top = 0.05 + 0.10 * 0.5
    h = tt.generate_tile("blocks", 0.5, 7, TILE, CELL)
    assert h.min() >= 0.0 and 0.0 < h.max() <= top
    s = CELL * np.arange(N)
    centre = np.abs(s - TILE / 2) <= 0.5
    np.testing.assert_array_equal(h[np.ix_(centre, centre)], 0.0)
    np.testing.assert_array_equal(h, tt.generate_tile("blocks", 0.5, 7, TILE, CELL))


def test_layout_tiles_centres_and_lookup():
    """The assembled field holds each tile at its place: `tile_at(tile_centre(l, k)) = (l, k)`,
    the height at a tile's centre is that tile's, the border is flat and `on_tiles` false."""
    layout = tt.TileLayout(kinds=("stairs_up", "blocks", "slope_down"), num_levels=3,
                           tile_size=TILE, cell_size=CELL, border=1.0)  # fmt: skip
    hf = tt.tile_terrain(layout, seed=5, window=1)
    assert hf.heights.shape == (2 * 10 + 3 * N + 1, 2 * 10 + 3 * N + 1) and hf.window == 1
    levels, kinds = np.meshgrid(np.arange(3), np.arange(3), indexing="ij")
    x, y = tt.tile_centre(layout, levels.ravel(), kinds.ravel())
    lookup = jax.jit(lambda x, y: tt.tile_at(layout, x, y))
    level, kind, on = lookup(x + 1.9, y - 1.9)  # still inside the tile
    np.testing.assert_array_equal(level, levels.ravel())
    np.testing.assert_array_equal(kind, kinds.ravel())
    assert bool(jnp.all(on))
    grid = tt.tile_grid(layout, seed=5)
    for l, k, xc, yc in zip(levels.ravel(), kinds.ravel(), np.asarray(x), np.asarray(y)):
        np.testing.assert_allclose(terrain.height(hf, xc, yc), grid[l][k][N // 2, N // 2])
    assert not bool(lookup(0.5, 5.0)[2]) and not bool(lookup(5.0, 13.5)[2])
    np.testing.assert_array_equal(hf.heights[:10], 0.0)
    np.testing.assert_allclose(layout.difficulty(np.arange(3)), [0.0, 0.5, 1.0])


def test_per_env_terrains_match_the_tiles():
    """Environment b on tile (l, k) sees, around the origin, the shared field around the
    tile's centre: the same heights and the same distances."""
    layout = tt.TileLayout(kinds=("stairs_down", "rough"), num_levels=2, tile_size=TILE,
                           cell_size=CELL, border=0.5)  # fmt: skip
    shared = tt.tile_terrain(layout, seed=1)
    bank = tt.tile_bank(layout, seed=1)
    levels, kinds = jnp.array([1, 0, 1]), jnp.array([0, 1, 1])
    own = tt.env_terrains(layout, bank, levels, kinds)
    assert own.heights.shape == (3, N + 11, N + 11)
    offsets = np.random.default_rng(0).uniform([-1.9, -1.9, -0.2], [1.9, 1.9, 0.3], (3, 3))
    xc, yc = tt.tile_centre(layout, levels, kinds)
    world = jnp.asarray(offsets) + jnp.stack([xc, yc, jnp.zeros(3)], axis=1)
    gap_own, n_own = jax.vmap(terrain.signed_distance)(own, jnp.asarray(offsets))
    gap_shared, n_shared = jax.vmap(terrain.signed_distance, in_axes=(None, 0))(shared, world)
    np.testing.assert_allclose(gap_own, gap_shared, atol=1e-12)
    np.testing.assert_allclose(n_own, n_shared, atol=1e-12)


# ----------------------------------------------------------------------------- bad input
def test_refuses_a_riser_taller_than_the_leg():
    layout = tt.TileLayout(kinds=("stairs_up",), num_levels=3, tile_size=TILE, cell_size=CELL)
    tt.tile_terrain(layout, max_riser=0.15 + 1e-9)  # the top level's risers are 0.15 m
    with pytest.raises(ValueError, match=r"max_riser: .*0\.150 m riser.* <= max_riser = 0\.12"):
        tt.tile_terrain(layout, max_riser=0.12)
    with pytest.raises(ValueError, match="max_riser"):
        tt.tile_bank(layout, max_riser=0.12)
    hf = np.zeros((5, 5))
    hf[3:] = 0.3  # a 30 cm wall between nodes 2 and 3
    with pytest.raises(ValueError, match=r"0\.300 m riser at node \(2, 0\)"):
        tt.check_heights(hf, CELL, max_riser=0.25)


def test_refuses_nan_heights():
    heights = np.zeros((4, 4))
    heights[1, 2] = np.nan
    with pytest.raises(
        ValueError, match=r"heightfield: heights must be finite, got nan at \(1, 2\)"
    ):
        terrain.heightfield(heights, 0.0, 0.0, 0.1)
    with pytest.raises(ValueError, match=r"tile \(0, 1\) must be finite"):
        tt.assemble([[np.zeros((4, 4)), heights]], CELL)


def test_refuses_mismatched_tile_sizes():
    with pytest.raises(ValueError, match=r"tile_size must be a positive multiple of cell_size"):
        tt.TileLayout(tile_size=1.05, cell_size=0.1)
    with pytest.raises(ValueError, match=r"border must be a positive multiple of cell_size"):
        tt.TileLayout(tile_size=1.0, cell_size=0.1, border=0.25)
    with pytest.raises(ValueError, match=r"tile \(1, 0\) is \(4, 5\), tile \(0, 0\) is \(4, 4\)"):
        tt.assemble([[np.zeros((4, 4))], [np.zeros((4, 5))]], CELL)
    with pytest.raises(ValueError, match="row 1 has 1 tiles, expected 2"):
        tt.assemble([[np.zeros((4, 4))] * 2, [np.zeros((4, 4))]], CELL)
    with pytest.raises(ValueError, match="must be square"):
        tt.assemble([[np.zeros((4, 5))]], CELL)
    with pytest.raises(ValueError, match="kind must be one of"):
        tt.generate_tile("lava", 0.5, 0, TILE, CELL)
    with pytest.raises(ValueError, match="window must be an int >= 1"):
        terrain.heightfield(np.zeros((3, 3)), 0.0, 0.0, 0.1, window=0)
