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
   otherwise raise the Levenberg-Marquardt regularisation `mu` and retry. The next iteration
   starts from `fddp_step.next_mu` (Crocoddyl's schedule): `mu / 10` after a step of at least
   0.5, `10 mu` after one of at most 0.01 (a model that over-predicts, as at a kink of the
   contact model), else the same `mu`.

Stopping (`info["status"]`, and `info["reason"]` says why in words, with the numbers):

    converged  <=>  a full step (alpha = 1) was taken at mu <= 1e-4 on a feasible trajectory
                    (sum_t |f_t|_1 < defect_tolerance) whose model predicted
                    |dV1| < tolerance (1 + |cost|);
                    or no step lowers the merit where the model, at the iteration's first
                    positive definite Riccati pass, predicts |dV1| < tolerance (1 + |cost|) on a
                    feasible trajectory (a possibly non-smooth minimum)

That first pass is at the `mu` the iteration started from. After short steps at kinks of the
contact model the schedule has raised it, and the step `k ~ -Q_u / mu` and its prediction
`dV1 ~ -|Q_u|^2 / mu` shrink with it, as in Crocoddyl, whose stop is this prediction: the
solve then stops where no step along the (nearly steepest-descent) direction lowers the merit,
down to a step of `0.01 max |k|`. The reason gives that `mu` and `max |k|`.

`dV1 = sum_t k_t^T Q_u,t` is the Gauss-Newton model's change for the full step. Otherwise
"line_search_failed" when no step length lowers the merit at any `mu` up to
`fddp_step.MU_MAX` = 1e10 (the model predicts a decrease the trials do not give: at a kink of
the contact model, or derivatives that are not those of the computed step), with the predicted
decrease, the smallest trial's merit change and the `mu` reached; "max_iterations" and
"time_budget" with the last prediction against the tolerance; "diverged" for a non-finite
start. With a `time_budget` the first iteration always runs, and a later one is not begun when
another as long as the last would end past the budget (`next_iteration_overruns`).

Derivatives of the computed step. "implicit" and "compiled" derivatives are those of Coulomb
contact's fixed point; where the sweeps stop short of it (the paper's fixed `num_sweeps`, or a
`contact_tolerance` the solve only just meets) they are not exactly the derivatives of the step
the rollout computes, and the model can predict a decrease no trial gives. So, before
"line_search_failed", such a solve without a `time_budget` retries the iteration from the same
point with `exact_derivatives(problem)` (fixed sweeps: the unrolled derivatives, in JAX; a
tolerance: the contact solved 100 times tighter) and keeps them to the end:
`info["exact_derivatives_from"]` is that iteration (None if never). A
real-time solve (with a `time_budget`) keeps its derivatives, as the switch's first use
compiles.

The solver never returns NaN: a non-finite trial is a rejected step, and a non-finite start
stops with status "diverged". Progress (iteration, cost, step, defects, mu) prints unless quiet.
`info["timing"]` splits the solve's wall time [s] into the knots' linearisation, the Riccati
passes, the line searches and the rest (the start's evaluation, host transfers, bookkeeping).

The knots are the problem's knot backend (`trajopt.engine.knot_backends.for_problem`: JAX, or C for
`derivatives="compiled"`), which linearises every knot, forms the Gauss-Newton model, runs the
Riccati pass (`trajopt.engine.riccati`, or `trajopt.engine.compiled_riccati`: it flags a `Q_uu`
that is not positive definite, so the loop raises `mu`) and the line search's forward passes
(`trajopt.engine.shooting`). One iteration, steps 1-4 at one point, is
`trajopt.engine.fddp_step.iterate` over those calls; for `derivatives="compiled"` it is one C call
(`CompiledKnots.iterate_in_c`, `trajopt.engine.compiled_iteration`) where that covers the problem.
This module holds the acceptance of a step, the stopping rule and the loop.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from .. import problem as P
from . import fddp_step, knot_backends
from .shooting import ALPHAS

# Largest impulse-solve residual [m/s] at which a linearisation point's contact solves count as
# converged with the paper's fixed sweeps (a problem without a `contact_tolerance`): the planners'
# tolerance. Above it the optimised dynamics are not yet Coulomb contact's fixed point there, and
# the implicit derivatives (of the exact solution) differ from the computed step's, the gap
# growing with the residual (BENCHMARKS.md, "Derivatives through contact").
CONTACT_RESIDUAL_TOLERANCE = P.CONTACT_TOLERANCE
EXACT_NOTE = "the derivatives of the computed step (unrolled)"  # `exact_derivatives`
# A converged contact solve's retry (`exact_derivatives`): its tolerance times TIGHTENING, not
# below TIGHTEST [m/s] (the residual's rounding floor on these problems is about 1e-15)
TIGHTENING, TIGHTEST = 1e-2, 1e-10
TIMING_PARTS = fddp_step.ITERATION_PARTS + ("other",)  # `info["timing"]`'s keys


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


