"""Analytic gradients against a zeroth-order baseline on the same task and wall-clock budget.

    python benchmarks/bench_training.py --robot go2 --minutes 10          # all methods
    python benchmarks/bench_training.py --minutes 1 --no-write            # a quick look
    python benchmarks/bench_training.py --minutes 12 --vx-range 0 1 --vy-range 0 0 \
        --yaw-range 0 0 --latency 0 0.5 --push 0.3 --envs 32              # forward walking
    python benchmarks/bench_training.py --methods shac-smooth shac-init \
        --init results/distill/policy.eqx --gait-period 0.4 --lr 3e-4 --seed 1   # warm start

Methods, each for `--minutes` of wall time (compilation included, and reported separately):
  (a) shac-smooth: analytic gradients (`learning.shac`, its defaults:
      short-horizon return, no critic bootstrap) with the smooth hard-contact model;
  (b) shac-penalty: the same with the penalty contact model (the other differentiable model);
  (c) ppo: PPO (`learning.ppo`, zeroth order: no gradient through the
      simulator), on the smooth model's environment;
  (d) shac-critic (optional): (a) with the critic's value bootstrapped into the actor loss
      (SHAC proper, `critic_bootstrap=True`);
  (e) shac-init (optional, needs `--init`): (a) starting from a saved policy (e.g. a distilled
      one, `examples/distill_policy.py`); a policy that observes the gait clock needs the
      environment's clock, `--gait-period` (the distilled policy's gait period).
`--seed` seeds the environments and the fresh networks of every method (run the benchmark once
per seed, `--results` apart, to measure the spread).
All train the same `Policy` network on the same `LocomotionEnv` task (velocity tracking with
the command ranges and domain randomisation given on the command line, defaults those of
`EnvConfig`) and are evaluated the same way: every
`--eval-every` seconds the deterministic policy runs from 32 fixed resets for 3 s in the
environment of (a) (`learning.evaluation.evaluate`), and its mean tracking error
`|v_xy - c_xy|` [m/s] (until a fall) and fall fraction are recorded. Reported: curves
against env steps and wall time (`benchmarks/results/training_curves.png`), and per method the
env steps and wall time to first reach each tracking-error threshold. Results go to the
`## Policy training` section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

HEADING = "## Policy training"
ROOT = Path(__file__).resolve().parents[1]
THRESHOLDS = (0.5, 0.3, 0.2, 0.1)  # [m/s]


def _evaluator(env_config, seconds=3.0, n=32):
    import jax

    from learning.evaluation import evaluate as evaluate_policy
    from learning.policy import CONTROL_DT

    keys = jax.random.split(jax.random.PRNGKey(1234), n)
    steps = int(round(seconds / CONTROL_DT))

    def evaluate(policy):
        out = evaluate_policy(policy, env_config, keys, steps)
        return out["mean_tracking_error"], out["fell_fraction"]

    return evaluate


def run_shac(env_config, args, evaluate, critic_bootstrap=False, policy=None):
    from learning.shac import train as shac

    config = shac.SHACConfig(env=env_config, num_envs=args.envs, horizon=args.horizon,
                             actor_lr=args.lr, critic_bootstrap=critic_bootstrap,
                             seed=args.seed)  # fmt: skip
    state = shac.init_state(config, policy)
    iteration = shac.compiled_iteration(config)
    return _loop(lambda s: iteration(s)[0], state, lambda s: s.policy,
                 config.num_envs * config.horizon, args, evaluate)  # fmt: skip


def run_ppo(env_config, args, evaluate):
    import equinox as eqx
    import jax
    import optax

    from learning.env import make_env
    from learning.ppo import networks as ppo_networks
    from learning.ppo import train as ppo

    env = make_env(env_config)
    config = ppo.PPOConfig(num_envs=args.ppo_envs, rollout_steps=args.ppo_steps, seed=args.seed)
    key = jax.random.key(config.seed)
    k_model, k_env, key = jax.random.split(key, 3)
    # with --gait-period the environment's observation carries the clock: so must the policy's
    model = ppo_networks.ActorCritic.create(k_model, env.nu, config, clock=env.clock)
    optimizer = optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                            optax.adam(config.learning_rate))  # fmt: skip
    opt_state = optimizer.init(eqx.filter(model, ppo_networks.trainable(model)))
    envs = jax.vmap(env.reset)(jax.random.split(k_env, config.num_envs))
    obs = jax.vmap(env.observe)(envs)
    iteration = ppo.make_iteration(env, config, optimizer)
    box = {"key": key}

    def step(state):
        model, opt_state, envs, obs = state
        box["key"], sub = jax.random.split(box["key"])
        model, opt_state, envs, obs, _ = iteration(model, opt_state, envs, obs, sub)
        return model, opt_state, envs, obs

    return _loop(step, (model, opt_state, envs, obs), lambda s: s[0].policy,
                 config.num_envs * config.rollout_steps, args, evaluate)  # fmt: skip


def _loop(step, state, policy_of, steps_per_iteration, args, evaluate):
    """Iterate `step` until the budget is spent; evaluate every `eval_every` seconds of
    training (evaluation time is not counted). Returns the curve and the compile time."""
    import jax

    budget = 60.0 * args.minutes
    curve = []
    trained = 0.0  # wall seconds of training so far
    iterations = 0
    compile_time = None
    next_eval = 0.0
    while trained < budget:
        began = time.perf_counter()
        state = step(state)
        jax.block_until_ready(jax.tree.leaves(policy_of(state)))
        took = time.perf_counter() - began
        if compile_time is None:
            compile_time = took  # the first iteration compiles
        trained += took
        iterations += 1
        if trained >= next_eval or trained >= budget:
            error, fell = evaluate(policy_of(state))
            point = {
                "iteration": iterations,
                "env_steps": iterations * steps_per_iteration,
                "wall_time": trained,
                "tracking_error": error,
                "fell_fraction": fell,
            }
            curve.append(point)
            print(f"  {trained:7.1f} s  {iterations:5d} it  {curve[-1]['env_steps']:9d} steps  "
                  f"tracking error {error:.3f} m/s  fell {fell:.0%}", flush=True)  # fmt: skip
            next_eval = trained + args.eval_every
    return {"curve": curve, "compile_time": compile_time, "iterations": iterations}


def first_reaching(curve, threshold):
    for point in curve:
        if point["tracking_error"] <= threshold and point["fell_fraction"] == 0.0:
            return point
    return None


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, r in results.items():
        steps = [p["env_steps"] for p in r["curve"]]
        wall = [p["wall_time"] for p in r["curve"]]
        error = [p["tracking_error"] for p in r["curve"]]
        axes[0].plot(steps, error, marker=".", label=name)
        axes[1].plot(wall, error, marker=".", label=name)
    axes[0].set_xlabel("environment steps (policy steps)")
    axes[1].set_xlabel("training wall time [s] (compilation included)")
    for ax in axes:
        ax.set_ylabel("tracking error |v_xy - c_xy| [m/s]")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle("Velocity tracking during training (32 fixed resets, 3 s, until a fall)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


METHODS = ("shac-smooth", "shac-penalty", "ppo", "shac-critic", "shac-init")


def run_method(name, args):
    """Train with method `name` for `args.minutes`; returns its curve (see `_loop`)."""
    sys.path.insert(0, str(ROOT))
    smooth = task_config(args)
    evaluate = _evaluator(smooth)
    print(f"{name}: {args.minutes} min", flush=True)
    if name == "shac-smooth":
        return run_shac(smooth, args, evaluate)
    if name == "shac-penalty":
        return run_shac(smooth.replace(contact="penalty"), args, evaluate)
    if name == "ppo":
        return run_ppo(smooth, args, evaluate)
    if name == "shac-init":
        from learning.policy import load_policy

        return run_shac(smooth, args, evaluate, policy=load_policy(args.init))
    return run_shac(smooth, args, evaluate, critic_bootstrap=True)


def task_config(args):
    """The benchmark's `EnvConfig`: `EnvConfig` defaults, changed by the command line."""
    from learning.env import EnvConfig

    config = EnvConfig(robot=args.robot, contact="smooth", dtype=args.dtype, kappa=args.kappa,
                       gait_period=args.gait_period)  # fmt: skip
    return config.with_task(args.vx_range, args.vy_range, args.yaw_range, args.latency,
                            args.push)  # fmt: skip


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (module docstring); stops with a message on a bad `--init`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2")
    parser.add_argument("--minutes", type=float, default=10.0, help="wall budget per method")
    parser.add_argument("--methods", nargs="+", default=["shac-smooth", "shac-penalty", "ppo"])
    parser.add_argument("--envs", type=int, default=64, help="SHAC environments")
    parser.add_argument("--horizon", type=int, default=32, help="SHAC horizon [policy steps]")
    parser.add_argument("--ppo-envs", type=int, default=256)
    parser.add_argument("--ppo-steps", type=int, default=32, help="PPO rollout length")
    parser.add_argument("--eval-every", type=float, default=30.0, help="[s] of training")
    parser.add_argument("--dtype", default="float64", choices=("float32", "float64"))
    parser.add_argument(
        "--kappa", type=float, default=300.0, help="smooth activation [1/m] (3000 diverged)"
    )
    parser.add_argument("--lr", type=float, default=1e-3, help="SHAC actor learning rate")
    parser.add_argument("--vx-range", type=float, nargs=2, default=None, metavar=("LO", "HI"))
    parser.add_argument("--vy-range", type=float, nargs=2, default=None, metavar=("LO", "HI"))
    parser.add_argument("--yaw-range", type=float, nargs=2, default=None, metavar=("LO", "HI"))
    parser.add_argument(
        "--latency",
        type=float,
        nargs=2,
        default=None,
        metavar=("LO", "HI"),
        help="action-latency blend range (randomisation)",
    )
    parser.add_argument("--push", type=float, default=None, help="largest push [m/s]")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="methods trained at once, one process each (timings then share "
        "the CPU: compare methods only within one run)",
    )
    parser.add_argument("--init", default=None,
                        help="a saved policy (save_policy file) for the shac-init method")
    parser.add_argument("--gait-period", type=float, default=None,
                        help="[s] the environments' gait clock (for policies that observe it)")
    parser.add_argument("--seed", type=int, default=0,
                        help="environments and fresh networks of every method")
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "results"),
                        help="folder for training_curves.json and .png")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if ("shac-init" in args.methods) != (args.init is not None):
        raise SystemExit("the shac-init method and --init POLICY go together: give both or neither")
    if args.init is not None and not os.path.isfile(args.init):
        raise SystemExit(f"--init: no policy file at {args.init}")
    return args


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from benchmarks.markdown_report import cpu_name, publish, versions

    load_before = os.getloadavg()[0]
    smooth = task_config(args)
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        raise SystemExit(f"unknown method(s) {unknown}: {', '.join(METHODS)}")
    if args.jobs > 1:  # one process per method (spawned: a fresh JAX in each)
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
            futures = {m: pool.submit(run_method, m, args) for m in args.methods}
            results = {m: f.result() for m, f in futures.items()}
    else:
        results = {m: run_method(m, args) for m in args.methods}
    for name, r in results.items():  # what `benchmarks/training_seeds.py` groups runs by
        r["settings"] = {
            "method": name, "seed": args.seed, "minutes": args.minutes,
            "lr": None if name == "ppo" else args.lr, "init": args.init,
            "gait_period": args.gait_period, "arguments": list(argv or sys.argv[1:]),
        }  # fmt: skip
    out_dir = Path(args.results)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "training_curves.json").write_text(json.dumps(results, indent=1))
    plot(results, out_dir / "training_curves.png")
    command = "python benchmarks/bench_training.py " + " ".join(argv or sys.argv[1:])
    lines = [
        HEADING,
        "",
        "Written by `benchmarks/bench_training.py`.",
        "",
        f"- Command: `{command.strip()}`",
        f"- Date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- CPU: {cpu_name()}, {os.cpu_count()} cores; 1-min load average {load_before:.2f} "
        f"before, {os.getloadavg()[0]:.2f} after",
        f"- Versions: {versions('jax', 'jaxlib', 'equinox', 'optax')}",
        f"- Task: {args.robot} velocity tracking (`LocomotionEnv`; commands vx in "
        f"{smooth.vx_range}, vy in {smooth.vy_range}, yaw rate in {smooth.yaw_rate_range}, "
        f"domain randomisation {smooth.randomization}), {args.dtype}, smooth-contact kappa "
        f"{args.kappa:g}; SHAC {args.envs} envs x {args.horizon} steps per iteration (actor lr "
        f"{args.lr:g}), PPO {args.ppo_envs} envs x {args.ppo_steps} steps; "
        f"{args.minutes} min of wall time per method, compilation included; "
        f"{args.jobs} method(s) trained at once on the {os.cpu_count()} cores; seed "
        f"{args.seed}" + (f"; shac-init from `{args.init}`" if args.init else "")
        + (f"; gait clock period {args.gait_period:g} s" if args.gait_period else "") + ".",
        "- Evaluation: deterministic policy, 32 fixed resets, 3 s, smooth environment; "
        "tracking error = mean |v_xy - c_xy| until a fall; a threshold counts as reached at "
        "the first evaluation at or below it in which no run fell. Curves: "
        f"`{os.path.relpath(out_dir / 'training_curves.png', ROOT)}` (data: "
        "`training_curves.json`).",
        "",
        "| method | compile s | iterations | env steps | final error m/s | best error m/s "
        "| final fell | " + " | ".join(f"to {t} m/s (steps, s)" for t in THRESHOLDS) + " |",
        "|---|---:|---:|---:|---:|---:|---:|" + "---|" * len(THRESHOLDS),
    ]
    for name, r in results.items():
        curve = r["curve"]
        last = curve[-1]
        best = min(p["tracking_error"] for p in curve)
        reached = []
        for t in THRESHOLDS:
            p = first_reaching(curve, t)
            reached.append("not reached" if p is None
                           else f"{p['env_steps']:,} / {p['wall_time']:.0f}")  # fmt: skip
        lines.append(
            f"| {name} | {r['compile_time']:.0f} | {r['iterations']} | {last['env_steps']:,} | "
            f"{last['tracking_error']:.3f} | {best:.3f} | {last['fell_fraction']:.0%} | "
            + " | ".join(reached)
            + " |"
        )
    lines.append("")
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING, "\n".join(lines))


if __name__ == "__main__":
    main()
