"""Batched FDDP: many problems of one structure (e.g. a grid of commands for a distillation
dataset) solved together, one jitted iteration for the whole batch, the batch split over the
devices (`trajopt.sharding`).

    results = solve_batched([make_problem("solo12", "trot", v, duration=0.1) for v in grid],
                            devices=4)
    result = results[i]                  # a `SolveResult`, as `fddp.solve_fddp(problems[i])`

Same algorithm as `fddp.solve_fddp`, built from the same pure pieces
(`shooting.linearize_horizon`, `riccati.backward`, `shooting.line_search_trials`,
`shooting.evaluate`), but every decision the single solver takes on the
host is taken inside one jitted call per iteration, per problem:

    lin = linearise every knot at (xs, us)
    repeat while not accepted and mu < 1e10:          (lax.while_loop)
        backward pass with mu; if Q_uu is indefinite: mu <- 10 mu, again
        line search over ALPHAS; accepted at the first step that lowers the merit,
        else mu <- 10 mu
    no step accepted: stop, "converged" if the model predicts no decrease on a feasible
        trajectory, else "line_search_failed"
    else take the step, mu <- fddp_step.next_mu(mu, alpha); "converged" after a full, barely
        regularised step predicting a negligible change on a feasible trajectory

Unlike `fddp.solve_fddp`, a problem with "implicit" derivatives whose line search fails stops
"line_search_failed": the batch does not switch to the computed step's derivatives
(`fddp.exact_derivatives`), which would be a second compiled iteration.

A problem that has stopped keeps its iterate while the others go on. On one device the batch
is vmapped (a stopped problem's lanes are computed and discarded, and the while loops run until
the slowest problem of the batch is done); split over devices, each device works on its own
block (vmapped, or one by one on CPU devices: `_Batched`). The host loop ends when all have
stopped or after `max_iterations`. Each problem's iterates are the single solver's up to the
floating-point differences of batched code (tests/trajopt/test_batched_trajopt.py: the same
status and iterations, costs to 1e-8 relative, on one and on four devices).

Opt-in and separate from `trajopt.engine.knot_backends`: vmapping the knot linearisation costs more
compilation per structure (`benchmarks/bench_sharding.py`), which single solves do not pay. The
compiled batched iteration is cached per structure, batch size and device count
(`clear_compiled`). No time budget (the batch stops together) and no callback.
"""

from __future__ import annotations

import collections
import functools
import gc
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec

from . import problem as P
from . import sharding
from .engine import fddp, fddp_step, knot_backends, riccati, shooting
from .engine.solve_result import ContactReport, SolveResult

# status codes inside the compiled iteration
RUNNING, CONVERGED, LINE_SEARCH_FAILED, DIVERGED = 0, 1, 2, 3
STATUS = {RUNNING: "max_iterations", CONVERGED: "converged",
          LINE_SEARCH_FAILED: "line_search_failed", DIVERGED: "diverged"}  # fmt: skip
MU_MAX = 1e10  # the single solver's bound on the regularisation


