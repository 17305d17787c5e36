"""Drop a quadruped onto the ground and let joint PD hold its standing pose; save the result.

    python examples/stand.py --robot go2 --contact hard --seconds 3 --out results

Simulates with this project's contact model (`hard`, `smooth` or `penalty`), optionally on a
slope, prints a summary (settled base height, foot forces against the robot's weight, contact
solver residual, penetration) and writes `results/stand_<robot>_<contact>.npz` (time, q, v,
contact forces, gaps) with a JSON file of metadata beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import contact
import dynamics
from dynamics.actuator import standing_controller


def initial_state(model, slope: float, drop: float) -> dynamics.State:
    """Standing pose rotated by the slope (about y) and lifted by `drop` along the normal."""
    h = float(model.q_standing[2]) + drop
    half = -0.5 * slope
    quat = np.array([0.0, np.sin(half), 0.0, np.cos(half)])  # xyzw, rotation about y
    q = np.array(model.q_standing, dtype=float)
    q[0:3] = [-np.sin(slope) * h, 0.0, np.cos(slope) * h]
    q[3:7] = quat
    return dynamics.State(jnp.asarray(q), jnp.zeros(model.nv))


def run(
    robot="go2", contact_model="hard", seconds=3.0, dt=0.002, slope_deg=0.0, drop=0.2, friction=0.8
):
    model = dynamics.load_robot(robot)
    slope = np.deg2rad(slope_deg)
    params = contact.StepParams(terrain=contact.incline(slope, friction=friction), dt=dt)
    steps = int(round(seconds / dt))
    controller = standing_controller(model)
    sim = jax.jit(
        lambda p, s: contact.simulate(model, p, s, controller, steps, contact=contact_model)
    )
    t0 = time.perf_counter()
    final, (states, infos) = sim(params, initial_state(model, slope, drop))
    jax.block_until_ready(final)
    wall = time.perf_counter() - t0
    forces = np.asarray(infos.force)
    last = slice(-max(1, steps // 10), None)  # the last tenth: settled
    weight = model.total_mass * 9.81
    summary = {
        "robot": robot,
        "contact_model": contact_model,
        "seconds": seconds,
        "dt": dt,
        "slope_deg": slope_deg,
        "friction": friction,
        "settled_base_height_m": float(np.mean(np.asarray(states.q)[last, 2])),
        "settled_normal_force_sum_over_weight": float(
            np.mean(np.sum(forces[last, :, 2], axis=1)) / weight
        ),
        "settled_foot_normal_forces_N": np.mean(forces[last, :, 2], axis=0).round(2).tolist(),
        "max_penetration_mm": float(-1e3 * min(0.0, np.min(np.asarray(infos.gap)[last]))),
        "max_solver_residual_m_per_s": float(np.max(np.asarray(infos.residual))),
        "final_speed_m_per_s": float(np.linalg.norm(np.asarray(final.v)[:3])),
        "wall_time_s_incl_compile": wall,
    }
    arrays = {
        "t": dt * np.arange(1, steps + 1),
        "q": np.asarray(states.q),
        "v": np.asarray(states.v),
        "contact_force": forces,
        "gap": np.asarray(infos.gap),
    }
    return summary, arrays


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--contact", default="hard", choices=contact.CONTACT_MODELS)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--dt", type=float, default=0.002)
    parser.add_argument("--slope", type=float, default=0.0, help="terrain slope [deg]")
    parser.add_argument("--drop", type=float, default=0.2, help="initial height above stance [m]")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.dt <= 0:
        parser.error("--seconds and --dt must be positive")
    summary, arrays = run(args.robot, args.contact, args.seconds, args.dt, args.slope, args.drop)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"stand_{args.robot}_{args.contact}")
    np.savez(stem + ".npz", **arrays)
    with open(stem + ".json", "w") as f:
        json.dump(summary, f, indent=2)
    for key, value in summary.items():
        print(f"  {key}: {value}")
    print(f"results saved to {os.path.abspath(stem)}.npz (+ .json)")
    return summary


if __name__ == "__main__":
    main()
