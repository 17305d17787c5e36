"""Crocoddyl's own ANYmal trot with its FDDP, timed (the peer of `bench_trajopt.py`).

Runs INSIDE a separate virtual environment (Crocoddyl is kept out of the project's own one):

    benchmarks/.venv-crocoddyl/bin/python benchmarks/crocoddyl_trot.py [--repeats 10]

(`bench_trajopt.py` creates that environment if it is missing and runs this script through it.)

The problem is the trotting phase of Crocoddyl's `examples/quadrupedal_gaits_fwddyn.py`:
`SimpleQuadrupedalGaitProblem(anymal.model, "LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT")`,
`createTrottingProblem(x0, stepLength=0.15, stepHeight=0.1, timeStep=1e-2, stepKnots=25,
supportKnots=2)`: 2 support + 25 swing (RF, LH) + 1 foot switch + 2 support + 25 swing (LF, RH)
+ 1 foot switch = 56 knots at 10 ms, from the standing pose at rest. As in the example, the
solver starts from `xs = [x0] * (T + 1)`, `us = problem.quasiStatic([x0] * T)` and runs
`solve(xs, us, 100, False)` (at most 100 iterations, no regularisation initialisation).

Each repeat builds a fresh problem and solver (not timed), then times the initial guess
(`quasiStatic`) and `solve`, the whole solve being the two (as ours: guess and FDDP), with
`time.perf_counter` and `time.process_time` (one thread: `problem.nthreads = 1`, and
OMP_NUM_THREADS=1 is set before importing). The linearisation alone (`problem.calc` +
`problem.calcDiff` over all knots, i.e. dynamics, contact and cost derivatives, analytic) is
also timed at the solution, the part that corresponds to our per-knot `jacfwd`.

Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import crocoddyl  # noqa: E402
import example_robot_data  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio  # noqa: E402
from crocoddyl.utils.quadruped import SimpleQuadrupedalGaitProblem  # noqa: E402

# the trotting entry of Crocoddyl's examples/quadrupedal_gaits_fwddyn.py
TROT = {
    "stepLength": 0.15,
    "stepHeight": 0.1,
    "timeStep": 1e-2,
    "stepKnots": 25,
    "supportKnots": 2,
}
FEET = ("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT")


def build(robot: str):
    """`(problem, x0, robot_model)`; a fresh gait builder each time (its `firstStep` flag is
    stateful: the first trot of a builder takes a half step, as in the example)."""
    rob = example_robot_data.load(robot)
    q0 = rob.model.referenceConfigurations["standing"].copy()
    x0 = np.concatenate([q0, np.zeros(rob.model.nv)])
    gait = SimpleQuadrupedalGaitProblem(rob.model, *FEET)
    problem = gait.createTrottingProblem(
        x0,
        TROT["stepLength"],
        TROT["stepHeight"],
        TROT["timeStep"],
        TROT["stepKnots"],
        TROT["supportKnots"],
    )
    if hasattr(problem, "nthreads"):
        problem.nthreads = 1
    return problem, x0, rob.model


def solve_once(robot: str, max_iterations: int):
    problem, x0, model = build(robot)
    solver = crocoddyl.SolverFDDP(problem)
    xs = [x0] * (problem.T + 1)
    guess0 = time.perf_counter()
    us = problem.quasiStatic([x0] * problem.T)
    guess = time.perf_counter() - guess0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    converged = solver.solve(xs, us, max_iterations, False)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    # linearisation alone at the solution (calc + calcDiff of every knot), best of 5
    lin = []
    for _ in range(5):
        t0 = time.perf_counter()
        problem.calc(solver.xs, solver.us)
        problem.calcDiff(solver.xs, solver.us)
        lin.append(time.perf_counter() - t0)
    base_x = [float(x[0]) for x in (solver.xs[0], solver.xs[-1])]
    return {
        "converged": bool(converged),
        "iterations": int(solver.iter),
        "wall_s": wall,
        "guess_s": guess,
        "cpu_s": cpu,
        "cost": float(solver.cost),
        "knots": int(problem.T),
        "dt": float(problem.runningModels[0].dt),
        "linearisation_s": min(lin),
        "base_x_travel_m": base_x[1] - base_x[0],
        "nthreads": int(getattr(problem, "nthreads", 1)),
        "mass_kg": float(sum(i.mass for i in model.inertias)),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--robot", default="anymal", help="example-robot-data name (default: anymal)")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--max-iterations", type=int, default=100)
    args = p.parse_args(argv)
    runs = [solve_once(args.robot, args.max_iterations) for _ in range(args.repeats)]
    per_iter = [r["wall_s"] / max(r["iterations"], 1) for r in runs]
    out = {
        "robot": args.robot,
        "repeats": args.repeats,
        "knots": runs[0]["knots"],
        "dt": runs[0]["dt"],
        "mass_kg": runs[0]["mass_kg"],
        "nthreads": runs[0]["nthreads"],
        "converged": all(r["converged"] for r in runs),
        "iterations": runs[0]["iterations"],
        "iterations_all": sorted({r["iterations"] for r in runs}),
        "cost": runs[0]["cost"],
        "base_x_travel_m": runs[0]["base_x_travel_m"],
        "solve_s_median": statistics.median(r["wall_s"] for r in runs),
        "solve_s_min": min(r["wall_s"] for r in runs),
        "whole_s_median": statistics.median(r["guess_s"] + r["wall_s"] for r in runs),
        "solve_cpu_s_median": statistics.median(r["cpu_s"] for r in runs),
        "per_iteration_s_median": statistics.median(per_iter),
        "linearisation_s_median": statistics.median(r["linearisation_s"] for r in runs),
        "versions": {
            "crocoddyl": crocoddyl.__version__,
            "pinocchio": pinocchio.__version__,
            "example_robot_data": getattr(example_robot_data, "__version__", "?"),
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
