"""Brax's PPO (the field's baseline) beside SHAC and our PPO, on the same task, the same
budget of environment steps and the same seeds, in one run.

    python benchmarks/bench_ppo_baseline.py --robot solo12 --steps 20000 --seeds 0 1 2
    python benchmarks/bench_ppo_baseline.py --robot solo12 --steps 20000 --terrain tiles

Task: velocity tracking (`learning.env`, float32, no randomisation, forward commands vx in
`--vx-range`, vy = yaw rate = 0) on flat ground, or on every tile kind of the terrain
curriculum (`--terrain tiles`, `--levels` levels of 4 m tiles). Every method trains through
the one training signature (`learning.trainer`) or its own compiled iteration, and every
`--eval-every` environment steps its deterministic policy runs from 16 fixed resets for 2 s
(`learning.evaluation.evaluate`, evaluation time not counted). Reported per method and seed:
the environment steps and training wall time (compilation included) to the first evaluation
with tracking error `|v_xy - c_xy|` below `--threshold` [m/s] and no fall, and the final
tracking error and fall fraction. Writes its section of BENCHMARKS.md (not with `--no-write`)
and JSON to `benchmarks/results/ppo_baseline.json` (`ppo_baseline_tiles.json` with `--terrain
tiles`: the terrain curriculum's tiles, its own section).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADING = "## Brax's PPO beside SHAC and our PPO"  # flat ground; ", rough ground" on tiles


def heading(args) -> str:
    """The section's heading: one section for flat ground, one for the tiles."""
    return HEADING + (", rough ground" if args.terrain == "tiles" else "")


def ground(args) -> str:
    if args.terrain == "flat":
        return "flat ground"
    return f"the terrain curriculum on every tile kind, {args.levels} levels of 4 m tiles"


def task(args):
    """The environment: flat ground, or with `--terrain tiles` the terrain curriculum on
    `--levels` levels of every tile kind (`learning.env_config.TerrainConfig`)."""
    from contact.terrain_tiles import TileLayout
    from learning.env import EnvConfig, Randomization
    from learning.env_config import TerrainConfig

    terrain = None
    if args.terrain == "tiles":
        terrain = TerrainConfig(layout=TileLayout(num_levels=args.levels, tile_size=4.0,
                                                  border=1.0))  # fmt: skip
    return EnvConfig(robot=args.robot, dtype="float32", randomization=Randomization.none(),
                     vx_range=tuple(args.vx_range), vy_range=(0.0, 0.0),
                     yaw_rate_range=(0.0, 0.0), terrain=terrain)  # fmt: skip


class Tracker:
    """Evaluates policies every `every` env steps; counts training time without evaluations."""

    def __init__(self, env, args):
        import jax

        from learning.evaluation import evaluate

        self.keys = jax.random.split(jax.random.PRNGKey(1234), 16)
        self.evaluate = lambda policy: evaluate(policy, env, self.keys, 100)
        self.every, self.next, self.curve = args.eval_every, 0, []
        self.start, self.excluded = time.perf_counter(), 0.0

    def __call__(self, env_steps, policy):
        if env_steps < self.next:
            return
        began = time.perf_counter()
        out = self.evaluate(policy)
        point = {"env_steps": int(env_steps), "wall_time": began - self.start - self.excluded,
                 "tracking_error": out["mean_tracking_error"],
                 "fell": out["fell_fraction"]}  # fmt: skip
        self.curve.append(point)
        print(f"    {point['env_steps']:8d} steps {point['wall_time']:7.1f} s  error "
              f"{point['tracking_error']:.3f} m/s  fell {point['fell']:.0%}",
              flush=True)  # fmt: skip
        self.next = env_steps + self.every
        self.excluded += time.perf_counter() - began


