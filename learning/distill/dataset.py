"""Distillation data: (observation, action) pairs from solved trajectory problems.

    data = build_dataset("go2", commands_grid(vx=(0, 0.25, 0.5)), gaits=("trot", "walk"),
                         folder="data/go2")

One trajectory problem is solved per velocity command `(vx, vy, yaw_rate)` and gait
(`trajopt.gaits.make_problem`, the command set in the references of every knot). At knot k the
observation is `learning.policy`'s at the knot state `x_k` with the command and the previous
knot's action, and the action is

    a_k = (u_k - q_default) / ACTION_SCALE,

the PD targets `u_k` the optimiser chose for the next `CONTROL_DT` (the knot duration equals
the policy period). Every solve is saved (`Trajectory.save`) as soon as it ends and reused when
the build runs again, so an interrupted build loses at most the solve in progress. With
`clock=True` the observation ends with the gait clock at the knot time `k CONTROL_DT`
(`trajopt.gait_clock.gait_clock`, with the problem's gait period): the phase the knot's
references were built at.

The MPC expert's own runs (`learning.distill.cloning.expert_rollouts`, DAgger) add to such a
`Dataset` with `+`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import sys
import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from dynamics import load_robot
from trajopt.batched import solve_batched
from trajopt.gait_clock import check_gait_period, gait_clock
from trajopt.gaits import gait_period as default_gait_period
from trajopt.gaits import make_problem
from trajopt.solver import solve
from trajopt.trajectory import Trajectory

from ..policy import ACTION_SCALE, CONTROL_DT, observation_from_state


@dataclass
class Dataset:
    """Observation/action pairs: `obs (N, 12 + 3 nu)` (`(N, 15 + 3 nu)` with the gait clock),
    `actions (N, nu)`, and per sample the
    command `(N, 3)` and a source tag `(N,)` (which solve or DAgger round it came from)."""

    obs: np.ndarray
    actions: np.ndarray
    commands: np.ndarray
    source: np.ndarray

    def __len__(self) -> int:
        return self.obs.shape[0]

    def __add__(self, other: Dataset) -> Dataset:
        return Dataset(*(np.concatenate([a, b]) for a, b in zip(_fields(self), _fields(other))))

    def save(self, path: str) -> None:
        """npz, written atomically (temporary file, then rename)."""
        tmp = path + ".tmp.npz"
        np.savez(tmp, **dataclasses.asdict(self))
        os.replace(tmp, path)

    @staticmethod
    def load(path: str) -> Dataset:
        with np.load(path) as f:
            return Dataset(f["obs"], f["actions"], f["commands"], f["source"])


def _fields(d: Dataset):
    return (d.obs, d.actions, d.commands, d.source)


def concatenate(parts) -> Dataset:
    """The datasets of `parts` (at least one) one after another."""
    data = parts[0]
    for part in parts[1:]:
        data = data + part
    return data


def commands_grid(vx=(0.0, 0.25, 0.5), vy=(0.0,), yaw_rate=(0.0,)) -> list[tuple]:
    """All combinations `(vx [m/s], vy [m/s], yaw_rate [rad/s])`."""
    return [tuple(float(c) for c in combo) for combo in itertools.product(vx, vy, yaw_rate)]


def pairs_from_trajectory(traj, command, q_default, *, gait_period: float | None = None,
                          start_time: float = 0.0) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """`(obs (T, 12 + 3 nu), actions (T, nu))` of a PD-target `Trajectory` (see module doc).

    gait_period [s]: the observations end with the gait clock at the knot times
    `start_time + k dt` [s] since the gait started (`(T, 15 + 3 nu)`); None: no clock."""
    if traj.meta.get("control", "pd") != "pd":
        raise ValueError("only trajectories with PD-target controls (control='pd') distil")
    if abs(traj.dt - CONTROL_DT) > 1e-9:
        raise ValueError(f"the knot duration {traj.dt} s must equal the policy period {CONTROL_DT}")
    q_default = np.asarray(q_default, dtype=float)
    actions = (np.asarray(traj.u) - q_default) / ACTION_SCALE
    u_prev0 = q_default if traj.u_prev0 is None else np.asarray(traj.u_prev0)
    last = np.concatenate([((u_prev0 - q_default) / ACTION_SCALE)[None], actions[:-1]])
    cmd = np.broadcast_to(np.asarray(command, dtype=float), (traj.horizon, 3))
    if gait_period is None:
        clock = None
    else:
        times = start_time + traj.dt * np.arange(traj.horizon)
        clock = jnp.asarray(gait_clock(times, check_gait_period(gait_period, "gait_period")))
    obs = jax.vmap(observation_from_state, in_axes=(0, 0, 0, 0, None, 0))(
        jnp.asarray(traj.q[:-1]), jnp.asarray(traj.v[:-1]), jnp.asarray(cmd),
        jnp.asarray(last), jnp.asarray(q_default), clock,
    )  # fmt: skip
    return np.asarray(obs), actions


# The planner of the distillation's plans and MPC experts: the paper's fixed 10 sweeps,
# differentiated through them, as every shipped policy was made (`trajopt.make_problem`'s
# default is the contact solve converged to a tolerance, with implicit derivatives). Options a
# caller gives replace these.
PLANNER = {"contact_tolerance": None, "num_sweeps": 10, "derivatives": "unrolled"}


def command_problem(robot: str, gait: str, command, *, duration: float, **options):
    """`make_problem` (with `PLANNER`'s settings unless `options` name others) with the full
    command `(vx, vy, yaw_rate)` in every knot's reference."""
    command = np.asarray(command, dtype=float)
    pr = make_problem(robot, gait, float(command[0]), duration=duration, dt=CONTROL_DT,
                      lateral_velocity=float(command[1]), **{**PLANNER, **options})  # fmt: skip
    ref = pr.data.reference
    velocity = jnp.tile(jnp.asarray(command, dtype=ref.base_velocity.dtype), (pr.horizon + 1, 1))
    return pr.replace_data(reference=dataclasses.replace(ref, base_velocity=velocity))


def _solve_name(robot, gait, command, duration):
    vx, vy, wz = command
    return f"{robot}_{gait}_vx{vx:+.2f}_vy{vy:+.2f}_wz{wz:+.2f}_T{duration:.2f}"


def build_dataset(robot: str, commands, gaits=("trot",), *, duration: float = 1.0,
                  folder: str | None = None, max_iterations: int = 40, verbose: bool = True,
                  batched: bool = False, devices: int | None = None, clock: bool = False,
                  **problem_options) -> Dataset:  # fmt: skip
    """Solve one problem per `(gait, command)` and collect the pairs (see module docstring).

    Problems of one gait share their structure, so FDDP compiles once per gait. With `folder`,
    each solved trajectory is saved there and a later call reuses it instead of solving again;
    `dataset.npz` and `dataset.json` (per solve: status, cost, average speed) are written at
    the end. Solves that end with status "diverged" are skipped (and listed in the json).
    batched: the unsolved commands of a gait in one `trajopt.batched.solve_batched` call (the
    same solutions within solver tolerance; a longer compile, then one call per iteration for
    the whole grid), split over `devices` devices (None: one).
    clock: the observations end with the gait clock at the knot times, with each gait's period
    (`problem_options["period"]`, else `trajopt.gaits.gait_period(robot, gait)`), recorded
    in `dataset.json` ("gait_periods").
    """
    if not commands:
        raise ValueError("commands is empty: give at least one (vx, vy, yaw_rate)")
    q_default = np.asarray(load_robot(robot).q_standing)[7:]
    periods = {}
    for gait in gaits if clock else ():
        period = problem_options.get("period")
        periods[gait] = default_gait_period(robot, gait) if period is None else float(period)
    if folder is not None:
        os.makedirs(folder, exist_ok=True)
    parts, report = [], []
    todo = [(g, tuple(map(float, c))) for g in gaits for c in commands]

    def path_of(gait, command):
        name = _solve_name(robot, gait, command, duration)
        return None if folder is None else os.path.join(folder, name + ".npz")

    solved = {}  # (gait, command) -> Trajectory, from the batched solves
    for gait in gaits if batched else ():
        saved = {(g, c) for g, c in todo if path_of(g, c) and os.path.exists(path_of(g, c))}
        pending = [(g, c) for g, c in todo if g == gait and (g, c) not in saved]
        if pending:
            solved.update(_solve_batched(robot, pending, duration, max_iterations, devices,
                                         problem_options))  # fmt: skip
    for index, (gait, command) in enumerate(todo):
        name = _solve_name(robot, gait, command, duration)
        path = path_of(gait, command)
        start = time.perf_counter()
        if path is not None and os.path.exists(path):
            traj, reused = Trajectory.load(path), True
        elif (gait, command) in solved:
            traj, reused = solved[(gait, command)], False
            if path is not None and traj.status != "diverged":
                traj.save(path)
        else:
            pr = command_problem(robot, gait, command, duration=duration, **problem_options)
            traj = solve(pr, max_iterations=max_iterations, verbose=False)
            traj.meta.update({"gait": gait, "command": list(command)})
            reused = False
            if path is not None and traj.status != "diverged":
                traj.save(path)
        entry = {"name": name, "gait": gait, "command": list(command), "status": traj.status,
                 "cost": float(traj.cost), "reused": reused,
                 "average_vx": float((traj.q[-1, 0] - traj.q[0, 0]) / (traj.horizon * traj.dt)),
                 "seconds": time.perf_counter() - start}  # fmt: skip
        report.append(entry)
        if verbose:
            took = "reused" if reused else f"{entry['seconds']:.1f} s"
            print(f"[{index + 1}/{len(todo)}] {name}: {traj.status}, cost {traj.cost:.4g}, "
                  f"average vx {entry['average_vx']:+.3f} m/s ({took})",
                  file=sys.stderr, flush=True)  # fmt: skip
        if traj.status == "diverged":
            continue
        obs, actions = pairs_from_trajectory(traj, command, q_default,
                                             gait_period=periods.get(gait))  # fmt: skip
        n = obs.shape[0]
        parts.append(Dataset(obs, actions, np.tile(command, (n, 1)), np.full(n, index)))
    if not parts:
        raise RuntimeError(f"every solve diverged: {report}")
    data = concatenate(parts)
    if folder is not None:
        data.save(os.path.join(folder, "dataset.npz"))
        with open(os.path.join(folder, "dataset.json"), "w") as f:
            json.dump({"robot": robot, "duration": duration, "solves": report,
                       "gait_periods": periods if clock else None}, f, indent=2)  # fmt: skip
    return data


def _solve_batched(robot, pending, duration, max_iterations, devices, problem_options) -> dict:
    """`{(gait, command): Trajectory}` for `pending` (one gait) by one batched FDDP solve."""
    problems = [command_problem(robot, g, c, duration=duration, **problem_options)
                for g, c in pending]  # fmt: skip
    results = solve_batched(problems, max_iterations=max_iterations, devices=devices)
    out = {}
    for (gait, command), pr, result in zip(pending, problems, results):
        traj = Trajectory.from_solution(pr, result, "fddp-single-batched")
        traj.meta.update({"gait": gait, "command": list(command)})
        out[(gait, command)] = traj
    return out
