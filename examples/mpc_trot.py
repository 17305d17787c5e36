"""MPC in closed loop: a quadruped trots in this project's simulator with FDDP replanning.

    python examples/mpc_trot.py --robot go2 --velocity 0.5 --seconds 10 --out results

Every 20 ms the MPC replans a 0.5 s horizon from the simulated state (warm start: the previous
plan shifted by one knot, one FDDP iteration, a wall-clock budget per cycle), and the plant
(`contact.step` at 2 ms, smooth contact, 20 sweeps) follows the first knot's PD targets. Time
is simulated: the plant waits for the controller, so the wall time per cycle is reported
separately (the rate this machine could sustain in real time).

Prints the tracking (mean forward speed and its error after the first second, average speed
from the displacement), whether the robot fell, and the cycle-time statistics; saves the
closed loop as a `Trajectory` (`results/mpc_<gait>_<robot>.npz` + `.json`, viewable with
`examples/view.py`).
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

import dynamics
from controllers.closed_loop import run_mpc
from controllers.mpc import MPC
from trajopt.gaits import available_gaits
from trajopt.trajectory import Trajectory


def to_trajectory(result, mpc: MPC) -> Trajectory:
    """The closed loop as a `Trajectory` (knots = control periods) for saving and viewing."""
    from trajopt.trajectory import problem_description

    meta = problem_description(mpc.problem)  # terrain, foot names and radius
    # the reference is the command that was applied, knot by knot (not the planner's last)
    meta["reference"] = {
        "base_velocity": np.concatenate([result.command, result.command[-1:]]).tolist()
    }
    return Trajectory(
        q=result.q,
        v=result.v,
        u=result.targets,
        dt=mpc.dt,
        force=result.force,
        status="closed_loop",
        meta={"robot": mpc.model.name, "problem": f"mpc_{mpc.gait}", "solver": "mpc-fddp", **meta},
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--gait", default="trot", choices=available_gaits())
    parser.add_argument("--velocity", type=float, default=0.5, help="forward command [m/s]")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--horizon", type=float, default=0.5, help="planning horizon [s]")
    parser.add_argument("--iterations", type=int, default=1, help="FDDP iterations per cycle")
    parser.add_argument("--budget", type=float, default=0.5, help="wall budget per cycle [s]")
    parser.add_argument("--contact", default="smooth", choices=("hard", "smooth"))
    parser.add_argument("--out", default="results")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    mpc = MPC(
        args.robot,
        args.gait,
        (args.velocity, 0.0, 0.0),
        horizon=args.horizon,
        iterations=args.iterations,
        time_budget=args.budget,
    )
    result = run_mpc(mpc, args.seconds, contact=args.contact, progress=not args.quiet)
    summary = result.summary(settle=min(1.0, 0.5 * args.seconds))
    traj = to_trajectory(result, mpc)
    traj.meta["summary"] = summary
    npz, js = traj.save(os.path.join(args.out, f"mpc_{args.gait}_{args.robot}"))
    print(json.dumps(summary, indent=2))
    print(f"\nresults saved to {os.path.abspath(npz)} (+ {os.path.basename(js)})")
    return result, summary


if __name__ == "__main__":
    main()
