"""The gait library, validated: every gait for every robot, solved and checked.

    python benchmarks/bench_gaits.py                        # 3 robots x 7 gaits, 2 processes
    python benchmarks/bench_gaits.py --robots solo12 --gaits trot pronk --no-write   # quick
    python benchmarks/bench_gaits.py --robots all     # every quadruped dynamics can load

Each (robot, gait) problem comes from `trajopt.gaits.make_problem` at the robot's command
(forward speed; turn: yaw rate), 0.8 s at 20 ms, and is solved by FDDP (single shooting, the
gait's default start) for a fixed number of iterations. The solution of single shooting is its
own open-loop rollout under the contact model, so what is checked is what the simulator does.
Checks (`trajopt.gait_metrics.gait_checks`): average speed within 10 % of the command, no
drift, base height within [0.75, 1.25] x standing, the contacts agree with the reference
pattern on 75 % of (knot, foot) pairs, and the gait's own pattern (pairs alternate, a pronk
flies, a walk keeps three feet down, a stand keeps four).

One process per robot (`--jobs` at a time), each compiling once for all its gaits. Results go
to `benchmarks/results/gaits_<robot>.json` and the `## Gait library` section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADING = "## Gait library"
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
ROBOTS = ("solo12", "go2", "anymal_c")
SPEEDS = {"go2": 0.5}  # forward commands [m/s] where not DEFAULT_SPEED
DEFAULT_SPEED = 0.3  # [m/s] a robot not in SPEEDS
YAW_RATE = 0.5  # turn command [rad/s]


def command_for(robot: str, gait: str) -> float:
    if gait == "stand":
        return 0.0
    return YAW_RATE if gait == "turn" else SPEEDS.get(robot, DEFAULT_SPEED)


def solve_robot(robot: str, gaits, iterations: int, duration: float) -> dict:
    """Solve and check every gait of `gaits` for `robot`: `{gait: row}`."""
    from trajopt.gait_metrics import average_velocity, solved_gait_checks
    from trajopt.gaits import make_problem
    from trajopt.solver import solve

    rows = {}
    for gait in gaits:
        command = command_for(robot, gait)
        problem = make_problem(robot, gait, command, duration=duration, dt=0.02)
        start = time.perf_counter()
        traj = solve(problem, max_iterations=iterations, verbose=False)
        seconds = time.perf_counter() - start
        checks = solved_gait_checks(problem, traj, command)
        velocity = average_velocity(traj.q, traj.dt)
        rows[gait] = {
            "command": command,
            "status": traj.status,
            "iterations": traj.iterations,
            "cost": float(traj.cost),
            "seconds": seconds,
            "forward": velocity["forward"],
            "yaw_rate": velocity["yaw_rate"],
            "checks": {k: {"value": v, "required": r, "passed": bool(p)}
                       for k, (v, r, p) in checks.items()},  # fmt: skip
            "passed": all(bool(p) for _, _, p in checks.values()),
        }
        failed = [k for k, c in rows[gait]["checks"].items() if not c["passed"]]
        print(f"{robot:<9} {gait:<6} {traj.status:<15} cost {traj.cost:8.3f} "
              f"forward {velocity['forward']:+.3f} m/s yaw {velocity['yaw_rate']:+.2f} rad/s "
              f"{seconds:6.1f} s  {'ok' if not failed else 'FAILED: ' + ', '.join(failed)}",
              flush=True)  # fmt: skip
    return rows


def _fmt(value) -> str:
    if isinstance(value, (list, tuple)):
        return "-".join(f"{v:.3f}" for v in value)
    return f"{value:.3f}" if isinstance(value, float) else str(value)


AT_MOST = ("drift", "every foot swings")  # checks passed at or below their required value


def failure(gait: str, name: str, check: dict) -> str:
    """A failed check, its value against what it needed: `first pair alone 0.150 < 0.2`."""
    value, required = check["value"], check["required"]
    if name == "height":
        return f"height {_fmt(value)} m outside {_fmt(required)}"
    if name == "speed" and gait != "stand":
        return f"speed {value:+.3f}, not within 10 % of {required:.2f}"
    above = name in AT_MOST or name == "speed"  # a stand's speed: at most its bound
    return f"{name} {_fmt(value)} {'>' if above else '<'} {required:g}"


def render(results: dict, command: str, iterations: int, duration: float,
           date: str | None = None) -> str:  # fmt: skip
    """The `## Gait library` section; `date` (ISO 8601) defaults to now."""
    from benchmarks.markdown_report import cpu_name, versions

    date = date or datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    speeds = ", ".join(f"{robot} {v} m/s" for robot, v in SPEEDS.items())
    lines = [
        HEADING,
        "",
        "Written by `benchmarks/bench_gaits.py`.",
        "",
        f"- Command: `{command}`",
        f"- Date: {date}",
        f"- CPU: {cpu_name()}, {os.cpu_count()} logical cores, one process per robot pinned "
        "to its own core, two at a time; " + versions("jax", "numpy"),
        f"- Problems: `make_problem(robot, gait, command, duration={duration}, dt=0.02)`, FDDP "
        f"single shooting (an open-loop rollout of the smooth contact model) from the gait's "
        f"default start, at most {iterations} iterations. Commands: {speeds}, the others "
        f"{DEFAULT_SPEED} m/s, turn {YAW_RATE} rad/s. Poses, gains, gait sizes: "
        "`dynamics.robots.BUILT_IN` (go2, anymal_c, solo12), else SRDF or "
        "`dynamics.robot_rules`. Solve s includes compilation on a robot's first gait.",
        "- Checks: `trajopt.gait_metrics.gait_checks` (its docstring gives each threshold: "
        "speed within 10 % of the command, no drift, height, pattern agreement >= 0.75, the "
        "gait's own pattern); failed ones listed with their values.",
        "",
        "| robot | gait | command | achieved | status | cost | pattern agreement | solve s "
        "| checks |",
        "|---|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for robot, rows in results.items():
        for gait, r in rows.items():
            checks = r["checks"]
            achieved = r["yaw_rate"] if gait == "turn" else r["forward"]
            failed = [failure(gait, k, c) for k, c in checks.items() if not c["passed"]]
            lines.append(
                f"| {robot} | {gait} | {r['command']:.2f} | {achieved:+.3f} | {r['status']} "
                f"| {r['cost']:.2f} | {checks['pattern agreement']['value']:.2f} "
                f"| {r['seconds']:.0f} "
                f"| {'pass' if not failed else 'FAIL: ' + ', '.join(failed)} |"
            )
    passed = sum(r["passed"] for rows in results.values() for r in rows.values())
    total = sum(len(rows) for rows in results.values())
    lines += ["", f"{passed} of {total} (robot, gait) pairs pass every check."]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="*", default=list(ROBOTS),
                        help="any of dynamics.available_robots(), or 'all'")
    parser.add_argument("--gaits", nargs="*", default=None, help="default: every gait")
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--duration", type=float, default=0.8)
    parser.add_argument("--jobs", type=int, default=2, help="robots solved at the same time")
    parser.add_argument("--no-write", action="store_true", help="print, do not write files")
    parser.add_argument("--one-robot", help=argparse.SUPPRESS)  # worker mode
    parser.add_argument("--json", help=argparse.SUPPRESS)
    parser.add_argument("--core", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.core is not None and hasattr(os, "sched_setaffinity"):
        # one core per worker, set before JAX starts its thread pools: two unpinned workers
        # on two cores ran 5-10x slower than one alone (measured 2026-12-01)
        os.sched_setaffinity(0, {args.core})
    sys.path.insert(0, str(ROOT))
    from trajopt.gaits import available_gaits, check_gait

    if args.robots == ["all"]:
        import dynamics

        args.robots = list(dynamics.available_robots())
    gaits = args.gaits if args.gaits else list(available_gaits())
    for gait in gaits:
        check_gait(gait)
    if args.iterations < 1:
        parser.error(f"--iterations must be >= 1, got {args.iterations}")
    if args.one_robot:
        rows = solve_robot(args.one_robot, gaits, args.iterations, args.duration)
        Path(args.json).write_text(json.dumps(rows, indent=1))
        return rows

    out = Path(tempfile.mkdtemp(prefix="bench_gaits_")) if args.no_write else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    pending = list(args.robots)
    running = []
    paths = {r: out / f"gaits_{r}.json" for r in args.robots}
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    pin = args.jobs <= len(cores)  # a core per worker when there are enough
    while pending or running:
        while pending and len(running) < max(1, args.jobs):
            robot = pending.pop(0)
            cmd = [sys.executable, __file__, "--one-robot", robot, "--json", str(paths[robot]),
                   "--iterations", str(args.iterations), "--duration", str(args.duration),
                   "--gaits", *gaits]  # fmt: skip
            core = None
            if pin:
                core = next(c for c in cores if c not in {c_ for _, _, c_ in running})
                cmd += ["--core", str(core)]
            running.append((robot, subprocess.Popen(cmd, cwd=ROOT), core))
        time.sleep(1.0)
        for robot, proc, core in list(running):
            if proc.poll() is not None:
                running.remove((robot, proc, core))
                if proc.returncode != 0:
                    raise SystemExit(f"{robot}: the solve process failed ({proc.returncode})")
    results = {r: json.loads(paths[r].read_text()) for r in args.robots}
    command = "python benchmarks/bench_gaits.py " + " ".join(argv or sys.argv[1:])
    text = render(results, command.strip(), args.iterations, args.duration)
    from benchmarks.markdown_report import publish

    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING, text)
    return results


if __name__ == "__main__":
    main()
