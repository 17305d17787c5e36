"""Named terrains for a quadruped of Go2's size, and reading a terrain from a command line.

    terrain = preset("stairs")                  # or PRESETS["rough"](seed=3)
    terrain = terrain_from_argument("rough")    # a preset's name or a terrain_to_dict JSON file

Every preset is a `contact.terrain` pytree (so our contact model and MuJoCo, through
`contact.mjcf_terrain`, see the same ground), level at z = 0 for `x < FEATURE_X`: a robot
started at the origin in its standing pose stands on flat ground and meets the feature about a
metre ahead, walking along +x. World frame z up, SI units; friction 0.8 (`contact.flat`'s).

    stairs   five 10 cm risers up (30 cm treads), a 1 m landing 0.5 m high, five 10 cm
             risers down (30 cm treads), level again at z = 0 from x = 4.4 m on
             (`contact.terraces.flight`, a `Terraces`)
    slope    15 degrees up over 1.2 m, a 0.6 m plateau, 15 degrees down over 1.2 m, level
             again (a `Heightfield` of 10 cm cells whose kinks lie on grid lines, so its
             triangles are exactly the ramps)
    rough    random heights, uniform in [0, 4 cm] at the nodes of a 10 cm grid (seeded)
    blocks   40 cm square blocks of random height, uniform in [0, 5 cm] (seeded), on a 2.5 cm
             grid: a block's side is one cell wide, a slope of up to 63 degrees

The height fields span x in [FEATURE_X - 0.5, FEATURE_X + 4.5] m and y in [-1.5, 1.5] m, their
border nodes at 0, so that outside them (where our terrain continues the border heights and
MuJoCo has its floor plane at the lowest height, 0) both agree.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from .terraces import Terraces, flight
from .terrain import Heightfield, Terrain, heightfield, terrain_from_dict

FEATURE_X = 1.0  # [m] where every feature begins
FRICTION = 0.8
_SPAN_X = (FEATURE_X - 0.5, FEATURE_X + 4.5)  # [m] height fields' extent along x
_HALF_WIDTH = 1.5  # [m] height fields' extent along y: [-1.5, 1.5]


def stairs(step_height: float = 0.10, step_length: float = 0.30, num_steps: int = 5,
           landing_length: float = 1.0) -> Terraces:  # fmt: skip
    """Up `num_steps` risers of `step_height` [m], treads `step_length` [m], the first riser at
    `FEATURE_X`; a landing `landing_length` [m] long; down the same flight to level ground."""
    return flight(step_height, step_length, FEATURE_X, num_steps, landing_length,
                  friction=FRICTION)  # fmt: skip


def _grid(cell: float) -> tuple[np.ndarray, np.ndarray]:
    """Node coordinates `(x (nx,), y (ny,))` [m] of the presets' height-field area."""
    nx = round((_SPAN_X[1] - _SPAN_X[0]) / cell) + 1
    ny = round(2 * _HALF_WIDTH / cell) + 1
    return _SPAN_X[0] + cell * np.arange(nx), -_HALF_WIDTH + cell * np.arange(ny)


def _field(heights: np.ndarray, cell: float) -> Heightfield:
    heights = np.array(heights, dtype=float)
    heights[0, :] = heights[-1, :] = heights[:, 0] = heights[:, -1] = 0.0  # a level border
    return heightfield(heights, _SPAN_X[0], -_HALF_WIDTH, cell, friction=FRICTION)


def slope(angle_deg: float = 15.0, run: float = 1.2, plateau: float = 0.6) -> Heightfield:
    """Up at `angle_deg` over `run` [m] from `FEATURE_X`, level for `plateau` [m], down over
    `run`, level after; `run` and `plateau` multiples of the 10 cm cell."""
    cell = 0.1
    x, y = _grid(cell)
    rise = math.tan(math.radians(angle_deg)) * run
    s = x - FEATURE_X
    profile = np.interp(s, [0.0, run, run + plateau, 2 * run + plateau], [0.0, rise, rise, 0.0])
    return _field(np.repeat(profile[:, None], len(y), axis=1), cell)


def rough(amplitude: float = 0.04, seed: int = 0, cell: float = 0.1) -> Heightfield:
    """Node heights uniform in `[0, amplitude]` [m] beyond `FEATURE_X` (seeded); level up
    to it."""
    x, y = _grid(cell)
    heights = np.random.default_rng(seed).uniform(0.0, amplitude, (len(x), len(y)))
    return _field(np.where(x[:, None] > FEATURE_X + 1e-9, heights, 0.0), cell)


def blocks(size: float = 0.4, max_height: float = 0.05, seed: int = 0,
           cell: float = 0.025) -> Heightfield:  # fmt: skip
    """Square blocks `size` [m] wide, of heights uniform in `[0, max_height]` [m] (seeded),
    from `FEATURE_X` on; block `(a, b)` holds the nodes with `floor((x - FEATURE_X) / size) = a`
    and `floor(y / size) = b`; level up to `FEATURE_X`."""
    x, y = _grid(cell)
    a = np.floor((x - FEATURE_X) / size + 1e-9).astype(int)
    b = np.floor(y / size + 1e-9).astype(int)
    table = np.random.default_rng(seed).uniform(0.0, max_height, (a.max() + 1, np.ptp(b) + 1))
    heights = table[np.clip(a, 0, None)[:, None], (b - b.min())[None, :]]
    return _field(np.where(x[:, None] > FEATURE_X + 1e-9, heights, 0.0), cell)


PRESETS = {"stairs": stairs, "slope": slope, "rough": rough, "blocks": blocks}


def preset(name: str) -> Terrain:
    """The preset `name` with its defaults; `ValueError` naming the known ones otherwise."""
    if name not in PRESETS:
        raise ValueError(f"terrain: unknown preset {name!r}; expected one of {sorted(PRESETS)}")
    return PRESETS[name]()


def terrain_from_argument(text: str) -> Terrain:
    """A command line's `--terrain`: a preset's name, or the path of a JSON file holding
    `contact.terrain.terrain_to_dict` of a terrain."""
    if text in PRESETS:
        return preset(text)
    if not os.path.isfile(text):
        raise ValueError(
            f"--terrain: expected a preset ({', '.join(sorted(PRESETS))}) or a JSON file of "
            f"terrain_to_dict, got {text!r}"
        )
    with open(text) as f:
        return terrain_from_dict(json.load(f))


__all__ = [
    "FEATURE_X",
    "PRESETS",
    "blocks",
    "preset",
    "rough",
    "slope",
    "stairs",
    "terrain_from_argument",
]
