"""Train a velocity-tracking policy by SHAC and save, evaluate and export it: the recipe behind
`examples/train_policy.py` and the SHAC stage of `learning.pipeline`.

    result, evaluation = train_policy("go2", iterations=200, out="results/shac")

Writes `<out>/checkpoints/` (resumable, with `metrics.json` / `metrics.csv`), `<out>/policy.eqx`,
`<out>/export/` (NumPy weights, conventions, ONNX where the `export` extra is installed) and
`<out>/report.json`.
"""

from __future__ import annotations

import json
import os
import time

import jax
import numpy as np

from learning.env import EnvConfig, ObservationNoise, Randomization
from learning.evaluation import evaluate
from learning.metrics_log import MetricsLog
from learning.policy import CONTROL_DT, load_policy, save_policy
from learning.shac.train import SHACConfig, train
from trajopt import sharding


def train_policy(robot="go2", iterations=100, envs=64, horizon=32, contact="smooth",
        out="results/shac", resume=False, init=None, checkpoint_every=10, randomization=True,
        actor_lr=1e-3, seed=0, eval_envs=16, eval_seconds=4.0, export=True, quiet=False, task=None,
        critic_bootstrap=False, fast_compile=False, command=None, devices=None,
        dtype="float64", gait_period=None, command_interval=None,
        command_extremes=0.0, base_velocity=True, observation_noise=False, keep=3,
        terrain=None):  # fmt: skip
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
    (`learning.env.ObservationNoise`); `keep`: the newest checkpoints kept
    (`checkpoint_policies` reads them); `terrain`: None (flat) or a
    `learning.env_config.TerrainConfig` (blind walking on tiles under a curriculum). Returns
    `(TrainResult, evaluation dict)` (the evaluation is None in processes other than 0 of a
    multi-process run)."""
    interval = None if command_interval is None else max(1, round(command_interval / CONTROL_DT))
    env = EnvConfig(
        robot=robot,
        contact=contact,
        dtype=dtype,
        gait_period=gait_period,
        command_interval=interval,
        command_extremes=command_extremes,
        observe_base_velocity=base_velocity,
        observation_noise=ObservationNoise() if observation_noise else None,
        terrain=terrain,
    )
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
                   devices=devices, progress_fn=MetricsLog(folder), keep=keep)  # fmt: skip
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
                + (f", terrain level {r['terrain_level']:.2f}" if "terrain_level" in r else "")
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


def checkpoint_policies(result, out: str, newest: int | None = None) -> list:
    """`[(iteration, policy), ...]` of the `newest` (None: all) checkpoints `train_policy(
    out=out)` kept, newest first; `result` is its `TrainResult` (its state is the
    checkpoints' template). Only those are read."""
    from learning import checkpoint

    listed = checkpoint.list_checkpoints(os.path.join(out, "checkpoints"))[:newest]
    return [(iteration, checkpoint.load(path, result.state)[0].policy)
            for iteration, path in listed]  # fmt: skip


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
