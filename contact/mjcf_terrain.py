"""Our terrains (`contact.terrain`) as MuJoCo MJCF: the ground `dynamics.mjcf.to_mjcf` writes in
place of its flat floor.

    elements = ground_elements(contact.steps(0.1, 0.3, 1.0, num_steps=5))
    xml = dynamics.mjcf.to_mjcf(model, ground=elements)

`ground_elements(terrain) -> [xml.etree.ElementTree.Element]`: `<geom>`s for the worldbody and,
for a height field, its `<hfield>` asset. World frame z up, SI units, as in `contact.terrain`.

    Plane        one plane geom, `pos (0, 0, height)`, `quat` the shortest-arc rotation taking
                 +z onto the outward normal (for `incline(a)`: `a` about -y, as `to_mjcf`'s
                 `floor_incline`)
    Steps        the floor plane at the lowest level `min(0, N h)` (`N = num_steps`, `h`
                 = step_height) and one box per level above it, each from that plane up to its
                 top: the treads `k = 1 .. ceil(N)` (top `min(k, N) h`, x in
                 `[start_x + (k-1) L, start_x + k L]`, `L` = step_length) and the approach
                 (`x < start_x`, top 0); the open end (the landing after the last tread when
                 climbing, the approach when descending) is a box `run_out` long, beyond which
                 the floor plane goes on at the lowest level. Boxes are `width` wide, centred
                 on y = 0 (our staircase is unbounded in y). `num_steps` must be finite.
    Terraces     likewise (a flight up, its landing and the flight down): the floor plane at
                 the lowest level and one box per level above it, from that plane up to its
                 top: "approach" (`x < edges[0]`), "step_i" for `x in [edges[i-1], edges[i]]`,
                 i = 1 .. m, the outer ones `run_out` long; a level at the lowest has no box.
    Heightfield  an `<hfield>` asset and its geom, and the floor plane at the lowest height
                 (below every triangle, so it never covers a pit).

Height fields, MuJoCo's conventions: `size = (rx, ry, top, base)`, the grid spans
`[-rx, rx] x [-ry, ry]` about the geom's position; node elevation `z = e top` with `e` in
[0, 1], down to `-base` below the geom (a solid slab); `nrow` rows along y, `ncol` columns along
x. MuJoCo normalises the `elevation` attribute to [0, 1] and reads its rows from +y down to -y
(as an image), so our `heights (nx, ny)` are written as `heights.T[::-1]`, normalised, with
`ncol = nx`, `nrow = ny`, `rx = (nx - 1) cell_size / 2` (likewise `ry`), the geom at
`(x0 + rx, y0 + ry, min(heights))` and `top = max - min` (a tiny positive value on a level
grid). Triangulation: MuJoCo splits cell (row r, column c) along the diagonal from node
`(c, r)` to `(c + 1, r + 1)`, i.e. from `(x_lo, y_lo)` to `(x_hi, y_hi)`: the diagonal of
`contact.terrain.heightfield`, so both are the same piecewise-linear surface (MuJoCo stores
elevations in float32: about 1e-7 of `top`). Outside the grid our terrain continues its edge
heights; MuJoCo has the floor plane at the lowest height, so they agree there where the border
nodes are at the lowest height (the presets of `contact.terrain_presets` are: zero).

Friction: every ground geom carries the terrain's Coulomb coefficient and `priority="1"`, so
MuJoCo takes the ground's friction for a contact instead of the larger of the two geoms'.
Solver parameters (solref, solimp, condim) come from the model's defaults, as for the floor.

Bad input raises `ValueError` naming the argument (`checks.require`): a non-finite leaf (a NaN
height, an infinite `num_steps`), a negative friction or `num_steps`, `width`/`run_out` <= 0,
terraces' edges that do not increase (a tread <= 0); a type that is not one of the four
terrains raises `TypeError`.
"""

from __future__ import annotations

import dataclasses
import math
import xml.etree.ElementTree as ET

import numpy as np

from .checks import NONNEGATIVE, POSITIVE, require
from .terraces import Terraces
from .terrain import Heightfield, Plane, Steps

FINITE = ("finite", np.isfinite)
STEPS_WIDTH = 4.0  # [m] lateral extent of the stair boxes, centred on y = 0
STEPS_RUN_OUT = 4.0  # [m] length of the open-ended box (landing or approach)
HFIELD_BASE = 0.1  # [m] depth of the height field's slab below its lowest node
_LEVEL_TOP = 1e-6  # [m] MuJoCo's `top` for a level height field (it must be > 0)
_FLOOR_SIZE = "0 0 0.05"  # an infinite plane (the 0.05 is its grid spacing when drawn)
_RGBA = {"plane": "0.8 0.8 0.8 1", "box": "0.7 0.7 0.75 1", "hfield": "0.6 0.62 0.6 1"}


