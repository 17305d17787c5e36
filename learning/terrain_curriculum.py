"""Terrain curriculum: each environment's difficulty level, moved at the end of its episode.

Pure functions on arrays (jittable, `(B,)` per-environment arrays). The rule is legged_gym's
(`_update_terrain_curriculum`), with a fall counted as a failure:

    promote  = walked > tile_size / 2  and not fell
    demote   = (walked < 0.5 |c_xy| T  or fell)  and not promote
    level'   = level + promote - demote,  clipped below at 0;
               an environment promoted past the top level `num_levels - 1` is resampled
               uniformly in `[0, num_levels)` (so the hardest tiles stay occupied by robots
               that can walk them, and the rest of the range is revisited)

`walked` [m] is the horizontal distance from the episode's spawn point to where it ended,
`|c_xy| T` [m] the distance its velocity command asked for over the episode's duration `T`.
Only environments whose episode ended (`done`) move. The environment's kind (terrain column)
does not change; its spawn point is the centre of tile `(level', kind)`
(`contact.terrain_tiles.tile_centre`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def commanded_distance(command, duration):
    """`|c_xy| T` [m]: the distance the commands `command (B, 3)` (`[v_x, v_y, yaw_rate]`)
    ask for over `duration` [s] (scalar or `(B,)`)."""
    return jnp.linalg.norm(command[..., :2], axis=-1) * duration


def walked_distance(spawn_xy, final_xy):
    """Horizontal distance [m] `(B,)` from `spawn_xy (B, 2)` to `final_xy (B, 2)`."""
    return jnp.linalg.norm(final_xy - spawn_xy, axis=-1)


def level_changes(walked, commanded, fell, tile_size):
    """`(promote, demote)` booleans `(B,)` of the rule in the module docstring."""
    promote = (walked > 0.5 * tile_size) & ~fell
    demote = ((walked < 0.5 * commanded) | fell) & ~promote
    return promote, demote


def update_levels(key, levels, walked, commanded, fell, done, tile_size, num_levels):
    """New levels `(B,)` int32 after the episodes that ended (`done (B,)`); the others keep
    theirs. `levels (B,)` ints in `[0, num_levels)`, `walked`, `commanded (B,)` [m], `fell (B,)`
    bool, `tile_size` [m], `num_levels` (static). `key` draws the resampled levels."""
    levels = jnp.asarray(levels, jnp.int32)
    promote, demote = level_changes(walked, commanded, fell, tile_size)
    moved = levels + promote.astype(jnp.int32) - demote.astype(jnp.int32)
    resampled = jax.random.randint(key, levels.shape, 0, num_levels, dtype=jnp.int32)
    moved = jnp.where(moved >= num_levels, resampled, jnp.maximum(moved, 0))
    return jnp.where(done, moved, levels)


def initial_levels(key, num_envs: int, max_initial_level: int):
    """Levels `(B,)` uniform in `[0, max_initial_level]` (legged_gym starts low and lets the
    curriculum raise them)."""
    return jax.random.randint(key, (num_envs,), 0, max_initial_level + 1, dtype=jnp.int32)


def initial_kinds(num_envs: int, num_kinds: int):
    """Kinds `(B,)`: environments spread evenly over the terrain kinds, `b mod num_kinds`."""
    return jnp.arange(num_envs, dtype=jnp.int32) % num_kinds
