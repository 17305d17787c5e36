"""What a new problem costs: first and second runs on an empty and a warm cache, against Crocoddyl.

    python benchmarks/bench_new_problem.py                  # everything (minutes)
    python benchmarks/bench_new_problem.py --skip-stones --no-write      # quicker

Each row runs in its own process, as a user's would, on its own cache folder
(`DIFFLOCO_CACHE_DIR`): "first" starts from an empty one (the C libraries are built, JAX
programs compiled), "second" reuses it.

1. The README's main job (`examples/solve_trot.py --robot go2 --velocity 0.5`, no viewer):
   the first run's solve including its builds (the job's own `wall_time_incl_compile_s`), and
   the second run's whole process (wall, from the start of `python` to its exit).
2. The ANYmal C trot of `bench_trajopt.py` (56 knots at 10 ms, the problem Crocoddyl's
   `SimpleQuadrupedalGaitProblem` trot poses, `derivatives="compiled"`): the first solve of the
   new structure on an empty cache (both cores: the library's units build in parallel), and the
   whole solve (initial guess and FDDP to convergence) on the warm cache (pinned to core 0,
   median of `--repeats`), against Crocoddyl 3.2.1's on its own trot of the same robot (its
   `quasiStatic` guess and FDDP), pinned to the same core in the same run
   (`benchmarks/crocoddyl_trot.py`).
3. The Go2 MPC cycle (`bench_mpc.py`'s measurement: 25 knots, one compiled FDDP iteration per
   20 ms cycle, at least 500 cycles, pinned to core 1): median and 99th percentile, over
   Crocoddyl's 56-knot FDDP iteration (its median per-iteration time above).
4. The stepping-stones example (`examples/stepping_stones.py`, its defaults, no viewer), first
   run on an empty cache: the whole process.

Results go to the "New problem" section of BENCHMARKS.md; the targets are the issue's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_trajopt  # noqa: E402  (a sibling script module: the ANYmal trot and Crocoddyl)
import markdown_report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HEADING = "## New problem: first and second runs"
# the targets: seconds, or ratios to Crocoddyl
TARGETS = {"readme_first_s": 20.0, "readme_second_s": 5.0, "anymal_ratio": 2.0,
           "anymal_first_s": 20.0, "mpc_median_ratio": 0.3, "mpc_p99_ratio": 0.5,
           "stones_first_s": 60.0}  # fmt: skip

ANYMAL_SOLVE = """
import json, statistics, sys, time
sys.path.insert(0, "benchmarks")
import bench_trajopt as b
from trajopt.gaits import make_problem
from trajopt.solver import solve
problem = make_problem("anymal_c", "trot", velocity=b.CROC_SPEED, duration=b.CROC_KNOTS * b.CROC_DT,
                       dt=b.CROC_DT, substeps=1, period=b.CROC_PERIOD, lead_in=b.CROC_LEAD_IN,
                       derivatives="compiled")
times = []
for _ in range({runs}):
    began = time.perf_counter()
    traj = solve(problem, max_iterations=100, verbose=False)
    times.append(time.perf_counter() - began)
print(json.dumps({{"seconds": times, "status": traj.status, "iterations": traj.iterations,
                  "unconverged_knots": traj.meta["unconverged_knots"]}}))
"""

MPC_CYCLE = """
import json, sys
import numpy as np
sys.path.insert(0, "benchmarks")
from bench_mpc import DT, measure
_, times, _ = measure("go2", 0.5, {seconds}, 1, 1, 0.5, derivatives="compiled")
t = np.asarray(times)
print(json.dumps({{"median_s": float(np.median(t)), "p99_s": float(np.percentile(t, 99)),
                  "cycles": int(t.size), "over_budget": float(np.mean(t > DT))}}))
