"""The terrain curriculum wrapper: environments on the tiles of one shared height field, each
at its own difficulty level, moved by legged_gym's rule when its episode ends.

    env = TerrainCurriculum(DomainRandomization(core, r), TerrainConfig())

World frame z up, SI units. The ground is the core's (`LocomotionCore.ground`,
`learning.env_ground`): one `Heightfield` of the `TileLayout`, closed over, not batched. Each
environment carries a `TerrainState` in its `EnvState.terrain`: its tile `(level, kind)` and
the path lengths of its episode so far,

    walked    = sum_t |p_xy(t+1) - p_xy(t)|        (base position, per policy step)
    commanded = sum_t |c_xy(t)| CONTROL_DT          (the command in force at each step)

A reset spawns the robot at the centre of a tile, kind uniform over the layout's kinds, level
uniform in `[0, max_initial_level]` (`reset`), its base lifted by the highest ground under its
footprint (`learning.env_ground.spawn_height`). When an episode ends, `step` moves its level by
`learning.terrain_curriculum.update_levels` on these path lengths (which are legged_gym's
displacements for a robot walking straight at a constant command, and stay meaningful when the
command changes within an episode); the auto-reset's `restart` then spawns the next episode at
the centre of the new tile, same kind. The observation is blind: it holds nothing of the base's
position or of the ground, so moving the base does not change it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from contact.terrain_tiles import tile_centre
from dynamics.configuration import State

from .env_contract import Environment, EnvStep, Wrapper
from .env_core import step_keys
from .env_ground import spawn_height
from .policy import CONTROL_DT
from .terrain_curriculum import update_levels

TERRAIN_STREAM = 3  # `fold_in` index of the terrain's draws in a reset key and a step's reset key
FOOTPRINT = (0.25, 0.2)  # [m] half extents (x, y) around the base where the feet may stand


@jax.tree_util.register_dataclass
@dataclass
class TerrainState:
    """One environment's place in the curriculum (scalars): `level`, `kind` (int32) of its
    tile, and its episode's `walked` and `commanded` path lengths [m] (module docstring)."""

    level: jax.Array
    kind: jax.Array
    walked: jax.Array
    commanded: jax.Array

    def replace(self, **changes) -> TerrainState:
        return dataclasses.replace(self, **changes)


class TerrainCurriculum(Wrapper):
    """The module docstring's curriculum around `env` (whose core has the ground of
    `terrain`, a `learning.env_config.TerrainConfig`)."""

    def __init__(self, env: Environment, terrain):
        super().__init__(env)
        if self.unwrapped.ground is None:
            raise ValueError("TerrainCurriculum needs a core with a ground (EnvConfig.terrain)")
        self.terrain = terrain
        self.layout = terrain.layout

    def place(self, env_state, level, kind):
        """`env_state` moved onto tile `(level, kind)`: the base at the standing pose's
        `(x, y, z)` plus the tile's centre and the spawn height there (wherever it was before),
        a fresh `TerrainState`."""
        x, y = tile_centre(self.layout, level, kind)
        q, standing = env_state.sim.q, self.unwrapped.q_standing
        x, y = standing[0] + x, standing[1] + y
        z = standing[2] + spawn_height(self.unwrapped.ground, x, y, FOOTPRINT)
        q = q.at[0].set(x).at[1].set(y).at[2].set(z)
        zero = jnp.zeros((), self.dtype)
        terrain = TerrainState(jnp.asarray(level, jnp.int32), jnp.asarray(kind, jnp.int32),
                               zero, zero)  # fmt: skip
        return env_state.replace(sim=State(q, env_state.sim.v), terrain=terrain)

    def reset(self, key) -> EnvStep:
        s = self.env.reset(key)
        k_level, k_kind = jax.random.split(jax.random.fold_in(key, TERRAIN_STREAM))
        level = jax.random.randint(k_level, (), 0, self.terrain.max_initial_level + 1)
        kind = jax.random.randint(k_kind, (), 0, len(self.layout.kinds))
        return s.replace(env=self.place(s.env, level, kind))

    def step(self, state: EnvStep, action) -> EnvStep:
        s = self.env.step(state, action)
        before, after = state.env, s.env
        t = before.terrain
        moved = jnp.linalg.norm(after.sim.q[0:2] - before.sim.q[0:2])
        walked = t.walked + jax.lax.stop_gradient(moved)
        commanded = t.commanded + jnp.linalg.norm(before.command[:2]) * CONTROL_DT
        key = jax.random.fold_in(step_keys(before.key).reset, TERRAIN_STREAM)
        level = update_levels(key, t.level, walked, commanded, s.info["fell"], s.done,
                              self.layout.tile_size, self.layout.num_levels)  # fmt: skip
        terrain = t.replace(level=level, walked=walked, commanded=commanded)
        return s.replace(env=after.replace(terrain=terrain))

    def restart(self, ended, fresh):
        """The next episode on the tile `ended`'s curriculum chose (its level, its kind)."""
        fresh = self.env.restart(ended, fresh)
        return self.place(fresh, ended.terrain.level, ended.terrain.kind)
