"""Train a velocity-tracking policy with SHAC through the differentiable simulator.

    python examples/train_policy.py --robot go2 --iterations 200 --envs 64 --horizon 32
    python examples/train_policy.py --robot go2 --iterations 400 --resume      # continue a run
    python examples/train_policy.py --init results/distill_go2/policy.eqx   # distilled start
    python examples/train_policy.py --envs 4096 --devices 8 --dtype float32  # 512 per device
    python examples/train_policy.py --gait-period 0.4     # the policy also observes a gait clock

`--envs` is the global batch, split over `--devices` devices (default: all that JAX sees) by
`learning.shac.train.train`. Several hosts: run the same command on each with
`--coordinator HOST:PORT --num-processes N --process-id I` (or the environment variables
`DIFFLOCO_COORDINATOR`, `DIFFLOCO_NUM_PROCESSES`, `DIFFLOCO_PROCESS_ID`); process 0 writes
the checkpoints, the policy and the report.

Environments: `learning.env` (commands vx in [-1, 1] m/s, vy in [-0.5, 0.5]
m/s, yaw rate in [-1, 1] rad/s, domain randomisation of payload, friction, PD gains, latency and
pushes; `--no-randomization` turns it off). Checkpoints every `--checkpoint-every` iterations in
`<out>/checkpoints/`, with `metrics.json`/`metrics.csv` beside them written after every
iteration (`learning.metrics_log.MetricsLog`); `--resume` continues from the newest one bit for
bit. At the end: the policy (`<out>/policy.eqx`,
`learning.policy.load_policy`), its NumPy/ONNX export (`<out>/export/`, if
`learning.policy_export` is available) and an evaluation on fixed commands.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

import jax
import numpy as np

from learning.env import EnvConfig, ObservationNoise, Randomization
from learning.evaluation import evaluate
from learning.metrics_log import MetricsLog
from learning.policy import CONTROL_DT, load_policy, save_policy
from learning.shac.train import SHACConfig, train
from trajopt import sharding


def run(robot="go2", iterations=100, envs=64, horizon=32, contact="smooth", out="results/shac",
        resume=False, init=None, checkpoint_every=10, randomization=True, actor_lr=1e-3,
        seed=0, eval_envs=16, eval_seconds=4.0, export=True, quiet=False, task=None,
        critic_bootstrap=False, fast_compile=False, command=None, devices=None,
        dtype="float64", gait_period=None, command_interval=None,
        command_extremes=0.0, base_velocity=True, observation_noise=False):  # fmt: skip
    """`task`: keyword arguments of `EnvConfig.with_task` (command ranges, latency, push);
    `command`: the command line, recorded in report.json; `devices`: see `train`; `dtype`:
    the environment's ("float32" on GPUs); `gait_period` [s]: the observation ends with a gait
    clock of this period (`EnvConfig.gait_period`; None: none), exported with it;
    `command_interval` [s]: a new command every so often within an episode
    (`EnvConfig.command_interval`, rounded to policy steps; None: one per episode);
    `command_extremes`: `EnvConfig.command_extremes` (corners of the command box);
    `base_velocity` False: the policy does not observe the base linear velocity (a start
    policy that did has those inputs removed, `learning.policy.without_base_velocity`);
    `observation_noise`: legged_gym-like noise on every observation
    (`learning.env.ObservationNoise`). Returns
    `(TrainResult, evaluation dict)` (the evaluation is None in processes other than 0 of a
    multi-process run)."""
    interval = None if command_interval is None else max(1, round(command_interval / CONTROL_DT))
    env = EnvConfig(robot=robot, contact=contact, dtype=dtype, gait_period=gait_period,
                    command_interval=interval, command_extremes=command_extremes,
                    observe_base_velocity=base_velocity,
                    observation_noise=ObservationNoise() if observation_noise else None)
    env = env.with_task(**(task or {}))
    if not randomization:
        env = env.replace(randomization=Randomization.none())
    config = SHACConfig(env=env, num_envs=envs, horizon=horizon, actor_lr=actor_lr, seed=seed,
                        critic_bootstrap=critic_bootstrap, fast_compile=fast_compile)  # fmt: skip
    policy = _load_start(init) if init else None
    folder = os.path.join(out, "checkpoints")
    start = time.perf_counter()
    result = train(config, policy, iterations=iterations, checkpoint_dir=folder,
                   checkpoint_every=checkpoint_every, resume=resume, quiet=quiet,
                   devices=devices, progress_fn=MetricsLog(folder))  # fmt: skip
    seconds = time.perf_counter() - start
    if not sharding.is_main_process():  # process 0 reports and writes the files
        return result, None
    m = result.metrics
    if m:
        last = m[-1]
        rate = float(np.median([r["env_steps_per_s"] for r in m]))  # the first one compiles
        print(f"{last['iteration']} iterations, {last['env_steps']} env steps in "
              f"{last['wall_time']:.0f} s of training (median {rate:.0f} env steps/s); this "
              f"call {seconds:.0f} s incl. compilation")  # fmt: skip
        for r in m[:: max(1, len(m) // 10)] + [m[-1]]:
            print(
                f"  iteration {r['iteration']:5d}: mean reward {r['mean_reward']:.3f}, "
                f"tracking error {r['tracking_error']:.3f} m/s, falls {r['falls']}"
            )
    policy_path = os.path.join(out, "policy.eqx")
    save_policy(result.policy, policy_path)
    keys = jax.random.split(jax.random.PRNGKey(12345), eval_envs)
    ev = evaluate(result.policy, env, keys, int(round(eval_seconds / 0.02)), fast_compile)
    print(f"evaluation ({eval_envs} random commands, {eval_seconds:.0f} s): tracking error "
          f"{ev['mean_tracking_error']:.3f} m/s, yaw-rate error "
          f"{ev['mean_yaw_rate_error']:.3f} rad/s, return {ev['mean_return']:.2f}, "
          f"fell {ev['fell_fraction']:.0%}")  # fmt: skip
    report = {"config": config.to_dict(), "evaluation": {
        k: ev[k] for k in ("mean_tracking_error", "mean_yaw_rate_error", "mean_return",
                           "fell_fraction")},
        "policy": policy_path, "checkpoint": result.checkpoint, "seconds": seconds,
        "command": command}  # fmt: skip
    exported = None
    if export:
        try:
            from learning.policy_export import export_policy
        except ImportError:
            export_policy = None
        if export_policy is not None:
            exported = export_policy(result.policy, os.path.join(out, "export"), robot=robot,
                                     onnx=_has_onnx(), gait_period=env.gait_period)  # fmt: skip
            report["export"] = exported
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2, default=str)
    print(f"policy: {policy_path}")
    print(f"checkpoints and metrics: {folder} (metrics.json, metrics.csv)")
    if exported:
        print(f"export: {os.path.join(out, 'export')}")
    print(f"report: {os.path.join(out, 'report.json')}")
    return result, ev


def _load_start(init: str):
    """The start policy: a `save_policy` file, or an exported policy folder."""
    if os.path.isdir(init):
        from learning.policy_export import load_exported_policy

        return load_exported_policy(init)
    return load_policy(init)


def _has_onnx() -> bool:
    try:
        import onnx  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--robot", default="go2")
    p.add_argument("--iterations", type=int, default=100, help="total SHAC iterations")
    p.add_argument("--envs", type=int, default=64, help="parallel environments")
    p.add_argument("--horizon", type=int, default=32, help="policy steps per iteration")
    p.add_argument("--contact", choices=("smooth", "penalty"), default="smooth")
    p.add_argument("--out", default="results/shac")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    p.add_argument("--init", default=None,
                   help="start from a saved policy (save_policy file or exported folder)")
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--no-randomization", action="store_true")
    p.add_argument("--lr", type=float, default=1e-3, help="actor learning rate")
    p.add_argument(
        "--critic-bootstrap",
        action="store_true",
        help="add the critic's value at the horizon to the actor loss (SHAC proper)",
    )
    p.add_argument("--vx-range", type=float, nargs=2, metavar=("LO", "HI"), help="[m/s]")
    p.add_argument("--vy-range", type=float, nargs=2, metavar=("LO", "HI"), help="[m/s]")
    p.add_argument("--yaw-range", type=float, nargs=2, metavar=("LO", "HI"), help="[rad/s]")
    p.add_argument(
        "--latency",
        type=float,
        nargs=2,
        metavar=("LO", "HI"),
        help="action-latency blend range in [0, 1]",
    )
    p.add_argument("--push", type=float, help="largest push [m/s]")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-export", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--eval-envs", type=int, default=16, help="evaluation runs (random commands)")
    p.add_argument("--eval-seconds", type=float, default=4.0)
    p.add_argument(
        "--fast-compile",
        action="store_true",
        help="XLA optimisation level 0: compiles faster, runs slower (short runs)",
    )
    p.add_argument("--devices", type=int, default=None,
                   help="devices to split --envs over (default: all JAX sees)")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="the environment's float type (float32 on GPUs)")
    p.add_argument("--gait-period", type=float, default=None,
                   help="[s] the policy also observes a gait clock of this period")
    p.add_argument("--command-interval", type=float, default=None,
                   help="[s] a new command this often within an episode (default: one each)")
    p.add_argument("--command-extremes", type=float, default=0.0,
                   help="probability of each command component at an end of its range")
    p.add_argument("--no-base-velocity", action="store_true",
                   help="the policy does not observe the base linear velocity")
    p.add_argument("--observation-noise", action="store_true",
                   help="legged_gym-like uniform noise on the observations")
    p.add_argument("--coordinator", help="multi-host: HOST:PORT of process 0")
    p.add_argument("--num-processes", type=int, help="multi-host: number of processes")
    p.add_argument("--process-id", type=int, help="multi-host: this process's index")
    a = p.parse_args(argv)
    sharding.initialize_distributed(a.coordinator, a.num_processes, a.process_id)
    argv = sys.argv[1:] if argv is None else argv
    command = " ".join(["python examples/train_policy.py", *map(shlex.quote, argv)])
    return run(a.robot, a.iterations, a.envs, a.horizon, a.contact, a.out, a.resume, a.init,
        a.checkpoint_every, not a.no_randomization, a.lr, a.seed, a.eval_envs, a.eval_seconds,
        export=not a.no_export, quiet=a.quiet, critic_bootstrap=a.critic_bootstrap,
        fast_compile=a.fast_compile, command=command, devices=a.devices, dtype=a.dtype,
        gait_period=a.gait_period, command_interval=a.command_interval,
        command_extremes=a.command_extremes, base_velocity=not a.no_base_velocity,
        observation_noise=a.observation_noise,
        task=dict(vx=a.vx_range, vy=a.vy_range, yaw_rate=a.yaw_range, latency=a.latency,
                  push=a.push))  # fmt: skip


if __name__ == "__main__":
    np.set_printoptions(precision=3, suppress=True)
    main()
