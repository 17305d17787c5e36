"""Gauss-Newton feasibility-driven DDP (FDDP) for single and multiple shooting, in tangent space.

Knot dynamics `x+ = F(x, u)` (`problem.transition`), running cost `0.5 |r(x, u)|^2` (weighted
residuals) and terminal cost `0.5 |r_T(x)|^2`. Each iteration:

1. Linearise every knot with forward-mode JAX (exact derivatives through `contact.step`), in the
   tangent space of the manifold: `A = dF/dx`, `B = dF/du`, residual Jacobians `R_x`, `R_u`;
   Gauss-Newton: `l_x = R_x^T r`, `l_xx = R_x^T R_x`, `l_uu = R_u^T R_u`, `l_ux = R_u^T R_x`.
2. Backward pass (Riccati, with the defects `f_{t+1} = F(x_t, u_t) (-) x_{t+1}` of multiple
   shooting, Mastalli et al. 2020):

       V'_x = V_x + V_xx f                 (at knot t+1)
       Q_x = l_x + A^T V'_x,   Q_u = l_u + B^T V'_x
       Q_xx = l_xx + A^T V_xx A,   Q_uu = l_uu + B^T V_xx B + mu 1,   Q_ux = l_ux + B^T V_xx A
       k = -Q_uu^-1 Q_u,   K = -Q_uu^-1 Q_ux

3. Forward pass with step `alpha`: `u = u_t + alpha k + K (x^ (-) x_t)`,
   `x^_{t+1} = F(x^_t, u) (+) (alpha - 1) f_{t+1}`: defects shrink by `(1 - alpha)`; a full step
   (`alpha = 1`) is a closed-loop rollout and leaves a feasible (single-shooting) trajectory.
4. Accept the first `alpha` in the line search whose merit `cost + nu sum_t |f_t|_1` decreases;
   otherwise raise the Levenberg-Marquardt regularisation `mu` and retry.

The solver never returns NaN: a non-finite trial is a rejected step, and a non-finite start
stops with status "diverged". Progress (iteration, cost, step, defects, mu) prints unless quiet.

Compiled (issue 15): an iteration is three jitted calls, with no per-knot Python: every knot
linearised in one call (`lax.map`), the backward pass as a float64 `lax.scan` (it returns a
flag when a `Q_uu` is not positive definite; the Python loop then raises `mu`), and the line
search's trials in one call (a `while_loop` over `ALPHAS` that stops at the first accepted
step). The jitted functions of a problem structure are cached (`compiled`, a bounded LRU).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
import gc
import hashlib
import os
import time
import weakref
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import problem as P
from .program_cache import DiskCachedFunction
from .trajectory import Trajectory

ALPHAS = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.01)
MERIT_DEFECT_WEIGHT = 100.0  # nu: cost units per unit of L1 defect (tangent coordinates)
# Largest impulse-solve residual [m/s] at which a linearisation point's contact solves count as
# converged. FDDP differentiates what `num_sweeps` sweeps computed (the step's default, unrolled
# derivatives), so its model and derivatives agree either way; above the tolerance that model
# is not yet Coulomb contact's fixed point at this point, and the step's opt-in implicit
# derivatives (of the exact solution) would differ from the computed step's: BENCHMARKS.md,
# "Derivatives through contact", measured a 4 % Jacobian gap at 5.7e-4 m/s and 17 % at
# 5.9e-3 m/s on the ANYmal trot knot, so below 1e-4 m/s about 1 % or less.
CONTACT_RESIDUAL_TOLERANCE = 1e-4


# ----------------------------------------------------------------------------- compiled pieces
class Compiled:
    """The jitted functions of one problem structure (data is always an argument).

    An FDDP iteration is three calls, none per knot: `linearize_all` (every knot), `backward`
    (the Riccati recursion, again with a larger `mu` if `Q_uu` is not positive definite) and
    `line_search` (all step lengths, stopping at the first accepted one). `linearize` (one
    knot), `linearize_terminal` and `forward` (one step length) are the pieces, for tests and
    benchmarks; each compiles only when first called.

    The four functions of the iteration and the rollout are `program_cache.DiskCachedFunction`s:
    their traced programs are saved on disk, keyed by the structure, so a later process with the
    same structure does not trace them again (`DIFFLOCO_CACHE_DIR`, see `trajopt.program_cache`).
    """

    def __init__(self, problem: P.Problem):
        self.problem = problem
        context = repr(structure_key(problem))

        def disk(name, fun):
            return DiskCachedFunction(f"fddp.{name}", jax.jit(fun), context)

        self.rollout = disk("rollout", functools.partial(_rollout, problem))
        self.evaluate = disk("evaluate", functools.partial(_evaluate, problem))
        if problem.derivatives != "compiled":
            self.rollout_and_evaluate = disk(
                "rollout_and_evaluate", functools.partial(_rollout_and_evaluate, problem)
            )
        self.linearize = jax.jit(functools.partial(_linearize_knot, problem))
        self.linearize_terminal = jax.jit(functools.partial(_linearize_terminal, problem))
        self.forward = jax.jit(functools.partial(_forward, problem))
        if problem.derivatives == "compiled":  # the knots in generated C (`compiled_knots`)
            self.linearize_all = functools.partial(_linearize_all_compiled, self)
            self.knot_functions = None  # (params, gains, compiled_knots.SubstepFunctions)
            # the forward passes in C too, their costs and defects in JAX
            self.evaluate_transitions = disk(
                "evaluate_transitions", functools.partial(_evaluate_transitions, problem)
            )
            self.line_search = functools.partial(_line_search_compiled, self)
            self.rollout_and_evaluate = functools.partial(_rollout_and_evaluate_compiled, self)
        else:
            self.linearize_all = disk("linearize_all", functools.partial(_linearize_all, problem))
        self.linearize_knots = disk("linearize_knots", functools.partial(_linearize_knots, problem))
        self.linearize_knots_ready = False  # compiled (`linearize_in_two_threads`)
        self.backward = disk("backward", _backward)
        if problem.derivatives != "compiled":
            self.line_search = disk("line_search", functools.partial(_line_search, problem))


# The compiled-structure cache (issue 20). What is kept: the `Compiled` of the last
# `cache_size()` problem structures, least recently used first out. Why bounded: every structure
# compiles about 8,000 memory mappings of executable code (measured: 437 -> 8,281 lines of
# /proc/self/maps for one Solo12 structure), and the kernel kills the process at
# `vm.max_map_count` (65,530 by default), i.e. after about 8 structures. Dropping a `Compiled`
# frees its jitted functions and with them their executables (8,281 -> 796 mappings after the
# drop), so the LRU alone bounds the count; `clear_compiled()` also empties JAX's own caches
# (`jax.clear_caches()`, which recompiles every other jitted function on its next call).
DEFAULT_CACHE_SIZE = 4  # structures; 4 x ~8,000 mappings stays far below 65,530
_CACHE: collections.OrderedDict = collections.OrderedDict()
_CACHE_SIZE = [int(os.environ.get("DIFFLOCO_COMPILED_CACHE_SIZE", DEFAULT_CACHE_SIZE))]
_MODEL_FINGERPRINTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def model_fingerprint(model) -> str:
    """Content hash of a robot model: its static fields and every array (dtype, shape, bytes).

    Two models with equal fingerprints trace to the same program, so they may share compiled
    functions (the arrays are compile-time constants of them); object identity is not used."""
    cached = _MODEL_FINGERPRINTS.get(model)
    if cached is not None:
        return cached
    h = hashlib.sha256()
    for f in dataclasses.fields(model):
        value = getattr(model, f.name)
        h.update(f.name.encode())
        if f.metadata.get("static") or value is None:
            h.update(repr(value).encode())
        else:
            a = np.asarray(value)
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
    fingerprint = h.hexdigest()
    _MODEL_FINGERPRINTS[model] = fingerprint
    return fingerprint


def structure_key(problem: P.Problem):
    """What must be equal for two problems to share compiled functions: the robot (name and
    content hash), the static fields, the knot duration (a constant of the control-rate
    residual), the weighted terms and the shapes and dtypes of the traced data."""
    data = problem.data
    leaves_shapes = tuple(
        (np.shape(x), str(np.asarray(x).dtype)) for x in jax.tree_util.tree_leaves(data)
    )
    return (
        problem.model.name,
        model_fingerprint(problem.model),
        problem.horizon,
        problem.substeps,
        problem.dt_knot,
        problem.contact,
        problem.num_sweeps,
        problem.derivatives,
        problem.control,
        tuple(sorted(data.weights)),
        jax.tree_util.tree_structure(data),
        leaves_shapes,
    )


def compiled(problem: P.Problem) -> Compiled:
    """The `Compiled` of `problem`'s structure, from the LRU cache (built on a miss; the least
    recently used structure is dropped when the cache holds more than `cache_size()`)."""
    key = structure_key(problem)
    fn = _CACHE.get(key)
    if fn is not None:
        _CACHE.move_to_end(key)
        return fn
    fn = _CACHE[key] = Compiled(problem)
    _evict()
    return fn


def cache_size() -> int:
    """How many problem structures stay compiled (default `DEFAULT_CACHE_SIZE`, or the
    environment variable `DIFFLOCO_COMPILED_CACHE_SIZE`)."""
    return _CACHE_SIZE[0]


def set_cache_size(size: int) -> None:
    """Keep at most `size` (>= 1) problem structures compiled; evicts at once if needed."""
    if int(size) < 1:
        raise ValueError(f"the compiled cache holds at least one structure, got {size}")
    _CACHE_SIZE[0] = int(size)
    _evict()


def _evict() -> None:
    dropped = False
    while len(_CACHE) > _CACHE_SIZE[0]:
        _CACHE.popitem(last=False)
        dropped = True
    if dropped:
        gc.collect()  # free the executables now, not at the next collection


def clear_compiled(jax_caches: bool = True) -> None:
    """Drop every compiled problem structure and, with `jax_caches`, JAX's own compilation and
    tracing caches (`jax.clear_caches()`: every other jitted function recompiles on its next
    call). The persistent on-disk cache is not touched."""
    _CACHE.clear()
    gc.collect()
    if jax_caches:
        jax.clear_caches()


def _index(tree, t):
    return jax.tree_util.tree_map(lambda a: a[t], tree)


def _rollout(problem, data, us):
    """Single-shooting rollout from `data.x0`: `(xs (T+1), forces (T, k, 3), taus (T, nu))`."""

    def body(x, u):
        nxt, forces, taus = P.transition(problem, data, x, u)
        return nxt, (nxt, forces, taus)

    _, (xs, forces, taus) = jax.lax.scan(body, data.x0, us)
    xs = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), data.x0, xs)
    return xs, forces, taus


def _transitions(problem, data, xs, us):
    """Every knot's transition from `xs[t]` under `us[t]`, batched: `(nexts (T), forces (T, k, 3),
    taus (T, nu))`."""
    return jax.vmap(lambda x, u: P.transition(problem, data, x, u))(
        _index(xs, slice(0, problem.horizon)), us
    )


def _evaluate(problem, data, xs, us):
    """`(total cost, {term: cost}, defects (T, nx), forces, taus)`."""
    return _evaluate_transitions(problem, data, xs, us, *_transitions(problem, data, xs, us))


def _evaluate_transitions(problem, data, xs, us, nexts, forces, taus):
    """`_evaluate` of a (possibly infeasible) trajectory whose knots' transitions are known:
    `nexts` (T) the state each knot's dynamics reach from `xs[t]` under `us[t]`, `forces
    (T, k, 3)`, `taus (T, nu)` (a rollout or a forward pass computed them: evaluating its result
    does not simulate again). Defects `f_t = local(xs[t+1], nexts[t])`."""
    T = problem.horizon

    def knot(t):
        x, u = _index(xs, t), us[t]
        res = P.running_residuals(
            problem, data, x, u, forces[t], taus[t], P.reference_at(data.reference, t)
        )
        defect = P.local(problem, _index(xs, t + 1), _index(nexts, t))
        return P.term_costs(res, data.weights), defect

    terms, defects = jax.vmap(knot)(jnp.arange(T))
    terms = {k: jnp.sum(c) for k, c in terms.items()}
    x_T = _index(xs, problem.horizon)
    terminal = P.terminal_residuals(
        problem, data, x_T, P.reference_at(data.reference, problem.horizon)
    )
    terms.update(P.term_costs(terminal, data.weights))
    total = sum(terms.values())
    initial_gap = P.local(problem, _index(xs, 0), data.x0)
    defects = jnp.concatenate([initial_gap[None], defects])  # (T+1, nx): f_0 .. f_T
    return total, terms, defects, forces, taus


def _linearize_knot(problem, data, x, u, t):
    """`(A, B, r, R_x, R_u)` of knot t at `(x, u)` (see `_linearize_knot_with_residual`)."""
    return _linearize_knot_with_residual(problem, data, x, u, t)[:5]


class KnotDynamics(NamedTuple):
    """One knot's transition linearised (`_knot_dynamics`): what the costs' chain rule needs
    from the simulation besides `A` and `B`."""

    A: jax.Array  # (nx, nx) d local(nominal next, next) / dx
    B: jax.Array  # (nx, nu)
    forces: jax.Array  # (k, 3) the knot's average contact forces at (x, u)
    taus: jax.Array  # (nu,) the knot's peak torques at (x, u)
    forces_x: jax.Array  # (3k, 2 nv) d forces / d(dq, dv)
    forces_u: jax.Array  # (3k, nu)
    taus_x: jax.Array  # (nu, 2 nv)
    taus_u: jax.Array  # (nu, nu)
    contact_residual: jax.Array  # () largest impulse-solve residual of the knot [m/s]


def _knot_dynamics(problem, data, x, u) -> KnotDynamics:
    """The knot's transition at `(x, u)` and its Jacobians (`KnotDynamics`).

    The tangent directions pushed through the simulation are `dq, dv, du` (2 nv + nu). The
    `u_prev` block is exact without them: the transition does not read `x.u_prev` (the next
    knot's `u_prev` is `u`), so `A[:, u_prev] = 0`.

    The knot is simulated once: `jacfwd` returns the next state's coordinates `(q, v)`, the
    contact forces and the torques with their tangents, and the coordinates are mapped to the
    tangent space at the nominal next state afterwards (`local(nominal, .)` is differentiated
    at `nominal`, a small product), rather than simulating the nominal first and
    differentiating `local(nominal, next(dx))`."""
    nv, nu = problem.model.nv, problem.nu
    dtype = x.v.dtype

    def simulate(dqv, du):
        xp = P.retract(problem, x, jnp.concatenate([dqv, jnp.zeros(nu, dtype=dtype)]))
        nxt, forces, taus, residual = P.transition_with_residual(problem, data, xp, u + du)
        return (nxt.q, nxt.v, forces, taus), (nxt, forces, taus, residual)

    dqv0 = jnp.zeros(2 * nv, dtype=dtype)
    du0 = jnp.zeros(nu, dtype=dtype)
    jacobians, aux = jax.jacfwd(simulate, argnums=(0, 1), has_aux=True)(dqv0, du0)
    by_x, by_u = (tuple(j[i] for j in jacobians) for i in (0, 1))  # (q, v, forces, taus)
    nominal, forces0, taus0, contact_residual = aux

    def to_tangent(dq, dv, du_prev):
        """`d(next.q, next.v, next.u_prev) (nq, n), (nv, n), (nu, n)` -> the tangent at
        `nominal`, `d local(nominal, next) (nx, n)`."""

        def one(tq, tv, tu):
            tangent = P.KnotState(tq, tv, tu)
            return jax.jvp(lambda y: P.local(problem, nominal, y), (nominal,), (tangent,))[1]

        return jax.vmap(one, in_axes=-1, out_axes=-1)(dq, dv, du_prev)

    # the next knot's u_prev is u: zero along dx, the identity along du
    A_q = to_tangent(by_x[0], by_x[1], jnp.zeros((nu, 2 * nv), dtype))
    B = to_tangent(by_u[0], by_u[1], jnp.eye(nu, dtype=dtype))
    A = jnp.concatenate([A_q, jnp.zeros((problem.nx, nu), dtype=dtype)], axis=1)
    k3 = forces0.size
    return KnotDynamics(
        A, B, forces0, taus0, by_x[2].reshape(k3, -1), by_u[2].reshape(k3, -1), by_x[3],
        by_u[3], contact_residual,
    )  # fmt: skip


def _knot_costs(problem, data, x, u, t, dyn: KnotDynamics):
    """`(r, R_x, R_u)`: knot t's weighted running residuals at `(x, u)` and their Jacobians,
    with the forces and torques of `dyn` and their Jacobians.

    The residuals `r(x, u, forces, torques)` are differentiated apart from the simulation, by
    the chain rule through the forces and torques:

        R_x = dr/dx + dr/dforces dforces/dx + dr/dtorques dtorques/dx      (R_u likewise)

    so that only the `nv` directions of `dq` go through the foot kinematics of the costs
    (`compute_foot_contacts`), and the other inputs' `2 nv + 2 nu + 3k` directions through
    the costs' cheap, mostly linear terms: the simulation's `2 nv + nu` directions never pass
    through the costs."""
    ref_t = P.reference_at(data.reference, t)
    nv, nu = problem.model.nv, problem.nu
    dtype = x.v.dtype

    def residuals(dq, dv, du_prev, du, forces, taus):
        # not `retract` of one concatenated tangent: `dq` alone reaches the configuration
        xp = P.KnotState(P.integrate(problem.model, x.q, dq), x.v + dv, x.u_prev + du_prev)
        res = P.running_residuals(problem, data, xp, u + du, forces, taus, ref_t)
        return P.weighted(res, data.weights)

    zv, zu = jnp.zeros(nv, dtype), jnp.zeros(nu, dtype)
    r = residuals(zv, zv, zu, zu, dyn.forces, dyn.taus)
    # dq alone through the foot kinematics; everything else at the nominal configuration
    r_q = jax.jacfwd(lambda dq: residuals(dq, zv, zu, zu, dyn.forces, dyn.taus))(zv)
    r_v, r_up, r_u, r_f, r_tau = jax.jacfwd(lambda *a: residuals(zv, *a), argnums=(0, 1, 2, 3, 4))(
        zv, zu, zu, dyn.forces, dyn.taus
    )
    r_f = r_f.reshape(r.shape[0], -1)
    R_x = jnp.concatenate([
        jnp.concatenate([r_q, r_v], axis=1) + r_f @ dyn.forces_x + r_tau @ dyn.taus_x, r_up,
    ], axis=1)  # fmt: skip
    R_u = r_u + r_f @ dyn.forces_u + r_tau @ dyn.taus_u
    return r, R_x, R_u


def _linearize_knot_with_residual(problem, data, x, u, t):
    """`(A, B, r, R_x, R_u, contact_residual)` of knot t at `(x, u)`; the last is the knot's
    largest impulse-solve residual [m/s] at the linearisation point
    (`problem.transition_with_residual`). The transition by `_knot_dynamics`, the costs by
    `_knot_costs` (the chain rule through the forces and torques)."""
    dyn = _knot_dynamics(problem, data, x, u)
    r, R_x, R_u = _knot_costs(problem, data, x, u, t, dyn)
    return dyn.A, dyn.B, r, R_x, R_u, dyn.contact_residual


def _linearize_terminal(problem, data, x):
    ref_t = P.reference_at(data.reference, problem.horizon)

    def g(dx):
        res = P.weighted(
            P.terminal_residuals(problem, data, P.retract(problem, x, dx), ref_t), data.weights
        )
        return res, res

    jx, r = jax.jacfwd(g, has_aux=True)(jnp.zeros(problem.nx, dtype=x.v.dtype))
    return r, jx


def _rollout_and_evaluate(problem, data, us):
    """`_rollout` then `_evaluate` of its result from the rollout's own transitions (one
    simulation of the horizon, not two): `(xs, cost, terms, defects, forces, taus)`."""
    xs, forces, taus = _rollout(problem, data, us)
    nexts = _index(xs, slice(1, problem.horizon + 1))
    return (xs,) + _evaluate_transitions(problem, data, xs, us, nexts, forces, taus)


def _forward(problem, data, xs, us, k, K, defects, alpha):
    """FDDP forward pass; returns the trial `(xs, us)` (defects shrink by `1 - alpha`)."""
    return _forward_with_transitions(problem, data, xs, us, k, K, defects, alpha)[:2]


def _forward_with_transitions(problem, data, xs, us, k, K, defects, alpha):
    """`_forward`'s trial `(xs, us)` and its knots' transitions `(nexts, forces, taus)` (each
    knot's dynamics from the trial state, before the defect `(alpha - 1) f` is added), for
    `_evaluate_transitions`."""
    x0 = data.x0  # the initial state is fixed: its gap closes fully at any alpha

    def body(x_hat, inputs):
        x_t, u_t, k_t, K_t, f_next = inputs
        u = u_t + alpha * k_t + K_t @ P.local(problem, x_t, x_hat)
        reached, forces, taus = P.transition(problem, data, x_hat, u)
        nxt = P.retract(problem, reached, (alpha - 1.0) * f_next)
        return nxt, (nxt, u, reached, forces, taus)

    xs_t = _index(xs, slice(0, problem.horizon))
    _, (x_next, u_new, reached, forces, taus) = jax.lax.scan(
        body, x0, (xs_t, us, k, K, defects[1:])
    )
    xs_new = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), x0, x_next)
    return xs_new, u_new, reached, forces, taus


LINEARIZE_LAYOUTS = ("map", "vmap")


class Linearization(NamedTuple):
    """Every knot's linearisation (`_linearize_all`); the first seven fields are what the
    backward pass reads."""

    A: jax.Array  # (T, nx, nx) dF/dx
    B: jax.Array  # (T, nx, nu) dF/du
    r: jax.Array  # (T, nr) weighted running residuals
    R_x: jax.Array  # (T, nr, nx)
    R_u: jax.Array  # (T, nr, nu)
    r_T: jax.Array  # (nr_T,) weighted terminal residuals
    R_T: jax.Array  # (nr_T, nx)
    contact_residual: jax.Array  # (T,) largest impulse-solve residual of each knot [m/s]


def _linearize_all(problem, data, xs, us, layout: str = "map") -> Linearization:
    """Every knot's linearisation in one call (`Linearization`).

    layout="map": `lax.map` over the knots (one knot's program, run T times inside XLA);
    layout="vmap": the knots batched. `map` is the solver's: `benchmarks/bench_linearize.py`
    measured vmap at 0.3-0.8x the time but 20-25 s more compilation per problem structure."""
    if layout not in LINEARIZE_LAYOUTS:
        raise ValueError(f"layout must be one of {LINEARIZE_LAYOUTS}, got {layout!r}")
    T = problem.horizon
    per_knot = _linearize_knots(problem, data, xs, us, jnp.arange(T), layout)
    A, B, r, Rx, Ru, contact_residual = per_knot
    rT, RT = _linearize_terminal(problem, data, _index(xs, T))
    return Linearization(A, B, r, Rx, Ru, rT, RT, contact_residual)


def compiled_knot_dynamics(fn: Compiled, data, xs, us) -> KnotDynamics:
    """Every running knot's `KnotDynamics` (stacked `(T, ...)`, NumPy) by the generated C code
    of `trajopt.compiled_knots` (`derivatives="compiled"`): the same values as
    `_knot_dynamics` with implicit derivatives, to rounding."""
    from . import compiled_knots  # CasADi, on first use only

    problem = fn.problem
    functions = _knot_functions(fn, data)
    T, nv, nu, nx = problem.horizon, problem.model.nv, problem.nu, problem.nx
    q, v = (np.asarray(a)[:T] for a in (xs.q, xs.v))
    out = compiled_knots.knot_dynamics(problem, functions, q, v, np.asarray(us))
    state, forces_jac, taus_jac = out["state"], out["forces_jac"], out["taus_jac"]
    A = np.zeros((T, nx, nx))
    A[:, : 2 * nv, : 2 * nv] = state[:, :, : 2 * nv]  # the next knot's u_prev is u: zero along x
    B = np.zeros((T, nx, nu))
    B[:, : 2 * nv] = state[:, :, 2 * nv :]
    B[:, 2 * nv :] = np.eye(nu)
    return KnotDynamics(
        A, B, out["forces"], out["taus"], forces_jac[:, :, : 2 * nv], forces_jac[:, :, 2 * nv :],
        taus_jac[:, :, : 2 * nv], taus_jac[:, :, 2 * nv :], out["residual"],
    )  # fmt: skip


def _knot_functions(fn: Compiled, data):
    """The compiled functions of `fn.problem` at `data`'s step parameters and PD gains, looked
    up again only when those are other objects than last time."""
    from . import compiled_knots  # CasADi, on first use only

    recent = fn.knot_functions
    if recent is None or recent[0] is not data.params or recent[1] is not data.gains:
        recent = (data.params, data.gains, compiled_knots.substep_functions(fn.problem, data))
        fn.knot_functions = recent
    return recent[2]


def _flat_states(xs) -> np.ndarray:
    """Knot states `(n, nq + nv + nu)` as `[q, v, u_prev]` rows (the C functions' layout)."""
    return np.concatenate([np.asarray(xs.q), np.asarray(xs.v), np.asarray(xs.u_prev)], axis=-1)


def _forward_compiled(fn: Compiled, data, xs, us, k, K, defects, alpha):
    """`_forward_with_transitions` by the generated C fold (`compiled_knots`): `(xs, us,
    reached, forces, taus)` as NumPy (knot states as `KnotState`)."""
    problem = fn.problem
    T, m = problem.horizon, problem.model
    nq, nv = m.nq, m.nv
    x0 = _flat_states(data.x0)
    out = _knot_functions(fn, data).forward_pass(T)(
        x0, _flat_states(_index(xs, slice(0, T))), us, k,
        np.swapaxes(np.asarray(K), 1, 2), np.asarray(defects)[1:], np.full(T, float(alpha)),
    )  # fmt: skip

    def states(flat):
        return P.KnotState(flat[:, :nq], flat[:, nq : nq + nv], flat[:, nq + nv :])

    following = np.concatenate([x0[None], out["next"][..., 0]])
    return (
        states(following), out["u"][..., 0], states(out["reached"][..., 0]),
        out["forces"][..., 0].reshape(T, m.nfeet, 3), out["taus"][..., 0],
    )  # fmt: skip


def _line_search_compiled(fn: Compiled, data, xs, us, k, K, defects, merit_old):
    """`_line_search` with each trial's forward pass in C (`_forward_compiled`) and its costs
    and defects in one JAX call (`_evaluate_transitions`); the same trials, in the same order,
    and the same return values."""
    k, K, defects = (np.asarray(a) for a in (k, K, defects))
    trial = None
    for i, alpha in enumerate(ALPHAS):
        xs_t, us_t, reached, forces_t, taus_t = _forward_compiled(
            fn, data, xs, us, k, K, defects, alpha
        )
        evaluated = jax.device_get(
            fn.evaluate_transitions(data, xs_t, us_t, reached, forces_t, taus_t)
        )
        cost, terms, d, forces, taus = evaluated
        trial = (xs_t, us_t, cost, terms, d, forces, taus)
        if np.isfinite(cost) and np.all(np.isfinite(d)) and _merit(cost, d) < merit_old:
            return i, i + 1, trial
    return -1, len(ALPHAS), trial


def _rollout_and_evaluate_compiled(fn: Compiled, data, us):
    """`_rollout_and_evaluate` with the rollout in C: the forward pass at `alpha = 1` with no
    feedback and no defects, from `data.x0`."""
    T, nu, nx = fn.problem.horizon, fn.problem.nu, fn.problem.nx
    start = jax.tree_util.tree_map(lambda a: np.broadcast_to(np.asarray(a), (T + 1,) + a.shape),
                                   data.x0)  # fmt: skip
    xs, us_t, reached, forces, taus = _forward_compiled(
        fn, data, start, np.asarray(us), np.zeros((T, nu)), np.zeros((T, nu, nx)),
        np.zeros((T + 1, nx)), 1.0,
    )  # fmt: skip
    return (xs,) + tuple(fn.evaluate_transitions(data, xs, us_t, reached, forces, taus))


def compiled_knot_costs(fn: Compiled, data, xs, us, dyn: KnotDynamics):
    """`(r, R_x, R_u, r_T, R_T)` of every knot (NumPy) by the generated C code: the weighted
    residuals and their Jacobians (`compiled_knots._costs_function`), chained through the
    forces' and torques' Jacobians of `dyn` as `_knot_costs` does, and the terminal knot's. The
    residuals' order within a term may differ from `_knot_costs`'; the backward pass reads only
    `R^T r` and `R^T R`, which do not depend on it."""
    from . import compiled_knots  # CasADi, on first use only

    problem = fn.problem
    functions = _knot_functions(fn, data)
    T, nx = problem.horizon, problem.nx
    flat = _flat_states(xs)
    refs = compiled_knots.reference_rows(problem, data.reference)
    terms = compiled_knots.running_terms(problem)
    sqrt_w = np.sqrt(np.array([float(data.weights[name]) for name in terms]))
    out = functions.costs_mapped(T)(
        flat[:T], us, np.reshape(dyn.forces, (T, -1)), dyn.taus, refs[:T],
        np.broadcast_to(sqrt_w, (T, len(terms))),
    )  # fmt: skip
    r_f, r_tau = out["r_f"], out["r_tau"]
    R_x = np.concatenate(
        [np.concatenate([out["r_q"], out["r_v"]], axis=2) + r_f @ dyn.forces_x
         + r_tau @ dyn.taus_x, out["r_up"]],
        axis=2,
    )  # fmt: skip
    R_u = out["r_u"] + r_f @ dyn.forces_u + r_tau @ dyn.taus_u
    if "terminal_state" in data.weights:
        w_T = np.sqrt(float(data.weights["terminal_state"]))
        terminal = functions.terminal_call()(flat[T:], refs[T:], np.array([[w_T]]))
        r_T, R_T = terminal["r"][0, :, 0], terminal["r_x"][0]
    else:
        r_T, R_T = np.zeros(0), np.zeros((0, nx))
    return out["r"][..., 0], R_x, R_u, r_T, R_T


def _linearize_all_compiled(fn: Compiled, data, xs, us) -> Linearization:
    """`Compiled.linearize_all` of a `derivatives="compiled"` problem, all in the generated
    code and NumPy: the knots' dynamics (`compiled_knot_dynamics`) and costs
    (`compiled_knot_costs`)."""
    dyn = compiled_knot_dynamics(fn, data, xs, us)
    r, R_x, R_u, r_T, R_T = compiled_knot_costs(fn, data, xs, us, dyn)
    return Linearization(dyn.A, dyn.B, r, R_x, R_u, r_T, R_T, dyn.contact_residual)


def _linearize_knots(problem, data, xs, us, knots, layout: str = "map"):
    """The running knots `knots (n,)` (integer indices) linearised one after the other
    (`layout="map"`, `lax.map`) or batched ("vmap"): `(A, B, r, Rx, Ru, contact_residual)`,
    each stacked `(n, ...)`."""

    def knot(t):
        return _linearize_knot_with_residual(problem, data, _index(xs, t), us[t], t)

    return jax.lax.map(knot, knots) if layout == "map" else jax.vmap(knot)(knots)


@functools.cache
def _linearize_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The helper thread of `linearize_in_two_threads` (one per process, made on first use)."""
    return concurrent.futures.ThreadPoolExecutor(
        max_workers=1, thread_name_prefix="diffloco-linearize"
    )


def check_linearize_threads(threads) -> int:
    """`threads` as an int if it is 1 or 2 (the `linearize_threads` of `solve_fddp`, `solve` and
    `MPC`), else a ValueError naming the argument."""
    if threads not in (1, 2):
        raise ValueError(f"linearize_threads must be 1 or 2, got {threads!r}")
    return int(threads)


def linearize_in_two_threads(fn: Compiled, data, xs, us) -> Linearization:
    """`fn.linearize_all` with the running knots split in two halves, linearised at the same
    time: the second half by a helper thread, the first half and the terminal knot by the
    caller. The same program per knot, so the same values as `linearize_all`.

    Why: a knot's linearisation is a long chain of small operations, which one call runs
    mostly on one core (BENCHMARKS.md, "Where one step's Jacobian goes"); a second call from a
    second thread uses another (measured on 2 cores: 0.73x the time for the two halves, 0.77x
    per FDDP iteration, "Two linearisation threads"). The first call of a structure linearises
    both halves in the caller, so the program compiles once."""
    T = fn.problem.horizon
    if T < 2:  # nothing to split
        return fn.linearize_all(data, xs, us)
    half = (T + 1) // 2
    first = np.arange(half)
    second = np.minimum(np.arange(half, 2 * half), T - 1)  # T odd: the last knot twice
    if not fn.linearize_knots_ready:
        parts = [fn.linearize_knots(data, xs, us, first)]
        parts.append(fn.linearize_knots(data, xs, us, second))
        fn.linearize_knots_ready = True
    else:
        future = _linearize_pool().submit(
            lambda: jax.block_until_ready(fn.linearize_knots(data, xs, us, second))
        )
        parts = [jax.block_until_ready(fn.linearize_knots(data, xs, us, first))]
        parts.append(future.result())
    rT, RT = fn.linearize_terminal(data, _index(xs, T))
    A, B, r, Rx, Ru, contact_residual = (
        jnp.concatenate([a, b[: T - half]]) for a, b in zip(*parts)
    )
    return Linearization(A, B, r, Rx, Ru, rT, RT, contact_residual)


def _backward(lin, defects, mu):
    """Riccati recursion (float64 `lax.scan` from the last knot). `lin` is `_linearize_all`'s
    output (or its first seven arrays), `defects (T+1, nx)`, `mu` the regularisation of `Q_uu`.

    Returns `(k (T, nu), K (T, nu, nx), dV1, dV2, ok)`: `dV1 = sum k^T Q_u`,
    `dV2 = sum k^T Q_uu k` (the expected-change model); `ok` is False when a `Q_uu` is not
    positive definite (its Cholesky factor is not finite): the caller raises `mu`."""
    A, B, r, Rx, Ru, rT, RT = lin[:7]
    nu = B.shape[2]
    eye = jnp.eye(nu, dtype=B.dtype)

    def step(carry, knot):
        Vx, Vxx, dV1, dV2, ok = carry
        A_t, B_t, r_t, Rx_t, Ru_t, f_next = knot
        vx = Vx + Vxx @ f_next
        Qx = Rx_t.T @ r_t + A_t.T @ vx
        Qu = Ru_t.T @ r_t + B_t.T @ vx
        VA = Vxx @ A_t
        Qxx = Rx_t.T @ Rx_t + A_t.T @ VA
        Quu = Ru_t.T @ Ru_t + B_t.T @ Vxx @ B_t + mu * eye
        Qux = Ru_t.T @ Rx_t + B_t.T @ VA
        chol = jnp.linalg.cholesky(Quu)
        gains = -jax.scipy.linalg.cho_solve((chol, True), jnp.concatenate([Qu[:, None], Qux], 1))
        k, K = gains[:, 0], gains[:, 1:]
        Vx = Qx + K.T @ Quu @ k + K.T @ Qu + Qux.T @ k
        Vxx = Qxx + K.T @ Quu @ K + K.T @ Qux + Qux.T @ K
        Vxx = 0.5 * (Vxx + Vxx.T)
        ok = ok & jnp.all(jnp.isfinite(chol))
        return (Vx, Vxx, dV1 + k @ Qu, dV2 + k @ Quu @ k, ok), (k, K)

    zero = jnp.zeros((), dtype=B.dtype)
    init = (RT.T @ rT, RT.T @ RT, zero, zero, jnp.array(True))
    (_, _, dV1, dV2, ok), (k, K) = jax.lax.scan(
        step, init, (A, B, r, Rx, Ru, defects[1:]), reverse=True
    )
    return k, K, dV1, dV2, ok


def _merit_of(cost, defects):
    """`cost + nu sum_t |f_t|_1` (the line search's merit)."""
    return cost + MERIT_DEFECT_WEIGHT * jnp.sum(jnp.abs(defects))


def _line_search(problem, data, xs, us, k, K, defects, merit_old):
    """Try the step lengths `ALPHAS` in order inside one call (`lax.while_loop`) and stop at
    the first whose trial is finite and decreases the merit below `merit_old`.

    Returns `(index, trials, trial)`: the accepted step's index in `ALPHAS` (-1 if none),
    how many trials ran, and the last trial's `(xs, us, cost, terms, defects, forces, taus)`.
    A loop rather than a `vmap` over the step lengths: the first step is usually accepted
    (BENCHMARKS.md counts 1-5 trials per iteration on the trots), and a batch would always
    pay for all seven."""
    alphas = jnp.asarray(ALPHAS, dtype=defects.dtype)

    def trial(i):
        xs_t, us_t, reached, forces_t, taus_t = _forward_with_transitions(
            problem, data, xs, us, k, K, defects, alphas[i]
        )
        cost, terms, d, forces, taus = _evaluate_transitions(
            problem, data, xs_t, us_t, reached, forces_t, taus_t
        )
        finite = jnp.isfinite(cost) & jnp.all(jnp.isfinite(d))
        return finite & (_merit_of(cost, d) < merit_old), (xs_t, us_t, cost, terms, d, forces, taus)

    def cond(carry):
        i, accepted, _ = carry
        return (~accepted) & (i < len(ALPHAS))

    def body(carry):
        i, _, _ = carry
        accepted, out = trial(i)
        return i + 1, accepted, out

    shapes = jax.eval_shape(lambda: trial(0)[1])
    empty = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    trials, accepted, out = jax.lax.while_loop(cond, body, (0, jnp.array(False), empty))
    return jnp.where(accepted, trials - 1, -1), trials, out


# ----------------------------------------------------------------------------- the solver
def _to_numpy_tree(tree):
    return jax.tree_util.tree_map(np.asarray, tree)


def linearize_all(fn: Compiled, data, xs, us) -> Linearization:
    """Every knot's linearisation on the host (NumPy): `fn.linearize_all`, one jitted call
    (see `Linearization` for the arrays)."""
    return Linearization(*(np.asarray(a) for a in fn.linearize_all(data, xs, us)))


def _merit(cost, defects):
    return float(cost) + MERIT_DEFECT_WEIGHT * float(np.sum(np.abs(defects)))


def solve_fddp(
    problem: P.Problem,
    xs=None,
    us=None,
    *,
    max_iterations: int = 50,
    time_budget: float | None = None,
    tolerance: float = 1e-4,
    defect_tolerance: float = 1e-6,
    mu0: float = 1e-6,
    verbose: bool = True,
    callback=None,
    linearize_threads: int = 1,
):
    """Run FDDP from `(xs, us)` (KnotState stacked `T+1`, `(T, nu)`); `xs=None`: roll out `us`
    (single shooting). Returns `(xs, us, info)` with `info` = status, iterations, cost,
    term_costs, history, forces, taus, defects, wall_time, feedback, and the contact solves'
    report at the linearisation points (`_contact_report`: `contact_residual`,
    `unconverged_linearizations`; every history record has its point's `contact_residual`).
    `linearize_threads`: 1, or 2 to linearise the two halves of the horizon at the same time
    (`linearize_in_two_threads`: the same iterates, on two cores)."""
    two_threads = check_linearize_threads(linearize_threads) == 2
    if two_threads and problem.derivatives == "compiled":
        raise ValueError(
            "linearize_threads=2 is for the JAX linearisation; derivatives='compiled' "
            "linearises in C and takes linearize_threads=1"
        )
    fn = compiled(problem)
    linearize = functools.partial(linearize_in_two_threads, fn) if two_threads else fn.linearize_all
    data = problem.data
    start = time.perf_counter()
    if xs is None:  # single shooting: the rollout's own transitions give the costs
        xs, cost, terms, defects, forces, taus = fn.rollout_and_evaluate(data, us)
    else:
        cost, terms, defects, forces, taus = fn.evaluate(data, xs, us)
    # one transfer each time, not one per value: an MPC cycle's overhead counts
    cost, defects, terms = jax.device_get((cost, defects, terms))
    cost = float(cost)
    history = []
    status = "max_iterations"
    mu = mu0
    iteration = 0
    feedback = None  # (T, nu, nx) the Riccati gains K of the last accepted step
    if not np.isfinite(cost) or not np.all(np.isfinite(defects)):
        # Never hand NaN back: keep the (finite) initial state at every knot, report inf.
        status = "diverged"
        max_iterations = 0
        xs = jax.tree_util.tree_map(
            lambda a: jnp.tile(a, (problem.horizon + 1,) + (1,) * a.ndim), data.x0
        )
        cost = float("inf")
        terms = {k_: float("inf") for k_ in terms}
        forces = np.zeros(np.shape(forces))
        taus = np.zeros(np.shape(taus))
        defects = np.zeros(np.shape(defects))
    if verbose:
        print(
            f"{'iter':>4} {'cost':>12} {'step':>8} {'defects':>10} {'mu':>8} {'dV':>10} "
            f"{'contact':>9}"
        )
        print(f"{0:>4} {cost:>12.5g} {'-':>8} {np.sum(np.abs(defects)):>10.3g} {mu:>8.1e}")
    contact_residuals = []  # the largest impulse-solve residual at each linearisation point
    for iteration in range(1, max_iterations + 1):
        lin = linearize(data, xs, us)
        contact_residual = float(np.max(np.asarray(lin.contact_residual)))
        contact_residuals.append(contact_residual)
        accepted = False
        first_expected = None  # the model's predicted change at the least regularisation
        out_of_time = False
        while not accepted and mu < 1e10:
            if time_budget is not None and time.perf_counter() - start > time_budget:
                out_of_time = True  # keep the current iterate; do not search further
                break
            k, K, dV1, dV2, ok = fn.backward(lin, defects, mu)
            ok, dV1 = jax.device_get((ok, dV1))
            if not bool(ok):
                mu *= 10.0
                continue
            dV1 = float(dV1)
            if first_expected is None:
                first_expected = abs(dV1)
            index, _, trial = fn.line_search(data, xs, us, k, K, defects, _merit(cost, defects))
            index = int(index)
            if index >= 0:
                accepted = True
                alpha = ALPHAS[index]
            else:
                mu *= 10.0
        if out_of_time and not accepted:
            status = "time_budget"
            break
        if not accepted:
            # No step decreases the merit. At a (possibly non-smooth) minimum of a feasible
            # trajectory the Gauss-Newton model also predicts no decrease: that is convergence.
            stationary = first_expected is not None and first_expected < tolerance * (
                1.0 + abs(cost)
            )
            feasible = float(np.sum(np.abs(defects))) < defect_tolerance
            status = "converged" if stationary and feasible else "line_search_failed"
            break
        xs, us, cost, terms, defects, forces, taus = trial
        feedback = K
        cost, defects, terms = jax.device_get((cost, defects, terms))
        cost = float(cost)
        mu = max(mu / 10.0, 1e-9)
        gaps = float(np.sum(np.abs(defects)))
        record = {
            "iteration": iteration,
            "time": time.perf_counter() - start,
            "cost": cost,
            "step": alpha,
            "defects": gaps,
            "mu": mu,
            "expected": float(-dV1),
            "contact_residual": contact_residual,  # at the point this iteration linearised
            "terms": {k_: float(v) for k_, v in terms.items()},
        }
        history.append(record)
        if verbose:
            print(
                f"{iteration:>4} {cost:>12.5g} {alpha:>8.3g} {gaps:>10.3g} {mu:>8.1e} "
                f"{-dV1:>10.3g} {contact_residual:>9.2g}"
            )
        if callback is not None:
            callback(record)
        # Converged: a full Gauss-Newton step was taken, barely regularised, predicting a
        # negligible change, on a feasible trajectory.
        if (
            alpha == 1.0
            and mu <= 1e-4
            and gaps < defect_tolerance
            and abs(dV1) < tolerance * (1.0 + abs(cost))
        ):
            status = "converged"
            break
        if time_budget is not None and time.perf_counter() - start > time_budget:
            status = "time_budget"
            break
    info = {
        "status": status,
        "iterations": iteration if status != "diverged" else 0,
        "cost": cost,
        "term_costs": {k_: float(v) for k_, v in terms.items()},
        "history": history,
        "forces": np.asarray(forces),
        "taus": np.asarray(taus),
        "defects": float(np.sum(np.abs(defects))),
        "wall_time": time.perf_counter() - start,
        "feedback": None if feedback is None else np.asarray(feedback),
        **_contact_report(contact_residuals, problem.num_sweeps, verbose),
    }
    return xs, us, info


def _contact_report(residuals: list, num_sweeps: int, verbose: bool) -> dict:
    """The solver's report on its linearisation points' contact solves: `contact_residual`, the
    largest impulse-solve residual over them [m/s] (None without an iteration), and
    `unconverged_linearizations`, how many exceeded `CONTACT_RESIDUAL_TOLERANCE` (there the
    optimised dynamics are the `num_sweeps`-sweep approximation of Coulomb contact; the
    derivatives stay finite). Prints one line when any did and `verbose`."""
    unconverged = sum(r > CONTACT_RESIDUAL_TOLERANCE for r in residuals)
    worst = max(residuals) if residuals else None
    if verbose and unconverged:
        print(
            f"note: at {unconverged} of {len(residuals)} linearisation points the contact solve "
            f"had not converged in {num_sweeps} sweeps (largest residual {worst:.2g} m/s > "
            f"{CONTACT_RESIDUAL_TOLERANCE:g}): there the optimised dynamics approximate Coulomb "
            "contact (more sweeps: the problem's num_sweeps)"
        )
    return {"contact_residual": worst, "unconverged_linearizations": unconverged}


def to_trajectory(problem: P.Problem, xs, us, info, solver: str) -> Trajectory:
    xs = _to_numpy_tree(xs)
    return Trajectory(
        q=xs.q,
        v=xs.v,
        u=np.asarray(us),
        dt=problem.dt_knot,
        tau=info["taus"],
        force=info["forces"],
        u_prev0=np.asarray(problem.data.x0.u_prev),
        feedback=info.get("feedback"),
        cost=info["cost"],
        term_costs=info["term_costs"],
        status=info["status"],
        iterations=info["iterations"],
        history=info["history"],
        meta={
            "robot": problem.model.name,
            "problem": problem.name,
            "solver": solver,
            "horizon": problem.horizon,
            "substeps": problem.substeps,
            "contact": problem.contact,
            "control": problem.control,
            "num_sweeps": problem.num_sweeps,
            "derivatives": problem.derivatives,
            "wall_time_s": info["wall_time"],
            "defects": info["defects"],
            "contact_residual": info.get("contact_residual"),
            "unconverged_linearizations": info.get("unconverged_linearizations"),
            **problem_description(problem),
        },
    )


def problem_description(problem: P.Problem) -> dict:
    """JSON-able terrain and references of a problem, kept with a solved trajectory so viewers
    and plots can show the ground and the commanded motion: `terrain` (see
    `contact.terrain_to_dict`), `reference` {base_velocity (T+1, 3) `[v_x, v_y, yaw_rate]` in
    the base frame, base_height (T+1,), stance (T+1, nfeet)}, `foot_names`, `foot_radius`."""
    from contact import terrain_to_dict

    ref = problem.data.reference
    return {
        "terrain": terrain_to_dict(problem.data.params.terrain),
        "reference": {
            "base_velocity": np.asarray(ref.base_velocity).tolist(),
            "base_height": np.asarray(ref.base_height).tolist(),
            "stance": np.asarray(ref.stance).tolist(),
        },
        "foot_names": list(problem.model.foot_names),
        "foot_radius": float(np.asarray(problem.model.foot_radius).max()),
    }