def _iteration(problem, tolerance, defect_tolerance, data, carry):
    """One FDDP iteration of one problem (vmapped by the caller). `carry`: xs, us, cost, terms,
    defects (T+1, nx), forces, taus, mu, status (int32), iterations (int32), plus the last
    iteration's step and expected change (for the history). A stopped problem is unchanged."""
    xs, us, defects = carry["xs"], carry["us"], carry["defects"]
    cost, mu = carry["cost"], carry["mu"]
    lin = shooting.linearize_horizon(problem, data, xs, us)
    merit_old = shooting.merit_of(cost, defects)
    trial0 = (xs, us, cost, carry["terms"], defects, carry["forces"], carry["taus"])
    zero = jnp.zeros((), cost.dtype)

    def cond(c):
        return (~c["accepted"]) & (c["mu"] < MU_MAX)

    def body(c):
        k, K, dV1, _, ok = riccati.backward(lin, defects, c["mu"])
        first = jnp.where(c["has_first"] | ~ok, c["first_expected"], jnp.abs(dV1))
        index, _, trial = shooting.line_search_trials(
            problem, data, xs, us, k, K, defects, merit_old
        )
        index = index.astype(jnp.int32)
        accepted = ok & (index >= 0)
        return {
            "accepted": accepted,
            "mu": jnp.where(accepted, c["mu"], 10.0 * c["mu"]),
            "has_first": c["has_first"] | ok,
            "first_expected": first,
            "index": jnp.where(accepted, index, c["index"]),
            "dV1": jnp.where(accepted, dV1, c["dV1"]),
            "trial": jax.tree_util.tree_map(lambda a, b: jnp.where(accepted, a, b), trial,
                                            c["trial"]),  # fmt: skip
        }

    init = {"accepted": jnp.array(False), "mu": mu, "has_first": jnp.array(False),
            "first_expected": zero, "index": jnp.array(-1, jnp.int32), "dV1": zero,
            "trial": trial0}  # fmt: skip
    out = jax.lax.while_loop(cond, body, init)
    accepted = out["accepted"]
    gaps_old = jnp.sum(jnp.abs(defects))
    stationary = out["has_first"] & (out["first_expected"] < tolerance * (1.0 + jnp.abs(cost)))
    failed_status = jnp.where(stationary & (gaps_old < defect_tolerance), CONVERGED,
                              LINE_SEARCH_FAILED)  # fmt: skip
    xs_n, us_n, cost_n, terms_n, defects_n, forces_n, taus_n = out["trial"]
    alpha = jnp.asarray(shooting.ALPHAS, cost.dtype)[jnp.maximum(out["index"], 0)]
    mu_n = fddp_step.next_mu(out["mu"], alpha, jnp)
    gaps = jnp.sum(jnp.abs(defects_n))
    done = (alpha == 1.0) & (mu_n <= 1e-4) & (gaps < defect_tolerance) & (
        jnp.abs(out["dV1"]) < tolerance * (1.0 + jnp.abs(cost_n))
    )
    status = jnp.where(accepted, jnp.where(done, CONVERGED, RUNNING), failed_status)
    new = {
        "xs": xs_n, "us": us_n, "cost": cost_n, "terms": terms_n, "defects": defects_n,
        "forces": forces_n, "taus": taus_n, "mu": jnp.where(accepted, mu_n, out["mu"]),
        "status": status.astype(jnp.int32), "iterations": carry["iterations"] + 1,
        "step": jnp.where(accepted, alpha, 0.0), "expected": -out["dV1"],
        "accepted": accepted, "contact_residual": jnp.max(lin.contact_residual),
    }  # fmt: skip
    running = carry["status"] == RUNNING
    return jax.tree_util.tree_map(lambda a, b: jnp.where(running, a, b), new, carry)


class _Batched:
    """The jitted pieces of one structure, batch size and mesh.

    No mesh: every piece `vmap`ped over the batch. With a mesh: `shard_map`, each device works
    on its own block of problems with no communication (the problems are independent); inside
    a device the block is vmapped, except on several CPU devices, where each device works
    through its problems one by one (`lax.map`; its while loops then also run only as long as
    the problem at hand). The reason: on the CPU backend a vmapped linear solve is one batched
    LAPACK call, which jaxlib 0.10.2 splits over the process's intra-op thread pool and then
    waits for on a thread of that same pool. With several devices executing at once every pool
    thread can end up waiting: the vmapped solve hung on 2 and on 4 fake CPU devices of a
    2-core machine, no CPU used, every `tf_XLAEigen` thread in `jax::ParallelBatchMap` (gdb).
    A one-problem call has batch 1, which does not wait on the pool."""

    def __init__(self, problem, tolerance, defect_tolerance, mesh):
        step = functools.partial(_iteration, problem, tolerance, defect_tolerance)
        self.rollout_and_evaluate = _batch_of(
            functools.partial(shooting.rollout_and_evaluate, problem), mesh
        )
        self.evaluate = _batch_of(functools.partial(shooting.evaluate, problem), mesh)
        self.iteration = _batch_of(step, mesh)


def block_layout(mesh) -> str:
    """How a device runs its block of problems: "map" (one by one) on a mesh of several CPU
    devices, else "vmap" (see `_Batched`)."""
    if mesh is not None and mesh.devices.size > 1 and mesh.devices.flat[0].platform == "cpu":
        return "map"
    return "vmap"


