"""The ground under a locomotion environment: flat, or the tiles of one shared height field.

World frame z up, SI units. `TerrainConfig` (in `learning.env_config`) names a
`contact.terrain_tiles.TileLayout`; `build_ground` makes its one `Heightfield` (all tiles, one
array closed over by the compiled step, not batched per environment), searched over `window`
cells around a query (`contact.terrain.heightfield`). The per-environment friction stays an
`EnvParams` leaf: `with_friction` puts it on the shared field.

The reward and termination read the ground relative to the base, never an absolute height:

    h(x, y)          the triangulated height under the base (`contact.terrain.height`)
    n(x, y)          the mean ground normal over a body-sized patch, from central differences
                     of `h` over `+-reach`:
                        n ~ (-(h(x+r, y) - h(x-r, y)) / 2r, -(h(x, y+r) - h(x, y-r)) / 2r, 1)
                     normalised; on a plane its exact normal, on stairs the flight's mean slope
    spawn height     the highest `h` under the base's footprint (centre and the corners of
                     `+-half_extent`), so no foot starts inside a bump
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from contact.terrain import Heightfield, height
from contact.terrain_tiles import tile_terrain


def build_ground(terrain_config, dtype) -> Heightfield:
    """The tiles of `terrain_config` (`learning.env_config.TerrainConfig`) as one `Heightfield`
    (corner at the origin, levels along x, kinds along y), its numbers in `dtype` (the
    environment's: a float64 ground would promote a float32 environment's arithmetic)."""
    c = terrain_config
    ground = tile_terrain(c.layout, seed=c.seed, window=c.window)
    return jax.tree.map(lambda leaf: jnp.asarray(leaf, dtype), ground)


def with_friction(ground: Heightfield, friction) -> Heightfield:
    """`ground` with the Coulomb coefficient `friction ()` (one environment's `EnvParams`)."""
    return dataclasses.replace(ground, friction=jnp.asarray(friction, ground.heights.dtype))


def ground_height(ground: Heightfield, x, y):
    """`h(x, y)` [m] (module docstring); broadcasts."""
    return height(ground, x, y)


def ground_normal(ground: Heightfield, x, y, reach: float):
    """The unit mean ground normal `(3,)` (world frame) at `(x, y)`, central differences of `h`
    over `+-reach` [m] (module docstring)."""
    dx = (height(ground, x + reach, y) - height(ground, x - reach, y)) / (2.0 * reach)
    dy = (height(ground, x, y + reach) - height(ground, x, y - reach)) / (2.0 * reach)
    n = jnp.stack([-dx, -dy, jnp.ones_like(dx)])
    return n / jnp.linalg.norm(n)


def spawn_height(ground: Heightfield, x, y, half_extent):
    """The highest `h` [m] at `(x, y)` and at `(x +- ex, y +- ey)`, `half_extent = (ex, ey)`
    [m]: the ground a standing robot's feet may touch."""
    ex, ey = half_extent
    dtype = ground.heights.dtype
    xs = x + jnp.array([0.0, ex, ex, -ex, -ex], dtype)
    ys = y + jnp.array([0.0, ey, -ey, ey, -ey], dtype)
    return jnp.max(height(ground, xs, ys))