def _fmt(values) -> str:
    """Space-separated shortest round-trip representation of floats."""
    return " ".join(repr(float(v)) for v in np.ravel(np.asarray(values, dtype=float)))


def _leaf(terrain, name: str) -> np.ndarray:
    return np.asarray(getattr(terrain, name), dtype=float)


def _check(terrain) -> None:
    """`ValueError` naming the first leaf (array field) that is not finite, or a negative
    friction; static fields (a height field's search `window`) are not geometry."""
    for field in dataclasses.fields(terrain):
        if field.metadata.get("static", False):
            continue
        value = _leaf(terrain, field.name)
        if value.ndim > 1 and not np.all(np.isfinite(value)):
            i, j = np.argwhere(~np.isfinite(value))[0]
            raise ValueError(f"{terrain.kind}: {field.name} must be finite, got {value[i, j]} "
                             f"at ({i}, {j})")  # fmt: skip
        require(terrain.kind, field.name, value, FINITE)
    require(terrain.kind, "friction", _leaf(terrain, "friction"), NONNEGATIVE)


def _ground_geom(name: str, kind: str, friction: float, **attributes) -> ET.Element:
    """A ground `<geom>` with the terrain's friction and priority over the robot's geoms."""
    geom = ET.Element("geom", name=name, type=kind, **attributes)
    geom.set("friction", _fmt([friction, 0.005, 0.0001]))
    geom.set("priority", "1")
    geom.set("rgba", _RGBA[kind])
    return geom


def floor_geom(height: float, friction: float, quat=(1.0, 0.0, 0.0, 0.0)) -> ET.Element:
    """An infinite plane through `(0, 0, height)` [m], oriented by `quat (4,)` (w, x, y, z)."""
    return _ground_geom("floor", "plane", friction, size=_FLOOR_SIZE,
                        pos=_fmt([0.0, 0.0, height]), quat=_fmt(quat))  # fmt: skip


def normal_quat(normal) -> np.ndarray:
    """`(w, x, y, z)` of the shortest-arc rotation taking +z onto the unit `normal (3,)`
    (about the axis `e_z x n`; the identity for `n = e_z`). `normal` must not point down."""
    n = np.asarray(normal, dtype=float)
    n = n / np.linalg.norm(n)
    if n[2] <= -1.0 + 1e-12:
        raise ValueError(f"plane: normal must not be -z (a ceiling), got {n}")
    q = np.array([1.0 + n[2], -n[1], n[0], 0.0])
    return q / np.linalg.norm(q)


def plane_elements(terrain: Plane) -> list[ET.Element]:
    """The plane `n . (p - (0, 0, height)) = 0` as one MuJoCo plane geom (solid below)."""
    _check(terrain)
    quat = normal_quat(_leaf(terrain, "normal"))
    return [floor_geom(float(terrain.height), float(terrain.friction), quat)]


def _box(name: str, x_lo: float, x_hi: float, z_lo: float, z_hi: float, width: float, mu):
    size = [(x_hi - x_lo) / 2, width / 2, (z_hi - z_lo) / 2]
    pos = [(x_hi + x_lo) / 2, 0.0, (z_hi + z_lo) / 2]
    return _ground_geom(name, "box", mu, size=_fmt(size), pos=_fmt(pos))


def steps_elements(terrain: Steps, *, width: float = STEPS_WIDTH,
                   run_out: float = STEPS_RUN_OUT) -> list[ET.Element]:  # fmt: skip
    """The staircase as the floor plane at its lowest level and one box per level above it
    (module docstring): geoms "floor", "approach" (descending stairs only), "step_1" .. "step_K",
    `K = ceil(num_steps)`, the last `run_out` [m] longer (climbing). `width` [m] in y."""
    _check(terrain)
    require("steps", "num_steps", _leaf(terrain, "num_steps"), NONNEGATIVE)
    require("steps", "step_length", _leaf(terrain, "step_length"), POSITIVE)
    require("steps", "width", width, POSITIVE)
    require("steps", "run_out", run_out, POSITIVE)
    rise, length = float(terrain.step_height), float(terrain.step_length)
    start, count, mu = float(terrain.start_x), float(terrain.num_steps), float(terrain.friction)
    treads = math.ceil(count)
    lowest = min(0.0, count * rise)
    out = [floor_geom(lowest, mu)]
    if lowest < 0.0:
        out.append(_box("approach", start - run_out, start, lowest, 0.0, width, mu))
    for k in range(1, treads + 1):
        top = min(k, count) * rise
        x_lo, x_hi = start + (k - 1) * length, start + k * length
        if k == treads and rise > 0.0:
            x_hi += run_out
        if top > lowest:
            out.append(_box(f"step_{k}", x_lo, x_hi, lowest, top, width, mu))
    return out


