"""Three layouts of FDDP's per-iteration linearisation, timed on the same problem and core.

    python benchmarks/bench_linearize.py               # writes the section of BENCHMARKS.md
    python benchmarks/bench_linearize.py --no-write

Linearisation (forward-mode `jacfwd` of each knot's contact step and residuals, in tangent
space: `A, B, r, R_x, R_u`) is about two thirds of an FDDP iteration (BENCHMARKS.md,
"Trajectory optimisation vs Crocoddyl"). The layouts:

    loop   T calls of the jitted knot function from Python, arrays stacked on the host (what
           `solve_fddp` did at first)
    map    one call, `lax.map` over the knots (sequential inside XLA; `solve_fddp`'s layout,
           `trajopt.engine.shooting.linearize_horizon(layout="map")`)
    vmap   one call, `vmap` over the knots (the knots batched inside XLA)

Problem: the ANYmal C trot of `bench_trajopt.py` (56 knots at 10 ms, 1 substep, 10 sweeps),
linearised at the rollout of the standing targets. Pinned to one core before JAX starts.
Reported: median wall time of 7 repeats after the first call, the first call (compilation and
one run), and the largest difference of the Jacobians from the loop's.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import sys
import time
from pathlib import Path

HEADING = "## FDDP linearisation layouts"
ROOT = Path(__file__).resolve().parents[1]


def measure(layout: str, repeats: int) -> dict:
    import jax
    import numpy as np

    from trajopt.engine import knot_backends, shooting
    from trajopt.gaits import make_problem
    from trajopt.solver import initial_guess

    pr = make_problem("anymal_c", "trot", 0.2, duration=0.56, dt=0.01, substeps=1, period=0.56,
                      lead_in=0.0)
    fn = knot_backends.for_problem(pr)
    _, us = initial_guess(pr, guess="standing")
    xs, _, _ = fn.rollout(pr.data, us)
    T = pr.horizon

    def loop():  # one jitted call per knot (the terminal knot left out: the same in all)
        xs_host, us_host = jax.tree_util.tree_map(np.asarray, xs), np.asarray(us)
        lin = [fn.linearize(pr.data, shooting.index_knots(xs_host, t), us_host[t], t)
               for t in range(T)]  # fmt: skip
        return [np.stack([np.asarray(x[i]) for x in lin]) for i in range(5)]

    if layout != "loop":
        batched = jax.jit(functools.partial(shooting.linearize_horizon, pr, layout=layout))

    def run():
        if layout == "loop":
            return loop()
        return [np.asarray(a) for a in batched(pr.data, xs, us)[:5]]

    start = time.perf_counter()
    out = run()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - start)
    reference = loop()
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(reference, out))
    return {"layout": layout, "knots": T, "median_ms": 1e3 * float(np.median(times)),
            "first_s": first, "max_diff": diff}  # fmt: skip


def render(rows, command: str) -> str:
    from benchmarks.markdown_report import cpu_name, versions

    loop = next((r for r in rows if r["layout"] == "loop"), None)  # absent: no ratio column
    lines = [
        HEADING,
        "",
        "Written by `benchmarks/bench_linearize.py`.",
        "",
        f"- Command: `{command}`",
        f"- Date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- CPU: {cpu_name()}, one core (each layout in its own process, pinned); "
        + versions("jax", "numpy"),
        "- Problem: ANYmal C trot, 56 knots at 10 ms, 1 substep, 10 sweeps, linearised at the "
        "rollout of the standing targets (as `bench_trajopt.py`).",
        "",
        "| layout | knots | median ms | x loop | first call s | max diff vs loop |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['layout']} | {r['knots']} | {r['median_ms']:.1f} | "
            + (f"{r['median_ms'] / loop['median_ms']:.2f}" if loop else "-")
            + f" | {r['first_s']:.1f} | "
            f"{r['max_diff']:.1e} |"
        )
    lines += [
        "",
        "`map` is what `trajopt.engine.fddp.solve_fddp` does; every problem structure compiles "
        "the linearisation once, so a faster layout must not compile much longer "
        '(docs/benchmark-history.md, "The FDDP iteration").',
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", nargs="*", default=["loop", "map", "vmap"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-write", action="store_true", help="print, do not write files")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # worker mode: one layout
    args = parser.parse_args(argv)
    for layout in args.layouts:
        if layout not in ("loop", "map", "vmap"):
            parser.error(f"unknown layout {layout!r}: choose from loop, map, vmap")
    if args.one:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        sys.path.insert(0, str(ROOT))
        import json

        print("RESULT " + json.dumps(measure(args.one, args.repeats)), flush=True)
        return None
    import json
    import subprocess

    rows = []
    for layout in args.layouts:
        print(f"{layout}: compiling and timing ...", flush=True)
        cmd = [sys.executable, __file__, "--one", layout, "--repeats", str(args.repeats)]
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
        row = json.loads(next(x for x in out.splitlines() if x.startswith("RESULT "))[7:])
        print(f"  median {row['median_ms']:.1f} ms, first call {row['first_s']:.1f} s", flush=True)
        rows.append(row)
    sys.path.insert(0, str(ROOT))
    from benchmarks.markdown_report import publish

    command = "python benchmarks/bench_linearize.py " + " ".join(argv or sys.argv[1:])
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING,
            render(rows, command.strip()))  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
