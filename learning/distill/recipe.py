"""Distil trajectory optimisation and the MPC into a policy (dataset, DART, behaviour cloning,
DAgger) and save, evaluate and export it: the recipe behind `examples/distill_policy.py` and the
warm-start stage of `learning.pipeline`.

    policy, report = distill_policy("go2", vx=(0.0, 0.3), out="results/distill_go2")

Every solve and MPC run is saved as it finishes (`<out>/dataset/`, `<out>/dart/`) and reused
when the recipe runs again; at the end `<out>/policy.eqx`, `<out>/export/` and
`<out>/report.json`.
"""

from __future__ import annotations

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


def distill_policy(robot="go2", gaits=("trot",), vx=(0.0, 0.3, 0.6), vy=(0.0,), yaw=(0.0,),
        duration=1.0, iterations=30, bc_epochs=300, dagger_rounds=2, dagger_seconds=2.0,
        eval_seconds=3.0, mpc_horizon=0.5, out="results/distill", seed=0, batched=False,
        devices=None, clock=False, solves=True, dart_seconds=0.0, dart_noise=0.1,
        dart_runs=1, expert_iterations=1, students=1, dart_starts=0,
        dart_start_seconds=2.0, dagger_failures=False, dataset_folder=None):  # fmt: skip
    """The whole build (the stages of `examples/distill_policy.py`'s docstring).
    `dataset_folder`: where the solves are saved and reused (default `<out>/dataset`).
    `clock`: the dataset's observations and the policy's end with the gait clock of the first
    gait's period (`trajopt.gaits.gait_period`); the evaluations run the clock from 0 at the
    start of each rollout, DAgger at the MPC's time."""
    start = time.perf_counter()
    commands = dataset.commands_grid(vx, vy, yaw)
    if int(expert_iterations) != expert_iterations or expert_iterations < 1:
        raise ValueError(f"expert_iterations must be a positive integer, got {expert_iterations}")
    if int(students) != students or students < 1:
        raise ValueError(f"students must be a positive integer, got {students}")
    mpc_options = {"horizon": mpc_horizon, "iterations": int(expert_iterations)}
    folder = os.path.join(out, "dataset") if dataset_folder is None else dataset_folder
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