def terraces_elements(terrain: Terraces, *, width: float = STEPS_WIDTH,
                      run_out: float = STEPS_RUN_OUT) -> list[ET.Element]:  # fmt: skip
    """The terraces as the floor plane at their lowest level and one box per level above it
    (module docstring): geoms "floor", then "approach" and "step_1" .. "step_m" where above
    the floor, `m` the number of risers. `width` [m] in y."""
    _check(terrain)
    require("terraces", "width", width, POSITIVE)
    require("terraces", "run_out", run_out, POSITIVE)
    edges, levels = _leaf(terrain, "edges"), _leaf(terrain, "levels")
    require("terraces", "tread", np.diff(edges), POSITIVE)
    mu = float(terrain.friction)
    lowest = float(levels.min())
    x = np.concatenate([[edges[0] - run_out], edges, [edges[-1] + run_out]])
    names = ["approach"] + [f"step_{i}" for i in range(1, len(edges) + 1)]
    out = [floor_geom(lowest, mu)]
    for i, (name, top) in enumerate(zip(names, levels)):
        if top > lowest:
            out.append(_box(name, float(x[i]), float(x[i + 1]), lowest, float(top), width, mu))
    return out


def hfield_elevation(heights) -> tuple[np.ndarray, float, float]:
    """`(elevation (ny, nx), bottom, top)` of our `heights (nx, ny)` [m]: MuJoCo's rows (from
    +y down to -y) of `(heights - bottom) / top`, in [0, 1], `bottom` the lowest height and
    `top = max - min` (`_LEVEL_TOP` on a level grid), so that `z = bottom + e top`."""
    heights = np.asarray(heights, dtype=float)
    bottom = float(heights.min())
    span = float(heights.max()) - bottom
    top = span if span > 0.0 else _LEVEL_TOP
    return ((heights - bottom) / top).T[::-1], bottom, top


def heightfield_elements(terrain: Heightfield, *, base: float = HFIELD_BASE,
                         name: str = "heightfield") -> list[ET.Element]:  # fmt: skip
    """The height field as an `<hfield>` asset (named `name`), its geom (`name`) and the floor
    plane at its lowest height (module docstring); `base` [m]: the slab's depth below it."""
    _check(terrain)
    require("heightfield", "base", base, POSITIVE)
    nx, ny = terrain.heights.shape
    cell = float(terrain.cell_size)
    elevation, bottom, top = hfield_elevation(_leaf(terrain, "heights"))
    rx, ry = (nx - 1) * cell / 2, (ny - 1) * cell / 2
    asset = ET.Element("hfield", name=name, nrow=str(ny), ncol=str(nx))
    asset.set("size", _fmt([rx, ry, top, base]))
    asset.set("elevation", " ".join(format(v, ".9g") for v in elevation.ravel()))
    mu = float(terrain.friction)
    centre = [float(terrain.x0) + rx, float(terrain.y0) + ry, bottom]
    geom = _ground_geom(name, "hfield", mu, hfield=name, pos=_fmt(centre))
    return [asset, geom, floor_geom(bottom, mu)]


_CONVERTERS = {
    Plane: plane_elements,
    Steps: steps_elements,
    Terraces: terraces_elements,
    Heightfield: heightfield_elements,
}


def ground_elements(terrain) -> list[ET.Element]:
    """The MJCF elements of `terrain` (a `contact.terrain` Plane, Steps, Terraces or
    Heightfield, each with its defaults here): `<geom>`s for the worldbody, `<hfield>`s for
    `<asset>`."""
    try:
        convert = _CONVERTERS[type(terrain)]
    except KeyError:
        raise TypeError(
            f"terrain must be a contact.terrain Plane, Steps, Terraces or Heightfield, "
            f"got {type(terrain).__name__}"
        ) from None
    return convert(terrain)


__all__ = [
    "FINITE",
    "HFIELD_BASE",
    "STEPS_RUN_OUT",
    "STEPS_WIDTH",
    "floor_geom",
    "ground_elements",
    "heightfield_elements",
    "hfield_elevation",
    "normal_quat",
    "plane_elements",
    "steps_elements",
    "terraces_elements",
]
