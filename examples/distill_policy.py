"""Distil trajectory optimisation and the MPC into a policy: dataset, behaviour cloning, DAgger.

    python examples/distill_policy.py --robot go2 --vx 0 0.3 0.6 --out results/distill_go2
    python examples/distill_policy.py --robot go2 --gaits trot walk --vx 0 0.5 --yaw 0 0.5
    python examples/distill_policy.py --robot go2 --clock     # the policy observes the gait clock
    python examples/distill_policy.py --robot go2 --clock --no-solves --dart-seconds 10 \
        --dart-runs 2 --dagger-rounds 0 --vx 0 0.25 0.5 --yaw -0.5 0 0.5   # the recipe that walks

1. Solves one trajectory problem per gait and command (`--vx`, `--vy`, `--yaw` grids,
   `--duration` s each); each solve is saved in `<out>/dataset/` at once and reused when the
   script runs again, so an interrupted build resumes.
   `--dart-seconds S`: also `--dart-runs` MPC runs of S s per command with noise on its actions
   (DART, `--dart-noise`), every visited state labelled with the MPC's own action
   (`learning.distill.cloning.expert_rollouts`, saved in `<out>/dart/`); `--no-solves` keeps
   only those.
   `--dart-starts N --dart-start-seconds S` (default 2 s): N more DART runs per command, only
   the first S s from standing (seeds after the long runs'): more of the start, where the
   students fall.
   `--expert-iterations N`: the MPC expert (DART, DAgger) runs N FDDP iterations per cycle.
2. Behaviour cloning on the (observation, action) pairs (`--bc-epochs`). `--students K`: K
   networks cloned on the same data (network seeds `--seed` .. `--seed` + K - 1: their own
   initialisation and minibatch order), averaged into one policy (`learning.policy.
   average_policies`: one MLP K times as wide whose action is the mean of theirs).
   `--dagger-failures`: then each student runs alone at every command; where it falls it runs
   again for `--dagger-seconds` from standing with the MPC labelling its states
   (`cloning.failure_runs`), and all students are cloned again on the data plus those.
3. `--dagger-rounds` rounds of DAgger with the MPC as expert, `--dagger-seconds` per command.
After each stage it prints the imitation loss and the closed-loop tracking error of the policy
alone in this project's simulator. Saves the policy (`policy.eqx`, `learning.policy.
load_policy`), its NumPy/ONNX export (`export/`) and a report (`report.json`).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np

import dynamics
from learning.distill import cloning, dataset
from learning.evaluation import evaluate_policy
from learning.plant import Plant
from learning.policy import Policy, average_policies, save_policy
from trajopt.gaits import gait_period as default_gait_period


def _evaluate(policy, plant, commands, seconds, gait_period=None):
    ev = evaluate_policy(
        policy, plant, commands, seconds, settle=min(1.0, seconds / 2), gait_period=gait_period
    )
    return {"mean_velocity_error": ev["mean_velocity_error"], "fell_fraction": ev["fell_fraction"],
            "velocity_error": ev["velocity_error"].tolist()}  # fmt: skip


def _clone_students(data, nu, clock, seed, students, epochs):
    """`students` fresh networks (seeds `seed` ..) cloned on `data`: `(members, report)`, the
    first one's behaviour-cloning report plus every student's final loss and the total time."""
    members, reports = [], []
    for k in range(students):
        member = Policy.create(jax.random.key(seed + k), nu, clock=clock)
        member, bc_k = cloning.behaviour_cloning(member, data, epochs=epochs, seed=seed + k)
        members.append(member)
        reports.append(bc_k)
        if students > 1:
            print(f"student {k + 1}/{students} (network seed {seed + k}): imitation loss "
                  f"{bc_k['initial_loss']:.4f} -> {bc_k['final_loss']:.4f}")  # fmt: skip
    bc = dict(reports[0])
    if students > 1:
        bc["student_final_losses"] = [r["final_loss"] for r in reports]
        bc["seconds"] = sum(r["seconds"] for r in reports)
    return members, bc


def run(robot="go2", gaits=("trot",), vx=(0.0, 0.3, 0.6), vy=(0.0,), yaw=(0.0,), duration=1.0,
        iterations=30, bc_epochs=300, dagger_rounds=2, dagger_seconds=2.0, eval_seconds=3.0,
        mpc_horizon=0.5, out="results/distill", seed=0, batched=False,
        devices=None, clock=False, solves=True, dart_seconds=0.0, dart_noise=0.1,
        dart_runs=1, expert_iterations=1, students=1, dart_starts=0,
        dart_start_seconds=2.0, dagger_failures=False):  # fmt: skip
    """The whole build (module docstring). `clock`: the dataset's observations and the policy's
    end with the gait clock of the first gait's period (`trajopt.gaits.gait_period`); the
    evaluations run the clock from 0 at the start of each rollout, DAgger at the MPC's time."""
    start = time.perf_counter()
    commands = dataset.commands_grid(vx, vy, yaw)
    if int(expert_iterations) != expert_iterations or expert_iterations < 1:
        raise ValueError(f"expert_iterations must be a positive integer, got {expert_iterations}")
    if int(students) != students or students < 1:
        raise ValueError(f"students must be a positive integer, got {students}")
    mpc_options = {"horizon": mpc_horizon, "iterations": int(expert_iterations)}
    folder = os.path.join(out, "dataset")
    if not solves and not dart_seconds > 0:
        raise ValueError("no data: --no-solves needs --dart-seconds > 0")
    if int(dart_starts) != dart_starts or dart_starts < 0:
        raise ValueError(f"dart_starts must be a non-negative integer, got {dart_starts}")
    if dart_starts and not dart_start_seconds > 0:
        raise ValueError(f"dart_start_seconds must be positive, got {dart_start_seconds}")
    parts = []
    if solves:
        parts.append(dataset.build_dataset(
            robot, commands, gaits, duration=duration, folder=folder, max_iterations=iterations,
            batched=batched, devices=devices, clock=clock,
        ))  # fmt: skip
        print(f"dataset: {len(parts[-1])} samples from {len(commands) * len(gaits)} solves")
    if dart_seconds > 0:
        parts.append(cloning.expert_rollouts(
            robot, commands, gait=gaits[0], seconds=dart_seconds, noise=dart_noise, seed=seed,
            runs=dart_runs, clock=clock, mpc_options=mpc_options,
            folder=os.path.join(out, "dart"),
        ))  # fmt: skip
        print(f"dataset: {len(parts[-1])} samples from {dart_runs * len(commands)} MPC runs "
              f"with noise {dart_noise} (DART)")  # fmt: skip
    if dart_starts:
        parts.append(cloning.expert_rollouts(
            robot, commands, gait=gaits[0], seconds=dart_start_seconds, noise=dart_noise,
            seed=seed + (dart_runs if dart_seconds > 0 else 0), runs=dart_starts, clock=clock,
            mpc_options=mpc_options, folder=os.path.join(out, "dart"),
        ))  # fmt: skip
        print(f"dataset: {len(parts[-1])} samples from {dart_starts * len(commands)} starts of "
              f"{dart_start_seconds} s (DART)")  # fmt: skip
    data = parts[0]
    for part in parts[1:]:
        data = data + part
    model = dynamics.load_robot(robot)
    period = default_gait_period(robot, gaits[0]) if clock else None
    plant = Plant(robot)
    members, bc = _clone_students(data, model.nu, clock, seed, int(students), bc_epochs)
    failures = None
    if dagger_failures:
        new, failures = cloning.failure_runs(
            members, plant=plant, commands=commands, gait=gaits[0], seconds=dagger_seconds,
            eval_seconds=eval_seconds, mpc_options=mpc_options,
        )  # fmt: skip
        print(f"DAgger at the students' falls: {len(new)} samples from "
              f"{sum(map(len, failures['falls']))} runs; cloning again")  # fmt: skip
        data = data + new
        members, bc = _clone_students(data, model.nu, clock, seed, int(students), bc_epochs)
    policy = average_policies(members)
    if students > 1:
        obs, actions = np.asarray(data.obs, np.float32), np.asarray(data.actions, np.float32)
        bc["final_loss"] = float(cloning.imitation_loss(policy, obs, actions))
    evaluation = _evaluate(policy, plant, np.asarray(commands), eval_seconds, period)
    ratio = bc["initial_loss"] / bc["final_loss"]
    print(f"behaviour cloning: imitation loss {bc['initial_loss']:.4f} -> {bc['final_loss']:.4f}"
          f" ({ratio:.0f}x), closed-loop tracking error {evaluation['mean_velocity_error']:.3f}"
          f" m/s, fell {evaluation['fell_fraction']:.0%}")  # fmt: skip
    report = {"robot": robot, "gaits": list(gaits), "commands": commands, "samples": len(data),
              "gait_clock_period": period,
              "students": int(students),
              "sources": {"solves": solves, "dart_seconds": dart_seconds,
                          "dart_noise": dart_noise, "dart_runs": dart_runs,
                          "dart_starts": int(dart_starts),
                          "dart_start_seconds": dart_start_seconds,
                          "expert": mpc_options},
              "behaviour_cloning": {k: v for k, v in bc.items() if k != "epoch_losses"},
              "dagger_failures": failures,
              "after_cloning": evaluation, "dagger": []}  # fmt: skip
    if dagger_rounds > 0:
        policy, data, rounds = cloning.dagger(
            policy, data, plant=plant, commands=commands, gait=gaits[0], rounds=dagger_rounds,
            seconds=dagger_seconds, mpc_options=mpc_options, eval_seconds=eval_seconds,
            bc_options={"epochs": max(1, bc_epochs // 2), "seed": seed},
        )  # fmt: skip
        report["dagger"] = rounds
        report["after_dagger"] = _evaluate(
            policy, plant, np.asarray(commands), eval_seconds, period
        )
    os.makedirs(out, exist_ok=True)
    save_policy(policy, os.path.join(out, "policy.eqx"))
    data.save(os.path.join(out, "dataset_with_dagger.npz"))
    try:
        from learning.policy_export import export_policy
    except ImportError:  # the export module is optional here
        export_policy = None
    if export_policy is not None:
        import importlib.util

        with_onnx = importlib.util.find_spec("onnx") is not None  # the optional 'export' extra
        export_policy(policy, os.path.join(out, "export"), robot=robot, onnx=with_onnx,
                      gait_period=period)  # fmt: skip
    report["seconds"] = time.perf_counter() - start
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(f"policy saved to {os.path.abspath(os.path.join(out, 'policy.eqx'))}, report "
          f"{os.path.abspath(os.path.join(out, 'report.json'))}")  # fmt: skip
    return policy, report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--gaits", nargs="+", default=["trot"])
    parser.add_argument("--vx", nargs="+", type=float, default=[0.0, 0.3, 0.6], help="[m/s]")
    parser.add_argument("--vy", nargs="+", type=float, default=[0.0], help="[m/s]")
    parser.add_argument("--yaw", nargs="+", type=float, default=[0.0], help="[rad/s]")
    parser.add_argument("--duration", type=float, default=1.0, help="per solve [s]")
    parser.add_argument("--iterations", type=int, default=30, help="FDDP per solve")
    parser.add_argument("--bc-epochs", type=int, default=300)
    parser.add_argument("--dagger-rounds", type=int, default=2)
    parser.add_argument("--dagger-seconds", type=float, default=2.0, help="per command [s]")
    parser.add_argument("--eval-seconds", type=float, default=3.0)
    parser.add_argument("--mpc-horizon", type=float, default=0.5, help="[s]")
    parser.add_argument("--expert-iterations", type=int, default=1,
                        help="FDDP iterations per MPC cycle of the expert (DART and DAgger)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--students", type=int, default=1,
                        help="networks cloned on the same data (seeds --seed, --seed + 1, ...) "
                             "and averaged into one policy")  # fmt: skip
    parser.add_argument("--out", default="results/distill")
    parser.add_argument("--batched", action="store_true",
                        help="solve each gait's command grid in one batched FDDP call")
    parser.add_argument("--devices", type=int, default=None,
                        help="with --batched: split the grid over this many devices")
    parser.add_argument("--clock", action="store_true",
                        help="the policy observes the gait clock (phase sin/cos and frequency)")
    parser.add_argument("--solves", action=argparse.BooleanOptionalAction, default=True,
                        help="the dataset includes the trajectory solves (--no-solves: only "
                             "the DART runs)")  # fmt: skip
    parser.add_argument("--dart-seconds", type=float, default=0.0,
                        help="per command: an MPC run this long with noisy actions (DART)")
    parser.add_argument("--dart-noise", type=float, default=0.1,
                        help="DART noise on the MPC's executed actions [action units]")
    parser.add_argument("--dart-runs", type=int, default=1,
                        help="DART runs per command, each with its own noise")
    parser.add_argument("--dart-starts", type=int, default=0,
                        help="more DART runs per command, only their start (--dart-start-seconds)")
    parser.add_argument("--dart-start-seconds", type=float, default=2.0,
                        help="length of each --dart-starts run [s]")
    parser.add_argument("--dagger-failures", action="store_true",
                        help="after cloning, DAgger runs of each student where it falls "
                             "(--dagger-seconds each), then clone the students again")  # fmt: skip
    args = parser.parse_args(argv)
    return run(args.robot, tuple(args.gaits), args.vx, args.vy, args.yaw, args.duration,
               args.iterations, args.bc_epochs, args.dagger_rounds, args.dagger_seconds,
               args.eval_seconds, args.mpc_horizon, args.out, args.seed, args.batched,
               args.devices, args.clock, args.solves, args.dart_seconds,
               args.dart_noise, args.dart_runs, args.expert_iterations,
               args.students, args.dart_starts, args.dart_start_seconds,
               args.dagger_failures)  # fmt: skip


if __name__ == "__main__":
    main()
