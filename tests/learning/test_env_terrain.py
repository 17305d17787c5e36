"""The terrain curriculum wrapper (`learning.env_terrain`) on a small height field: spawning on a
tile's ground, the termination relative to the ground under the base, the curriculum's moves
when episodes end and the next episode on the new tile, and the ground normal of the reward."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from contact.terrain_tiles import MAX_SLOPE, PLATFORM, RISER, TileLayout, tile_centre
from dynamics.configuration import State
from learning.env import EnvConfig, Randomization, make_env
from learning.env_config import TerrainConfig
from learning.env_core import heading_frame_velocity
from learning.env_ground import ground_height, ground_normal, spawn_height
from learning.env_terrain import FOOTPRINT
from learning.policy import CONTROL_DT, projected_gravity

TILE = 2.0  # [m]: promotion past 1 m walked
LAYOUT = TileLayout(kinds=("slope_down", "stairs_up"), num_levels=2, tile_size=TILE,
                    cell_size=0.1, border=1.0)  # fmt: skip
FRACTION = 0.7  # fell below 0.7 standing heights above the ground
CONFIG = EnvConfig(robot="go2", randomization=Randomization.none(), min_height_fraction=FRACTION,
                   num_sweeps=4,
                   episode_length=50,
                   terrain=TerrainConfig(layout=LAYOUT, max_initial_level=1))  # fmt: skip
FAST = {"xla_backend_optimization_level": 0}


@pytest.fixture(scope="module")
def env():
    return make_env(CONFIG)


@pytest.fixture(scope="module")
def step(env):
    return jax.jit(jax.vmap(env.step), compiler_options=FAST)


@pytest.fixture(scope="module")
def fresh(env):
    """Two fresh environments `EnvState` (batched)."""
    reset = jax.jit(jax.vmap(env.reset), compiler_options=FAST)
    return reset(jax.random.split(jax.random.PRNGKey(3), 2))


@pytest.fixture(scope="module")
def on_tiles(env, fresh):
    """`on_tiles(levels, kinds)`: the two fresh environments moved onto tiles
    `(levels[b], kinds[b])`."""
    curriculum = env.wrapped.env  # AutoReset(TerrainCurriculum(...)) without pushes and noise
    place = jax.jit(jax.vmap(curriculum.place), compiler_options=FAST)
    return lambda levels, kinds: place(fresh, jnp.asarray(levels), jnp.asarray(kinds))


def test_flat_default_has_no_terrain():
    assert EnvConfig().terrain is None and "terrain" not in EnvConfig().to_dict()
    assert make_env(EnvConfig(robot="solo12")).core.ground is None
    with pytest.raises(ValueError, match="max_initial_level"):
        TerrainConfig(layout=LAYOUT, max_initial_level=2)


def test_reset_spawns_on_the_ground_of_a_tile(env, fresh):
    state = fresh
    t, q = state.terrain, np.asarray(state.sim.q)
    assert np.all((0 <= t.level) & (t.level <= 1)) and np.all((0 <= t.kind) & (t.kind <= 1))
    x, y = tile_centre(LAYOUT, t.level, t.kind)
    np.testing.assert_allclose(q[:, 0], x) and np.testing.assert_allclose(q[:, 1], y)
    ground = [spawn_height(env.core.ground, a, b, FOOTPRINT) for a, b in zip(x, y)]
    np.testing.assert_allclose(q[:, 2] - np.asarray(ground), env.core.standing_height, atol=1e-12)
    assert np.all(t.walked == 0.0) and np.all(t.commanded == 0.0)


def test_standing_in_a_pit_is_not_a_fall(env, step, on_tiles):
    """Standing on the platform of the steepest slope_down tile (0.18 m below the border) and of
    the highest stairs_up one: the base stays at a standing height above the ground under it,
    not a fall, though in the pit its absolute height is below 0.7 standing heights (a
    termination on `z` alone would end the episode at once)."""
    state = on_tiles([1, 1], [0, 1])
    depth = np.tan(MAX_SLOPE) * 0.5 * (TILE - PLATFORM)
    rise = RISER[1] * np.floor(0.5 * (TILE - PLATFORM) / 0.3)
    np.testing.assert_allclose(np.asarray(state.sim.q[:, 2]) - env.core.standing_height,
                               [-depth, rise], atol=1e-9)  # fmt: skip
    assert state.sim.q[0, 2] < FRACTION * env.core.standing_height
    zero = jnp.zeros((2, env.nu))
    for _ in range(5):
        state, _, _, done, info = step(state, zero)
        assert not np.any(np.asarray(done))
    height = jax.vmap(env.core.base_height)(state.sim.q)
    assert np.all(np.asarray(height) > 0.85 * env.core.standing_height)


def test_episode_end_moves_the_level_and_respawns_there(env, step, on_tiles):
    """Truncated episodes: environment 0 (level 0) walked 1.5 m > TILE / 2 and is promoted,
    environment 1 (level 1) walked 0.1 m of the 10 m it was asked for and is demoted; each next
    episode starts at the centre of its new tile, same kind, path lengths zero, its observation
    the one the step returned (moving the base is invisible to a blind policy). Before the end,
    one step adds the base's displacement and `|c_xy| CONTROL_DT` to the path lengths."""
    state = on_tiles([0, 1], [1, 0])
    after, *_ = step(state, jnp.zeros((2, env.nu)))
    moved = np.linalg.norm(np.asarray(after.sim.q[:, :2] - state.sim.q[:, :2]), axis=-1)
    np.testing.assert_allclose(after.terrain.walked, moved, rtol=1e-12)
    commanded = np.linalg.norm(np.asarray(state.command[:, :2]), axis=-1) * CONTROL_DT
    np.testing.assert_allclose(after.terrain.commanded, commanded, rtol=1e-12)
    terrain = state.terrain.replace(walked=jnp.array([1.5, 0.1]), commanded=jnp.array([1.0, 10.0]))
    state = state.replace(t=jnp.full((2,), CONFIG.episode_length - 1, jnp.int32), terrain=terrain)
    state, obs, _, done, info = step(state, jnp.zeros((2, env.nu)))
    assert np.all(np.asarray(info["truncated"])) and np.all(np.asarray(done))
    np.testing.assert_array_equal(state.terrain.level, [1, 0])
    np.testing.assert_array_equal(state.terrain.kind, [1, 0])
    x, y = tile_centre(LAYOUT, jnp.array([1, 0]), jnp.array([1, 0]))
    np.testing.assert_allclose(state.sim.q[:, 0], x) and np.testing.assert_allclose(
        state.sim.q[:, 1], y
    )
    assert np.all(state.t == 0) and np.all(state.terrain.walked == 0.0)
    np.testing.assert_array_equal(obs, jax.vmap(env.observe)(state))


