"""A trained policy against the issue's demonstration targets: tracking error in our simulator
at fixed commands up to 1 m/s, and a 20 s walk in MuJoCo through the hardware interface.

    python benchmarks/bench_policy.py --policy results/shac_go2/policy.eqx \
        --training results/shac_go2/checkpoints/metrics.json

1. Our simulator (`controllers.learning.training.env`, no randomisation, the policy alone from
   `--runs` noisy standing resets per command; `shac.evaluate` with fixed commands): per
   forward command in `--vx` the mean `|v_xy - c_xy|` [m/s] after `--settle` s and the fall
   fraction, once with the contact model it trained with (`smooth`, kappa `--kappa`) and once
   with the `hard` model (no smoothing: the model the smoothing approximates).
2. MuJoCo (an engine it was not trained in): the policy exported with
   `controllers.learning.policy_export` and run by `examples/deploy_policy.py` (the NumPy runner,
   `PolicyController`, the safety layer, MuJoCo at 500 Hz) for `--mujoco-seconds` per
   command in `--mujoco-vx`: average speed after 1.5 s, lowest base height, safety mode.
3. With `--training` (a `metrics.json` of `shac.train`): iterations, env steps and wall time.

Written to the `## Trained policy` section of BENCHMARKS.md (`--no-write`: print only).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

HEADING = "## Trained policy (demonstration: controllers/learning/training)"
ROOT = Path(__file__).resolve().parents[1]


def simulator_rows(policy, args) -> list[dict]:
    """Per contact model and command: mean tracking error after the settle time, falls."""
    import jax
    import numpy as np

    from controllers.learning.policy import CONTROL_DT
    from controllers.learning.training import shac
    from controllers.learning.training.env import EnvConfig, Randomization

    steps = int(round(args.seconds / CONTROL_DT))
    settle = int(round(args.settle / CONTROL_DT))
    rows = []
    for contact in ("smooth", "hard"):
        config = EnvConfig(robot=args.robot, contact=contact, kappa=args.kappa,
                           randomization=Randomization.none())  # fmt: skip
        keys = jax.random.split(jax.random.PRNGKey(2024), args.runs * len(args.vx))
        commands = np.repeat(np.array([[vx, 0.0, 0.0] for vx in args.vx]), args.runs, axis=0)
        out = shac.evaluate(policy, config, keys, steps, commands=commands, settle=settle)
        for i, vx in enumerate(args.vx):
            part = slice(i * args.runs, (i + 1) * args.runs)
            row = {
                "contact": contact,
                "vx": vx,
                "tracking_error": float(np.mean(out["tracking_error"][part])),
                "worst_run_error": float(np.max(out["tracking_error"][part])),
                "fell_fraction": float(np.mean(out["fell"][part])),
            }
            rows.append(row)
            print(f"  {contact:6s} vx {vx:4.2f} m/s: tracking error {row['tracking_error']:.3f} "
                  f"m/s (worst run {row['worst_run_error']:.3f}), fell "
                  f"{row['fell_fraction']:.0%}", flush=True)  # fmt: skip
    return rows


def intervention_counts(events) -> dict:
    """Safety interventions per kind, in ticks (`summary["safety_events"]` of a loop run)."""
    counts = {}
    for e in events:
        counts[e["kind"]] = counts.get(e["kind"], 0) + e["count"]
    return counts


def mujoco_rows(policy, args) -> list[dict]:
    """Export the policy and run `examples/deploy_policy.py` on MuJoCo for each command.
    The safety layer's per-event log lines are silenced; its interventions are counted."""
    import logging

    from controllers.learning.policy_export import export_policy

    logging.getLogger("controllers.hardware.safety").setLevel(logging.ERROR)

    path = ROOT / "examples" / "deploy_policy.py"
    spec = importlib.util.spec_from_file_location("deploy_policy", path)
    deploy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(deploy)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "export")
        export_policy(policy, folder, robot=args.robot, onnx=False)
        for vx in args.mujoco_vx:
            summary, _ = deploy.run(folder, "numpy", args.mujoco_seconds, vx)
            row = {
                "vx": vx,
                "seconds": args.mujoco_seconds,
                "average_speed": summary["average_speed_m_per_s"],
                "min_base_height": summary["min_base_height_m"],
                "settled_base_height": summary["settled_base_height_m"],
                "safety_mode": summary["safety_mode"],
                "interventions": intervention_counts(summary["safety_events"]),
                "controller_errors": summary["controller_errors"],
            }
            rows.append(row)
            print(f"  MuJoCo vx {vx:4.2f} m/s for {args.mujoco_seconds:g} s: average speed "
                  f"{row['average_speed']:.3f} m/s, base height min "
                  f"{row['min_base_height']:.3f} m, settled {row['settled_base_height']:.3f} m, "
                  f"safety {row['safety_mode']}, interventions (ticks) "
                  f"{row['interventions']}", flush=True)  # fmt: skip
    return rows


