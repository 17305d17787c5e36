"""Gauss-Newton feasibility-driven DDP (FDDP) for single and multiple shooting, in tangent space.

Knot dynamics `x+ = F(x, u)` (`problem.transition`), running cost `0.5 |r(x, u)|^2` (weighted
residuals) and terminal cost `0.5 |r_T(x)|^2`. Each iteration:

1. Linearise every knot (exact derivatives through `contact.step`), in the
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

The knots are the problem's knot backend (`trajopt.knot_backends.for_problem`: JAX, or C that
CasADi generates for `derivatives="compiled"`), which linearises every knot and runs the line
search's forward passes (`trajopt.shooting`); this module holds the Riccati pass (`backward`, a
float64 `lax.scan` that flags a `Q_uu` that is not positive definite, so the loop raises `mu`),
the acceptance of a step and the loop.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from . import knot_backends
from . import problem as P
from .program_cache import DiskCachedFunction
from .shooting import ALPHAS, merit

# Largest impulse-solve residual [m/s] at which a linearisation point's contact solves count as
# converged. FDDP differentiates what `num_sweeps` sweeps computed (the step's default, unrolled
# derivatives), so its model and derivatives agree either way; above the tolerance that model
# is not yet Coulomb contact's fixed point at this point, and the step's opt-in implicit
# derivatives (of the exact solution) would differ from the computed step's, the gap growing
# with the residual (BENCHMARKS.md, "Derivatives through contact").
CONTACT_RESIDUAL_TOLERANCE = 1e-4


def check_linearize_threads(threads, derivatives: P.ProblemDerivatives | None = None) -> int:
    """`threads` as an int if it is 1 or 2 (the `linearize_threads` of `solve_fddp`, `solve` and
    `MPC`), else a ValueError naming the argument. 2 is refused too for a problem with
    `derivatives="compiled"`, which linearises in C, not in the JAX program the threads split."""
    if threads not in (1, 2):
        raise ValueError(f"linearize_threads must be 1 or 2, got {threads!r}")
    if threads == 2 and derivatives == "compiled":
        raise ValueError(
            "linearize_threads=2 is for the JAX linearisation; derivatives='compiled' "
            "linearises in C and takes linearize_threads=1"
        )
    return int(threads)


def backward(lin, defects, mu):
    """Riccati recursion (float64 `lax.scan` from the last knot). `lin` is `linearize_horizon`'s
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


# The Riccati pass depends on the arrays' shapes only: one jitted function serves every
# structure (its traced programs saved on disk per shape, as the knot backends' are).
RICCATI = DiskCachedFunction("fddp.backward", jax.jit(backward), "riccati")


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
    report at the linearisation points (`contact_report`: `contact_residual`,
    `unconverged_linearizations`; every history record has its point's `contact_residual`).
    `linearize_threads`: 1, or 2 to linearise the two halves of the horizon at the same time
    (`JaxKnots.linearize_in_two_threads`: the same iterates, on two cores)."""
    two_threads = check_linearize_threads(linearize_threads, problem.derivatives) == 2
    fn = knot_backends.for_problem(problem)
    linearize = fn.linearize_in_two_threads if two_threads else fn.linearize_all
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
            k, K, dV1, dV2, ok = RICCATI(lin, defects, mu)
            ok, dV1 = jax.device_get((ok, dV1))
            if not bool(ok):
                mu *= 10.0
                continue
            dV1 = float(dV1)
            if first_expected is None:
                first_expected = abs(dV1)
            index, _, trial = fn.line_search(data, xs, us, k, K, defects, merit(cost, defects))
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
        **contact_report(contact_residuals, problem.num_sweeps, verbose),
    }
    return xs, us, info


def contact_report(residuals: list, num_sweeps: int, verbose: bool) -> dict:
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
