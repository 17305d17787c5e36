"""The knot model every shooting solver shares, in JAX: rollout, evaluation, linearisation.

A problem's trajectory is `xs` (`KnotState` stacked `T+1`) and `us (T, nu)`. Knot dynamics
`x+ = F(x, u)` (`problem.transition`), defects `f_{t+1} = F(x_t, u_t) (-) x_{t+1}` in the
tangent space (`problem.local`), running cost `0.5 |r(x, u)|^2` (weighted residuals) and
terminal cost `0.5 |r_T(x)|^2`.

- `rollout`, `transitions`, `evaluate`, `evaluate_transitions`, `rollout_and_evaluate`: the
  simulation of a trajectory and its costs and defects;
- `knot_dynamics`, `knot_costs`, `linearize_knot_with_residual`, `linearize_terminal`,
  `linearize_horizon` (`Linearization`): the Gauss-Newton model of every knot, exact
  derivatives through `contact.step` by forward-mode JAX, in tangent coordinates;
- `forward_with_transitions`, `line_search_trials`, `merit_of`: FDDP's forward pass at a step
  length `alpha` and the line search over `ALPHAS` on the merit `cost + nu sum_t |f_t|_1`;
- `structure_key`: what two problems must share to share compiled functions.

Everything here is a pure function of `(problem, data, ...)`; the knot backends
(`trajopt.engine.jax_knots`, `trajopt.engine.compiled_knots`) compile them per problem structure.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import problem as P
from .fingerprint import model_fingerprint

ALPHAS = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.01)
MERIT_DEFECT_WEIGHT = 100.0  # nu: cost units per unit of L1 defect (tangent coordinates)


def structure_key(problem: P.Problem):
    """What must be equal for two problems to share compiled functions: the robot (name and
    content hash), the static fields, the knot duration (a constant of the control-rate
    residual), the weighted terms, the problem's own terms and the shapes and dtypes of the
    traced data."""
    data = problem.data
    leaves_shapes = tuple(
        (np.shape(x), x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype)
        for x in jax.tree_util.tree_leaves(data)
    )  # the dtype read without a transfer of a device array (a dtype object: hashable)
    return (
        problem.model.name,
        model_fingerprint(problem.model),
        problem.horizon,
        problem.substeps,
        problem.dt_knot,
        problem.contact,
        problem.num_sweeps,
        problem.contact_tolerance,
        problem.derivatives,
        problem.control,
        tuple(sorted(data.weights)),
        problem.terms,  # the own terms' functions (each term is its own identity)
        jax.tree_util.tree_structure(data),
        leaves_shapes,
    )


def flat_states(xs) -> np.ndarray:
    """Knot states `(..., nq + nv + nu)` as `[q, v, u_prev]` rows on the host (the generated C
    functions' layout)."""
    return np.concatenate([np.asarray(xs.q), np.asarray(xs.v), np.asarray(xs.u_prev)], axis=-1)


def index_knots(tree, t):
    """Knot `t` (an index, a slice or an index array) of every leaf of a stacked pytree."""
    return jax.tree_util.tree_map(lambda a: a[t], tree)


def rollout(problem, data, us):
    """Single-shooting rollout from `data.x0`: `(xs (T+1), forces (T, k, 3), taus (T, nu))`."""

    def body(x, u):
        nxt, forces, taus = P.transition(problem, data, x, u)
        return nxt, (nxt, forces, taus)

    _, (xs, forces, taus) = jax.lax.scan(body, data.x0, us)
    xs = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), data.x0, xs)
    return xs, forces, taus


def transitions(problem, data, xs, us):
    """Every knot's transition from `xs[t]` under `us[t]`, batched: `(nexts (T), forces (T, k, 3),
    taus (T, nu))`."""
    return jax.vmap(lambda x, u: P.transition(problem, data, x, u))(
        index_knots(xs, slice(0, problem.horizon)), us
    )


def evaluate(problem, data, xs, us):
    """`(total cost, {term: cost}, defects (T, nx), forces, taus)`."""
    return evaluate_transitions(problem, data, xs, us, *transitions(problem, data, xs, us))


def evaluate_transitions(problem, data, xs, us, nexts, forces, taus):
    """`evaluate` of a (possibly infeasible) trajectory whose knots' transitions are known:
    `nexts` (T) the state each knot's dynamics reach from `xs[t]` under `us[t]`, `forces
    (T, k, 3)`, `taus (T, nu)` (a rollout or a forward pass computed them: evaluating its result
    does not simulate again). Defects `f_t = local(xs[t+1], nexts[t])`."""
    T = problem.horizon

    def knot(t):
        x, u = index_knots(xs, t), us[t]
        res = P.running_residuals(
            problem, data, x, u, forces[t], taus[t], P.reference_at(data.reference, t), t
        )
        defect = P.local(problem, index_knots(xs, t + 1), index_knots(nexts, t))
        return P.term_costs(res, data.weights), defect

    terms, defects = jax.vmap(knot)(jnp.arange(T))
    terms = {k: jnp.sum(c) for k, c in terms.items()}
    x_T = index_knots(xs, problem.horizon)
    terminal = P.terminal_residuals(
        problem, data, x_T, P.reference_at(data.reference, problem.horizon)
    )
    terms.update(P.term_costs(terminal, data.weights))
    total = sum(terms.values())
    initial_gap = P.local(problem, index_knots(xs, 0), data.x0)
    defects = jnp.concatenate([initial_gap[None], defects])  # (T+1, nx): f_0 .. f_T
    return total, terms, defects, forces, taus