def test_ground_normal_and_relative_terms(env):
    """On a slope_down face falling along +x the normal is the face's, `(sin a, 0, cos a)`;
    where the normal is `e_z` (the flat border) the relative terms are the flat
    ones: `v_W . n = v_z` and `-R^T n` = the projected gravity."""
    ground = env.core.ground
    cx, cy = tile_centre(LAYOUT, 1, 0)
    x = float(cx) - 0.5 * PLATFORM - 0.25  # on the face falling towards the platform (+x)
    n = np.asarray(ground_normal(ground, x, float(cy), 0.2))
    a = MAX_SLOPE
    np.testing.assert_allclose(n, [np.sin(a), 0.0, np.cos(a)], atol=1e-12)
    assert float(ground_height(ground, 0.3, 0.3)) == 0.0
    q = jnp.asarray(env.core.q_standing).at[0:2].set(0.3)
    quat = jnp.array([0.9, 0.2, -0.3, 0.25])
    q = q.at[3:7].set(quat / jnp.linalg.norm(quat))
    v = jnp.linspace(-1.0, 1.0, env.model.nv)

    @jax.jit
    def relative_and_flat(q, v):
        flat = (heading_frame_velocity(q, v)[1], projected_gravity(q[3:7]))
        return env.core.ground_relative(State(q, v)), flat

    (v_n, gravity), (v_z, flat_gravity) = relative_and_flat(q, v)
    np.testing.assert_allclose(v_n, v_z, atol=1e-12)
    np.testing.assert_allclose(gravity, flat_gravity, atol=1e-12)