def _batch_of(fn, mesh):
    """`fn` (one problem's arrays -> a pytree) over a leading batch axis of all its arguments,
    jitted: `vmap` without a mesh, else `shard_map` over the mesh with each device's block
    `vmap`ped or `lax.map`ped (`block_layout`)."""
    if mesh is None:
        return jax.jit(jax.vmap(fn))
    one_by_one = block_layout(mesh) == "map"

    def block(*args):
        if one_by_one:
            return jax.lax.map(lambda one: fn(*one), args)
        return jax.vmap(fn)(*args)

    split = PartitionSpec(sharding.AXIS)  # a prefix of every argument and output
    return jax.jit(jax.shard_map(block, mesh=mesh, in_specs=split, out_specs=split,
                                 check_vma=False))  # fmt: skip


COMPILED_STRUCTURES: collections.OrderedDict = collections.OrderedDict()
CACHE_SIZE = 2  # batched structures are the largest executables: keep few


def _compiled(problem, batch, tolerance, defect_tolerance, mesh) -> _Batched:
    key = (shooting.structure_key(problem), batch, tolerance, defect_tolerance, mesh)
    return knot_backends.lru_lookup(
        COMPILED_STRUCTURES, key,
        lambda: _Batched(problem, tolerance, defect_tolerance, mesh), CACHE_SIZE,
    )  # fmt: skip


def clear_compiled() -> None:
    """Drop every compiled batched structure (see `knot_backends.clear` for JAX's caches)."""
    COMPILED_STRUCTURES.clear()
    gc.collect()


def stack_data(problems) -> P.ProblemData:
    """The problems' `data` stacked along a new leading axis; raises unless all problems share
    one structure (`shooting.structure_key`: robot, horizon, substeps, contact, terms, shapes)."""
    problems = list(problems)
    if not problems:
        raise ValueError("no problems to solve")
    key = shooting.structure_key(problems[0])
    for i, p in enumerate(problems[1:], 1):
        if shooting.structure_key(p) != key:
            raise ValueError(f"problem {i} ({p.name}) has another structure than problem "
                             f"0 ({problems[0].name}): a batch shares one compiled program")
    return jax.tree_util.tree_map(lambda *a: np.stack([np.asarray(x) for x in a]),
                                  *[p.data for p in problems])  # fmt: skip