def exact_derivatives(problem: P.Problem) -> P.Problem | None:
    """`problem` with derivatives that are the computed step's, the same data, or None where
    its derivatives already are those or no closer ones exist. Fixed sweeps: the unrolled
    derivatives (through the sweeps `contact.step` runs). A contact solve converged to a
    tolerance: the same solve to `TIGHTENING` times it (the implicit derivative is the
    computed step's to within the residual), down to `TIGHTEST`."""
    if problem.contact_tolerance is not None:
        tighter = problem.contact_tolerance * TIGHTENING
        return None if tighter < TIGHTEST else problem.replace(contact_tolerance=tighter)
    if problem.derivatives == "unrolled":
        return None
    return problem.replace(derivatives="unrolled")


def exact_note(problem: P.Problem) -> str:
    """What `exact_derivatives(problem)` changes, in words (the solve's reason and output)."""
    if problem.contact_tolerance is not None:
        return f"the contact solved to {exact_derivatives(problem).contact_tolerance:g} m/s"
    return EXACT_NOTE


def next_iteration_overruns(elapsed: float, last_iteration: float, budget: float) -> bool:
    """Whether another iteration, as long as the last one, would end past `budget` [s] after
    `elapsed` [s]: then the solve stops ("time_budget") rather than start one it cannot
    finish (a real-time cycle's second iteration where the first left too little time)."""
    return elapsed + last_iteration > budget


def decrease_bound(cost: float, tolerance: float) -> float:
    """`tolerance (1 + |cost|)`: the largest expected decrease `|dV1|` of a converged solve."""
    return tolerance * (1.0 + abs(cost))


def converged_reason(expected: float, gaps: float, bound: float, how: str) -> str:
    """Why a solve converged: the model's expected decrease against `bound`, and `how`."""
    return (
        f"{how}; the model's expected decrease |dV1| = {expected:.3g} < {bound:.3g} on a "
        f"feasible trajectory (defects {gaps:.2g})"
    )


def line_search_reason(first, trials, mu: float, gaps: float, defect_tolerance: float,
                       contact_residual: float) -> str:  # fmt: skip
    """Why no step was accepted: `first = (|dV1|, max |k|, mu, dV2)` of the iteration's first
    Riccati pass (None if no `Q_uu` was positive definite), `trials` the `(mu, merit change)`
    of each rejected line search's last trial (its smallest step, `ALPHAS[-1]`), the `mu`
    reached, the point's defects and its largest contact residual [m/s]. The model's change
    for a step `alpha` is `alpha dV1 + alpha^2 dV2 / 2`."""
    if first is None:
        return f"no Q_uu was positive definite for mu up to {mu:.0e}"
    alpha = ALPHAS[-1]
    text = (
        f"no step length lowered the merit for mu from {first[2]:.0e} to {mu:.0e}: the model "
        f"predicted a decrease of {first[0]:.3g} for the full step (|dV1|, step max |k| "
        f"{first[1]:.3g})"
    )
    if trials:
        predicted = -alpha * first[0] + 0.5 * alpha**2 * first[3]
        least = min(trials, key=lambda m_c: m_c[1])
        text += (
            f"; its smallest step ({alpha:g}), predicted to change the merit by "
            f"{predicted:+.3g}, changed it by {trials[0][1]:+.3g}; the least change of any "
            f"trial was {least[1]:+.3g} (at mu {least[0]:.0e})"
        )
    if gaps >= defect_tolerance:
        return text + f"; the trajectory is not feasible (defects {gaps:.3g})"
    return (
        text + "; the cost no longer decreases where the model says it should (a kink of the "
        "contact model, or derivatives that are not the computed step's; the largest contact "
        f"residual here is {contact_residual:.2g} m/s)"
    )