def training_summary(path) -> dict | None:
    """Iterations, env steps and wall time of the last record of a `metrics.json`, and the
    training command from the run's `report.json` (`examples/train_policy.py` writes it next
    to `checkpoints/`), if there is one."""
    if path is None:
        return None
    metrics = json.loads(Path(path).read_text())
    if isinstance(metrics, dict):
        metrics = metrics.get("metrics", [])
    if not metrics:
        return None
    last = metrics[-1]
    summary = {k: last[k] for k in ("iteration", "env_steps", "wall_time") if k in last}
    report = Path(path).resolve().parent.parent / "report.json"
    if report.is_file():
        summary["command"] = json.loads(report.read_text()).get("command")
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", required=True, help="a save_policy file (policy.eqx)")
    parser.add_argument("--robot", default="go2")
    parser.add_argument("--vx", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    parser.add_argument("--runs", type=int, default=8, help="resets per command")
    parser.add_argument("--seconds", type=float, default=8.0, help="per run in our simulator")
    parser.add_argument("--settle", type=float, default=1.0, help="[s] not counted")
    parser.add_argument("--kappa", type=float, default=300.0, help="of the smooth model")
    parser.add_argument("--mujoco-vx", type=float, nargs="*", default=[0.5, 1.0])
    parser.add_argument("--mujoco-seconds", type=float, default=20.0)
    parser.add_argument("--training", default=None, help="metrics.json of the training run")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.policy):
        parser.error(
            f"no policy file {args.policy!r} (controllers.learning.policy.save_policy writes one)"
        )
    sys.path.insert(0, str(ROOT))
    from benchmarks.markdown_report import cpu_name, publish
    from controllers.learning.policy import load_policy

    policy = load_policy(args.policy)
    print("our simulator:", flush=True)
    sim = simulator_rows(policy, args)
    print("MuJoCo through the hardware interface:", flush=True)
    mujoco = mujoco_rows(policy, args)
    training = training_summary(args.training)
    command = "python benchmarks/bench_policy.py " + " ".join(argv or sys.argv[1:])
    lines = [
        HEADING,
        "",
        "Written by `benchmarks/bench_policy.py`; rerun it to refresh this section.",
        "",
        f"- Command: `{command.strip()}`",
        f"- Date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- CPU: {cpu_name()}, {os.cpu_count()} cores",
        f"- Policy: `{args.policy}` ({args.robot})",
    ]
    if training:
        lines.append(
            f"- Training: {training.get('iteration')} iterations, "
            f"{training.get('env_steps', 0):,} env steps (policy steps), "
            f"{training.get('wall_time', 0.0) / 60:.1f} min of wall time"
        )
        if training.get("command"):
            lines.append(f"- Trained by: `{training['command']}`")
    lines += [
        "",
        f"Our simulator: {args.runs} runs per command from noisy standing resets, "
        f"{args.seconds:g} s each, error `|v_xy - c_xy|` averaged after {args.settle:g} s "
        "(until a fall); no randomisation.",
        "",
        "| contact model | command vx m/s | mean tracking error m/s | worst run m/s | fell |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in sim:
        lines.append(f"| {r['contact']} | {r['vx']:.2f} | {r['tracking_error']:.3f} | "
                     f"{r['worst_run_error']:.3f} | {r['fell_fraction']:.0%} |")  # fmt: skip
    lines += [
        "",
        "MuJoCo through the hardware interface (`examples/deploy_policy.py`: NumPy runner, "
        "safety layer, 500 Hz; 0.5 s standing, then the command):",
        "",
        "| command vx m/s | seconds | average speed after 1.5 s m/s | base height min / "
        "settled m | safety mode at the end | safety interventions (ticks) |",
        "|---:|---:|---:|---:|---|---|",
    ]
    for r in mujoco:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["interventions"].items()))
        lines.append(f"| {r['vx']:.2f} | {r['seconds']:g} | {r['average_speed']:.3f} | "
                     f"{r['min_base_height']:.3f} / {r['settled_base_height']:.3f} | "
                     f"{r['safety_mode']} | {kinds or 'none'} |")  # fmt: skip
    lines.append("")
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING, "\n".join(lines))
    return {"simulator": sim, "mujoco": mujoco, "training": training}


if __name__ == "__main__":
    main()