def solve_batched(
    problems,
    us=None,
    xs=None,
    *,
    max_iterations: int = 50,
    tolerance: float = 1e-4,
    defect_tolerance: float = 1e-6,
    mu0: float = 1e-6,
    devices: int | None = None,
    verbose: bool = False,
):
    """Solve a batch of same-structure problems with FDDP in one jitted call per iteration.

    problems: B `Problem`s; us: `(B, T, nu)` initial controls (default: each problem's
    `solve.initial_guess`); xs: stacked `KnotState` `(B, T+1, ...)` for multiple shooting, or
    None to roll `us` out. devices: split the batch over this many devices (`sharding`; a batch
    that does not divide evenly is padded with copies of its last problem, whose results are
    dropped; None: one device, no mesh). The other arguments are `fddp.solve_fddp`'s.

    Returns a list of B `SolveResult`s as `fddp.solve_fddp` returns them (`wall_time` the
    batch's; no `feedback` gains, no `timing`, and a contact report without per-knot residuals)."""
    problems = list(problems)
    if not problems:
        raise ValueError("no problems to solve")
    asked = len(problems)
    problem = problems[0]
    if us is None:
        from .solver import initial_guess

        us = np.stack([np.asarray(initial_guess(p)[1]) for p in problems])
    us = np.asarray(us)
    if us.shape != (asked, problem.horizon, problem.nu):
        raise ValueError(f"us must have shape {(asked, problem.horizon, problem.nu)}, "
                         f"got {us.shape}")  # fmt: skip
    mesh = None if devices is None else sharding.make_mesh(devices)
    pad = 0 if mesh is None else -asked % mesh.devices.size
    if pad:  # copies of the last problem (dropped from the results)
        problems = problems + [problems[-1]] * pad
        us = np.concatenate([us, np.repeat(us[-1:], pad, axis=0)])
        if xs is not None:
            xs = jax.tree_util.tree_map(
                lambda a: np.concatenate([a, np.repeat(np.asarray(a)[-1:], pad, axis=0)]), xs
            )
    data = stack_data(problems)
    batch = len(problems)
    fn = _compiled(problem, batch, float(tolerance), float(defect_tolerance), mesh)
    start = time.perf_counter()
    place = (lambda t: t) if mesh is None else (
        lambda t: sharding.put(t, sharding.batch_sharding(mesh)))  # fmt: skip
    data = place(data)
    us = place(jnp.asarray(us))
    if xs is None:  # single shooting: the rollout's own transitions give the costs
        xs, cost, terms, defects, forces, taus = fn.rollout_and_evaluate(data, us)
    else:
        xs = place(xs)
        cost, terms, defects, forces, taus = fn.evaluate(data, xs, us)
    host_cost = sharding.to_host(cost)
    host_defects = sharding.to_host(defects)
    finite = np.isfinite(host_cost) & np.all(np.isfinite(host_defects.reshape(batch, -1)), 1)
    carry = {
        "xs": xs, "us": us, "cost": cost, "terms": terms, "defects": defects,
        "forces": forces, "taus": taus,
        "mu": np.full(batch, mu0, host_cost.dtype),
        "status": np.where(finite, RUNNING, DIVERGED).astype(np.int32),
        "iterations": np.zeros(batch, np.int32),
        "step": np.zeros(batch, host_cost.dtype), "expected": np.zeros(batch, host_cost.dtype),
        "accepted": np.zeros(batch, bool), "contact_residual": np.zeros(batch, host_cost.dtype),
    }  # fmt: skip
    for name in ("mu", "status", "iterations", "step", "expected", "accepted", "contact_residual"):
        carry[name] = place(jnp.asarray(carry[name]))
    history = [[] for _ in range(batch)]
    contact_residuals = [[] for _ in range(batch)]  # at each linearisation point, as fddp's
    for iteration in range(1, max_iterations + 1):
        before = sharding.to_host(carry["status"])
        if np.all(before != RUNNING):
            break
        carry = fn.iteration(data, carry)
        names = ("cost", "step", "mu", "expected", "accepted", "status", "contact_residual")
        small = sharding.to_host({k: carry[k] for k in names})
        for i in np.flatnonzero(before == RUNNING):
            contact_residuals[i].append(float(small["contact_residual"][i]))
        gaps = np.sum(np.abs(sharding.to_host(carry["defects"]).reshape(batch, -1)), 1)
        elapsed = time.perf_counter() - start
        for i in np.flatnonzero((before == RUNNING) & small["accepted"]):
            history[i].append({"iteration": iteration, "time": elapsed,
                               "cost": float(small["cost"][i]), "step": float(small["step"][i]),
                               "defects": float(gaps[i]), "mu": float(small["mu"][i]),
                               "expected": float(small["expected"][i]),
                               "contact_residual": contact_residuals[i][-1]})  # fmt: skip
        if verbose:
            running = int(np.sum(small["status"] == RUNNING))
            print(f"{iteration:>4} running {running:>4}/{batch} "
                  f"cost {np.min(small['cost']):.5g}..{np.max(small['cost']):.5g}")  # fmt: skip
    host = sharding.to_host(carry)
    wall = time.perf_counter() - start
    results = []
    for i, p in enumerate(problems[:asked]):
        one = jax.tree_util.tree_map(lambda a, i=i: a[i], host)
        status = STATUS[int(one["status"])]
        xs_i, us_i = one["xs"], one["us"]
        if status == "diverged":  # never NaN: the initial state at every knot, as fddp does
            xs_i = fddp.resting_states(p.data.x0, p.horizon)
            cost = float("inf")
            terms_i = {k: float("inf") for k in one["terms"]}
            forces_i, taus_i = np.zeros_like(one["forces"]), np.zeros_like(one["taus"])
            gaps_i = 0.0
        else:
            cost = float(one["cost"])
            terms_i = {k: float(v) for k, v in one["terms"].items()}
            forces_i, taus_i = one["forces"], one["taus"]
            gaps_i = float(np.sum(np.abs(one["defects"])))
        results.append(SolveResult(
            xs=jax.tree_util.tree_map(np.asarray, xs_i), us=np.asarray(us_i), status=status,
            iterations=int(one["iterations"]) if status != "diverged" else 0, cost=cost,
            term_costs=terms_i, history=history[i], forces=np.asarray(forces_i),
            taus=np.asarray(taus_i), defects=gaps_i, wall_time=wall,
            contact=ContactReport.of(contact_residuals[i], None, fddp.contact_tolerance(p)),
            devices=1 if mesh is None else int(mesh.devices.size),
        ))  # fmt: skip
    return results
