"""Does an exported policy cross a terrain preset in MuJoCo, on what a robot measures?

    row = crossing(folder, "stairs", seed=3)   # {"crossed": True, "x_end": 7.1, ...}

One run of `learning.deployment.run_mujoco` as `examples/deploy_policy.py --terrain NAME
--estimator --randomize SEED --seconds 16 --velocity 0.5` runs it: Go2-like sensor noise, the
state estimator in place of the true base state, the start-up sequence, the safety layer and
one draw of `DisturbanceRanges` (seed `seed`), walking `velocity` [m/s] forward along +x over
`contact.terrain_presets.preset(name)` (level for its first metre). The policy crossed when it
never fell, the safety layer ended neither damped nor in e-stop, and MuJoCo's true base ended
past the feature's end (`feature_end`). On "flat" the run is the randomised omnidirectional
tour instead (`learning.deployment.run_tour`), and crossed is its `walked`.
"""

from __future__ import annotations

import numpy as np

from contact.terrain import Heightfield, Plane, Steps, Terraces
from contact.terrain_presets import preset

from .deployment import run_mujoco, run_tour

SECONDS = 16.0  # [s] of a crossing run
VELOCITY = 0.5  # [m/s] forward


def feature_end(terrain) -> float:
    """The x [m] past which `terrain` is level again along +x: the last riser of Terraces or
    Steps (finite), the last grid column of a Heightfield with a node off its border's height;
    0 for a Plane."""
    if isinstance(terrain, Terraces):
        return float(np.asarray(terrain.edges)[-1])
    if isinstance(terrain, Steps):
        count = float(terrain.num_steps)
        if not np.isfinite(count):
            raise ValueError("terrain: an endless staircase has no end")
        return float(terrain.start_x + count * terrain.step_length)
    if isinstance(terrain, Heightfield):
        heights = np.asarray(terrain.heights)
        varied = np.flatnonzero(np.any(heights != heights[0, 0], axis=1))
        last = int(varied[-1]) + 1 if varied.size else 0
        return float(terrain.x0 + last * terrain.cell_size)
    if isinstance(terrain, Plane):
        return 0.0
    raise TypeError(f"terrain must be a contact.terrain kind, got {type(terrain).__name__}")


def crossing(folder: str, name: str, seed: int, *, seconds: float = SECONDS,
             velocity: float = VELOCITY) -> dict:  # fmt: skip
    """One run (module docstring) of the policy in `folder` on preset `name` ("flat": the
    tour) with disturbance seed `seed`: `{"crossed", "fell", "safety_mode", "x_end" [m],
    "feature_end" [m], "linear_error" [m/s]}` ("flat": `x_end`, `feature_end` None)."""
    if name == "flat":
        tour = run_tour(folder, seed, estimator=True)
        return {"crossed": bool(tour["walked"]), "fell": bool(tour["fell"]),
                "safety_mode": None, "x_end": None, "feature_end": None,
                "linear_error": float(tour["mean_linear_error_m_per_s"])}  # fmt: skip
    terrain = preset(name)
    summary, _ = run_mujoco(folder, "numpy", seconds, velocity, randomize=seed, estimator=True,
                            terrain=terrain)  # fmt: skip
    x_end, end = summary["final_true_base_position_m"][0], feature_end(terrain)
    stopped = summary["safety_mode"] in ("damping", "estop")
    return {"crossed": bool(not summary["fell"] and not stopped and x_end >= end),
            "fell": bool(summary["fell"]), "safety_mode": summary["safety_mode"],
            "x_end": float(x_end), "feature_end": end,
            "linear_error": float(summary["mean_linear_error_m_per_s"])}  # fmt: skip
