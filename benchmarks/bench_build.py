"""The generated C's build: one translation unit against one per function compiled in parallel,
and the optimisation level's build time against the solve's run time.

    python benchmarks/bench_build.py              # writes the "## Generated C build" section
    python benchmarks/bench_build.py --no-write   # prints it

For each robot's trot (`trajopt.gaits.make_problem(..., derivatives="compiled")`): the CasADi
functions of `trajopt.engine.generated_code.substep_functions` built into an empty library folder
with each setting, then the problem solved for `--iterations` FDDP iterations on that library:
the build's wall seconds and the median iteration. The peer is the build the project used
before, all functions in one translation unit at `-O2`, run in the same process. The process
is not pinned: the parallel units need every core it may use (reported); run it on an
otherwise idle machine.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HEADING = "## Generated C build"
SETTINGS = (  # (label, optimisation flags, one translation unit); the first is the peer
    ("one unit, -O2", ("-O2",), True),
    ("parallel units, -O0", ("-O0",), False),
    ("parallel units, -O1", ("-O1",), False),
    ("parallel units, -O2", ("-O2",), False),
    ("parallel units, -O2 -fno-gcse", ("-O2", "-fno-gcse"), False),
)


def measure(robot: str, setting, iterations: int) -> dict:
    """Build seconds and median FDDP iteration [ms] of one setting, in a fresh library folder."""
    from native import c_library
    from trajopt.engine import generated_code
    from trajopt.gaits import make_problem
    from trajopt.solver import solve

    label, optimisation, one_unit = setting
    flags = (*optimisation, *c_library.MACHINE_FLAGS)
    with tempfile.TemporaryDirectory(prefix="diffloco-bench-build-") as cache:
        os.environ["DIFFLOCO_CACHE_DIR"] = cache
        generated_code.unload_all()
        problem = make_problem(robot, "trot", 0.5, duration=0.5, derivatives="compiled")
        functions = generated_code.knot_functions(problem)
        before = len(c_library.builds())
        started = time.perf_counter()
        generated_code.compile_library(functions, flags, one_unit=one_unit)
        build = c_library.builds()[before]
        assert not build.cached
        seconds = time.perf_counter() - started
        saved = generated_code.COMPILER_FLAGS
        generated_code.COMPILER_FLAGS = flags  # the solve's own build finds this library
        try:
            solve(problem, max_iterations=2, verbose=False)  # loads; JAX compiles its parts
            traj = solve(problem, max_iterations=iterations, verbose=False)
        finally:
            generated_code.COMPILER_FLAGS = saved
    times = np.diff([0.0] + [r["time"] for r in traj.history])
    return {"robot": robot, "setting": label, "units": build.units, "build_s": seconds,
            "compile_s": build.seconds, "iteration_ms": 1e3 * float(np.median(times)),
            "iterations": len(times)}  # fmt: skip


def render(rows, command: str, load: str) -> str:
    from benchmarks.markdown_report import cpu_name, versions

    lines = [
        HEADING, "",
        f"- Command: `{command}`",
        f"- Date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- CPU: {cpu_name()}, {len(os.sched_getaffinity(0))} of {os.cpu_count()} logical "
        "cores usable; load average at the start "
        f"{load}; " + versions("casadi"),
        "- Build: code generation and the C compiler, into an empty folder; its units "
        "compile in parallel, one process per core. Iteration: median wall time of an FDDP "
        "iteration on that library (`derivatives=\"compiled\"`). Ratios against the peer, one "
        "unit at -O2, measured in the same run.", "",
        "| robot | setting | units | build s | build / peer | iteration ms | iteration / peer |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for robot in dict.fromkeys(r["robot"] for r in rows):
        mine = [r for r in rows if r["robot"] == robot]
        peer = mine[0]
        for r in mine:
            lines.append(
                f"| {robot} | {r['setting']} | {r['units']} | {r['build_s']:.1f} "
                f"| {r['build_s'] / peer['build_s']:.2f} | {r['iteration_ms']:.1f} "
                f"| {r['iteration_ms'] / peer['iteration_ms']:.2f} |"
            )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", default=["go2"])
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    from benchmarks.markdown_report import publish

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = []
    for robot in args.robots:
        for setting in SETTINGS:
            rows.append(measure(robot, setting, args.iterations))
            print(rows[-1], flush=True)
    command = "python benchmarks/bench_build.py " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-write"
    )
    text = render(rows, command.strip(), load)
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING, text)
    return rows


if __name__ == "__main__":
    main()
