"""MPC cycle time and how closed-loop tracking degrades with a slower replanning rate.

    python benchmarks/bench_mpc.py                 # Go2 trot, 0.5 s horizon at 20 ms, one core
    python benchmarks/bench_mpc.py --seconds 2 --replan 1 4 --no-write    # quick

1. Cycle time: the closed loop of `controllers.closed_loop.run_mpc` (simulated time) with one
   FDDP iteration per 20 ms cycle, for at least `--min-cycles` cycles (default 500: a p99 over
   fewer is a maximum in disguise); median, 99th percentile and maximum of the cycle wall time
   (the first solve, which compiles, excluded), the share of cycles past the 50 Hz (20 ms)
   budget, against the targets for a robot's own computer (median 5 ms, p99 10 ms).
2. Degradation: the same loop replanning only every k control periods (k = 1, 2, 4, 8: 50,
   25, 12.5, 6.25 Hz), the plan's next targets applied open loop in between; tracking error
   and falls per rate. Simulated time makes the rate exact and independent of this machine.
3. Latency (`--latency`, default k = 1, 2): replanning every k periods with each plan used k
   periods after its measurement, as in real time when a solve takes k periods
   (`run_mpc(..., latency=k)`), without and with the latency compensation
   (`lookahead = k dt`: the plan is solved from the predicted state and starts there).

The process is pinned to one core (`--core`, default 0) before JAX starts (issue: one core).
`--derivatives implicit` plans with the impulse solve's implicit derivatives
(`trajopt.problem.Problem`). Results go to the `## MPC (controllers/mpc.py)` section of
BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

HEADING = "## MPC"
ROOT = Path(__file__).resolve().parents[1]
DT = 0.02  # [s] the control period and the 50 Hz budget of one cycle
TARGET_MEDIAN, TARGET_P99 = 0.005, 0.010  # [s] a cycle on a robot's own computer


def cycle_time_table(cycle_times, parts: dict | None = None) -> list:
    """The cycle-time rows (markdown lines): count, median, p99, max, the share past the
    `DT` budget, against `TARGET_MEDIAN` and `TARGET_P99`; with `parts` (`{part: median [s]}`,
    `controllers.mpc.timing_medians`) where a cycle's time goes."""
    import numpy as np

    t = np.asarray(cycle_times)
    med, p99 = float(np.median(t)), float(np.percentile(t, 99))
    overruns = int(np.sum(t > DT))
    verdict = "met" if med <= TARGET_MEDIAN and p99 <= TARGET_P99 else "not met"
    return [
        "### Cycle time (replanning every 20 ms)",
        "",
        "| cycles | median ms | p99 ms | max ms | past 20 ms | target median 5 / p99 10 ms |",
        "|---:|---:|---:|---:|---:|---|",
        f"| {len(t)} | {1e3 * med:.1f} | {1e3 * p99:.1f} | {1e3 * t.max():.1f} | "
        f"{overruns} ({overruns / len(t):.1%}) | {verdict} ({med / TARGET_MEDIAN:.1f}x, "
        f"{p99 / TARGET_P99:.1f}x) |",
        "",
    ] + ([] if not parts else [
        "Where a cycle's time goes (medians, ms; `other`: the rest of the cycle; "
        "`generated_code` and `elimination` are parts of `linearize`):",
        "",
        "| " + " | ".join(parts) + " |",
        "|" + "---:|" * len(parts),
        "| " + " | ".join(f"{1e3 * v:.2f}" for v in parts.values()) + " |",
        "",
    ])  # fmt: skip


