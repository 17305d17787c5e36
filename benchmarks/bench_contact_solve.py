"""How many sweeps the planners' impulse solve needs to reach its tolerance, by relaxation.

    python benchmarks/bench_contact_solve.py             # writes "## Contact solve convergence"
    python benchmarks/bench_contact_solve.py --no-write  # prints it

The contact problems (`contact.impulse_problem`: Delassus matrix, free velocity, weights) of
every knot's first substep along trot and pace solves of ANYmal C, Go2 and Solo12, at several
FDDP iterates (the start and after `--iterates`), each solved by
`contact.coulomb.solve_impulses(tolerance=, relaxation=)` with every relaxation of
`--relaxations`. The peer is the paper's full update (relaxation 1), in the same run. Reported:
the problems that do not reach the tolerance within `--most` sweeps, and the sweeps the others
need (median, 90th percentile, largest).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HEADING = "## Contact solve convergence"
# (robot, gait, make_problem options): ANYmal C's is bench_trajopt.py's Crocoddyl trot
PROBLEMS = (
    ("anymal_c", "trot", {"velocity": 0.2009, "duration": 0.56, "dt": 0.01, "substeps": 1,
                          "period": 0.56, "lead_in": 0.0}),
    ("go2", "trot", {"velocity": 0.5}),
    ("solo12", "trot", {"velocity": 0.3}),
    ("go2", "pace", {"velocity": 0.5}),
)  # fmt: skip


def contact_problems(robot: str, gait: str, options: dict, iterates) -> list:
    """`(label, G (N, k, 3, k, 3), c (N, k, 3), w (N, k), mu (N, k))` at each iterate: every
    knot's first substep along the solve stopped after that many FDDP iterations."""
    import jax

    from contact import impulse_problem
    from dynamics import State
    from dynamics.actuator import pd_torque
    from trajopt import problem as P
    from trajopt.gaits import make_problem
    from trajopt.solver import solve

    problem = make_problem(robot, gait, derivatives="implicit", **options)
    model, params = problem.model, problem.data.params

    def knot(q, v, u):
        command = P.joint_command(problem, problem.data, u)
        tau = pd_torque(model, State(q, v), command.q_target, command.kp, command.kd,
                        command.qd_target, command.tau_ff)  # fmt: skip
        return impulse_problem(model, params, State(q, v), tau, problem.contact)

    batch = jax.jit(jax.vmap(knot))
    out = []
    for iterations in iterates:
        traj = solve(problem, max_iterations=iterations, verbose=False)
        arrays = batch(traj.q[:-1], traj.v[:-1], traj.u)
        out.append((f"{robot} {gait}, iterate {iterations}", *map(np.asarray, arrays)))
    return out


def sweeps_needed(problems, relaxation: float, tolerance: float, most: int) -> np.ndarray:
    """The sweeps each contact problem needed to reach `tolerance` (-1: not within `most`)."""
    import jax

    from contact import coulomb

    def one(g, c, w, mu):
        _, info = coulomb.solve_impulses(g, c, mu, w, most, tolerance=tolerance,
                                         relaxation=relaxation)  # fmt: skip
        return info["sweeps"], info["residual"]

    solve = jax.jit(jax.vmap(one))
    counts = []
    for _, g, c, w, mu in problems:
        sweeps, residual = map(np.asarray, solve(g, c, w, mu))
        counts.append(np.where(residual <= tolerance, sweeps, -1))
    return np.concatenate(counts)


def render(rows, problems, settings, command: str) -> str:
    from benchmarks.markdown_report import cpu_name, versions

    total = sum(p[1].shape[0] for p in problems)
    lines = [
        HEADING, "",
        f"- Command: `{command}`",
        f"- Date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}; "
        f"CPU: {cpu_name()}; " + versions("jax"),
        f"- Problems: {total} contact problems (every knot's first substep) of "
        + ", ".join(dict.fromkeys(p[0].split(",")[0] for p in problems))
        + f" at FDDP iterates {', '.join(map(str, settings['iterates']))}; tolerance "
        f"{settings['tolerance']:g} m/s, at most {settings['most']} sweeps. Relaxation 1 is "
        "the paper's full update (the peer), run in the same process.", "",
        "| relaxation | not converged | sweeps median | 90th percentile | largest "
        "| median / peer |",
        "|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    peer = next(r for r in rows if r["relaxation"] == 1.0)
    for r in rows:
        ratio = r["median"] / peer["median"] if peer["median"] else float("nan")
        lines.append(
            f"| {r['relaxation']:g} | {r['failed']} of {total} | {r['median']:.0f} "
            f"| {r['p90']:.0f} | {r['largest']} | {ratio:.2f} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relaxations", type=float, nargs="+", default=[1.0, 0.9, 0.8, 0.7, 0.5])
    parser.add_argument("--iterates", type=int, nargs="+", default=[0, 3, 8, 30])
    parser.add_argument("--tolerance", type=float, default=None,
                        help="[m/s] (default the planners', trajopt.problem.CONTACT_TOLERANCE)")
    parser.add_argument("--most", type=int, default=2000)
    parser.add_argument("--problems", type=int, default=len(PROBLEMS),
                        help="use the first this many of the robot/gait problems")  # fmt: skip
    parser.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"))
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", True)
    from benchmarks.markdown_report import publish
    from trajopt.problem import CONTACT_TOLERANCE

    if args.tolerance is None:
        args.tolerance = CONTACT_TOLERANCE

    if 1.0 not in args.relaxations:
        args.relaxations = [1.0, *args.relaxations]
    problems = []
    for robot, gait, options in PROBLEMS[: args.problems]:
        problems += contact_problems(robot, gait, options, args.iterates)
        print(f"{robot} {gait}: contact problems gathered", flush=True)
    rows = []
    for relaxation in args.relaxations:
        needed = sweeps_needed(problems, relaxation, args.tolerance, args.most)
        ok = needed[needed >= 0]
        rows.append({"relaxation": relaxation, "failed": int(np.sum(needed < 0)),
                     "median": float(np.median(ok)) if ok.size else float("nan"),
                     "p90": float(np.percentile(ok, 90)) if ok.size else float("nan"),
                     "largest": int(ok.max()) if ok.size else -1})  # fmt: skip
        print(rows[-1], flush=True)
    given = list(argv if argv is not None else sys.argv[1:])
    if "--output" in given:  # where it was written is not how it was measured
        del given[given.index("--output") : given.index("--output") + 2]
    command = "python benchmarks/bench_contact_solve.py " + " ".join(
        a for a in given if a != "--no-write"
    )
    settings = {"iterates": args.iterates, "tolerance": args.tolerance, "most": args.most}
    text = render(rows, problems, settings, command.strip())
    publish(None if args.no_write else Path(args.output), HEADING, text)
    return rows


if __name__ == "__main__":
    main()
