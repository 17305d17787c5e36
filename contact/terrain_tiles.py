"""Rough-ground terrains: tile generators, their layout in one height field, and per-environment
terrains.

World frame: z up, SI units. A tile is a square of side `tile_size` sampled on the nodes of a
`cell_size` grid: an array `(n, n)`, `n = tile_size / cell_size`, node `(i, j)` at
`(i cell_size, j cell_size)` from the tile's corner (the node row at the far edge belongs to the
next tile). Each generator is a pure function of `(difficulty in [0, 1], seed, tile_size,
cell_size)` and, except rough ground, is zero on the tile's edge and flat on a central platform
of side `PLATFORM` (where a robot spawns):

    kind          height at a node, d = distance to the tile edge (Chebyshev), s = difficulty
    rough         uniform noise of half-range a = 0.01 + 0.04 s [m] on a ROUGH_SPACING grid,
                  interpolated bilinearly
    slope_up      tan(20 deg * s) min(d, D),      D = (tile_size - PLATFORM) / 2 (a pyramid)
    slope_down    the negative
    stairs_up     r floor(min(d, D) / TREAD),     riser r = 0.05 + 0.10 s [m] (a pyramid)
    stairs_down   the negative
    blocks        NUM_BLOCKS random rectangles (sides 0.4..1 m) of heights in [0, 0.05 + 0.10 s]

Layout (`TileLayout`): tile `(level l, kind k)` covers `x in border + [l, l + 1) tile_size`,
`y in border + [k, k + 1) tile_size`, levels along x (difficulty `l / (num_levels - 1)`), kinds
along y, all of it inside a flat border at height 0; one `Heightfield` with `x0 = y0 = 0`.
`tile_at` and `tile_centre` map between world `(x, y)` and `(level, kind)` (jittable).
Per-environment terrains (`tile_bank`, `env_terrains`): each environment gets its own tile, with
its own border, centred on the origin, as one `Heightfield` with a leading batch axis.

Bad input raises `ValueError` naming the argument: a length that is not a positive multiple of
`cell_size`, tiles of different shapes, a NaN height, and a riser (the height difference between
neighbouring nodes, along x, y or the triangles' diagonal) above `max_riser` (a robot with
shorter legs cannot climb it).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .terrain import Heightfield, heightfield

KINDS = ("rough", "slope_up", "slope_down", "stairs_up", "stairs_down", "blocks")
PLATFORM = 1.0  # [m] side of the flat square at the centre of the slope, stairs and blocks tiles
TREAD = 0.3  # [m] stair tread
MAX_SLOPE = np.deg2rad(20.0)  # [rad] slope at difficulty 1
RISER = (0.05, 0.15)  # [m] stair riser at difficulty 0 and 1
ROUGH_AMPLITUDE = (0.01, 0.05)  # [m] half-range of the rough ground's noise at difficulty 0, 1
ROUGH_SPACING = 0.2  # [m] spacing of the rough ground's random samples
BLOCK_HEIGHT = (0.05, 0.15)  # [m] largest block height at difficulty 0 and 1
BLOCK_SIDE = (0.4, 1.0)  # [m] range of a block's sides
NUM_BLOCKS = 20


# ----------------------------------------------------------------------------- validation
def num_cells(name: str, length: float, cell_size: float) -> int:
    """`length / cell_size` as an int; `ValueError` naming `name` unless it is a positive
    multiple (to 1e-9 relative)."""
    if not cell_size > 0:
        raise ValueError(f"cell_size must be > 0, got {cell_size}")
    ratio = length / cell_size
    n = int(round(ratio))
    if n < 1 or abs(ratio - n) > 1e-9 * max(ratio, 1.0):
        raise ValueError(
            f"{name} must be a positive multiple of cell_size {cell_size} m, got {length} m "
            f"({ratio:.6g} cells)"
        )
    return n


def largest_riser(heights) -> tuple[float, tuple[int, int]]:
    """The largest height difference [m] between neighbouring nodes of `heights (nx, ny)`
    (along x, y and the diagonal `(i, j) -> (i+1, j+1)` that splits each cell) and the node
    `(i, j)` where it starts."""
    h = np.asarray(heights, dtype=float)
    best, where = 0.0, (0, 0)
    for d in (
        np.abs(h[1:] - h[:-1]),
        np.abs(h[:, 1:] - h[:, :-1]),
        np.abs(h[1:, 1:] - h[:-1, :-1]),
    ):
        if d.size and d.max() > best:
            best, where = (
                float(d.max()),
                tuple(int(k) for k in np.unravel_index(d.argmax(), d.shape)),
            )
    return best, where


def check_heights(heights, cell_size: float, max_riser: float | None = None, what="heights"):
    """`ValueError` if `heights` holds a NaN or an infinity, or (with `max_riser` [m], e.g. the
    robot's leg length) a riser taller than `max_riser`; `what` names the array in the message."""
    h = np.asarray(heights, dtype=float)
    bad = ~np.isfinite(h)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise ValueError(
            f"{what} must be finite, got {h[i, j]} at node ({i}, {j}) "
            f"(x = {i * cell_size:.3f} m, y = {j * cell_size:.3f} m from its corner)"
        )
    if max_riser is not None:
        riser, (i, j) = largest_riser(h)
        if riser > max_riser:
            raise ValueError(
                f"max_riser: {what} has a {riser:.3f} m riser at node ({i}, {j}) (x = "
                f"{i * cell_size:.3f} m, y = {j * cell_size:.3f} m from its corner); expected "
                f"every riser <= max_riser = {max_riser} m, the tallest step the robot can climb"
            )


# ----------------------------------------------------------------------------- tile generators
def _lerp(bounds, difficulty):
    return bounds[0] + (bounds[1] - bounds[0]) * float(np.clip(difficulty, 0.0, 1.0))


def _edge_distance(tile_size: float, cell_size: float):
    """`(n, n)` Chebyshev distance [m] of each node to the tile's edge, capped at the platform
    edge `D = (tile_size - PLATFORM) / 2`, and `D`."""
    n = num_cells("tile_size", tile_size, cell_size)
    s = cell_size * np.arange(n)
    d1 = np.minimum(s, tile_size - s)
    reach = max(0.5 * (tile_size - PLATFORM), 0.0)
    return np.minimum(np.minimum(d1[:, None], d1[None, :]), reach), reach


def rough(difficulty, seed, tile_size, cell_size):
    """Random rough ground `(n, n)`: uniform noise in `[-a, a]`, `a = 0.01 + 0.04 difficulty`
    [m], drawn on a `ROUGH_SPACING` grid and interpolated bilinearly to the nodes."""
    n = num_cells("tile_size", tile_size, cell_size)
    a = _lerp(ROUGH_AMPLITUDE, difficulty)
    m = int(np.ceil(tile_size / ROUGH_SPACING)) + 1
    coarse = np.random.default_rng(seed).uniform(-a, a, size=(m, m))
    grid, s = ROUGH_SPACING * np.arange(m), cell_size * np.arange(n)
    along_x = np.stack([np.interp(s, grid, coarse[:, k]) for k in range(m)], axis=1)
    return np.stack([np.interp(s, grid, along_x[i]) for i in range(n)], axis=0)


def slope(difficulty, seed, tile_size, cell_size, up=True):
    """A pyramid `(n, n)` sloping at `20 deg * difficulty` from the edge (height 0) to the
    central platform: up (a hill) or down (a pit). `seed` is unused (deterministic)."""
    del seed
    d, _ = _edge_distance(tile_size, cell_size)
    h = np.tan(MAX_SLOPE * float(np.clip(difficulty, 0.0, 1.0))) * d
    return h if up else -h


def stairs(difficulty, seed, tile_size, cell_size, up=True):
    """A stepped pyramid `(n, n)`: treads `TREAD` deep, risers `0.05 + 0.10 difficulty` [m],
    from the edge (height 0) to the central platform, up or down. `seed` is unused."""
    del seed
    d, reach = _edge_distance(tile_size, cell_size)
    riser = _lerp(RISER, difficulty)
    # the small offset keeps a node exactly on a tread boundary on the upper tread
    k = np.minimum(np.floor(d / TREAD + 1e-9), np.floor(reach / TREAD + 1e-9))
    return riser * k if up else -riser * k


def blocks(difficulty, seed, tile_size, cell_size):
    """`NUM_BLOCKS` random rectangular blocks `(n, n)` (sides uniform in `BLOCK_SIDE`, centres
    uniform on the tile, heights uniform in `[0, 0.05 + 0.10 difficulty]` m; overlapping blocks
    take the taller), the central platform cleared to 0."""
    n = num_cells("tile_size", tile_size, cell_size)
    rng = np.random.default_rng(seed)
    top = _lerp(BLOCK_HEIGHT, difficulty)
    s = cell_size * np.arange(n)
    h = np.zeros((n, n))
    for _ in range(NUM_BLOCKS):
        (cx, cy), (wx, wy) = rng.uniform(0, tile_size, 2), rng.uniform(*BLOCK_SIDE, 2)
        inside = (np.abs(s - cx)[:, None] <= wx / 2) & (np.abs(s - cy)[None, :] <= wy / 2)
        h = np.where(inside, np.maximum(h, rng.uniform(0.0, top)), h)
    centre = np.abs(s - tile_size / 2) <= PLATFORM / 2
    return np.where(centre[:, None] & centre[None, :], 0.0, h)


GENERATORS = {
    "rough": rough,
    "slope_up": lambda *a: slope(*a, up=True),
    "slope_down": lambda *a: slope(*a, up=False),
    "stairs_up": lambda *a: stairs(*a, up=True),
    "stairs_down": lambda *a: stairs(*a, up=False),
    "blocks": blocks,
}


def generate_tile(kind: str, difficulty, seed, tile_size, cell_size):
    """The tile `(n, n)` of `kind` (one of `KINDS`)."""
    if kind not in GENERATORS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return np.asarray(GENERATORS[kind](difficulty, seed, tile_size, cell_size), dtype=float)


# ----------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class TileLayout:
    """Static description of a tiled terrain: `kinds` along y, `num_levels` along x, square
    tiles of `tile_size` [m] on a `cell_size` [m] grid, inside a flat `border` [m]. Hashable,
    so jitted functions can close over it."""

    kinds: tuple = KINDS
    num_levels: int = 10
    tile_size: float = 8.0
    cell_size: float = 0.1
    border: float = 2.0

    def __post_init__(self):
        unknown = [k for k in self.kinds if k not in GENERATORS]
        if unknown or not self.kinds:
            raise ValueError(f"kinds must be a non-empty tuple of {KINDS}, got {self.kinds}")
        if self.num_levels < 1:
            raise ValueError(f"num_levels must be >= 1, got {self.num_levels}")
        num_cells("tile_size", self.tile_size, self.cell_size)
        if self.border != 0.0:
            num_cells("border", self.border, self.cell_size)

    @property
    def cells_per_tile(self) -> int:
        return num_cells("tile_size", self.tile_size, self.cell_size)

    @property
    def border_cells(self) -> int:
        return 0 if self.border == 0.0 else num_cells("border", self.border, self.cell_size)

    def difficulty(self, level):
        """Difficulty in `[0, 1]` of `level` (0 for a single level)."""
        return level / max(self.num_levels - 1, 1)


def assemble(tiles, cell_size: float, border: float = 0.0, max_riser=None, friction=0.8,
             window=None):  # fmt: skip
    """One `Heightfield` from a grid of tiles `tiles[l][k]` (each `(n, n)`, the same `n`), row
    `l` along x, column `k` along y, inside a flat border (height 0) of `border` [m], corner at
    the origin, its distance query searching `window` cells around the point (`heightfield`).
    `ValueError` for tiles of different shapes or non-square ones, NaN heights, a
    border not a multiple of `cell_size`, or a riser above `max_riser` [m] (between tiles too)."""
    rows = [list(r) for r in tiles]
    if not rows or not rows[0]:
        raise ValueError("tiles must be a non-empty grid tiles[level][kind] of (n, n) arrays")
    first = np.shape(rows[0][0])
    if len(first) != 2 or first[0] != first[1] or first[0] < 1:
        raise ValueError(f"tiles must be square (n, n) arrays, got tile (0, 0) of shape {first}")
    for l, row in enumerate(rows):
        if len(row) != len(rows[0]):
            raise ValueError(f"tiles: row {l} has {len(row)} tiles, expected {len(rows[0])}")
        for k, tile in enumerate(row):
            if np.shape(tile) != first:
                raise ValueError(
                    f"tiles must all have the same shape: tile ({l}, {k}) is {np.shape(tile)}, "
                    f"tile (0, 0) is {first}"
                )
            check_heights(tile, cell_size, None, what=f"tile ({l}, {k})")
    nb = 0 if border == 0.0 else num_cells("border", border, cell_size)
    n = first[0]
    inner = np.block([[np.asarray(t, dtype=float) for t in row] for row in rows])
    heights = np.zeros((inner.shape[0] + 2 * nb + 1, inner.shape[1] + 2 * nb + 1))
    heights[nb : nb + len(rows) * n, nb : nb + len(rows[0]) * n] = inner
    check_heights(heights, cell_size, max_riser, what="terrain")
    return heightfield(heights, 0.0, 0.0, cell_size, friction, window)


def tile_grid(layout: TileLayout, seed: int = 0):
    """The tiles `[level][kind]` of `layout`, tile `(l, k)` drawn with the seed `(seed, l, k)`."""
    return [
        [
            generate_tile(
                kind, layout.difficulty(l), (seed, l, k), layout.tile_size, layout.cell_size
            )  # fmt: skip
            for k, kind in enumerate(layout.kinds)
        ]
        for l in range(layout.num_levels)
    ]


def tile_terrain(layout: TileLayout, seed: int = 0, max_riser=None, friction=0.8,
                 window=None) -> Heightfield:  # fmt: skip
    """The tiles of `layout` as one `Heightfield` (`assemble`), refusing risers above
    `max_riser` [m]; `window` as in `contact.terrain.heightfield`."""
    tiles = tile_grid(layout, seed)
    return assemble(tiles, layout.cell_size, layout.border, max_riser, friction, window)


def tile_at(layout: TileLayout, x, y):
    """The tile under world `(x, y)`: `(level, kind, on_tiles)`, `level` and `kind` int32
    clipped to the grid, `on_tiles` false over the border. Broadcasts; jittable."""
    level = jnp.floor((jnp.asarray(x) - layout.border) / layout.tile_size).astype(jnp.int32)
    kind = jnp.floor((jnp.asarray(y) - layout.border) / layout.tile_size).astype(jnp.int32)
    num_kinds = len(layout.kinds)
    on = (level >= 0) & (level < layout.num_levels) & (kind >= 0) & (kind < num_kinds)
    return (jnp.clip(level, 0, layout.num_levels - 1), jnp.clip(kind, 0, num_kinds - 1), on)


def tile_centre(layout: TileLayout, level, kind):
    """World `(x, y)` of the centre of tile `(level, kind)` (the spawn point). Broadcasts."""
    x = layout.border + (jnp.asarray(level) + 0.5) * layout.tile_size
    y = layout.border + (jnp.asarray(kind) + 0.5) * layout.tile_size
    return x, y


# ----------------------------------------------------------------------------- per environment
def tile_bank(layout: TileLayout, seed: int = 0, max_riser=None):
    """Every tile of `layout` with its own flat border: `(num_levels, num_kinds, N, N)`,
    `N = n + 2 border_cells + 1`, the same tiles as `tile_terrain(layout, seed)`."""
    nb, n = layout.border_cells, layout.cells_per_tile
    grid = tile_grid(layout, seed)
    bank = np.zeros((layout.num_levels, len(layout.kinds), n + 2 * nb + 1, n + 2 * nb + 1))
    for l, row in enumerate(grid):
        for k, tile in enumerate(row):
            bank[l, k, nb : nb + n, nb : nb + n] = tile
            check_heights(bank[l, k], layout.cell_size, max_riser, what=f"tile ({l}, {k})")
    return bank


def env_terrains(layout: TileLayout, bank, levels, kinds, friction=0.8, window=3) -> Heightfield:
    """Per-environment terrains: a `Heightfield` whose leaves have a leading axis `B`
    (`heights (B, N, N)`), environment `b` on tile `(levels[b], kinds[b])` of `bank`
    (`tile_bank`) centred on the origin (`x0 = y0 = -(border + tile_size / 2)`). Jittable
    (a gather); `vmap(signed_distance, in_axes=(0, 0))` over it."""
    heights = jnp.asarray(bank)[jnp.asarray(levels), jnp.asarray(kinds)]
    b = heights.shape[0]
    origin = -(layout.border + 0.5 * layout.tile_size)
    full = lambda v: jnp.full((b,), v, dtype=heights.dtype)  # noqa: E731
    return Heightfield(heights, full(origin), full(origin), full(layout.cell_size), full(friction),
                       window)  # fmt: skip
