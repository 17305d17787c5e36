"""Solve a trot for a quadruped and save it: the main job.

    python examples/solve_trot.py --robot go2 --velocity 0.5 --out results

Builds the gait-library trot (contact-implicit: the smooth contact model decides the contacts,
the gait pattern only shapes them), solves it with FDDP (each iteration one call into generated
C where a C compiler is found, `--derivatives compiled`; JAX otherwise), re-simulates it open
loop, prints the per-term costs and what the gait achieves (average speed, base height, torque
use, contact pattern) and saves `results/trot_<robot>.npz` + `.json`, plots
(`trot_<robot>_*.png`) and a self-contained HTML replay (`trot_<robot>.html`), then shows the
result in a Meshcat viewer on localhost and prints its URL (`--no-view`: no viewer).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import dynamics
from trajopt.gait_metrics import CONTACT_THRESHOLD, contact_flags
from trajopt.gaits import available_gaits, make_problem
from trajopt.problem import DERIVATIVES
from trajopt.solver import SOLVERS, default_derivatives, solve
from viz import save_and_publish


def contact_pattern(force: np.ndarray, threshold: float = CONTACT_THRESHOLD) -> np.ndarray:
    """`(nfeet, T)` 0/1 matrix: a foot is in contact when its normal force exceeds `threshold`."""
    return contact_flags(force, threshold).astype(int).T


def summarize(traj, problem) -> dict:
    model = problem.model
    duration = traj.horizon * traj.dt
    limit = np.asarray(model.effort_limit)[model.nv - model.nu :]
    return {
        "robot": model.name,
        "gait": problem.name,
        "status": traj.status,
        "reason": traj.meta.get("reason"),  # why the solver stopped (FDDP), with its numbers
        "iterations": traj.iterations,
        "cost": traj.cost,
        "commanded_velocity_m_per_s": float(problem.data.reference.base_velocity[0, 0]),
        "average_velocity_m_per_s": float((traj.q[-1, 0] - traj.q[0, 0]) / duration),
        "base_height_range_m": [float(traj.q[:, 2].min()), float(traj.q[:, 2].max())],
        "max_torque_over_limit": float(np.max(np.abs(traj.tau) / limit)),
        "derivatives": problem.derivatives,
        "solve_time_s": traj.meta.get("wall_time_s"),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--gait", default="trot", choices=available_gaits())
    parser.add_argument("--velocity", type=float, default=0.5, help="forward speed [m/s]")
    parser.add_argument("--duration", type=float, default=0.8, help="horizon [s]")
    parser.add_argument("--dt", type=float, default=0.02, help="knot duration [s]")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--solver", default="fddp", choices=SOLVERS)
    parser.add_argument(
        "--derivatives", choices=DERIVATIVES,
        help="how FDDP differentiates the contact solve: 'compiled' (the implicit derivatives, "
        "the whole iteration in generated C; the default where a C compiler is found), or in "
        "JAX: 'unrolled' (the default without one) or 'implicit'",
    )  # fmt: skip
    parser.add_argument("--out", default="results")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--no-view", action="store_true", help="write plots and replay only")
    parser.add_argument("--zmq-url", help="show the result in this running Meshcat server")
    args = parser.parse_args(argv)
    if args.derivatives is None:
        args.derivatives = default_derivatives()
    problem = make_problem(args.robot, args.gait, args.velocity, duration=args.duration, dt=args.dt,
                           derivatives=args.derivatives)  # fmt: skip
    t0 = time.perf_counter()
    traj = solve(
        problem, solver=args.solver, max_iterations=args.iterations, verbose=not args.quiet
    )
    summary = summarize(traj, problem)
    summary["wall_time_incl_compile_s"] = time.perf_counter() - t0
    print("\ncost per term:")
    for name, c in sorted(traj.term_costs.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<24} {c:10.4g}")
    print("\ncontact pattern (feet x knots, 1 = in contact):")
    for name, row in zip(problem.model.foot_names, contact_pattern(traj.force)):
        print(f"  {name:<10} {''.join('#' if c else '.' for c in row)}")
    print()
    save_and_publish(traj, os.path.join(args.out, f"{args.gait}_{args.robot}"), summary,
                     serve=not args.no_view, zmq_url=args.zmq_url)  # fmt: skip
    return traj, summary


if __name__ == "__main__":
    main()