def linearize_knot(problem, data, x, u, t):
    """`(A, B, r, R_x, R_u)` of knot t at `(x, u)` (see `linearize_knot_with_residual`)."""
    return linearize_knot_with_residual(problem, data, x, u, t)[:5]


class KnotDynamics(NamedTuple):
    """One knot's transition linearised (`knot_dynamics`): what the costs' chain rule needs
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


def knot_dynamics(problem, data, x, u) -> KnotDynamics:
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


def knot_costs(problem, data, x, u, t, dyn: KnotDynamics):
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
        res = P.running_residuals(problem, data, xp, u + du, forces, taus, ref_t, t)
        return P.weighted(res, data.weights)

    zv, zu = jnp.zeros(nv, dtype), jnp.zeros(nu, dtype)
    r = residuals(zv, zv, zu, zu, dyn.forces, dyn.taus)
    # dq alone through the foot kinematics; everything else at the nominal configuration
    r_q = jax.jacfwd(lambda dq: residuals(dq, zv, zu, zu, dyn.forces, dyn.taus))(zv)
    r_v, r_up, r_u, r_f, r_tau = jax.jacfwd(
        lambda *a: residuals(zv, *a), argnums=(0, 1, 2, 3, 4)
    )(zv, zu, zu, dyn.forces, dyn.taus)
    r_f = r_f.reshape(r.shape[0], -1)
    R_x = jnp.concatenate([
        jnp.concatenate([r_q, r_v], axis=1) + r_f @ dyn.forces_x + r_tau @ dyn.taus_x, r_up,
    ], axis=1)  # fmt: skip
    R_u = r_u + r_f @ dyn.forces_u + r_tau @ dyn.taus_u
    return r, R_x, R_u


def linearize_knot_with_residual(problem, data, x, u, t):
    """`(A, B, r, R_x, R_u, contact_residual)` of knot t at `(x, u)`; the last is the knot's
    largest impulse-solve residual [m/s] at the linearisation point
    (`problem.transition_with_residual`). The transition by `knot_dynamics`, the costs by
    `knot_costs` (the chain rule through the forces and torques)."""
    dyn = knot_dynamics(problem, data, x, u)
    r, R_x, R_u = knot_costs(problem, data, x, u, t, dyn)
    return dyn.A, dyn.B, r, R_x, R_u, dyn.contact_residual


def linearize_terminal(problem, data, x):
    """`(r_T (nr_T,), R_T (nr_T, nx))`: the weighted terminal residuals at `x` and their
    Jacobian over the tangent `dx` (`x (+) dx`)."""
    ref_t = P.reference_at(data.reference, problem.horizon)

    def g(dx):
        res = P.weighted(
            P.terminal_residuals(problem, data, P.retract(problem, x, dx), ref_t), data.weights
        )
        return res, res

    jx, r = jax.jacfwd(g, has_aux=True)(jnp.zeros(problem.nx, dtype=x.v.dtype))
    return r, jx


def rollout_and_evaluate(problem, data, us):
    """`rollout` then `evaluate` of its result from the rollout's own transitions (one
    simulation of the horizon, not two): `(xs, cost, terms, defects, forces, taus)`."""
    xs, forces, taus = rollout(problem, data, us)
    nexts = index_knots(xs, slice(1, problem.horizon + 1))
    return (xs,) + evaluate_transitions(problem, data, xs, us, nexts, forces, taus)


def forward(problem, data, xs, us, k, K, defects, alpha):
    """FDDP forward pass; returns the trial `(xs, us)` (defects shrink by `1 - alpha`)."""
    return forward_with_transitions(problem, data, xs, us, k, K, defects, alpha)[:2]


def forward_with_transitions(problem, data, xs, us, k, K, defects, alpha):
    """`forward`'s trial `(xs, us)` and its knots' transitions `(nexts, forces, taus)` (each
    knot's dynamics from the trial state, before the defect `(alpha - 1) f` is added), for
    `evaluate_transitions`."""
    x0 = data.x0  # the initial state is fixed: its gap closes fully at any alpha

    def body(x_hat, inputs):
        x_t, u_t, k_t, K_t, f_next = inputs
        u = u_t + alpha * k_t + K_t @ P.local(problem, x_t, x_hat)
        reached, forces, taus = P.transition(problem, data, x_hat, u)
        nxt = P.retract(problem, reached, (alpha - 1.0) * f_next)
        return nxt, (nxt, u, reached, forces, taus)

    xs_t = index_knots(xs, slice(0, problem.horizon))
    _, (x_next, u_new, reached, forces, taus) = jax.lax.scan(
        body, x0, (xs_t, us, k, K, defects[1:])
    )
    xs_new = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), x0, x_next)
    return xs_new, u_new, reached, forces, taus


LinearizeLayout = Literal["map", "vmap"]
LINEARIZE_LAYOUTS: tuple[LinearizeLayout, ...] = ("map", "vmap")


class Linearization(NamedTuple):
    """Every knot's linearisation (`linearize_horizon`); the first seven fields are what the
    backward pass reads."""

    A: jax.Array  # (T, nx, nx) dF/dx
    B: jax.Array  # (T, nx, nu) dF/du
    r: jax.Array  # (T, nr) weighted running residuals
    R_x: jax.Array  # (T, nr, nx)
    R_u: jax.Array  # (T, nr, nu)
    r_T: jax.Array  # (nr_T,) weighted terminal residuals
    R_T: jax.Array  # (nr_T, nx)
    contact_residual: jax.Array  # (T,) largest impulse-solve residual of each knot [m/s]


def linearize_horizon(problem, data, xs, us, layout: LinearizeLayout = "map") -> Linearization:
    """Every knot's linearisation in one call (`Linearization`).

    layout="map": `lax.map` over the knots (one knot's program, run T times inside XLA);
    layout="vmap": the knots batched. `map` is the solver's: vmap runs faster but compiles far
    longer per problem structure (`benchmarks/bench_linearize.py` measures both)."""
    if layout not in LINEARIZE_LAYOUTS:
        raise ValueError(f"layout must be one of {LINEARIZE_LAYOUTS}, got {layout!r}")
    T = problem.horizon
    per_knot = linearize_knots(problem, data, xs, us, jnp.arange(T), layout)
    A, B, r, Rx, Ru, contact_residual = per_knot
    rT, RT = linearize_terminal(problem, data, index_knots(xs, T))
    return Linearization(A, B, r, Rx, Ru, rT, RT, contact_residual)



def linearize_knots(problem, data, xs, us, knots, layout: LinearizeLayout = "map"):
    """The running knots `knots (n,)` (integer indices) linearised one after the other
    (`layout="map"`, `lax.map`) or batched ("vmap"): `(A, B, r, Rx, Ru, contact_residual)`,
    each stacked `(n, ...)`."""

    def knot(t):
        return linearize_knot_with_residual(problem, data, index_knots(xs, t), us[t], t)

    return jax.lax.map(knot, knots) if layout == "map" else jax.vmap(knot)(knots)



def merit_of(cost, defects):
    """`cost + nu sum_t |f_t|_1` (the line search's merit)."""
    return cost + MERIT_DEFECT_WEIGHT * jnp.sum(jnp.abs(defects))


def line_search_trials(problem, data, xs, us, k, K, defects, merit_old):
    """Try the step lengths `ALPHAS` in order inside one call (`lax.while_loop`) and stop at
    the first whose trial is finite and decreases the merit below `merit_old`.

    Returns `(index, trials, trial)`: the accepted step's index in `ALPHAS` (-1 if none),
    how many trials ran, and the last trial's `(xs, us, cost, terms, defects, forces, taus)`.
    A loop rather than a `vmap` over the step lengths: the first step is usually accepted
    (BENCHMARKS.md counts 1-5 trials per iteration on the trots), and a batch would always
    pay for all seven."""
    alphas = jnp.asarray(ALPHAS, dtype=defects.dtype)

    def trial(i):
        xs_t, us_t, reached, forces_t, taus_t = forward_with_transitions(
            problem, data, xs, us, k, K, defects, alphas[i]
        )
        cost, terms, d, forces, taus = evaluate_transitions(
            problem, data, xs_t, us_t, reached, forces_t, taus_t
        )
        finite = jnp.isfinite(cost) & jnp.all(jnp.isfinite(d))
        return finite & (merit_of(cost, d) < merit_old), (xs_t, us_t, cost, terms, d, forces, taus)

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


def merit(cost, defects) -> float:
    """`merit_of` on the host, as a Python float."""
    return float(cost) + MERIT_DEFECT_WEIGHT * float(np.sum(np.abs(defects)))


def defects_after_pass(defects: np.ndarray, alpha: float) -> np.ndarray:
    """The defects `(T + 1, nx)` a forward pass at step `alpha` leaves, on the host: `(1 - alpha)
    f_t`, and `f_0 = 0` (the pass starts at `x0`)."""
    left = (1.0 - alpha) * np.asarray(defects)
    left[0] = 0.0
    return left
