"""Distillation: trajectories and an MPC expert into a policy (the warm start of training).

    data = build_dataset("go2", commands_grid(...), gaits=("trot", "walk"), folder="data/go2")
    policy, report = behaviour_cloning(Policy.create(key, nu), data)
    policy, rounds = dagger(policy, data, robot="go2", commands=[(0.5, 0, 0)], rounds=3)

1. A dataset of (observation, action) pairs from solved trajectory problems over a grid of
   velocity commands `(vx, vy, yaw_rate)` and gaits (`trajopt.gaits.make_problem`, the command
   set in the references of every knot): at knot k, the observation of `learning.policy`
   at the knot state `x_k` with the command and the previous knot's action, and the action
   `a_k = (u_k - q_default) / ACTION_SCALE`, the PD targets `u_k` the optimiser chose for the
   next `CONTROL_DT` (the knot duration equals the policy period). Every solve is saved
   (`Trajectory.save`) as soon as it ends and reused when the build runs again, so an
   interrupted build loses at most the solve in progress. With `clock=True` the observation
   ends with the gait clock at the knot time `k CONTROL_DT` (`trajopt.gait_clock.gait_clock`, with
   the problem's gait period): the phase the knot's references were built at.
2. Behaviour cloning: mean squared action error, Adam (optax), minibatches; the policy's
   observation normaliser is fitted to the dataset first.
3. DAgger (Ross et al. 2011) with the MPC (`controllers.mpc.MPC`) as the expert: the policy
   drives the simulator (`contact.step`, the closed-loop plant of `controllers.closed_loop`)
   while the MPC, run along the same states, labels each visited state with its targets; the
   labelled states join the dataset and the policy is retrained. Each round reports the
   imitation loss and the closed-loop tracking error of the policy alone. A policy with the
   gait clock observes `MPC.gait_clock(t)` at the time `t` the MPC labels.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import sys
import time
import zlib
from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from trajopt.gait_clock import check_gait_period, gait_clock

from ..policy import ACTION_SCALE, CONTROL_DT, Policy, observation_from_state

# --------------------------------------------------------------------------- dataset


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


def command_problem(robot: str, gait: str, command, *, duration: float, **options):
    """`make_problem` with the full command `(vx, vy, yaw_rate)` in every knot's reference."""
    from trajopt.gaits import make_problem

    command = np.asarray(command, dtype=float)
    pr = make_problem(robot, gait, float(command[0]), duration=duration, dt=CONTROL_DT,
                      lateral_velocity=float(command[1]), **options)  # fmt: skip
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
    from dynamics import load_robot
    from trajopt.gaits import gait_period
    from trajopt.solver import solve
    from trajopt.trajectory import Trajectory

    if not commands:
        raise ValueError("commands is empty: give at least one (vx, vy, yaw_rate)")
    q_default = np.asarray(load_robot(robot).q_standing)[7:]
    periods = {}
    for gait in gaits if clock else ():
        period = problem_options.get("period")
        periods[gait] = gait_period(robot, gait) if period is None else float(period)
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
    data = _concatenate(parts)
    if folder is not None:
        data.save(os.path.join(folder, "dataset.npz"))
        with open(os.path.join(folder, "dataset.json"), "w") as f:
            json.dump({"robot": robot, "duration": duration, "solves": report,
                       "gait_periods": periods if clock else None}, f, indent=2)  # fmt: skip
    return data


def _solve_batched(robot, pending, duration, max_iterations, devices, problem_options) -> dict:
    """`{(gait, command): Trajectory}` for `pending` (one gait) by one batched FDDP solve."""
    from trajopt import batched, fddp

    problems = [command_problem(robot, g, c, duration=duration, **problem_options)
                for g, c in pending]  # fmt: skip
    results = batched.solve_batched(problems, max_iterations=max_iterations, devices=devices)
    out = {}
    for (gait, command), pr, (xs, us, info) in zip(pending, problems, results):
        traj = fddp.to_trajectory(pr, xs, us, info, "fddp-single-batched")
        traj.meta.update({"gait": gait, "command": list(command)})
        out[(gait, command)] = traj
    return out


