"""The Go2 policies on what the robot measures: the 28 s omnidirectional tour in MuJoCo with
the true base velocity, with the state estimator's, and without one.

    python benchmarks/bench_policy_measurements.py --seeds 8 --jobs 2

Each run is `examples/deploy_policy.py`'s (the exported policy's NumPy runner, the safety
layer, MuJoCo at 500 Hz, the tour `OMNI_TOUR` with ramped commands) under one
`DisturbanceRanges` draw per seed, in two settings: the training environment's ranges
("default": payload -5..15 %, friction 0.5-1.25, latency up to 20 ms, pushes up to 0.5 m/s)
and a harder one ("harsh": friction 0.3-0.6, latency up to 40 ms, pushes up to 1 m/s). The
rows:

- `go2_omni`, truth: it observes MuJoCo's base velocity (what no Go2 with its sport service
  released gives);
- `go2_omni`, estimator: Go2-like sensor noise, the truth removed, the velocity estimated
  (`deploy_policy --estimator`);
- `go2_omni_proprio`, estimator: the policy that observes no base velocity, under the same
  noise and estimator.

A run walked when the safety layer stayed NORMAL and the true base stayed above 0.2 m. The
table gives the runs that walked, the mean over runs of the tour's mean linear and yaw-rate
tracking errors, and the estimator's velocity RMS error. Written to BENCHMARKS.md's
`## Policies on the robot's measurements` (`--no-write`: print only).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HEADING = "## Policies on the robot's measurements"
SETTINGS = {
    "default": {},
    "harsh": {"friction": (0.3, 0.6), "latency_s": 0.04, "push_velocity": 1.0},
}
ROWS = (("go2_omni", False), ("go2_omni", True), ("go2_omni_proprio", True))


def one_run(job):
    """`(policy, estimator, setting, seed, seconds) -> dict` of one tour (a worker)."""
    policy, estimator, setting, seed, seconds = job
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "examples"))
    import logging

    logging.disable(logging.WARNING)
    import deploy_policy

    from hardware.backends.mujoco_disturbances import DisturbanceRanges

    ranges = DisturbanceRanges(**SETTINGS[setting])
    folder = str(ROOT / "examples" / "policies" / policy)
    summary, result = deploy_policy.run(folder, seconds=seconds, randomize=seed, ranges=ranges,
                                        commands=np.asarray(deploy_policy.OMNI_TOUR),
                                        estimator=estimator)  # fmt: skip
    e = summary["estimator"] or {}
    lowest = e.get("min_true_height_m", summary["min_base_height_m"])
    return {
        "walked": summary["safety_mode"] == "normal" and lowest > 0.2,
        "linear": summary["mean_linear_error_m_per_s"],
        "yaw": summary["mean_yaw_rate_error_rad_per_s"],
        "estimator_rms": e.get("velocity_rms_m_per_s", float("nan")),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=28.0)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from benchmarks.markdown_report import cpu_name, publish

    load = os.getloadavg()
    jobs = [(p, e, s, seed, args.seconds) for s in SETTINGS for p, e in ROWS
            for seed in range(args.seeds)]  # fmt: skip
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(one_run, jobs))
    table = {}
    for job, r in zip(jobs, results):
        table.setdefault((job[2], job[0], job[1]), []).append(r)
    command = "python benchmarks/bench_policy_measurements.py " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    lines = [HEADING, "",
             f"`{command.strip()}` on {cpu_name()}, {args.jobs} worker(s), load average "
             f"{load[0]:.2f} at the start; seeds 0-{args.seeds - 1}, the {args.seconds:.0f} s "
             "tour. Walked: safety layer NORMAL and true base above 0.2 m throughout.", "",
             "| setting | policy | base velocity | walked | linear error [m/s] | "
             "yaw-rate error [rad/s] | estimator velocity RMS [m/s] |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    out = {}
    for (setting, policy, estimator), rows in table.items():
        walked = sum(r["walked"] for r in rows)
        fine = [r for r in rows if np.isfinite(r["linear"])]
        linear = np.mean([r["linear"] for r in fine]) if fine else float("nan")
        yaw = np.mean([r["yaw"] for r in fine]) if fine else float("nan")
        rms = np.nanmean([r["estimator_rms"] for r in rows]) if estimator else float("nan")
        source = "not observed" if policy.endswith("proprio") else (
            "estimator" if estimator else "truth")  # fmt: skip
        lines.append(f"| {setting} | `{policy}` | {source} | {walked} / {len(rows)} | "
                     f"{linear:.3f} | {yaw:.3f} | "
                     f"{'-' if not estimator else f'{rms:.3f}'} |")  # fmt: skip
        out[f"{setting}/{policy}/{source}"] = {"walked": walked, "runs": len(rows),
                                               "linear": linear, "yaw": yaw, "rms": rms}
    text = "\n".join(lines) + "\n"
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING, text)
    return out


if __name__ == "__main__":
    main()