def budget_reason(status: str, done: int, first, bound: float, gaps: float, limit) -> str:
    """Why a solve stopped at its iteration (`status` "max_iterations", `limit` = the budget) or
    time budget (`limit` [s]) after `done` iterations: the last Riccati pass's prediction
    `first = (|dV1|, max |k|, mu, dV2)` against the convergence `bound` on `|dV1|`."""
    what = f"{limit} iterations" if status == "max_iterations" else f"{limit:g} s"
    text = f"the budget of {what} ran out after {done} iterations"
    if first is None:
        return text + " (no Riccati pass)"
    return (
        text + f"; the last Riccati pass predicted a decrease |dV1| = {first[0]:.3g} (converged "
        f"below {bound:.3g}) with a step max |k| = {first[1]:.3g}, defects {gaps:.2g}"
    )


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
    (single shooting). Returns `(xs, us, info)` with `info` = status, reason, iterations, cost,
    term_costs, history, forces, taus, defects, wall_time, timing, feedback, and the contact
    solves' report at the linearisation points (`contact_report`: `contact_residual`,
    `unconverged_linearizations`; every history record has its point's `contact_residual`).

    Stops "converged" by the rule of the module docstring; `info["reason"]` says why the solve
    stopped, with the numbers; `info["timing"]` the seconds spent in `TIMING_PARTS` over the
    whole solve (they sum to `wall_time`), `info["linearize_parts"]` those of the linearisation
    spent in the generated code and the substeps' elimination by one-call iterations
    (`fddp_step.LINEARIZE_PARTS`; empty when none ran).
    `linearize_threads`: 1, or 2 to linearise the two halves of the horizon at the same time
    (`JaxKnots.linearize_in_two_threads`: the same iterates, on two cores)."""
    two_threads = check_linearize_threads(linearize_threads, problem.derivatives) == 2
    fn = knot_backends.for_problem(problem)
    linearize = fn.linearize_in_two_threads if two_threads else fn.linearize_all
    data = problem.data
    start = time.perf_counter()
    timing = dict.fromkeys(TIMING_PARTS, 0.0)
    linearize_parts: dict = {}  # within timing["linearize"], from one-call iterations
    in_jax = dict(getattr(fn, "terms_in_jax", {}))  # own terms beside the generated C
    jax_terms_start = getattr(fn, "jax_terms_seconds", 0.0)
    if in_jax and verbose:
        print("own terms linearised in JAX beside the generated C: "
              + "; ".join(f"{name} ({why})" for name, why in in_jax.items()))  # fmt: skip
    if xs is None:  # single shooting: the rollout's own transitions give the costs
        xs, cost, terms, defects, forces, taus = fn.rollout_and_evaluate(data, us)
    else:
        cost, terms, defects, forces, taus = fn.evaluate(data, xs, us)
    # one transfer each time, not one per value: an MPC cycle's overhead counts
    cost, defects, terms = jax.device_get((cost, defects, terms))
    cost = float(cost)
    history = []
    status, reason = "max_iterations", None
    mu = mu0
    iteration = 0
    feedback = None  # (T, nu, nx) the Riccati gains K of the last accepted step
    prediction = None  # (|dV1|, max |k|, mu, dV2) of the last iteration's first Riccati pass
    bound = 0.0
    if not np.isfinite(cost) or not np.all(np.isfinite(defects)):
        # Never hand NaN back: keep the (finite) initial state at every knot, report inf.
        status = "diverged"
        reason = "the initial trajectory's cost or defects are not finite"
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
    knot_residuals = None  # each knot's, at the last linearisation point
    exact = exact_derivatives(problem) if time_budget is None else None
    exact_from = None  # the iteration from which the derivatives are the computed step's
    deadline = float("inf") if time_budget is None else start + time_budget
    while iteration < max_iterations:
        iteration += 1
        began = time.perf_counter()
        gaps = float(np.sum(np.abs(defects)))
        bound = decrease_bound(cost, tolerance)
        step = None
        in_c = getattr(fn, "iterate_in_c", None)
        if in_c is not None and not two_threads:
            step = in_c(data, xs, us, cost, defects, mu, deadline)
        if step is None:
            step = fddp_step.iterate(fn, linearize, data, xs, us, cost, defects, mu, deadline)
        for part, seconds in step.seconds.items():
            timing[part] += seconds
        for part, seconds in (step.linearize_parts or {}).items():
            linearize_parts[part] = linearize_parts.get(part, 0.0) + seconds
        contact_residual = step.contact_residual
        contact_residuals.append(contact_residual)
        knot_residuals = step.knot_residuals
        mu, first = step.mu, step.first
        if first is not None:
            prediction = first
        if step.status == "out_of_time":
            status = "time_budget"
            break
        if step.status == "no_step":
            # No step decreases the merit. At a (possibly non-smooth) minimum of a feasible
            # trajectory the Gauss-Newton model also predicts no decrease: that is convergence.
            if first is not None and first[0] < bound and gaps < defect_tolerance:
                status = "converged"
                reason = converged_reason(
                    first[0], gaps, bound,
                    f"no step lowers the merit for mu from {first[2]:.0e} to {mu:.0e} (the "
                    f"first pass's step max |k| = {first[1]:.3g})",
                )  # fmt: skip
            elif exact is not None and exact_from is None:
                # the model is not the computed step's: retry from here with one that is
                exact_from, fn = iteration, knot_backends.for_problem(exact)
                linearize = fn.linearize_in_two_threads if two_threads else fn.linearize_all
                if verbose:
                    print(f"{iteration:>4} no step: retrying with {exact_note(problem)}")
                contact_residuals.pop()
                iteration -= 1
                mu = mu0
                continue
            else:
                status = "line_search_failed"
                reason = line_search_reason(first, step.trials, mu, gaps, defect_tolerance,
                                            contact_residual)  # fmt: skip
            break
        alpha, K, dV1, k_max = step.alpha, step.K, step.dV1, step.k_max
        xs, us, cost, terms, defects, forces, taus = step.trial
        feedback = K
        mu = float(fddp_step.next_mu(mu, alpha))
        gaps = float(np.sum(np.abs(defects)))
        record = {
            "iteration": iteration,
            "time": time.perf_counter() - start,
            "cost": cost,
            "step": alpha,
            "defects": gaps,
            "mu": mu,
            "expected": float(-dV1),
            "step_size": k_max,  # max |k| of the accepted step's Riccati pass
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
        if alpha == 1.0 and mu <= 1e-4 and gaps < defect_tolerance and abs(dV1) < decrease_bound(
            cost, tolerance
        ):
            status = "converged"
            reason = converged_reason(abs(dV1), gaps, decrease_bound(cost, tolerance),
                                      "a full step at mu <= 1e-4")  # fmt: skip
            break
        now = time.perf_counter()
        if (time_budget is not None and iteration < max_iterations
                and next_iteration_overruns(now - start, now - began, time_budget)):  # fmt: skip
            status = "time_budget"
            break
    gaps = float(np.sum(np.abs(defects)))
    if status in ("max_iterations", "time_budget"):
        limit = max_iterations if status == "max_iterations" else time_budget
        reason = budget_reason(status, iteration, prediction, bound, gaps, limit)
    if exact_from is not None:
        reason += (f"; with {exact_note(problem)} from iteration {exact_from}, where the "
                   f"{problem.derivatives} ones predicted a decrease no step gave")  # fmt: skip
    wall_time = time.perf_counter() - start
    timing["other"] = max(wall_time - sum(timing.values()), 0.0)
    if verbose:
        print(f"{status}: {reason}")
    info = {
        "status": status,
        "reason": reason,
        "iterations": iteration if status != "diverged" else 0,
        "cost": cost,
        "term_costs": {k_: float(v) for k_, v in terms.items()},
        "history": history,
        "forces": np.asarray(forces),
        "taus": np.asarray(taus),
        "defects": gaps,
        "wall_time": wall_time,
        "timing": timing,
        "linearize_parts": linearize_parts,
        # {name: why} of the own terms linearised in JAX, and their seconds (within "linearize")
        "terms_in_jax": in_jax,
        "terms_in_jax_seconds": getattr(fn, "jax_terms_seconds", 0.0) - jax_terms_start,
        "feedback": None if feedback is None else np.asarray(feedback),
        "exact_derivatives_from": exact_from,
        **contact_report(contact_residuals, knot_residuals, problem, verbose),
    }
    return xs, us, info


def contact_tolerance(problem: P.Problem) -> float:
    """The residual [m/s] below which a contact solve of `problem` counts as converged: its
    `contact_tolerance`, or `CONTACT_RESIDUAL_TOLERANCE` for the paper's fixed sweeps."""
    if problem.contact_tolerance is None:
        return CONTACT_RESIDUAL_TOLERANCE
    return problem.contact_tolerance


