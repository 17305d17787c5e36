"""Terraces: level ground stepping along +x through any sequence of levels, e.g. a flight of
stairs up, a landing and the same flight down (`flight`).

World frame z up, SI units. The profile is piecewise constant along x and extruded along y:

    edges (m,)     x of the risers [m], strictly increasing, m >= 1
    levels (m+1,)  heights [m]: levels[0] for x < edges[0], levels[i] for x in
                   [edges[i-1], edges[i]), levels[m] for x >= edges[m-1]

    H(x) = levels[i(x)],   i(x) = #{k : edges[k] <= x}

Interval `i` is tread `i` (the outer two are unbounded); riser `k` is the vertical segment at
`edges[k]` from `levels[k]` to `levels[k+1]` (outward normal -x where it rises, +x where it
falls). `Terraces` is a pytree like the other terrains of `contact.terrain` (leaves `edges`,
`levels`, `friction`; the number of edges is static, its array shape), so terrains of one shape
can be batched with `vmap` and differentiated in every leaf.

Distance (`terraces_distance`): exact Euclidean distance to the treads `i-W .. i+W` around the
tread `i` under the point and the risers between them (`W = WINDOW`), signed by the side of
the surface; features outside the window are at least `W` inner treads away horizontally, so
the gap is exact when `|gap| < W min_tread` (`min_tread` the shortest inner tread) and clipped
to that, which keeps it continuous where the window shifts (see
`surface_distance.staircase_distance`). With a single riser (m = 1) it is exact everywhere.

`flight(h, L, x0, N, D)`: N risers of `h` up from level 0 at `x0, x0 + L, ..., x0 + (N-1) L`,
the top level `N h` (the landing) `D` long, then N risers of `h` down, `L` apart, to level 0:

    edges  = x0 + (0, L, ..., (N-1) L,  (N-1) L + D + (0, L, ..., (N-1) L))
    levels = h (0, 1, ..., N, N-1, ..., 0)

Bad input raises `ValueError` naming the argument (concrete values; traced ones pass
unchecked): non-finite edges, levels or step height, edges that do not increase (a tread
<= 0), a non-positive `step_length` or `landing_length`, `num_steps` not an int >= 1, a
negative friction, and a riser taller than `max_riser` [m] when given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .checks import NONNEGATIVE, POSITIVE, concrete, require
from .surface_distance import staircase_distance

WINDOW = 2  # treads searched on each side of the one under the point
FINITE = ("finite", np.isfinite)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Terraces:
    """Piecewise-constant ground along +x, extruded along y (module docstring).

    Leaves: `edges (m,)` x of the risers [m], increasing; `levels (m+1,)` tread heights [m];
    `friction ()` Coulomb coefficient.
    """

    kind: ClassVar[str] = "terraces"
    edges: jax.Array
    levels: jax.Array
    friction: jax.Array


def _check_edges(owner: str, edges: np.ndarray) -> None:
    bad = np.flatnonzero(~np.isfinite(edges))
    if bad.size:
        raise ValueError(f"{owner}: edges must be finite, got {edges[bad[0]]} at {bad[0]}")
    treads = np.diff(edges)
    if treads.size and not np.all(treads > 0.0):
        k = int(np.argmin(treads))
        raise ValueError(f"{owner}: edges must increase (every tread > 0), got a tread of "
                         f"{treads[k]} m from edge {k} to {k + 1}")  # fmt: skip


def _check_levels(owner: str, levels: np.ndarray, edges, max_riser) -> None:
    bad = np.flatnonzero(~np.isfinite(levels))
    if bad.size:
        raise ValueError(f"{owner}: levels must be finite, got {levels[bad[0]]} at {bad[0]}")
    if max_riser is None:
        return
    risers = np.abs(np.diff(levels))
    k = int(np.argmax(risers))
    if risers[k] > max_riser:
        where = "" if edges is None else f" (x = {float(edges[k]):.3f} m)"
        raise ValueError(f"max_riser: {owner} has a {risers[k]:.3f} m riser at edge {k}{where};"
                         f" expected every riser <= max_riser = {max_riser} m, the tallest step "
                         "the robot can climb")  # fmt: skip


def terraces(edges, levels, friction=0.8, max_riser=None) -> Terraces:
    """Ground at `levels[i]` between the risers `edges[i-1]` and `edges[i]` (module docstring);
    `edges (m,)`, m >= 1, strictly increasing; `levels (m+1,)`; `max_riser` [m] (optional):
    the tallest riser allowed."""
    edges = jnp.asarray(edges, dtype=jnp.result_type(float))
    levels = jnp.asarray(levels, dtype=jnp.result_type(float))
    if edges.ndim != 1 or edges.shape[0] < 1 or levels.shape != (edges.shape[0] + 1,):
        raise ValueError(f"terraces: expected edges (m,), m >= 1, and levels (m+1,), got "
                         f"edges {edges.shape} and levels {levels.shape}")  # fmt: skip
    edge_values, level_values = concrete(edges), concrete(levels)
    if edge_values is not None:
        _check_edges("terraces", edge_values)
    if level_values is not None:
        _check_levels("terraces", level_values, edge_values, max_riser)
    require("terraces", "friction", friction, NONNEGATIVE)
    friction = jnp.asarray(friction, dtype=jnp.result_type(float))
    return Terraces(edges=edges, levels=levels, friction=friction)


def flight(step_height, step_length, start_x, num_steps: int = 5, landing_length=1.0,
           friction=0.8, max_riser=None) -> Terraces:  # fmt: skip
    """`num_steps` risers of `step_height` [m] up, `step_length` [m] apart, the first at
    `start_x` [m]; a landing `landing_length` [m] long (the top level, from the last riser up
    to the first riser down); the same flight down to level 0 (module docstring). A negative
    `step_height` gives the mirror image: a flight down into a pit and up again."""
    if not isinstance(num_steps, (int, np.integer)) or isinstance(num_steps, bool) or num_steps < 1:
        raise ValueError(f"flight: num_steps must be an int >= 1, got {num_steps!r}")
    for name, value, condition in (("step_height", step_height, FINITE),
                                   ("start_x", start_x, FINITE),
                                   ("step_length", step_length, POSITIVE),
                                   ("landing_length", landing_length, POSITIVE)):  # fmt: skip
        require("flight", name, value, condition)
    rise = concrete(step_height)
    if max_riser is not None and rise is not None and abs(float(rise)) > max_riser:
        raise ValueError(f"max_riser: flight has {abs(float(rise)):.3f} m risers (step_height); "
                         f"expected every riser <= max_riser = {max_riser} m, the tallest step "
                         "the robot can climb")  # fmt: skip
    dtype = jnp.result_type(float)
    h, length = jnp.asarray(step_height, dtype), jnp.asarray(step_length, dtype)
    n = np.arange(num_steps, dtype=float)
    top = (num_steps - 1) * length + jnp.asarray(landing_length, dtype)
    edges = jnp.asarray(start_x, dtype) + jnp.concatenate([n * length, top + n * length])
    steps_up = np.arange(num_steps + 1, dtype=float)
    levels = h * jnp.asarray(np.concatenate([steps_up, steps_up[-2::-1]]))
    return terraces(edges, levels, friction)  # its risers were checked as step_height


def tread_index(terrain: Terraces, x):
    """Index `i (int)` of the tread under `x` (any shape): the number of edges `<= x`."""
    return jnp.searchsorted(terrain.edges, x, side="right")


def terraces_height(terrain: Terraces, x):
    """`H(x) = levels[i(x)]` (jumps at the risers; any shape of `x`)."""
    return terrain.levels[tread_index(terrain, x)]


def terraces_distance(terrain: Terraces, point):
    """`(gap (), normal (3,))` of the world point `point (3,)` (module docstring): the treads
    `j = i-W .. i+W` (clamped to `0 .. m`; a repeated outer tread adds nothing) as segments
    `[x_lo_j, x_hi_j] x {levels[j]}`, the unbounded outer ones cut at the point's own x (so
    their closest point is the foot of the perpendicular), and the risers between them;
    clipped to `+-W min_tread` (exact within it)."""
    x, z = point[0], point[2]
    edges, levels = terrain.edges, terrain.levels
    m = edges.shape[-1]
    i = tread_index(terrain, x)
    j = jnp.clip(i + jnp.arange(-WINDOW, WINDOW + 1), 0, m)
    x_lo = jnp.where(j == 0, jnp.minimum(x, edges[0]), edges[jnp.maximum(j - 1, 0)])
    x_hi = jnp.where(j == m, jnp.maximum(x, edges[m - 1]), edges[jnp.minimum(j, m - 1)])
    limit = WINDOW * jnp.min(jnp.diff(edges)) if m > 1 else jnp.inf
    return staircase_distance(x, z, x_lo, x_hi, levels[j], WINDOW, limit)


__all__ = [
    "FINITE",
    "Terraces",
    "WINDOW",
    "flight",
    "terraces",
    "terraces_distance",
    "terraces_height",
    "tread_index",
]
