"""Solve every gait of the library for one robot and save each result.

    python examples/solve_all_gaits.py --robot go2 --out results

All gaits share one problem structure (same horizon and cost terms), so JAX compiles once and
every further gait costs only its iterations. Prints a table: status, cost, average speed,
base height range, the fraction of knots each foot is in contact and which of
`trajopt.gait_metrics.gait_checks` fail (speed, drift, height, the gait's contact pattern).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import dynamics
from trajopt.gait_metrics import (
    average_velocity,
    contact_agreement,
    contact_flags,
    solved_gait_checks,
)
from trajopt.gaits import GAITS, make_problem
from trajopt.solver import solve

DEFAULT_SPEEDS = {"stand": 0.0, "turn": 0.5}  # turn: yaw rate [rad/s]; others: forward m/s


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--velocity", type=float, default=0.3, help="forward speed [m/s]")
    parser.add_argument("--duration", type=float, default=0.8)
    parser.add_argument("--dt", type=float, default=0.02)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--gaits", nargs="*", default=list(GAITS), choices=list(GAITS))
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    rows = {}
    for gait in args.gaits:
        speed = DEFAULT_SPEEDS.get(gait, args.velocity)
        problem = make_problem(args.robot, gait, speed, duration=args.duration, dt=args.dt)
        traj = solve(problem, max_iterations=args.iterations, verbose=False)
        traj.save(os.path.join(args.out, f"{gait}_{args.robot}"))
        velocity = average_velocity(traj.q, traj.dt)
        contact = np.mean(contact_flags(traj.force), axis=0)
        rows[gait] = {
            "status": traj.status,
            "cost": traj.cost,
            "speed": velocity["forward"],
            "yaw_rate": velocity["yaw_rate"],
            "height": (float(traj.q[:, 2].min()), float(traj.q[:, 2].max())),
            "contact_fraction": contact.round(2).tolist(),
            "pattern_agreement": contact_agreement(traj.force, problem.data.reference.stance),
        }
        checks = solved_gait_checks(problem, traj, speed)
        rows[gait]["failed_checks"] = [k for k, (_, _, ok) in checks.items() if not ok]
        r = rows[gait]
        verdict = "ok" if not r["failed_checks"] else "failed: " + ", ".join(r["failed_checks"])
        print(
            f"{gait:<6} {r['status']:<15} cost {r['cost']:8.4g}  speed {r['speed']:+.3f} m/s  "
            f"yaw rate {r['yaw_rate']:+.2f} rad/s  "
            f"height {r['height'][0]:.3f}-{r['height'][1]:.3f} m  "
            f"contact {r['contact_fraction']}  pattern {r['pattern_agreement']:.2f}  "
            f"checks {verdict}",
            flush=True,
        )
    print(f"results saved in {os.path.abspath(args.out)}")
    return rows


if __name__ == "__main__":
    main()
