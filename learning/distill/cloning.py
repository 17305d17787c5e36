"""Behaviour cloning, and the expert's corrections it needs: DART and DAgger with the MPC.

    policy, report = behaviour_cloning(Policy.create(key, nu), data)
    data = data + expert_rollouts("go2", [(0.5, 0, 0)], seconds=10, noise=0.1)     # DART
    policy, data, rounds = dagger(policy, data, commands=[(0.5, 0, 0)], rounds=3)    # DAgger

1. Behaviour cloning: the mean squared action error

       L = mean_{i, j} (policy(o_i)_j - a_ij)^2      (actions in policy units)

   by Adam (optax) over minibatches; the policy's observation normaliser is fitted to the
   dataset first (it is data, not a parameter).
2. DART (Laskey et al. 2017): the MPC drives the plant with Gaussian noise on its actions and
   every visited state is labelled with its own noise-free action (`expert_rollouts`).
3. DAgger (Ross et al. 2011) with the MPC (`controllers.mpc.MPC`) as the expert: the policy
   drives the plant (`learning.plant.Plant`, `learning.distill.expert.expert_run`) while the
   MPC, run along the same states, labels each visited state with its targets; the labelled
   states join the dataset and the policy is retrained (`dagger`; `failure_runs` at each
   student's own falls). Each round reports the imitation loss and the closed-loop tracking
   error of the policy alone (`learning.evaluation.evaluate_policy`). A policy with the gait
   clock observes `MPC.gait_clock(t)` at the time `t` the MPC labels.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import zlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import controllers.mpc

from ..evaluation import evaluate_policy
from ..plant import Plant
from ..policy import Policy
from .dataset import Dataset, concatenate
from .expert import DEFAULT_MPC_OPTIONS, expert_run, rollout_name

DEFAULT_PLANT = Plant()  # Go2 at the defaults of `Plant`: DAgger's and failure_runs' plant


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
    trajectories compounds its errors). With `clock` the observations end with
    the MPC's gait clock (`MPC.gait_clock(t)`; the policy must observe the clock with the same
    period, `trajopt.gaits.gait_period(robot, gait)`).

    A run stops when the expert falls (base below half the standing height); its samples up to
    then are kept. The noise of a run depends only on its name (robot, gait, command, seconds,
    noise, the run's seed): `numpy.random.default_rng([seed + r, zlib.crc32(name)])`, `name` from
    `rollout_name`, which also names the `mpc_options` that differ from the MPC's defaults. With
    `folder`, each run is saved there as `<name>.npz` as soon as it ends and reused by a later
    call with the same name (an interrupted build resumes; another expert does not match).
    Sample sources are `DART_SOURCE + i` for command `i`. Raises ValueError for a negative
    noise, non-positive seconds or no commands.
    """
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
        name = rollout_name(robot, gait, command, seconds, noise, run_seed, mpc_options)
        path = None if folder is None else os.path.join(folder, name + ".npz")
        start = time.perf_counter()
        if path is not None and os.path.exists(path):
            run, fell, reused = Dataset.load(path), None, True
        else:
            if mpc is None:
                mpc = controllers.mpc.MPC(robot, gait, command,
                                          **{**DEFAULT_MPC_OPTIONS, **(mpc_options or {})})
            rng = np.random.default_rng([run_seed, zlib.crc32(name.encode())])

            def noisy(obs, expert, rng=rng):
                return expert + noise * jnp.asarray(rng.standard_normal(expert.shape[0]))

            run, fell = expert_run(mpc, plant, command, seconds, noisy, clock)
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
    return concatenate(parts)


DART_SOURCE = 10_000  # sample source of expert_rollouts' command i: DART_SOURCE + i


def dagger(
    policy: Policy,
    data: Dataset,
    *,
    plant: Plant = DEFAULT_PLANT,
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
    mpc = controllers.mpc.MPC(plant.robot, gait, commands[0],
                              **{**DEFAULT_MPC_OPTIONS, **(mpc_options or {})})
    period = mpc.gait_period if policy.clock else None
    policy_fn = eqx.filter_jit(lambda p, o: p(o))
    dtype = policy.normalizer.mean.dtype
    reports = []
    for i in range(rounds):
        beta = beta0 * 0.5**i

        def mix(obs, expert, beta=beta, student=policy):
            own = policy_fn(student, obs.astype(dtype)).astype(expert.dtype)
            return beta * expert + (1.0 - beta) * own

        runs = [expert_run(mpc, plant, command, seconds, mix, policy.clock)[0]
                for command in commands]  # fmt: skip
        fresh = concatenate(runs)
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
    plant: Plant = DEFAULT_PLANT,
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
    every state it visits (`expert_run` with the student's action executed). Those are the
    states on the way to its falls, the ones its data lacked.

    Returns `(Dataset of the new samples, report)`: sources `FAILURE_SOURCE + k` for student
    k; report `{"falls": [[command, ...] per student], "samples": n}`. Re-clone the students on
    the data plus these samples (`examples/distill_policy.py --dagger-failures`). Raises
    ValueError for no students or non-positive `seconds`."""
    students = list(students)
    if not students:
        raise ValueError("students is empty: give at least one Policy")
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    commands = np.asarray(commands, dtype=float).reshape(-1, 3)
    mpc = controllers.mpc.MPC(plant.robot, gait, tuple(commands[0]),
                              **{**DEFAULT_MPC_OPTIONS, **(mpc_options or {})})
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

            run, _ = expert_run(mpc, plant, command, seconds, own, student.clock)
            parts.append(dataclasses.replace(run, source=np.full(len(run), FAILURE_SOURCE + k)))
        if verbose:
            print(f"student {k + 1}/{len(students)}: fell at {len(fell)} of {len(commands)} "
                  f"commands {fell}", file=sys.stderr, flush=True)  # fmt: skip
    if parts:
        data = concatenate(parts)
    else:
        n_obs, nu = students[0].mlp.in_size, students[0].nu
        data = Dataset(np.zeros((0, n_obs)), np.zeros((0, nu)), np.zeros((0, 3)),
                       np.zeros(0, dtype=int))  # fmt: skip
    return data, {"falls": falls, "samples": len(data)}