# --------------------------------------------------------------------------- cloning


def imitation_loss(policy: Policy, obs, actions):
    """Mean over samples and joints of `(policy(obs) - action)^2` (actions in policy units)."""
    return jnp.mean((jax.vmap(policy)(obs) - actions) ** 2)


@eqx.filter_jit
def _bc_epoch(policy, opt_state, obs, actions, order, optimizer, batch_size: int):
    params, static = eqx.partition(policy, eqx.is_inexact_array)

    def loss_fn(p, o, a):
        return imitation_loss(eqx.combine(p, static), o, a)

    n_batches = order.shape[0] // batch_size
    batches = order[: n_batches * batch_size].reshape(n_batches, batch_size)

    def body(carry, idx):
        p, s = carry
        loss, grads = jax.value_and_grad(loss_fn)(p, obs[idx], actions[idx])
        # the normaliser is data, not a parameter
        grads = eqx.tree_at(
            lambda g: g.normalizer, grads, jax.tree.map(jnp.zeros_like, grads.normalizer)
        )
        updates, s = optimizer.update(grads, s, p)
        return (optax.apply_updates(p, updates), s), loss

    (params, opt_state), losses = jax.lax.scan(body, (params, opt_state), batches)
    return eqx.combine(params, static), opt_state, jnp.mean(losses)


