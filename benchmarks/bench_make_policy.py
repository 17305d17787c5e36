"""`examples/make_policy.py` per robot: wall time per stage and the deployment check's result.

    python examples/make_policy.py --robot anymal_c --out results/policy_anymal_c   # first
    python benchmarks/bench_make_policy.py results/policy_anymal_c results/policy_solo12

Reads each run's `pipeline.json` and `check.json` (`learning.pipeline`) and writes the
"## make_policy" section: per robot, the seconds of each stage, the warm start's and SHAC's
tracking in this project's simulator, and how many seeds of the randomised MuJoCo tour with the
state estimator the policy walked, with why the others did not. It runs no peer: legged_gym's
and MuJoCo Playground's recipes need a GPU this machine does not have.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HEADING = "## make_policy"


def read_run(folder: str) -> dict:
    with open(os.path.join(folder, "pipeline.json")) as f:
        state = json.load(f)
    check_path = os.path.join(folder, "check.json")
    check = None
    if os.path.isfile(check_path):
        with open(check_path) as f:
            check = json.load(f)
    return {"folder": folder, "state": state, "check": check}


def why_not(check: dict | None) -> str:
    """The reasons the tour's seeds did not walk, counted by their words before any number."""
    if not check:
        return "-"
    reasons = collections.Counter(
        re.split(r"[:\d]", reason)[0].strip()
        for row in check["seeds"] for reason in row.get("why_not", [])
    )  # fmt: skip
    return ", ".join(f"{k} ({n})" for k, n in reasons.most_common()) or "-"


def render(runs, command: str) -> str:
    from benchmarks.markdown_report import cpu_name, versions
    from learning.pipeline import STAGES

    lines = [
        HEADING, "",
        "Written by `benchmarks/bench_make_policy.py` from the runs' own records (after "
        "`examples/make_policy.py`).", "",
        f"- Command: `{command}`",
        f"- Date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- CPU: {cpu_name()}, {os.cpu_count()} logical cores, shared by the runs listed "
        "and other work; " + versions("jax", "mujoco"),
        "- Stages: `learning.pipeline` (default recipe unless said). Tracking: mean velocity "
        "error [m/s] in our simulator at the stage's end. Check: seeds of the randomised "
        "MuJoCo tour with the state estimator walked (`learning.deployment.walk_failures`). "
        "A stage's seconds are its last run's.",
        "",
        "| robot | " + " | ".join(f"{s} s" for s in STAGES) + " | total min | warm start "
        "tracking | SHAC tracking, fell | SHAC iterations | command box | check walked | why not |",
        "|---|" + "---:|" * len(STAGES) + "---:|---:|---|---:|---|---|---|",
    ]  # fmt: skip
    for run in runs:
        state, stages = run["state"], run["state"]["stages"]
        seconds = [stages[s]["seconds"] if s in stages else None for s in STAGES]
        total = sum(s for s in seconds if s is not None) / 60
        warm = stages.get("warm_start", {}).get("result", {})
        shac = stages.get("shac", {}).get("result", {})
        check = stages.get("check", {}).get("result")
        cells = " | ".join("-" if s is None else f"{s:.0f}" for s in seconds)
        walked = "-" if check is None else f"{check['walked']} of {check['of']}"
        lines.append(
            f"| {state['robot']} | {cells} | {total:.0f} "
            f"| {warm.get('tracking_error', float('nan')):.3f} "
            f"| {shac.get('tracking_error', float('nan')):.3f}, "
            f"{shac.get('fell_fraction', float('nan')):.0%} "
            f"| {state['recipe']['shac_iterations']} "
            f"| {_box(run)} "
            f"| {walked} "
            f"| {why_not(run['check'])} |"
        )
    return "\n".join(lines)


def _box(run: dict) -> str:
    """The run's command box `(vx, vy, yaw rate)`: as `pipeline.json` records it, else as its
    exported policy declares it (`policy/policy.json`), else '-'."""
    box = run["state"].get("box")
    exported = os.path.join(run["folder"], "policy", "policy.json")
    if box is None and os.path.isfile(exported):
        with open(exported) as f:
            ranges = json.load(f).get("command_ranges") or {}
        box = [ranges[k][1] for k in ("vx", "vy", "yaw_rate")] if ranges else None
    return "-" if box is None else "(" + ", ".join(f"{c:g}" for c in box) + ")"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="make_policy output folders")
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    from benchmarks.markdown_report import publish

    runs = [read_run(folder) for folder in args.runs]
    command = "python benchmarks/bench_make_policy.py " + " ".join(args.runs)
    text = render(runs, command)
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING, text)
    return runs


if __name__ == "__main__":
    main()
