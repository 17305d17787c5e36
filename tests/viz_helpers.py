"""Trajectories for the viz tests, built from arrays (no solve, no JAX compilation)."""

import numpy as np

from contact import terrain_to_dict
from dynamics import load_robot
from trajopt.trajectory import Trajectory


def walking_trajectory(robot="solo12", horizon=20, dt=0.02, speed=0.3, terrain=None):
    """The standing pose sliding forward at `speed`, rocking, with a swinging hip joint, feet
    carrying the weight in a trot pattern (diagonal pairs alternate every 5 knots), a reference
    of the same speed and a fake 3-iteration solver history with per-term costs."""
    model = load_robot(robot)
    q = np.tile(np.asarray(model.q_standing, dtype=float), (horizon + 1, 1))
    t = dt * np.arange(horizon + 1)
    q[:, 0] += speed * t
    roll = 0.05 * np.sin(2 * np.pi * t / (horizon * dt))  # base rocks about x
    q[:, 3:7] = np.stack([np.sin(roll / 2), 0 * t, 0 * t, np.cos(roll / 2)], axis=1)
    q[:, 8] += 0.3 * np.sin(2 * np.pi * t / (horizon * dt))  # FL hip-pitch-ish joint swings
    v = np.zeros((horizon + 1, model.nv))
    v[:, 0] = speed
    mass = float(np.sum(np.asarray(model.body_mass)))
    stance = np.zeros((horizon + 1, 4))
    phase = (np.arange(horizon + 1) // 5) % 2
    stance[:, [0, 3]] = (phase == 0)[:, None]
    stance[:, [1, 2]] = (phase == 1)[:, None]
    force = np.zeros((horizon, 4, 3))
    force[:, :, 2] = stance[:-1] * mass * 9.81 / 2
    force[:, :, 0] = stance[:-1] * 2.0
    history = [
        {
            "iteration": i + 1,
            "cost": 10.0 / (i + 1),
            "terms": {"a": 6.0 / (i + 1), "b": 4.0 / (i + 1)},
        }
        for i in range(3)
    ]
    meta = {
        "robot": robot,
        "problem": "trot",
        "terrain": terrain_to_dict(terrain) if terrain is not None else None,
        "reference": {
            "base_velocity": np.tile([speed, 0.0, 0.0], (horizon + 1, 1)).tolist(),
            "base_height": np.full(horizon + 1, model.q_standing[2]).tolist(),
            "stance": stance.tolist(),
        },
        "foot_names": list(model.foot_names),
        "foot_radius": float(np.max(model.foot_radius)),
    }
    if meta["terrain"] is None:
        del meta["terrain"]
    return Trajectory(
        q=q,
        v=v,
        u=np.zeros((horizon, model.nu)),
        dt=dt,
        tau=np.tile(np.linspace(-1, 1, model.nu), (horizon, 1)),
        force=force,
        cost=3.33,
        term_costs={"a": 2.0, "b": 1.33},
        status="max_iterations",
        iterations=3,
        history=history,
        meta=meta,
    )
