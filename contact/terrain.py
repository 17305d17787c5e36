"""Terrains as JAX pytrees, their signed distance, friction and contact frames.

World frame: z up, SI units. A terrain is a frozen dataclass registered as a pytree: its class
is the (static) kind, every numeric parameter is a traced leaf, so terrains can be batched with
`vmap`, randomised (friction, heights) and differentiated. The constructors below raise
`ValueError` naming the argument for a concrete negative `friction`, a `step_length` or
`cell_size` <= 0, non-finite `heights` (`checks.require`; traced values pass unchecked).
`Terraces` (a flight up, a landing and down again, or any piecewise-constant profile along x)
lives in `contact.terraces`, with its own checks; it is dispatched here like the others.

    kind         constructor                                      distance
    Plane        flat(height), incline(angle), plane(n, h)        exact
    Steps        steps(step_height, step_length, start_x)         exact within 2 step lengths
    Terraces     flight(h, L, x0, N, D), terraces(edges, levels)  exact within 2 treads
    Heightfield  heightfield(heights, x0, y0, cell_size)          exact within `window` cells (3)

`signed_distance(terrain, p) -> (gap, normal)`: `gap > 0` above (outside) the ground, `normal`
the unit outward normal, equal to the gradient of the gap wherever the gap is differentiable.
Every gap has finite first derivatives everywhere (including on the surface and at edges).

`contact_frame(normal) -> R (3, 3)` with columns `[t1, t2, n]`: a contact-frame vector
`p_C = [p_t1, p_t2, p_n]` maps to the world as `p_W = R p_C`, and `v_C = R^T v_W`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Literal

import jax
import jax.numpy as jnp
import numpy as np

from .checks import NONNEGATIVE, POSITIVE, concrete, require
from .surface_distance import nearest_feature, staircase_distance
from .terraces import Terraces, terraces_distance, terraces_height

# Steps: the distance is computed to the treads k-2..k+2 around the tread under the point and
# the risers between them; it is exact within `_STEPS_WINDOW * step_length` of the surface.
_STEPS_WINDOW = 2
# Heightfield: the distance is computed to the triangles of the cells within this many cells of
# the one under the point; it is exact within `_HEIGHTFIELD_WINDOW * cell_size` of the surface.
_HEIGHTFIELD_WINDOW = 3


def _scalar(x):
    return jnp.asarray(x, dtype=jnp.result_type(float))


def _friction(kind: str, friction):
    """The Coulomb coefficient as a leaf; a concrete negative one raises `ValueError`."""
    require(kind, "friction", friction, NONNEGATIVE)
    return _scalar(friction)


# ----------------------------------------------------------------------------- terrain kinds
@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Plane:
    """Plane `{p : n . (p - (0, 0, height)) = 0}`, solid on the side opposite to `n`.

    Leaves: `normal (3,)` unit outward normal (`n_z > 0`), `height ()` [m] where the plane
    crosses the z axis, `friction ()` Coulomb coefficient.
    """

    kind: ClassVar[str] = "plane"
    normal: jax.Array
    height: jax.Array
    friction: jax.Array


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Steps:
    """Staircase along +x, extruded along y (see `steps`).

    Leaves: `step_height ()` rise per step [m] (negative: descending stairs), `step_length ()`
    tread length [m], `start_x ()` x of the first riser [m], `num_steps ()` number of steps
    (float, `inf` for an endless staircase), `friction ()`.
    """

    kind: ClassVar[str] = "steps"
    step_height: jax.Array
    step_length: jax.Array
    start_x: jax.Array
    num_steps: jax.Array
    friction: jax.Array


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Heightfield:
    """Triangulated height map (see `heightfield`).

    Leaves: `heights (nx, ny)` [m], `heights[i, j]` at `(x0 + i cell_size, y0 + j cell_size)`;
    `x0 ()`, `y0 ()`, `cell_size ()` [m]; `friction ()`. The grid size is static (array shape),
    and so is `window` (int): the distance query searches the cells within `window` cells of
    the one under the point and is exact within `window * cell_size` of the surface.
    """

    kind: ClassVar[str] = "heightfield"
    heights: jax.Array
    x0: jax.Array
    y0: jax.Array
    cell_size: jax.Array
    friction: jax.Array
    window: int = dataclasses.field(default=_HEIGHTFIELD_WINDOW, metadata={"static": True})


Terrain = Plane | Steps | Terraces | Heightfield


# ----------------------------------------------------------------------------- constructors
def plane(normal, height=0.0, friction=0.8) -> Plane:
    """Plane through `(0, 0, height)` with outward normal `normal (3,)` (normalised here)."""
    n = jnp.asarray(normal, dtype=jnp.result_type(float))
    friction = _friction("plane", friction)
    return Plane(normal=n / jnp.linalg.norm(n), height=_scalar(height), friction=friction)


def flat(height=0.0, friction=0.8) -> Plane:
    """Horizontal ground `z = height`."""
    return plane(jnp.array([0.0, 0.0, 1.0]), height, _friction("flat", friction))


InclineAxis = Literal["x", "y"]


def incline(angle, friction=0.8, axis: InclineAxis = "x", height=0.0) -> Plane:
    """Slope through `(0, 0, height)` rising by `angle` [rad] along +x (`axis="x"`) or +y.

    Surface `z = height + tan(angle) x` (resp. `y`); outward normal `(-sin a, 0, cos a)` (resp.
    `(0, -sin a, cos a)`), i.e. the +z axis rotated by `-angle` about y (resp. `+angle` about x).
    `angle` may be traced; `axis` is static.
    """
    a = _scalar(angle)
    s, c, zero = jnp.sin(a), jnp.cos(a), jnp.zeros_like(a)
    if axis == "x":
        n = jnp.stack([-s, zero, c])
    elif axis == "y":
        n = jnp.stack([zero, -s, c])
    else:
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    return Plane(normal=n, height=_scalar(height), friction=_friction("incline", friction))


def steps(step_height, step_length, start_x, friction=0.8, num_steps=float("inf")) -> Steps:
    """Staircase along +x: ground `z = 0` for `x < start_x`, then tread `k = 1, 2, ...` at
    `z = k step_height` for `x in [start_x + (k-1) step_length, start_x + k step_length)`;
    after `num_steps` treads the last height continues as a flat landing.

    Sharp edges, exact Euclidean distance (see `signed_distance`): near a nose (convex edge)
    the distance is to the edge line, so the normal turns smoothly from +z to the riser normal
    over the quarter circle around it, as if the edge were rounded by the query's own clearance.
    """
    require("steps", "step_length", step_length, POSITIVE)
    return Steps(
        step_height=_scalar(step_height),
        step_length=_scalar(step_length),
        start_x=_scalar(start_x),
        num_steps=_scalar(num_steps),
        friction=_friction("steps", friction),
    )


def heightfield(heights, x0, y0, cell_size, friction=0.8, window=None) -> Heightfield:
    """Height map `heights (nx, ny)`, nx, ny >= 2, node `(i, j)` at `(x0 + i h, y0 + j h)` with
    `h = cell_size`; each cell two triangles split along its diagonal from node `(i, j)` to
    `(i+1, j+1)` (the surface `viz` draws), constant (edge values) outside the grid. Sharp
    edges, exact Euclidean distance within `window` cells (default `_HEIGHTFIELD_WINDOW`; see
    `signed_distance`): a stone's vertical side is a wall, not a slope felt from above.

    The query's cost grows as `(2 window + 1)^2`: a contact step needs the distance exact only
    below its activation cut-off (`StepParams.margin`, a few cm), so `window =
    ceil(cutoff / cell_size)` gives the same step for a fraction of the cost (`window_for`)."""
    heights = jnp.asarray(heights, dtype=jnp.result_type(float))
    if heights.ndim != 2 or min(heights.shape) < 2:
        raise ValueError(f"heights must be (nx, ny) with nx, ny >= 2, got {heights.shape}")
    values = concrete(heights)
    if values is not None and not np.all(np.isfinite(values)):
        i, j = np.argwhere(~np.isfinite(values))[0]
        raise ValueError(f"heightfield: heights must be finite, got {values[i, j]} at ({i}, {j})")
    require("heightfield", "cell_size", cell_size, POSITIVE)
    window = _HEIGHTFIELD_WINDOW if window is None else window
    if not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"heightfield: window must be an int >= 1 (cells), got {window!r}")
    window = int(window)
    return Heightfield(
        heights=heights,
        x0=_scalar(x0),
        y0=_scalar(y0),
        cell_size=_scalar(cell_size),
        friction=_friction("heightfield", friction),
        window=window,
    )


def window_for(reach: float, cell_size: float) -> int:
    """The smallest `window` (>= 1) whose query is exact for every gap below `reach` [m]:
    `ceil(reach / cell_size)` (the window's edge is at least `window` cells away)."""
    return max(1, int(-(-float(reach) // float(cell_size))))


# ----------------------------------------------------------------------------- heights
def _steps_tread_index(terrain: Steps, x):
    """Index `k` of the tread under `x` (0: ground before the first riser), as a float."""
    return jnp.floor((x - terrain.start_x) / terrain.step_length) + 1.0


def _steps_tread_height(terrain: Steps, k):
    return jnp.clip(k, 0.0, terrain.num_steps) * terrain.step_height


def _heightfield_cell(terrain: Heightfield, x, y):
    """The cell `(i, j)` under `(x, y)` (clamped to the grid) and the point's coordinates
    `(u, v)` in it, in cells (in [0, 1] inside the grid)."""
    nx, ny = terrain.heights.shape
    sx = jnp.clip((x - terrain.x0) / terrain.cell_size, 0.0, nx - 1.0)
    sy = jnp.clip((y - terrain.y0) / terrain.cell_size, 0.0, ny - 1.0)
    i = jnp.clip(jnp.floor(sx), 0, nx - 2).astype(jnp.int32)
    j = jnp.clip(jnp.floor(sy), 0, ny - 2).astype(jnp.int32)
    return i, j, sx - i, sy - j


def _heightfield_height(terrain: Heightfield, x, y):
    """`H(x, y)` on the triangulated grid (clamped to the grid): cell `(i, j)` is split along
    its diagonal from node `(i, j)` to `(i+1, j+1)`, and `H` is linear on each triangle:

        u >= v:  H = h[i,j] + u (h[i+1,j] - h[i,j]) + v (h[i+1,j+1] - h[i+1,j])
        u <  v:  H = h[i,j] + v (h[i,j+1] - h[i,j]) + u (h[i+1,j+1] - h[i,j+1])
    """
    i, j, u, v = _heightfield_cell(terrain, x, y)
    h = terrain.heights
    h00, h10, h11, h01 = h[i, j], h[i + 1, j], h[i + 1, j + 1], h[i, j + 1]
    lower = h00 + u * (h10 - h00) + v * (h11 - h10)
    upper = h00 + v * (h01 - h00) + u * (h11 - h01)
    return jnp.where(u >= v, lower, upper)


def height(terrain: Terrain, x, y):
    """Terrain height `z` under the world point `(x, y)` (steps: the tread height, which jumps
    at the risers)."""
    if isinstance(terrain, Plane):
        n = terrain.normal
        return terrain.height - (n[0] * x + n[1] * y) / n[2]
    if isinstance(terrain, Steps):
        return _steps_tread_height(terrain, _steps_tread_index(terrain, x))
    if isinstance(terrain, Terraces):
        return terraces_height(terrain, x)
    if isinstance(terrain, Heightfield):
        return _heightfield_height(terrain, x, y)
    raise TypeError(f"unknown terrain {type(terrain).__name__}")


# ----------------------------------------------------------------------------- distances
def _plane_distance(terrain: Plane, point):
    """`gap = n . (p - (0, 0, h))`, exact."""
    n = terrain.normal
    return n @ point - n[2] * terrain.height, n


def _steps_distance(terrain: Steps, point):
    """Exact signed distance to the staircase profile in the (x, z) plane.

    The profile near `x` is the polyline of treads `j = k-2 .. k+2` (horizontal segments
    `[x_j, x_j + L] x {z_j}`) and the risers between them (vertical segments at `x_j + L`).
    For each segment: the clamped closest point `c`, `delta = p - c`. The nearest segment wins.
    If its closest point is interior, `gap` is the linear face offset `n_face . delta` (smooth
    and finite on the surface); if it is an end point (an edge), `gap = s |delta|` with
    `s = sign(z - H(x))`, normal `s delta / |delta|`. Features outside the window are more than
    `2 L` away, so the result is exact when `|gap| < 2 L`; it is clipped to `[-2 L, 2 L]`,
    which keeps it continuous where the window shifts (`surface_distance.staircase_distance`).
    Derivatives jump only on the medial axis (points equidistant from two faces, e.g. above
    the bisector of an inner corner), as for any exact distance to a non-smooth surface.
    """
    x, z = point[0], point[2]
    length = terrain.step_length
    k = _steps_tread_index(terrain, x)
    j = k + jnp.arange(-_STEPS_WINDOW, _STEPS_WINDOW + 1, dtype=x.dtype)
    x_lo = terrain.start_x + (j - 1.0) * length
    z_j = _steps_tread_height(terrain, j)
    return staircase_distance(x, z, x_lo, x_lo + length, z_j, _STEPS_WINDOW,
                              _STEPS_WINDOW * length)  # fmt: skip


def _segment_closest(p, a, b):
    """Closest points `(m, 3)` to `p (3,)` on the segments `a (m, 3) -> b (m, 3)`."""
    d = b - a
    t = jnp.clip(jnp.sum((p[None] - a) * d, axis=-1) / jnp.sum(d * d, axis=-1), 0.0, 1.0)
    return a + t[:, None] * d


def _triangles_closest(p, a, b, c):
    """Closest points `(m, 3)` to `p (3,)` on the triangles `(a, b, c)` (each `(m, 3)`,
    counter-clockwise seen from +z), with `inside (m,)` (the closest point is the projection
    of `p` onto the triangle's plane, inside it), the unit upward normals `(m, 3)` and the
    signed offsets `n . (p - a)` of `p` from the planes. Outside, the closest point lies on
    the nearest edge."""
    e0, e1 = b - a, c - a
    n = jnp.cross(e0, e1)
    n = n / jnp.linalg.norm(n, axis=-1, keepdims=True)
    offset = jnp.sum((p[None] - a) * n, axis=-1)
    projection = p[None] - offset[:, None] * n
    w = projection - a
    d00, d01, d11 = (jnp.sum(e0 * e0, -1), jnp.sum(e0 * e1, -1), jnp.sum(e1 * e1, -1))
    d20, d21 = jnp.sum(w * e0, -1), jnp.sum(w * e1, -1)
    denominator = d00 * d11 - d01 * d01
    beta = (d11 * d20 - d01 * d21) / denominator
    gamma = (d00 * d21 - d01 * d20) / denominator
    inside = (beta >= 0.0) & (gamma >= 0.0) & (beta + gamma <= 1.0)
    edges = jnp.stack([_segment_closest(p, a, b), _segment_closest(p, b, c),
                       _segment_closest(p, c, a)])  # fmt: skip
    nearest = jnp.argmin(jnp.sum((p[None, None] - edges) ** 2, axis=-1), axis=0)
    on_edge = jnp.take_along_axis(edges, nearest[None, :, None], axis=0)[0]
    return jnp.where(inside[:, None], projection, on_edge), inside, n, offset


def _heightfield_window(terrain: Heightfield, x, y):
    """Corners `(a, b, c)`, each `(m, 3)`, of the triangles of the `(2 W + 1)^2` cells around
    the cell under `(x, y)`, `W = terrain.window` (fewer on a smaller grid; the window is
    shifted to stay on the grid)."""
    nx, ny = terrain.heights.shape
    w = terrain.window
    wx, wy = min(2 * w + 1, nx - 1), min(2 * w + 1, ny - 1)
    i, j, _, _ = _heightfield_cell(terrain, x, y)
    i0 = jnp.clip(i - w, 0, nx - 1 - wx)
    j0 = jnp.clip(j - w, 0, ny - 1 - wy)
    z = jax.lax.dynamic_slice(terrain.heights, (i0, j0), (wx + 1, wy + 1))
    gx = terrain.x0 + terrain.cell_size * (i0 + jnp.arange(wx + 1, dtype=z.dtype))
    gy = terrain.y0 + terrain.cell_size * (j0 + jnp.arange(wy + 1, dtype=z.dtype))
    X, Y = jnp.meshgrid(gx, gy, indexing="ij")
    nodes = jnp.stack([X, Y, z], axis=-1)
    n00, n10 = nodes[:-1, :-1].reshape(-1, 3), nodes[1:, :-1].reshape(-1, 3)
    n11, n01 = nodes[1:, 1:].reshape(-1, 3), nodes[:-1, 1:].reshape(-1, 3)
    a = jnp.concatenate([n00, n00])
    b = jnp.concatenate([n10, n11])
    c = jnp.concatenate([n11, n01])
    return a, b, c


def _heightfield_distance(terrain: Heightfield, point):
    """Euclidean distance to the triangles of the `(2 W + 1)^2` cells around the point,
    `W = terrain.window`, signed by the side of the surface `s = sign(z - H(x, y))`:

        closest point inside a triangle:  gap = n . (p - a),  normal n   (smooth on the surface)
        closest point on an edge c:       gap = s |p - c|,    normal s (p - c) / |p - c|

    Triangles outside the window are at least `W` cells away horizontally, so the gap is
    exact wherever `|gap| < W cell_size`; beyond, it lies between that and the vertical gap
    `z - H` (the window always holds the triangle under the point), and may jump there where
    the window moves by a cell. Outside the grid the surface continues flat at its edge heights
    and the gap is the nearer of the window's and the vertical one `z - H`, normal +z.
    """
    x, y, z = point[0], point[1], point[2]
    a, b, c = _heightfield_window(terrain, x, y)
    closest, inside, normals, offsets = _triangles_closest(point, a, b, c)
    best = jnp.argmin(jnp.sum((point[None] - closest) ** 2, axis=-1))
    vertical = z - _heightfield_height(terrain, x, y)
    sign = jnp.where(vertical >= 0.0, 1.0, -1.0)
    gap, normal = nearest_feature(point - closest[best], inside[best], offsets[best],
                                  normals[best], sign, normals[best])  # fmt: skip
    nearer_vertically = jnp.abs(vertical) < jnp.abs(gap) - 1e-12
    up = jnp.array([0.0, 0.0, 1.0], dtype=normal.dtype)
    return jnp.where(nearer_vertically, vertical, gap), jnp.where(nearer_vertically, up, normal)


_DISTANCES = {
    Plane: _plane_distance,
    Steps: _steps_distance,
    Terraces: terraces_distance,
    Heightfield: _heightfield_distance,
}


def signed_distance(terrain: Terrain, point):
    """Signed distance of the world point `point (3,)` to the terrain.

    Returns `(gap (), normal (3,))`: `gap > 0` above the ground, `< 0` below; `normal` is the
    unit outward normal of the surface at the closest point (exact for planes; for steps and
    height fields near the surface, see `_steps_distance`, `_heightfield_distance`).
    Differentiable with finite gradients everywhere; `vmap` over points for several feet.
    """
    try:
        distance = _DISTANCES[type(terrain)]
    except KeyError:
        raise TypeError(f"unknown terrain {type(terrain).__name__}") from None
    return distance(terrain, jnp.asarray(point))


def friction(terrain: Terrain, point):
    """Coulomb friction coefficient `mu ()` at `point (3,)` (constant per terrain)."""
    del point
    return terrain.friction


def contact_frame(normal, xp=jnp):
    """Contact frame `R (3, 3)` with columns `[t1, t2, n]` from the unit normal `n (3,)`
    (`xp`: `jax.numpy`, or `numpy` for a constant on the host).

    `R` is the shortest-arc rotation carrying `e_z` onto `n` (Rodrigues about `e_z x n`):

        t1 = (1 - a n_x^2, -a n_x n_y, -n_x),   t2 = (-a n_x n_y, 1 - a n_y^2, -n_y),
        a = 1 / (1 + n_z)

    so `R = I` for `n = e_z`, `t1` stays in the x-z plane for normals in that plane, and `R`
    is a smooth (rational) function of `n` everywhere except `n = -e_z` (a ceiling), where it is
    singular; terrain normals have `n_z >= 0` (vertical risers: `n_z = 0`, `a = 1`).
    """
    nx, ny, nz = normal[0], normal[1], normal[2]
    a = 1.0 / xp.maximum(1.0 + nz, 1e-12)
    t1 = xp.stack([1.0 - a * nx * nx, -a * nx * ny, -nx])
    t2 = xp.stack([-a * nx * ny, 1.0 - a * ny * ny, -ny])
    return xp.stack([t1, t2, normal], axis=-1)


# ----------------------------------------------------------------------------- serialisation
_KINDS = {cls.kind: cls for cls in (Plane, Steps, Terraces, Heightfield)}


def _static(f) -> bool:
    return bool(f.metadata.get("static", False))


def terrain_to_dict(terrain: Terrain) -> dict:
    """A JSON-able description `{"kind": ..., <leaf>: float or nested list}` of a terrain
    (static fields, e.g. a height field's `window`, as they are)."""
    out = {"kind": terrain.kind}
    for f in dataclasses.fields(terrain):
        value = getattr(terrain, f.name)
        out[f.name] = value if _static(f) else np.asarray(value, dtype=float).tolist()
    return out


def terrain_from_dict(description: dict) -> Terrain:
    """Inverse of `terrain_to_dict` (a static field may be absent: its default); raises
    `ValueError` naming the unknown kind or field."""
    kind = description.get("kind")
    if kind not in _KINDS:
        raise ValueError(f"unknown terrain kind {kind!r}; expected one of {sorted(_KINDS)}")
    cls = _KINDS[kind]
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields if not _static(f)]
    missing = [n for n in names if n not in description]
    if missing:
        raise ValueError(f"terrain description of kind {kind!r} lacks fields {missing}")
    _friction(kind, description["friction"])
    values = {n: jnp.asarray(description[n], dtype=jnp.result_type(float)) for n in names}
    static = {f.name: description[f.name] for f in fields if _static(f) and f.name in description}
    return cls(**values, **static)
