"""Solve the same trot with the hard, smooth and penalty contact models and compare.

    python examples/compare_contact_models.py --robot go2 --out results

The paper's argument in one table: each solution is re-simulated open loop with *every* contact
model, so a plan that only works in its own (soft) physics shows up as a gap between its own
speed and the speed it reaches under hard contact.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import dynamics
from contact import CONTACT_MODELS
from trajopt.gaits import make_problem
from trajopt.replay import resimulate
from trajopt.solver import solve


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--velocity", type=float, default=0.5)
    parser.add_argument("--duration", type=float, default=0.8)
    parser.add_argument("--dt", type=float, default=0.02)
    parser.add_argument("--iterations", type=int, default=25)
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    table = {}
    for model_name in CONTACT_MODELS:
        problem = make_problem(
            args.robot,
            "trot",
            args.velocity,
            duration=args.duration,
            dt=args.dt,
            contact=model_name,
        )
        traj = solve(problem, max_iterations=args.iterations, verbose=False)
        traj.save(os.path.join(args.out, f"trot_{args.robot}_{model_name}"))
        duration = traj.horizon * traj.dt
        speeds = {}
        for replay_model in CONTACT_MODELS:
            q, _, _, _ = resimulate(
                problem.model,
                problem.data.params,
                traj,
                substeps=problem.substeps,
                contact=replay_model,
                num_sweeps=problem.num_sweeps,
                control=problem.control,
                kp=float(problem.data.gains[0]),
                tolerance=problem.contact_tolerance,
            )
            speeds[replay_model] = float((q[-1, 0] - q[0, 0]) / duration)
        table[model_name] = {"status": traj.status, "cost": traj.cost, "speed_in": speeds}
        line = "  ".join(f"{k} {v:+.3f}" for k, v in speeds.items())
        print(
            f"planned with {model_name:<8} {traj.status:<18} cost {traj.cost:9.4g}  "
            f"replayed speed [m/s]: {line}",
            flush=True,
        )
    print(f"commanded {args.velocity} m/s; results saved in {os.path.abspath(args.out)}")
    return table


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