def behaviour_cloning(policy: Policy, data: Dataset, *, epochs: int = 200, batch_size: int = 256,
                      learning_rate: float = 1e-3, seed: int = 0, fit_normalizer: bool = True,
                      verbose: bool = False) -> tuple[Policy, dict]:  # fmt: skip
    """Fit `policy` to `data` by minibatch Adam on `imitation_loss`.

    Returns `(policy, report)`, report: `initial_loss`, `final_loss` (on the whole dataset,
    after fitting the normaliser), `epoch_losses` (mean minibatch loss per epoch), `seconds`.
    """
    if len(data) == 0:
        raise ValueError("the dataset is empty")
    dtype = policy.normalizer.mean.dtype
    obs, actions = jnp.asarray(data.obs, dtype), jnp.asarray(data.actions, dtype)
    if fit_normalizer:
        fresh = type(policy.normalizer).create(obs.shape[1], dtype)
        policy = policy.with_normalizer(fresh.update(obs))
    batch_size = min(batch_size, len(data))
    optimizer = optax.adam(learning_rate)
    params = eqx.filter(policy, eqx.is_inexact_array)
    opt_state = optimizer.init(params)
    initial = float(imitation_loss(policy, obs, actions))
    key = jax.random.key(seed)
    start = time.perf_counter()
    losses = []
    for epoch in range(epochs):
        key, sub = jax.random.split(key)
        order = jax.random.permutation(sub, len(data))
        policy, opt_state, loss = _bc_epoch(policy, opt_state, obs, actions, order, optimizer,
                                            batch_size)  # fmt: skip
        losses.append(float(loss))
        if verbose and (epoch + 1) % max(1, epochs // 10) == 0:
            print(f"BC epoch {epoch + 1}/{epochs}: loss {losses[-1]:.5f}", file=sys.stderr)
    final = float(imitation_loss(policy, obs, actions))
    report = {"initial_loss": initial, "final_loss": final, "epoch_losses": losses,
              "seconds": time.perf_counter() - start, "samples": len(data)}  # fmt: skip
    return policy, report


# --------------------------------------------------------------------------- closed loop


@dataclass(frozen=True)
class Plant:
    """The simulator the policy is distilled and evaluated in: `contact.step` at `sim_dt` with
    the joint PD of `controllers.closed_loop` (the MPC's actuator model: `Kp (q* - q)` clipped,
    the damping `Kd` implicit in the step), targets held over each `CONTROL_DT`."""

    robot: str = "go2"
    sim_dt: float = 0.002
    contact: str = "smooth"
    num_sweeps: int = 20
    friction: float = 0.8

    def parts(self):
        """`(model, params, advance, kp, q_default)`; `advance(params, state, targets, kp)`."""
        from contact import StepParams, flat
        from controllers.closed_loop import _advance
        from dynamics import load_robot
        from dynamics.actuator import default_gains

        model = load_robot(self.robot)
        kp, kd = default_gains(model)
        params = StepParams(terrain=flat(friction=self.friction), dt=self.sim_dt,
                            joint_damping=kd)  # fmt: skip
        steps = int(round(CONTROL_DT / self.sim_dt))
        advance = _advance(model, steps, self.contact, self.num_sweeps)
        q_default = jnp.asarray(model.q_standing)[model.nq - model.nu :]
        return model, params, advance, kp, q_default


def _policy_gait_period(policy: Policy, gait_period):
    """`gait_period` checked against the policy: a float if the policy observes the clock,
    None if it does not; ValueError naming gait_period otherwise."""
    if policy.clock and gait_period is None:
        raise ValueError("the policy observes a gait clock: give its gait_period [s]")
    if not policy.clock and gait_period is not None:
        raise ValueError(f"gait_period {gait_period} given, and the policy has no gait clock")
    return None if gait_period is None else check_gait_period(gait_period, "gait_period")


def rollout_policy(policy: Policy, plant: Plant, commands, seconds: float,
                   gait_period: float | None = None):  # fmt: skip
    """The policy alone in the plant from standing at rest, one run per command.

    gait_period [s]: the clock's period, for a policy that observes it (its time is
    `k CONTROL_DT` at policy step k). commands: `(C, 3)` `(vx, vy, yaw_rate)`. Returns
    `(q (C, K+1, nq), v (C, K+1, nv), actions (C, K, nu))` for `K = seconds / CONTROL_DT`
    policy steps (vmap over commands, `lax.scan` over time, one compile per plant and
    length)."""
    from dynamics.configuration import State

    from ..policy import joint_targets

    period = _policy_gait_period(policy, gait_period)
    model, params, advance, kp, q_default = plant.parts()
    n = int(round(seconds / CONTROL_DT))
    q0 = jnp.asarray(model.q_standing)
    dtype = policy.normalizer.mean.dtype
    times = CONTROL_DT * np.arange(n)
    clocks = jnp.asarray(gait_clock(times, period), q0.dtype) if period else None

    def one(command):
        def body(carry, clock):
            state, last = carry
            obs = observation_from_state(state.q, state.v, command, last, q_default, clock)
            action = policy(obs.astype(dtype)).astype(q0.dtype)
            state = advance(params, state, joint_targets(action, q_default), kp)[0]
            return (state, action), (state.q, state.v, action)

        init = (State(q0, jnp.zeros(model.nv)), jnp.zeros(model.nu))
        _, (qs, vs, actions) = jax.lax.scan(body, init, clocks, length=n)
        return (jnp.concatenate([q0[None], qs]),
                jnp.concatenate([jnp.zeros((1, model.nv)), vs]), actions)  # fmt: skip

    q, v, a = eqx.filter_jit(jax.vmap(one))(jnp.asarray(commands, dtype=q0.dtype))
    return np.asarray(q), np.asarray(v), np.asarray(a)


def tracking_error(q, v, commands, standing_height: float, settle: float = 1.0) -> dict:
    """Velocity tracking of runs `q (C, K+1, nq)`, `v (C, K+1, nv)` against `commands (C, 3)`
    after `settle` [s]: per run the mean `|v_xy - cmd_xy|` [m/s] (base frame, i.e. heading
    frame on level ground), the mean `|omega_z - cmd_yaw|` [rad/s], and whether it fell
    (base below half the standing height, or tilted beyond 60 deg)."""
    first = int(round(settle / CONTROL_DT))
    if first >= v.shape[1]:
        raise ValueError(f"settle {settle} s is longer than the runs")
    cmd = np.asarray(commands, dtype=float)[:, None, :]
    xy = np.linalg.norm(v[:, first:, 0:2] - cmd[:, :, 0:2], axis=-1).mean(axis=1)
    yaw = np.abs(v[:, first:, 5] - cmd[:, :, 2]).mean(axis=1)
    up_z = 1.0 - 2.0 * (q[..., 3] ** 2 + q[..., 4] ** 2)
    fell = np.any(q[..., 2] < 0.5 * standing_height, axis=1) | np.any(up_z < 0.5, axis=1)
    return {"velocity_error": xy, "yaw_rate_error": yaw, "fell": fell}


def evaluate_policy(policy: Policy, plant: Plant, commands, seconds: float = 3.0,
                    settle: float = 1.0, gait_period: float | None = None) -> dict:  # fmt: skip
    """`tracking_error` of `rollout_policy`, plus the means over commands."""
    from dynamics import load_robot

    q, v, _ = rollout_policy(policy, plant, commands, seconds, gait_period)
    out = tracking_error(q, v, commands, float(load_robot(plant.robot).q_standing[2]), settle)
    out["mean_velocity_error"] = float(np.mean(out["velocity_error"]))
    out["fell_fraction"] = float(np.mean(out["fell"]))
    return out


_OBSERVATION = jax.jit(observation_from_state)  # shared by every expert run of the process


def _expert_run(mpc, plant: Plant, command, seconds: float, act, clock: bool):
    """One run from standing at rest with `mpc` as the expert: at every policy step the MPC
    replans from the plant's state (`MPC.reset` at t = 0, then `MPC.update`) and labels it with
    its action `(u - q_default) / ACTION_SCALE`; `act(obs, expert) -> executed action`. Stops
    early if the base falls below half the standing height. Returns `(Dataset of the run
    (source 0), fell)`; the observations end with `mpc.gait_clock(t)` if `clock`."""
    from dynamics.configuration import State

    from ..policy import joint_targets

    model, params, advance, kp, q_default = plant.parts()
    command = jnp.asarray(command, dtype=jnp.float64)  # the simulation is float64
    mpc.set_command(*np.asarray(command))
    state = State(jnp.asarray(model.q_standing), jnp.zeros(model.nv))
    last = jnp.zeros(model.nu)
    obs_rows, labels, fell = [], [], False
    for k in range(int(round(seconds / CONTROL_DT))):
        t = k * CONTROL_DT
        expert_u = mpc.reset(state, t) if k == 0 else mpc.update(state, t)
        expert = (jnp.asarray(expert_u) - q_default) / ACTION_SCALE
        phase = jnp.asarray(mpc.gait_clock(t)) if clock else None
        obs = _OBSERVATION(state.q, state.v, command, last, q_default, phase)
        obs_rows.append(np.asarray(obs))
        labels.append(np.asarray(expert))
        action = act(obs, expert)
        state = advance(params, state, joint_targets(action, q_default), kp)[0]
        last = action
        if float(state.q[2]) < 0.5 * float(model.q_standing[2]):
            fell = True
            break
    n = len(labels)
    run = Dataset(np.array(obs_rows), np.array(labels), np.tile(np.asarray(command), (n, 1)),
                  np.zeros(n, dtype=int))  # fmt: skip
    return run, fell


def _concatenate(parts) -> Dataset:
    data = parts[0]
    for part in parts[1:]:
        data = data + part
    return data


def _rollout_name(robot, gait, command, seconds, noise, seed, mpc_options=None):
    """The saved run's name: robot, gait, command, length, noise, seed, and the expert's
    `mpc_options` that differ from `controllers.mpc.MPC`'s defaults (sorted `_key=value`; none
    for the default expert), so a run of another expert is never reused for this one."""
    vx, vy, wz = command
    expert = "".join(f"_{k}={v}" for k, v in sorted(_non_default_mpc_options(mpc_options).items()))
    # one decimal where it is exact (the names runs were saved under), all digits otherwise:
    # runs of 0.04 s and 0.03 s must not share a name
    length = f"{seconds:.1f}" if round(seconds, 1) == seconds else f"{seconds:g}"
    return (f"dart_{robot}_{gait}_vx{vx:+.2f}_vy{vy:+.2f}_wz{wz:+.2f}_T{length}"
            f"_noise{noise:.3f}_seed{seed}{expert}")  # fmt: skip


def _non_default_mpc_options(mpc_options) -> dict:
    """The entries of `mpc_options` whose value is not `MPC`'s default for that argument."""
    import inspect

    if not mpc_options:
        return {}

    from controllers.mpc import MPC

    defaults = {
        name: p.default
        for name, p in inspect.signature(MPC.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    return {k: v for k, v in mpc_options.items() if k not in defaults or defaults[k] != v}


def expert_rollouts(
    robot: str,
    commands,
    *,
    gait: str = "trot",
    seconds: float = 10.0,
    noise: float = 0.1,
    seed: int = 0,
    runs: int = 1,
    clock: bool = True,
    plant: Plant | None = None,
    mpc_options: dict | None = None,
    folder: str | None = None,
    verbose: bool = True,
) -> Dataset:
    """DART (Laskey et al. 2017): the MPC drives the plant with Gaussian noise on its actions and
    every visited state is labelled with the MPC's own (noise-free) action.

    Per command `(vx, vy, yaw_rate)`, `runs` runs of `seconds` from standing at rest (run r with
    seed `seed + r`: its own noise; more runs, more of the expert's corrections): at policy step
    k the MPC (`controllers.mpc.MPC`, `mpc_options`, default a 0.5 s horizon) replans from the
    plant's state, the label is its action `a* = (u - q_default) / ACTION_SCALE` and the plant
    executes `a* + noise * N(0, I)` (action units; 0.1 is 0.025 rad on each joint target). The
    states are the expert's own, widened by the noise, so the student learns the expert's
    corrections near its path (behaviour cloning of noise-free rollouts or of open-loop
    trajectories compounds its errors; BENCHMARKS.md). With `clock` the observations end with
    the MPC's gait clock (`MPC.gait_clock(t)`; the policy must observe the clock with the same
    period, `trajopt.gaits.gait_period(robot, gait)`).

    A run stops when the expert falls (base below half the standing height); its samples up to
    then are kept. The noise of a run depends only on its name (robot, gait, command, seconds,
    noise, the run's seed): `numpy.random.default_rng([seed + r, zlib.crc32(name)])`, `name` from
    `_rollout_name`, which also names the `mpc_options` that differ from the MPC's defaults. With
    `folder`, each run is saved there as `<name>.npz` as soon as it ends and reused by a later
    call with the same name (an interrupted build resumes; another expert does not match).
    Sample sources are `DART_SOURCE + i` for command `i`. Raises ValueError for a negative
    noise, non-positive seconds or no commands.
    """
    from controllers.mpc import MPC

    commands = [tuple(float(c) for c in command) for command in commands]
    if not commands:
        raise ValueError("commands is empty: give at least one (vx, vy, yaw_rate)")
    if any(len(c) != 3 for c in commands):
        raise ValueError(f"each command is (vx, vy, yaw_rate), got {commands}")
    if not noise >= 0:
        raise ValueError(f"noise must be >= 0 (action units), got {noise}")
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    if int(runs) != runs or runs < 1:
        raise ValueError(f"runs must be a positive integer, got {runs}")
    plant = Plant(robot) if plant is None else plant
    if plant.robot != robot:
        raise ValueError(f"plant.robot {plant.robot!r} is not robot {robot!r}")
    if folder is not None:
        os.makedirs(folder, exist_ok=True)
    mpc = None
    parts = []
    todo = [(i, command, seed + r) for r in range(int(runs)) for i, command in enumerate(commands)]
    for k, (i, command, run_seed) in enumerate(todo):
        name = _rollout_name(robot, gait, command, seconds, noise, run_seed, mpc_options)
        path = None if folder is None else os.path.join(folder, name + ".npz")
        start = time.perf_counter()
        if path is not None and os.path.exists(path):
            run, fell, reused = Dataset.load(path), None, True
        else:
            if mpc is None:
                mpc = MPC(robot, gait, command, **(mpc_options or {"horizon": 0.5}))
            rng = np.random.default_rng([run_seed, zlib.crc32(name.encode())])

            def noisy(obs, expert, rng=rng):
                return expert + noise * jnp.asarray(rng.standard_normal(expert.shape[0]))

            run, fell = _expert_run(mpc, plant, command, seconds, noisy, clock)
            reused = False
            if path is not None:
                run.save(path)
        run = dataclasses.replace(run, source=np.full(len(run), DART_SOURCE + i))
        parts.append(run)
        if verbose:
            took = "reused" if reused else f"{time.perf_counter() - start:.1f} s"
            status = "" if fell is None else (", the expert fell" if fell else "")
            print(f"[{k + 1}/{len(todo)}] {name}: {len(run)} samples{status} ({took})",
                  file=sys.stderr, flush=True)  # fmt: skip
    return _concatenate(parts)


DART_SOURCE = 10_000  # sample source of expert_rollouts' command i: DART_SOURCE + i


def dagger(
    policy: Policy,
    data: Dataset,
    *,
    plant: Plant = Plant(),
    commands=((0.5, 0, 0),),
    gait: str = "trot",
    rounds: int = 3,
    seconds: float = 2.0,
    beta0: float = 0.5,
    mpc_options: dict | None = None,
    bc_options: dict | None = None,
    eval_seconds: float = 3.0,
    verbose: bool = True,
) -> tuple[Policy, Dataset, list]:
    """DAgger rounds with the MPC as expert (see module docstring).

    In round i the executed action is `beta_i * expert + (1 - beta_i) * policy`, `beta_i =
    beta0 * 0.5^i` (round 0 mostly follows the expert, later ones the policy); every visited
    state is labelled with the expert's action. A run stops early when the robot falls.
    A policy with the gait clock observes `mpc.gait_clock(t)` (the MPC's gait period) at the
    time `t` the expert labels, and is evaluated with that period.
    Returns `(policy, dataset with the new samples, per-round reports)`; a report holds the
    imitation loss of the policy on the round's new samples before retraining (how far its own
    states are from the expert's choice), the loss after, and the closed-loop tracking error of
    the policy alone (`evaluate_policy`) after retraining."""
    from controllers.mpc import MPC

    mpc = MPC(plant.robot, gait, commands[0], **(mpc_options or {"horizon": 0.5}))
    period = mpc.gait_period if policy.clock else None
    policy_fn = eqx.filter_jit(lambda p, o: p(o))
    dtype = policy.normalizer.mean.dtype
    reports = []
    for i in range(rounds):
        beta = beta0 * 0.5**i

        def mix(obs, expert, beta=beta, student=policy):
            own = policy_fn(student, obs.astype(dtype)).astype(expert.dtype)
            return beta * expert + (1.0 - beta) * own

        runs = [_expert_run(mpc, plant, command, seconds, mix, policy.clock)[0]
                for command in commands]  # fmt: skip
        fresh = _concatenate(runs)
        fresh = dataclasses.replace(fresh, source=np.full(len(fresh), -(i + 1)))
        obs_new = jnp.asarray(fresh.obs, dtype)
        act_new = jnp.asarray(fresh.actions, dtype)
        before = float(imitation_loss(policy, obs_new, act_new))
        data = data + fresh
        policy, bc = behaviour_cloning(policy, data, **(bc_options or {"epochs": 100}))
        after = float(imitation_loss(policy, obs_new, act_new))
        ev = evaluate_policy(policy, plant, np.asarray(commands, dtype=float), eval_seconds,
                             settle=min(1.0, eval_seconds / 2), gait_period=period)  # fmt: skip
        report = {"round": i, "beta": beta, "new_samples": len(fresh), "samples": len(data),
                  "loss_on_new_before": before, "loss_on_new_after": after,
                  "dataset_loss": bc["final_loss"],
                  "velocity_error": ev["mean_velocity_error"],
                  "fell_fraction": ev["fell_fraction"]}  # fmt: skip
        reports.append(report)
        if verbose:
            print(f"DAgger round {i}: beta {beta:.2f}, {len(fresh)} new samples, loss on them "
                  f"{before:.4f} -> {after:.4f}, tracking error {ev['mean_velocity_error']:.3f} "
                  f"m/s, fell {ev['fell_fraction']:.0%}", file=sys.stderr, flush=True)  # fmt: skip
    return policy, data, reports


FAILURE_SOURCE = 20_000  # sample source of failure_runs' student k: FAILURE_SOURCE + k


def failure_runs(
    students,
    *,
    plant: Plant = Plant(),
    commands=((0.5, 0, 0),),
    gait: str = "trot",
    seconds: float = 2.0,
    eval_seconds: float = 10.0,
    mpc_options: dict | None = None,
    verbose: bool = True,
) -> tuple[Dataset, dict]:
    """DAgger at each student's own failures (one round, no mixing): every student runs alone
    from standing at every command (`evaluate_policy`, `eval_seconds`); where it falls, it
    drives the plant again from standing for `seconds` while the MPC (`mpc_options`) labels
    every state it visits (`_expert_run` with the student's action executed). Those are the
    states on the way to its falls, the ones its data lacked.

    Returns `(Dataset of the new samples, report)`: sources `FAILURE_SOURCE + k` for student
    k; report `{"falls": [[command, ...] per student], "samples": n}`. Re-clone the students on
    the data plus these samples (`examples/distill_policy.py --dagger-failures`). Raises
    ValueError for no students or non-positive `seconds`."""
    from controllers.mpc import MPC

    students = list(students)
    if not students:
        raise ValueError("students is empty: give at least one Policy")
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    commands = np.asarray(commands, dtype=float).reshape(-1, 3)
    mpc = MPC(plant.robot, gait, tuple(commands[0]), **(mpc_options or {"horizon": 0.5}))
    policy_fn = eqx.filter_jit(lambda p, o: p(o))
    parts, falls = [], []
    for k, student in enumerate(students):
        period = mpc.gait_period if student.clock else None
        ev = evaluate_policy(student, plant, commands, eval_seconds,
                             settle=min(1.0, eval_seconds / 2), gait_period=period)  # fmt: skip
        fell = [tuple(float(x) for x in c) for c in commands[ev["fell"]]]
        falls.append([list(c) for c in fell])
        dtype = student.normalizer.mean.dtype
        for command in fell:

            def own(obs, expert, student=student, dtype=dtype):
                return policy_fn(student, obs.astype(dtype)).astype(expert.dtype)

            run, _ = _expert_run(mpc, plant, command, seconds, own, student.clock)
            parts.append(dataclasses.replace(run, source=np.full(len(run), FAILURE_SOURCE + k)))
        if verbose:
            print(f"student {k + 1}/{len(students)}: fell at {len(fell)} of {len(commands)} "
                  f"commands {fell}", file=sys.stderr, flush=True)  # fmt: skip
    if parts:
        data = _concatenate(parts)
    else:
        n_obs, nu = students[0].mlp.in_size, students[0].nu
        data = Dataset(np.zeros((0, n_obs)), np.zeros((0, nu)), np.zeros((0, 3)),
                       np.zeros(0, dtype=int))  # fmt: skip
    return data, {"falls": falls, "samples": len(data)}
