"""A trained policy against its demonstration targets: tracking error in our simulator
at fixed commands up to 1 m/s, and a 20 s walk in MuJoCo through the hardware interface.

    python benchmarks/bench_policy.py --policy results/shac_go2/policy.eqx \
        --training results/shac_go2/checkpoints/metrics.json

1. Our simulator (`learning.env`, no randomisation, the policy alone from `--runs` noisy
   standing resets per command; `learning.evaluation.evaluate` with fixed commands): per
   command of the grid `--vx` x `--vy` x `--yaw` the mean `|v_xy - c_xy|` [m/s] and
   `|omega_z - c_yaw|` [rad/s] after `--settle` s and the fall fraction, once with the contact
   model it trained with (`smooth`, kappa `--kappa`) and once with the `hard` model (no
   smoothing: the model the smoothing approximates). `--gait-period`: the policy observes a
   gait clock of that period (as it was trained).
2. MuJoCo (an engine it was not trained in): the policy exported with
   `learning.policy_export` and run by `examples/deploy_policy.py` (the NumPy runner,
   `PolicyController`, the safety layer, MuJoCo at 500 Hz) for `--mujoco-seconds` per
   command in `--mujoco-vx`: average speed after 1.5 s, lowest base height, safety mode. Or,
   with `--mujoco-commands` (`deploy_policy`'s `--commands`, e.g. `omni`), one run of the
   commands one after another per seed of `--mujoco-randomize` (domain randomisation:
   payload, friction, latency, pushes; no seed: nominal MuJoCo): per run the worst and mean
   tracking errors over the commands, the pushes, the lowest base height, the safety mode.
3. With `--training` (a training run's `metrics.json`, `learning.metrics_log.MetricsLog`):
   iterations, env steps and wall time.

Written to the `## Trained policy` section of BENCHMARKS.md (`--section` names another;
`--no-write`: print only).

    python benchmarks/bench_policy.py --policy results/omni/policy.eqx --gait-period 0.4 \
        --vx -1 -0.5 0 0.5 1 --vy -0.5 0 0.5 --yaw -1 0 1 --runs 2 --seconds 10 \
        --mujoco-commands omni --mujoco-randomize 0 1 2 --mujoco-seconds 28 \
        --section "## Omnidirectional policy"
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

HEADING = "## Trained policy"
ROOT = Path(__file__).resolve().parents[1]


def simulator_rows(policy, args) -> list[dict]:
    """Per contact model and command: mean tracking errors after the settle time, falls."""
    import itertools

    import jax
    import numpy as np

    from learning.env import EnvConfig, Randomization
    from learning.evaluation import evaluate
    from learning.policy import CONTROL_DT

    steps = int(round(args.seconds / CONTROL_DT))
    settle = int(round(args.settle / CONTROL_DT))
    grid = list(itertools.product(args.vx, args.vy, args.yaw))
    rows = []
    for contact in ("smooth", "hard"):
        config = EnvConfig(robot=args.robot, contact=contact, kappa=args.kappa,
                           randomization=Randomization.none(), gait_period=args.gait_period)
        keys = jax.random.split(jax.random.PRNGKey(2024), args.runs * len(grid))
        commands = np.repeat(np.array(grid, dtype=float), args.runs, axis=0)
        out = evaluate(policy, config, keys, steps, commands=commands, settle=settle)
        for i, (vx, vy, yaw) in enumerate(grid):
            part = slice(i * args.runs, (i + 1) * args.runs)
            row = {
                "contact": contact,
                "vx": vx,
                "vy": vy,
                "yaw_rate": yaw,
                "tracking_error": float(np.mean(out["tracking_error"][part])),
                "worst_run_error": float(np.max(out["tracking_error"][part])),
                "yaw_rate_error": float(np.mean(out["yaw_rate_error"][part])),
                "worst_run_yaw_rate_error": float(np.max(out["yaw_rate_error"][part])),
                "fell_fraction": float(np.mean(out["fell"][part])),
            }
            rows.append(row)
            print(f"  {contact:6s} ({vx:+.2f}, {vy:+.2f}, {yaw:+.2f}): tracking error "
                  f"{row['tracking_error']:.3f} m/s (worst run {row['worst_run_error']:.3f}), "
                  f"yaw rate {row['yaw_rate_error']:.3f} rad/s, fell "
                  f"{row['fell_fraction']:.0%}", flush=True)  # fmt: skip
    return rows


def contact_summaries(rows) -> list[dict]:
    """Per contact model over the grid: mean and worst (command) errors, runs that fell."""
    import numpy as np

    out = []
    for contact in dict.fromkeys(r["contact"] for r in rows):
        part = [r for r in rows if r["contact"] == contact]
        worst = max(part, key=lambda r: r["tracking_error"])
        out.append({
            "contact": contact, "commands": len(part),
            "mean_error": float(np.mean([r["tracking_error"] for r in part])),
            "worst_error": worst["tracking_error"],
            "worst_command": (worst["vx"], worst["vy"], worst["yaw_rate"]),
            "mean_yaw_rate_error": float(np.mean([r["yaw_rate_error"] for r in part])),
            "worst_yaw_rate_error": max(r["yaw_rate_error"] for r in part),
            "commands_with_falls": sum(r["fell_fraction"] > 0 for r in part),
        })  # fmt: skip
    return out


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

    from learning.policy_export import export_policy

    logging.getLogger("hardware.safety").setLevel(logging.ERROR)

    path = ROOT / "examples" / "deploy_policy.py"
    spec = importlib.util.spec_from_file_location("deploy_policy", path)
    deploy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(deploy)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "export")
        export_policy(policy, folder, robot=args.robot, onnx=False, gait_period=args.gait_period)
        if args.mujoco_commands:
            commands = deploy.parse_commands(args.mujoco_commands)
            for seed in args.mujoco_randomize or [None]:
                rows.append(tour_row(deploy, folder, commands, seed, args))
            return rows
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


def tour_row(deploy, folder, commands, seed, args) -> dict:
    """One `deploy_policy` run of `commands` one after another (seed: its randomisation)."""
    summary, _ = deploy.run(folder, "numpy", args.mujoco_seconds, commands=commands,
                            segment_seconds=args.segment_seconds, randomize=seed)  # fmt: skip
    tracking = summary["tracking"]
    rand = summary["randomization"] or {}
    row = {
        "seed": seed,
        "seconds": args.mujoco_seconds,
        "commands": len(tracking),
        "mean_error": summary["mean_linear_error_m_per_s"],
        "worst_error": max(r["linear_error"] for r in tracking),
        "mean_yaw_rate_error": summary["mean_yaw_rate_error_rad_per_s"],
        "worst_yaw_rate_error": max(r["yaw_rate_error"] for r in tracking),
        "tracking": tracking,
        "randomization": rand,
        "pushes_applied": len(rand.get("applied_pushes", [])),
        "min_base_height": summary["min_base_height_m"],
        "settled_base_height": summary["settled_base_height_m"],
        "safety_mode": summary["safety_mode"],
        "interventions": intervention_counts(summary["safety_events"]),
        "controller_errors": summary["controller_errors"],
    }
    print(f"  MuJoCo tour of {row['commands']} commands, {args.mujoco_seconds:g} s, "
          f"randomisation seed {seed}: linear error mean {row['mean_error']:.3f} / worst "
          f"{row['worst_error']:.3f} m/s, yaw rate mean {row['mean_yaw_rate_error']:.3f} / worst "
          f"{row['worst_yaw_rate_error']:.3f} rad/s, {row['pushes_applied']} pushes, base "
          f"height min {row['min_base_height']:.3f} m, safety {row['safety_mode']}",
          flush=True)  # fmt: skip
    return row


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


def load_any_policy(args):
    """The policy of `--policy`: a `save_policy` file, or an exported folder read as float64
    (then its robot and gait clock are the folder's: `args.robot`, `args.gait_period` are set
    from its policy.json)."""
    if os.path.isfile(args.policy):
        from learning.policy import load_policy

        return load_policy(args.policy)
    import jax.numpy as jnp

    from learning.policy_export import load_exported_policy, load_numpy_policy

    exported = load_numpy_policy(args.policy)
    args.robot = exported.config["robot"]
    args.gait_period = exported.gait_period
    return load_exported_policy(args.policy, dtype=jnp.float64)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", required=True,
                        help="a save_policy file (policy.eqx) or an exported policy folder")
    parser.add_argument("--robot", default="go2", help="(an exported folder names its own)")
    parser.add_argument("--vx", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    parser.add_argument("--vy", type=float, nargs="+", default=[0.0], help="[m/s]")
    parser.add_argument("--yaw", type=float, nargs="+", default=[0.0], help="yaw rates [rad/s]")
    parser.add_argument("--gait-period", type=float, default=None,
                        help="[s] the policy observes a gait clock of this period")
    parser.add_argument("--runs", type=int, default=8, help="resets per command")
    parser.add_argument("--seconds", type=float, default=8.0, help="per run in our simulator")
    parser.add_argument("--settle", type=float, default=1.0, help="[s] not counted")
    parser.add_argument("--kappa", type=float, default=300.0, help="of the smooth model")
    parser.add_argument("--mujoco-vx", type=float, nargs="*", default=[0.5, 1.0])
    parser.add_argument("--mujoco-seconds", type=float, default=20.0)
    parser.add_argument("--mujoco-commands", nargs="+", metavar="VX,VY,YAW",
                        help="one MuJoCo run of these commands in turn (omni: the tour)")
    parser.add_argument("--segment-seconds", type=float, default=2.5,
                        help="[s] per command of --mujoco-commands")
    parser.add_argument("--mujoco-randomize", type=int, nargs="*", metavar="SEED",
                        help="with --mujoco-commands: one randomised run per seed")
    parser.add_argument("--section", default=HEADING, help="BENCHMARKS.md heading to write")
    parser.add_argument("--training", default=None, help="metrics.json of the training run")
    parser.add_argument("--results-name", default="policy.json",
                        help="file in benchmarks/results/ for every row")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if not (os.path.isfile(args.policy) or os.path.isdir(args.policy)):
        parser.error(
            f"no policy file or folder {args.policy!r} (learning.policy.save_policy "
            "writes a file, learning.policy_export.export_policy a folder)"
        )
    sys.path.insert(0, str(ROOT))
    from benchmarks.markdown_report import cpu_name, publish

    policy = load_any_policy(args)
    print("our simulator:", flush=True)
    sim = simulator_rows(policy, args)
    print("MuJoCo through the hardware interface:", flush=True)
    mujoco = mujoco_rows(policy, args)
    training = training_summary(args.training)
    command = "python benchmarks/bench_policy.py " + shlex.join(argv or sys.argv[1:])
    lines = [
        args.section,
        "",
        "Written by `benchmarks/bench_policy.py`.",
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
    ]
    if len(args.vy) == 1 and len(args.yaw) == 1 and args.vy[0] == 0 and args.yaw[0] == 0:
        lines += [
            "| contact model | command vx m/s | mean tracking error m/s | worst run m/s | fell |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in sim:
            lines.append(f"| {r['contact']} | {r['vx']:.2f} | {r['tracking_error']:.3f} | "
                         f"{r['worst_run_error']:.3f} | {r['fell_fraction']:.0%} |")  # fmt: skip
    else:
        lines += [
            f"Commands: vx {args.vx} m/s x vy {args.vy} m/s x yaw rate {args.yaw} rad/s "
            f"({len(sim) // 2} commands; per command: `benchmarks/results/{args.results_name}`).",
            "",
            "| contact model | commands | linear error: mean over commands m/s | worst command "
            "m/s (at) | yaw-rate error: mean rad/s | worst command rad/s | commands with a fall |",
            "|---|---:|---:|---|---:|---:|---:|",
        ]
        for c in contact_summaries(sim):
            at = ", ".join(f"{x:+g}" for x in c["worst_command"])
            lines.append(f"| {c['contact']} | {c['commands']} | {c['mean_error']:.3f} | "
                         f"{c['worst_error']:.3f} ({at}) | {c['mean_yaw_rate_error']:.3f} | "
                         f"{c['worst_yaw_rate_error']:.3f} | {c['commands_with_falls']} |")
    if args.mujoco_commands:
        lines += tour_lines(mujoco, args)
    else:
        lines += vx_lines(mujoco)
    lines.append("")
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", args.section, "\n".join(lines))
    results = {"simulator": sim, "mujoco": mujoco, "training": training}
    if not args.no_write:
        path = ROOT / "benchmarks" / "results" / args.results_name
        path.write_text(json.dumps({"command": command.strip(), **results}, indent=1))
    return results


def tour_lines(rows, args) -> list[str]:
    lines = [
        "",
        "MuJoCo through the hardware interface (`examples/deploy_policy.py`: NumPy runner, "
        f"safety layer, 500 Hz; 0.5 s standing, then the commands {args.mujoco_commands} "
        f"for {args.segment_seconds:g} s each, the last one held; errors of the mean velocity "
        "over each command after its first second):",
        "",
        "| randomisation seed | payload kg | friction | latency ms | pushes | linear error "
        "mean / worst m/s | yaw-rate error mean / worst rad/s | base height min m | safety "
        "mode at the end |",
        "|---|---:|---:|---:|---:|---|---|---:|---|",
    ]
    for r in rows:
        d = r["randomization"]
        draw = (f"{d['payload_kg']:+.2f} | {d['friction']:.2f} | {1e3 * d['latency_s']:.1f}"
                if d else "none | 0.80 | 0")  # fmt: skip
        lines.append(f"| {r['seed']} | {draw} | {r['pushes_applied']} | {r['mean_error']:.3f} / "
                     f"{r['worst_error']:.3f} | {r['mean_yaw_rate_error']:.3f} / "
                     f"{r['worst_yaw_rate_error']:.3f} | {r['min_base_height']:.3f} | "
                     f"{r['safety_mode']} |")  # fmt: skip
    return lines


def vx_lines(mujoco) -> list[str]:
    lines = [
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
    return lines


if __name__ == "__main__":
    main()