def run_shac(env, args, seed):
    from learning.shac import train as shac

    config = shac.SHACConfig(env=env, num_envs=args.shac_envs, horizon=args.horizon, seed=seed)
    tracker = Tracker(env, args)
    state = shac.init_state(config)
    iteration = shac.compiled_iteration(config)
    per = config.num_envs * config.horizon
    for it in range(1, -(-args.steps // per) + 1):
        state, _ = iteration(state)
        tracker(it * per, state.policy)
    return tracker.curve


def run_ppo(env, args, seed):
    from learning import trainer
    from learning.ppo.train import PPOConfig

    config = PPOConfig(num_envs=args.ppo_envs, rollout_steps=args.unroll, seed=seed)
    tracker = Tracker(env, args)
    per = config.num_envs * config.rollout_steps
    trainer.train(env, config, iterations=-(-args.steps // per), quiet=True,
                  callback=lambda model, r: tracker(r["env_steps"], model.policy))  # fmt: skip
    return tracker.curve


def run_brax(env, args, seed):
    from learning import brax_adapter, trainer

    per = args.ppo_envs * args.unroll
    config = brax_adapter.BraxPPOConfig(num_timesteps=args.steps, num_envs=args.ppo_envs,
                                        unroll_length=args.unroll, batch_size=args.ppo_envs,
                                        num_minibatches=4, num_updates_per_batch=4,
                                        num_evals=max(2, args.steps // max(per, args.eval_every)),
                                        seed=seed)  # fmt: skip
    tracker = Tracker(env, args)
    trainer.train(env, config, policy_params_fn=lambda step, policy: tracker(step, policy))
    return tracker.curve


METHODS = {"shac": run_shac, "ppo": run_ppo, "brax-ppo": run_brax}


def first_reaching(curve, threshold):
    for point in curve:
        if point["tracking_error"] < threshold and point["fell"] == 0:
            return point
    return None


def markdown(results, args) -> str:
    lines = [
        heading(args),
        "",
        f"- Command: `python benchmarks/bench_ppo_baseline.py {' '.join(args.argv)}`",
        f"- CPU: {args.cpu}; {args.robot}, {ground(args)}, float32, no randomisation, vx in "
        f"{tuple(args.vx_range)} m/s; budget {args.steps} env steps per method and seed.",
        f"- Reached: first evaluation (16 resets, 2 s) with tracking error < {args.threshold} "
        "m/s and no fall; time is training wall time with compilation.",
        "",
        "| method | seeds | steps to reach | time to reach [s] | final error [m/s] | final fell |",
        "|---|---|---|---|---|---|",
    ]
    for name, runs in results.items():  # per seed, in the order of the seeds column
        hits = [first_reaching(curve, args.threshold) for curve in runs.values()]
        steps = " / ".join(str(h["env_steps"]) if h else "-" for h in hits)
        times = " / ".join(f"{h['wall_time']:.1f}" if h else "-" for h in hits)
        errors = " / ".join(f"{c[-1]['tracking_error']:.3f}" for c in runs.values())
        fell = " / ".join(f"{c[-1]['fell']:.0%}" for c in runs.values())
        seeds = " / ".join(str(seed) for seed in runs)
        lines.append(f"| {name} | {seeds} | {steps} | {times} | {errors} | {fell} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="solo12")
    parser.add_argument("--steps", type=int, default=200_000, help="env steps per method, seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--vx-range", type=float, nargs=2, default=(0.0, 0.5))
    parser.add_argument("--threshold", type=float, default=0.2, help="[m/s]")
    parser.add_argument("--eval-every", type=int, default=10_000, help="[env steps]")
    parser.add_argument("--shac-envs", type=int, default=32)
    parser.add_argument("--horizon", type=int, default=32)
    parser.add_argument("--ppo-envs", type=int, default=64, help="ours and Brax's")
    parser.add_argument("--unroll", type=int, default=20, help="PPO rollout length, both")
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument(
        "--terrain",
        default="flat",
        choices=("flat", "tiles"),
        help="flat ground, or the terrain curriculum's tiles",
    )
    parser.add_argument("--levels", type=int, default=3, help="curriculum levels (tiles)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from benchmarks.markdown_report import cpu_name, publish

    args.argv = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-write"]
    args.cpu = f"{cpu_name()} ({os.cpu_count()} cores)"
    env = task(args)
    results = {}
    for name in args.methods:
        results[name] = {}
        for seed in args.seeds:
            print(f"{name} seed {seed}", flush=True)
            results[name][seed] = METHODS[name](env, args, seed)
    text = markdown(results, args)
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", heading(args), text)
    os.makedirs(args.results, exist_ok=True)
    out = Path(args.results) / ("ppo_baseline.json" if args.terrain == "flat"
                                else f"ppo_baseline_{args.terrain}.json")  # fmt: skip
    out.write_text(json.dumps({"args": {k: v for k, v in vars(args).items()},
                               "results": results}, indent=1, default=str))  # fmt: skip
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