def contact_report(
    residuals: list, knot_residuals, problem: P.Problem, verbose: bool
) -> dict:
    """The solver's report on its contact solves: `contact_residual`, the largest
    impulse-solve residual over the linearisation points [m/s] (None without an iteration);
    `unconverged_linearizations`, how many points exceeded `contact_tolerance(problem)`;
    `knot_contact_residuals`, each knot's largest residual at the last linearisation point
    (a list, None without an iteration); and `unconverged_knots`, the knots above the
    tolerance there. Where a solve has not converged the optimised dynamics approximate
    Coulomb contact (the derivatives stay finite). Prints one line when any did and
    `verbose`."""
    bound = contact_tolerance(problem)
    unconverged = sum(r > bound for r in residuals)
    worst = max(residuals) if residuals else None
    per_knot = (None if knot_residuals is None
                else np.asarray(knot_residuals, float).reshape(-1).tolist())  # fmt: skip
    knots = [] if per_knot is None else [t for t, r in enumerate(per_knot) if r > bound]
    if verbose and unconverged:
        how = (f"in {problem.num_sweeps} sweeps" if problem.contact_tolerance is None
               else f"to {bound:g} m/s within {problem.num_sweeps} sweeps")  # fmt: skip
        print(
            f"note: at {unconverged} of {len(residuals)} linearisation points the contact solve "
            f"had not converged {how} (largest residual {worst:.2g} m/s > {bound:g}); "
            f"at the last one, knots {knots or 'none'}: there the optimised dynamics "
            "approximate Coulomb contact"
        )
    return {"contact_residual": worst, "unconverged_linearizations": unconverged,
            "knot_contact_residuals": per_knot, "unconverged_knots": knots}  # fmt: skip