"""


def run(cmd: list[str], cache: Path, core: int | None = None) -> tuple[float, str]:
    """`(wall seconds, stdout)` of `cmd` in the repository with `cache` as its cache folder,
    pinned to `core` if given; a failure raises with the end of its stderr."""
    if core is not None and hasattr(os, "sched_setaffinity"):
        cmd = ["taskset", "-c", str(core), *cmd]
    env = dict(os.environ, DIFFLOCO_CACHE_DIR=str(cache))
    began = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return wall, done.stdout


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def readme_runs(scratch: Path) -> dict:
    """The README main job twice on one new cache folder."""
    cache = scratch / "readme-cache"
    cmd = [sys.executable, "examples/solve_trot.py", "--robot", "go2", "--velocity", "0.5",
           "--out", str(scratch / "readme-results"), "--no-view"]  # fmt: skip
    first_wall, first_out = run(cmd, cache)
    second_wall, second_out = run(cmd, cache)

    def solve_seconds(out: str) -> float:
        return float(re.search(r"wall_time_incl_compile_s: ([0-9.]+)", out).group(1))

    return {"first_process_s": first_wall, "first_solve_s": solve_seconds(first_out),
            "second_process_s": second_wall,
            "second_solve_s": solve_seconds(second_out)}  # fmt: skip


def anymal_runs(scratch: Path, repeats: int) -> dict:
    cache = scratch / "anymal-cache"
    first = last_json(run([sys.executable, "-c", ANYMAL_SOLVE.format(runs=1)], cache)[1])
    warm = last_json(run([sys.executable, "-c", ANYMAL_SOLVE.format(runs=repeats)], cache,
                         core=0)[1])  # fmt: skip
    return {"first_s": first["seconds"][0], "warm_s": statistics.median(warm["seconds"]),
            "status": warm["status"], "iterations": warm["iterations"],
            "unconverged_knots": warm["unconverged_knots"]}  # fmt: skip


def mpc_cycle(scratch: Path, seconds: float) -> dict:
    return last_json(run([sys.executable, "-c", MPC_CYCLE.format(seconds=seconds)],
                         scratch / "mpc-cache", core=1)[1])  # fmt: skip


def stones_run(scratch: Path) -> float:
    cmd = [sys.executable, "examples/stepping_stones.py", "--out", str(scratch / "stones"),
           "--no-view", "--quiet"]  # fmt: skip
    return run(cmd, scratch / "stones-cache")[0]


def render(r: dict, command: str, loads: tuple[float, float], when: str) -> str:
    croc = r["crocoddyl"]
    croc_iteration = croc["per_iteration_s_median"]
    rows = [("README main job, first run on an empty cache: solve incl. build",
             r["readme"]["first_solve_s"], "readme_first_s", "s"),
            ("README main job, second run, whole process", r["readme"]["second_process_s"],
             "readme_second_s", "s"),
            ("ANYmal trot, 56 knots, whole solve / Crocoddyl's",
             r["anymal"]["warm_s"] / croc["whole_s_median"], "anymal_ratio", "x"),
            ("first solve of a new ANYmal structure (build incl.)", r["anymal"]["first_s"],
             "anymal_first_s", "s")]  # fmt: skip
    if "mpc" in r:
        rows += [("Go2 MPC cycle median / Crocoddyl's 56-knot iteration",
                  r["mpc"]["median_s"] / croc_iteration, "mpc_median_ratio", "x"),
                 ("Go2 MPC cycle p99 / Crocoddyl's 56-knot iteration",
                  r["mpc"]["p99_s"] / croc_iteration, "mpc_p99_ratio", "x")]  # fmt: skip
    if "stones_s" in r:
        rows.append(("stepping stones, whole example, first run", r["stones_s"],
                     "stones_first_s", "s"))  # fmt: skip
    lines = [
        HEADING, "",
        f"- Command: `{command}`",
        f"- Date: {when}; CPU: {markdown_report.cpu_name()}, {os.cpu_count()} logical cores; "
        f"{markdown_report.versions('jax', 'casadi')}, Crocoddyl {croc['versions']['crocoddyl']}",
        f"- 1-minute load average at start / end: {loads[0]:.2f} / {loads[1]:.2f}",
        "- Each run is its own process with its own cache folder (first: empty; second: the "
        "first's). ANYmal's whole solve and Crocoddyl's are pinned to core 0, the MPC to core 1.",
        "", "| measure | measured | target | met |", "|---|---:|---:|---|",
    ]  # fmt: skip
    for name, value, key, unit in rows:
        text = f"{value:.1f} s" if unit == "s" else f"{value:.2f}x"
        target = f"{TARGETS[key]:g} s" if unit == "s" else f"{TARGETS[key]:g}x"
        lines.append(f"| {name} | {text} | {target} | {'yes' if value <= TARGETS[key] else 'no'} |")
    a, m = r["anymal"], r.get("mpc")
    lines += [
        "",
        f"- README main job: first process {r['readme']['first_process_s']:.1f} s, second "
        f"solve {r['readme']['second_solve_s']:.2f} s.",
        f"- ANYmal trot (ours): {a['status']} after {a['iterations']} iterations, "
        f"{a['warm_s']:.3f} s (median of the warm runs), knots above the contact tolerance: "
        f"{a['unconverged_knots'] or 'none'}; Crocoddyl: {croc['iterations']} iterations, "
        f"{croc['whole_s_median']:.3f} s (guess and solve), {1e3 * croc_iteration:.1f} ms per "
        "iteration.",
    ]
    if m is not None:
        lines.append(f"- MPC: {m['cycles']} cycles, median {1e3 * m['median_s']:.1f} ms, p99 "
                     f"{1e3 * m['p99_s']:.1f} ms, {100 * m['over_budget']:.1f} % past 20 ms.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeats", type=int, default=5, help="warm ANYmal solves and Crocoddyl's")
    p.add_argument("--mpc-seconds", type=float, default=10.0,
                   help="simulated seconds of MPC (0: skip)")  # fmt: skip
    p.add_argument("--skip-stones", action="store_true", help="skip the stepping stones")
    p.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"))
    p.add_argument("--no-write", action="store_true")
    s = p.parse_args(argv)
    if s.repeats < 1:
        p.error(f"--repeats must be at least 1, got {s.repeats}")
    if 0 < s.mpc_seconds <= 1.0:  # bench_mpc's tracking summary settles for 1 s
        p.error(f"--mpc-seconds must be 0 or above 1, got {s.mpc_seconds}")
    command = " ".join(["python benchmarks/bench_new_problem.py",
                        *(argv if argv is not None else sys.argv[1:])])  # fmt: skip
    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    load_start = os.getloadavg()[0]
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="diffloco-new-problem-") as folder:
        scratch = Path(folder)
        print("README main job, twice ...", flush=True)
        results["readme"] = readme_runs(scratch)
        print(f"  {results['readme']}\nANYmal trot ...", flush=True)
        results["anymal"] = anymal_runs(scratch, s.repeats)
        print(f"  {results['anymal']}\nCrocoddyl ...", flush=True)
        results["crocoddyl"] = bench_trajopt.run_crocoddyl("anymal_c", s.repeats, pin=True)
        if s.mpc_seconds > 0:
            print("MPC cycle ...", flush=True)
            results["mpc"] = mpc_cycle(scratch, s.mpc_seconds)
        if not s.skip_stones:
            print("stepping stones ...", flush=True)
            results["stones_s"] = stones_run(scratch)
    text = render(results, command, (load_start, os.getloadavg()[0]), when)
    markdown_report.publish(None if s.no_write else Path(s.output), HEADING, text)
    return results


if __name__ == "__main__":
    main()
