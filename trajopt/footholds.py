"""Footholds of a stepping plan: where each stance foot stands, placed on the terrain's usable
parts, as the targets of `trajopt.residual_library.footholds`.

    place = footholds.away_from_risers(terrain, margin=0.05)   # a staircase's treads
    place = footholds.nearest_point(stone_centres)             # or the nearest stone's centre
    rows = footholds.stance_footholds(problem, place)          # (T+1, nfeet, 3): [x, y, stance]
    problem = problem.with_terms(residual_library.footholds(problem.model, rows, weight=300.0))
    init = footholds.placed_guess(problem, place)              # the kinematic guess on them

The nominal foothold of a stance is the kinematic guess's (`trajopt.kinematic_guess`): the
foot's standing offset from the base at the middle of the stance, along the base path that the
velocity reference integrates. A `place(i, p) -> p'` function moves it (world frame, `p (3,)`
with z = 0; only x and y are used), e.g. off a step's nose or onto a stone. The stance flags
are the gait reference's, so the rows say where every foot should stand at every knot.
"""

from __future__ import annotations

import numpy as np

from contact.terrain import Steps

from . import problem as P
from .kinematic_guess import foot_targets, kinematic_guess, pinocchio_feet
from .trajectory import Trajectory


def stance_footholds(problem: P.Problem, place=None) -> np.ndarray:
    """`(T+1, nfeet, 3)` rows `[x, y, s]`: foot i's placed foothold (world, m) at every knot,
    `s = 1` where the reference has it in stance, 0 in swing (where `x, y` are the swing arc's
    and unused)."""
    _, feet, _ = foot_targets(problem, place)
    stance = (np.asarray(problem.data.reference.stance) > 0.5).astype(float)
    return np.concatenate([feet[..., :2], stance[..., None]], axis=-1)


def placed_guess(problem: P.Problem, place=None) -> Trajectory:
    """The kinematic guess with its footholds moved by `place`, as a `Trajectory` to pass as
    `solve(problem, init)`."""
    q, v, us = kinematic_guess(problem, place)
    return Trajectory(q=q, v=v, u=us, dt=problem.dt_knot)


def nearest_point(points):
    """`place` that moves a foothold to the nearest of `points (k, 2)` (world xy, m)."""
    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[1] != 2 or points.shape[0] == 0:
        raise ValueError(f"points must be (k, 2) world xy, got shape {points.shape}")

    def place(i, p):
        k = int(np.argmin(np.sum((points - np.asarray(p, dtype=float)[:2]) ** 2, axis=1)))
        return np.array([points[k, 0], points[k, 1], 0.0])

    return place


def away_from_risers(terrain: Steps, margin: float):
    """`place` that keeps a foothold at least `margin` (m, along x) from every riser of the
    staircase `terrain`, moving it to the nearer side: a foot then stands on a tread, not on a
    nose or against a riser. The landing beyond the last tread has no riser after it."""
    if not isinstance(terrain, Steps):
        raise TypeError(f"terrain must be contact.terrain.Steps, got {type(terrain).__name__}")
    length, start = float(terrain.step_length), float(terrain.start_x)
    count = float(terrain.num_steps)
    if not 0.0 < margin < 0.5 * length:
        raise ValueError(f"margin must be in (0, step_length / 2 = {0.5 * length}), got {margin}")

    def place(i, p):
        x = float(p[0])
        k = np.clip(np.round((x - start) / length), 0.0, count)  # nearest riser's index
        riser = start + k * length
        if abs(x - riser) < margin:
            x = riser - margin if x < riser else riser + margin
        return np.array([x, float(p[1]), 0.0])

    return place


def foot_positions(model, q: np.ndarray) -> np.ndarray:
    """`(N, nfeet, 3)` world foot-frame positions of the configurations `q (N, nq)` (Pinocchio's
    forward kinematics)."""
    import pinocchio as pin

    pin_model, data, foot_ids = pinocchio_feet(model)
    out = np.zeros((q.shape[0], len(foot_ids), 3))
    for t, qt in enumerate(np.asarray(q, dtype=float)):
        pin.framesForwardKinematics(pin_model, data, qt)
        out[t] = [data.oMf[f].translation for f in foot_ids]
    return out