def measure(robot, velocity, seconds, replan_every, iterations, budget, latency=0, lookahead=0.0,
            derivatives="unrolled"):  # fmt: skip
    from controllers.closed_loop import run_mpc
    from controllers.mpc import MPC, timing_medians

    mpc = MPC(robot, "trot", (velocity, 0.0, 0.0), horizon=0.5, iterations=iterations,
              time_budget=budget, derivatives=derivatives)  # fmt: skip
    result = run_mpc(mpc, seconds, replan_every=replan_every, latency=latency,
                     lookahead=lookahead, progress=False)  # fmt: skip
    cycles = mpc.stats.cycles[1:]  # the first solve compiles
    summary = result.summary(settle=1.0)
    return summary, [c.wall_time for c in cycles], timing_medians(cycles)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2")
    parser.add_argument("--velocity", type=float, default=0.5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--replan", type=int, nargs="*", default=[1, 2, 4, 8])
    parser.add_argument("--latency", type=int, nargs="*", default=[1, 2],
                        help="latency rows: replan every k periods, plans used k periods late")
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument("--derivatives", choices=("unrolled", "implicit", "compiled"),
                        default="unrolled",
                        help="the planning model's impulse-solve derivatives (trajopt.Problem)")
    parser.add_argument("--budget", type=float, default=0.5, help="wall budget per cycle [s]")
    parser.add_argument("--min-cycles", type=int, default=500,
                        help="cycles of the cycle-time row (its run lasts long enough)")
    parser.add_argument("--core", type=int, default=0, help="the core to pin to")
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if not args.no_pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.core})  # before JAX creates its thread pools
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from benchmarks.markdown_report import cpu_name, publish, versions

    load_before = os.getloadavg()[0]
    rows = []
    cycle_times = cycle_parts = None
    runs = [(k, 0, 0.0) for k in args.replan]
    runs += [(k, k, look) for k in args.latency for look in (0.0, 0.02 * k)]
    for k, latency, lookahead in runs:
        cycle_row = k == 1 and latency == 0
        seconds = max(args.seconds, (args.min_cycles + 1) * DT) if cycle_row else args.seconds
        summary, cycles, timing = measure(args.robot, args.velocity, seconds, k,
                                          args.iterations, args.budget, latency, lookahead,
                                          args.derivatives)  # fmt: skip
        if cycle_row:
            cycle_times, cycle_parts = np.asarray(cycles), timing
        rows.append((k, latency, lookahead, summary))
        print(k, latency, lookahead, summary, flush=True)
    load_after = os.getloadavg()[0]
    from trajopt.problem import CONTACT_TOLERANCE

    lines = [
        HEADING,
        "",
        "Written by `benchmarks/bench_mpc.py`.",
        "",
        f"- Command: `python benchmarks/bench_mpc.py {' '.join(argv or sys.argv[1:])}`".rstrip(),
        f"- Date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- CPU: {cpu_name()}, pinned to core {args.core}; 1-min load average "
        f"{load_before:.2f} before, "
        f"{load_after:.2f} after",
        f"- Versions: {versions('jax', 'jaxlib', 'numpy')}",
        f"- Problem: {args.robot} trot at {args.velocity} m/s, horizon 0.5 s at 20 ms (25 knots, "
        f"2 substeps, smooth contact solved to {CONTACT_TOLERANCE:g} m/s, "
        f"{args.derivatives} derivatives), "
        f"{args.iterations} FDDP iteration(s) per cycle, "
        f"wall budget {args.budget} s per cycle; plant: `contact.step` at 2 ms, smooth, 20 sweeps; "
        f"{args.seconds} s simulated per row, tracking measured after the first second.",
        "",
    ]
    if cycle_times is not None and len(cycle_times):
        lines += cycle_time_table(cycle_times, cycle_parts)
    lines += [
        "### Tracking against the replanning rate (simulated time)",
        "",
        "Latency: each plan is used k periods (20k ms) after the measurement it was solved "
        "from; a lookahead solves from the state the planning model predicts for then "
        "(`MPC.plan_cycle`).",
        "",
        "| replan every | rate Hz | latency | lookahead | fell | mean v_x m/s "
        "| mean abs v_x error m/s | avg speed m/s | RMS yaw-rate error rad/s |",
        "|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for k, latency, lookahead, s in rows:
        lines.append(
            f"| {20 * k} ms | {50 / k:.2f} | {20 * latency} ms | {1e3 * lookahead:.0f} ms | "
            f"{s['fell']} | {s['mean_forward_velocity']:.3f} | "
            f"{s['mean_abs_forward_error']:.3f} | {s['average_speed_from_displacement']:.3f} | "
            f"{s['rms_yaw_rate_error']:.3f} |"
        )
    lines.append("")
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING, "\n".join(lines))


if __name__ == "__main__":
    main()
