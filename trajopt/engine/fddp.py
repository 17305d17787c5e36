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

Stopping (the result's `status`, and its `reason` says why in words, with the numbers):

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
the result's `exact_derivatives_from` is that iteration (None if never). A
real-time solve (with a `time_budget`) keeps its derivatives, as the switch's first use
compiles.

The solver never returns NaN: a non-finite trial is a rejected step, and a non-finite start
stops with status "diverged". Progress (iteration, cost, step, defects, mu) prints unless quiet.
The result's `timing` splits the solve's wall time [s] into the knots' linearisation, the Riccati
passes, the line searches and the rest (the start's evaluation, host transfers, bookkeeping).

The knots are the problem's knot backend (`trajopt.engine.knot_backends.for_problem`: JAX, or C for
`derivatives="compiled"`), which linearises every knot, forms the Gauss-Newton model, runs the
Riccati pass (`trajopt.engine.riccati`, or `trajopt.engine.compiled_riccati`: it flags a `Q_uu`
that is not positive definite, so the loop raises `mu`) and the line search's forward passes
(`trajopt.engine.shooting`). One iteration, steps 1-4 at one point, is
`trajopt.engine.fddp_step.iterate` over those calls; for `derivatives="compiled"` it is one C
call (`CompiledKnots.iterate_in_one_call`, `trajopt.engine.compiled_iteration`) where that covers
the problem. This module holds the acceptance of a step, the stopping rule and the loop (`FDDP`,
returning a `SolveResult`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import jax
import numpy as np

from .. import problem as P
from . import fddp_step, knot_backends
from .knot_model import KnotModel
from .shooting import ALPHAS
from .solve_result import ContactReport, SolveResult

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
TIMING_PARTS = fddp_step.ITERATION_PARTS + ("other",)  # `SolveResult.timing`'s keys


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


@dataclass
class Point:
    """An iterate and its evaluation, on the host: states `xs` (stacked `KnotState`), controls
    `us (T, nu)`, `cost`, `terms` ({term: cost}), `defects (T+1, nx)`, `forces`, `taus`."""

    xs: object
    us: object
    cost: float
    terms: dict
    defects: np.ndarray
    forces: object
    taus: object

    @property
    def gaps(self) -> float:
        """`sum_t |f_t|_1`: how far the iterate is from a feasible trajectory."""
        return float(np.sum(np.abs(self.defects)))


def resting_states(x0, horizon: int):
    """The initial state `x0` (a `KnotState`) at every one of `horizon + 1` knots, on the host:
    what a solve whose start is not finite hands back instead of NaN."""
    x0 = jax.device_get(x0)
    return jax.tree_util.tree_map(lambda a: np.tile(a, (horizon + 1,) + (1,) * np.ndim(a)), x0)


def start_point(fn: KnotModel, data, xs, us, horizon: int) -> tuple[Point, bool]:
    """The evaluated start `(point, finite)`: `xs=None` rolls out `us` (single shooting, the
    rollout's own transitions give the costs). A start whose cost or defects are not finite
    comes back as the initial state at every knot, with infinite costs and zero defects,
    forces and torques (never NaN), and `finite` False."""
    if xs is None:
        xs, cost, terms, defects, forces, taus = fn.rollout_and_evaluate(data, us)
    else:
        cost, terms, defects, forces, taus = fn.evaluate(data, xs, us)
    # one transfer each time, not one per value: an MPC cycle's overhead counts
    cost, defects, terms = jax.device_get((cost, defects, terms))
    if np.isfinite(cost) and np.all(np.isfinite(defects)):
        return Point(xs, us, float(cost), terms, defects, forces, taus), True
    inf = float("inf")
    return Point(resting_states(data.x0, horizon), us, inf, dict.fromkeys(terms, inf),
                 np.zeros(np.shape(defects)), np.zeros(np.shape(forces)),
                 np.zeros(np.shape(taus))), False  # fmt: skip


def full_step_converged(alpha: float, mu: float, gaps: float, expected: float, bound: float,
                        defect_tolerance: float) -> bool:  # fmt: skip
    """Whether an accepted step ends the solve: a full Gauss-Newton step (`alpha = 1`), barely
    regularised (`mu <= 1e-4`), on a feasible trajectory, its model predicting a negligible
    change (`|dV1| = expected < bound`, `decrease_bound` of the step's cost)."""
    return alpha == 1.0 and mu <= 1e-4 and gaps < defect_tolerance and expected < bound


def no_step_outcome(first, gaps: float, bound: float, defect_tolerance: float,
                    can_retry: bool) -> str:  # fmt: skip
    """What an iteration in which no step lowered the merit means: "converged" at a (possibly
    non-smooth) minimum of a feasible trajectory, where the first Riccati pass's model also
    predicts no decrease (`first[0] = |dV1| < bound`); else "retry" with the computed step's
    derivatives where the solve may still switch to them; else "line_search_failed"."""
    if first is not None and first[0] < bound and gaps < defect_tolerance:
        return "converged"
    return "retry" if can_retry else "line_search_failed"


def print_contact_note(report: ContactReport, points: int, problem: P.Problem) -> None:
    """One line on the linearisation points whose contact solve did not converge."""
    bound = contact_tolerance(problem)
    how = (f"in {problem.num_sweeps} sweeps" if problem.contact_tolerance is None
           else f"to {bound:g} m/s within {problem.num_sweeps} sweeps")  # fmt: skip
    print(
        f"note: at {report.unconverged_linearizations} of {points} linearisation points the "
        f"contact solve had not converged {how} (largest residual {report.residual:.2g} m/s > "
        f"{bound:g}); at the last one, knots {report.unconverged_knots or 'none'}: there the "
        "optimised dynamics approximate Coulomb contact"
    )


def contact_tolerance(problem: P.Problem) -> float:
    """The residual [m/s] below which a contact solve of `problem` counts as converged: its
    `contact_tolerance`, or `CONTACT_RESIDUAL_TOLERANCE` for the paper's fixed sweeps."""
    if problem.contact_tolerance is None:
        return CONTACT_RESIDUAL_TOLERANCE
    return problem.contact_tolerance


@dataclass
class Progress:
    """A solve so far: the knot model `fn` (switched by a retry), the current `point`, the
    regularisation `mu`, the iterations begun, `status`/`reason` once stopped (None while
    running), the convergence `bound` of the last iteration, the accepted iterations'
    `history`, the seconds per part (`timing`, `linearize_parts`), each linearisation point's
    largest contact residual and the last point's per knot, the last accepted step's gains
    `feedback`, the last first Riccati pass's `prediction` `(|dV1|, max |k|, mu, dV2)`, and the
    iteration from which the derivatives are the computed step's (`exact_from`)."""

    fn: KnotModel
    point: Point
    mu: float
    start: float
    iteration: int = 0
    status: str | None = None
    reason: str | None = None
    bound: float = 0.0
    history: list = field(default_factory=list)
    timing: dict = field(default_factory=lambda: dict.fromkeys(TIMING_PARTS, 0.0))
    linearize_parts: dict = field(default_factory=dict)
    contact_residuals: list = field(default_factory=list)
    knot_residuals: np.ndarray | None = None
    feedback: np.ndarray | None = None
    prediction: tuple | None = None
    exact_from: int | None = None

    def count(self, step: fddp_step.Iteration) -> None:
        """Add an iteration's seconds and contact residuals."""
        for part, seconds in step.seconds.items():
            self.timing[part] += seconds
        for part, seconds in (step.linearize_parts or {}).items():
            self.linearize_parts[part] = self.linearize_parts.get(part, 0.0) + seconds
        self.contact_residuals.append(step.contact_residual)
        self.knot_residuals = step.knot_residuals
        self.mu = step.mu
        self.prediction = step.first if step.first is not None else self.prediction


class FDDP:
    """FDDP on `problem`'s knot model (module docstring): `FDDP(problem, ...).solve(xs, us)`.

    Settings: `max_iterations`, `time_budget` [s] (None: none), `tolerance` (the relative
    bound on the predicted decrease), `defect_tolerance` (sum of |defects| of a feasible
    trajectory), `mu0` (the first regularisation), `verbose` (progress lines), `callback`
    (called with each accepted iteration's history record), `linearize_threads` (1, or 2 to
    linearise the horizon's halves at the same time: `JaxKnots.linearize_in_two_threads`)."""

    def __init__(self, problem: P.Problem, *, max_iterations: int = 50,
                 time_budget: float | None = None, tolerance: float = 1e-4,
                 defect_tolerance: float = 1e-6, mu0: float = 1e-6, verbose: bool = True,
                 callback=None, linearize_threads: int = 1):  # fmt: skip
        self.threads = check_linearize_threads(linearize_threads, problem.derivatives)
        self.problem = problem
        self.max_iterations, self.time_budget = max_iterations, time_budget
        self.tolerance, self.defect_tolerance, self.mu0 = tolerance, defect_tolerance, mu0
        self.verbose, self.callback = verbose, callback
        # the retry's problem (`exact_derivatives`); a real-time solve keeps its derivatives
        self.exact = exact_derivatives(problem) if time_budget is None else None

    def solve(self, xs=None, us=None) -> SolveResult:
        """Run FDDP from `(xs, us)`; `xs=None`: roll out `us` (single shooting)."""
        fn = knot_backends.for_problem(self.problem)
        in_jax, jax_terms_start = dict(fn.terms_in_jax), fn.jax_terms_seconds
        if in_jax and self.verbose:
            print("own terms linearised in JAX beside the generated C: "
                  + "; ".join(f"{name} ({why})" for name, why in in_jax.items()))  # fmt: skip
        start = time.perf_counter()
        point, finite = start_point(fn, self.problem.data, xs, us, self.problem.horizon)
        run = Progress(fn, point, self.mu0, start)
        if not finite:
            run.status = "diverged"
            run.reason = "the initial trajectory's cost or defects are not finite"
        if self.verbose:
            print(f"{'iter':>4} {'cost':>12} {'step':>8} {'defects':>10} {'mu':>8} {'dV':>10} "
                  f"{'contact':>9}")  # fmt: skip
            print(f"{0:>4} {point.cost:>12.5g} {'-':>8} {point.gaps:>10.3g} {self.mu0:>8.1e}")
        deadline = float("inf") if self.time_budget is None else start + self.time_budget
        while run.status is None and run.iteration < self.max_iterations:
            self.iterate(run, deadline)
        return self.result(run, in_jax, run.fn.jax_terms_seconds - jax_terms_start)

    def iterate(self, run: Progress, deadline: float) -> None:
        """One iteration from `run.point`: accept a step, or stop, or retry with the computed
        step's derivatives."""
        run.iteration += 1
        began = time.perf_counter()
        point = run.point
        run.bound = decrease_bound(point.cost, self.tolerance)
        step = None
        if self.threads == 1:
            step = run.fn.iterate_in_one_call(self.problem.data, point.xs, point.us, point.cost,
                                              point.defects, run.mu, deadline)  # fmt: skip
        if step is None:
            step = fddp_step.iterate(run.fn, run.fn.linearizer(self.threads), self.problem.data,
                                     point.xs, point.us, point.cost, point.defects, run.mu,
                                     deadline)  # fmt: skip
        run.count(step)
        if step.status == "out_of_time":
            run.status = "time_budget"
        elif step.status == "no_step":
            self.no_step(run, step)
        else:
            self.accept(run, step, began)

    def no_step(self, run: Progress, step: fddp_step.Iteration) -> None:
        """No step lowered the merit: converged, retry with the computed step's derivatives
        (`no_step_outcome`), or stop "line_search_failed"."""
        gaps, first = run.point.gaps, step.first
        can_retry = self.exact is not None and run.exact_from is None
        outcome = no_step_outcome(first, gaps, run.bound, self.defect_tolerance, can_retry)
        if outcome == "retry":  # the model is not the computed step's: retry from here
            run.exact_from, run.fn = run.iteration, knot_backends.for_problem(self.exact)
            if self.verbose:
                print(f"{run.iteration:>4} no step: retrying with {exact_note(self.problem)}")
            run.contact_residuals.pop()
            run.iteration, run.mu = run.iteration - 1, self.mu0
            return
        run.status = outcome
        if outcome == "converged":
            how = (f"no step lowers the merit for mu from {first[2]:.0e} to {run.mu:.0e} (the "
                   f"first pass's step max |k| = {first[1]:.3g})")  # fmt: skip
            run.reason = converged_reason(first[0], gaps, run.bound, how)
        else:
            run.reason = line_search_reason(
                first, step.trials, run.mu, gaps, self.defect_tolerance, step.contact_residual
            )

    def accept(self, run: Progress, step: fddp_step.Iteration, began: float) -> None:
        """Take the accepted step: record it, and stop where it converged or where another
        iteration would overrun the time budget."""
        run.point = point = Point(*step.trial)
        run.feedback = step.K
        run.mu = float(fddp_step.next_mu(run.mu, step.alpha))
        record = {
            "iteration": run.iteration,
            "time": time.perf_counter() - run.start,
            "cost": point.cost,
            "step": step.alpha,
            "defects": point.gaps,
            "mu": run.mu,
            "expected": float(-step.dV1),
            "step_size": step.k_max,  # max |k| of the accepted step's Riccati pass
            "contact_residual": step.contact_residual,  # at the point it linearised
            "terms": {k_: float(v) for k_, v in point.terms.items()},
        }
        run.history.append(record)
        if self.verbose:
            print(f"{run.iteration:>4} {point.cost:>12.5g} {step.alpha:>8.3g} "
                  f"{point.gaps:>10.3g} {run.mu:>8.1e} {-step.dV1:>10.3g} "
                  f"{step.contact_residual:>9.2g}")  # fmt: skip
        if self.callback is not None:
            self.callback(record)
        bound = decrease_bound(point.cost, self.tolerance)
        if full_step_converged(step.alpha, run.mu, point.gaps, abs(step.dV1), bound,
                               self.defect_tolerance):  # fmt: skip
            run.status = "converged"
            run.reason = converged_reason(abs(step.dV1), point.gaps, bound,
                                          "a full step at mu <= 1e-4")  # fmt: skip
            return
        now = time.perf_counter()
        budget = self.time_budget
        if budget is not None and run.iteration < self.max_iterations and (
                next_iteration_overruns(now - run.start, now - began, budget)):  # fmt: skip
            run.status = "time_budget"

    def result(self, run: Progress, in_jax: dict, jax_terms_seconds: float) -> SolveResult:
        """The solve's `SolveResult`, its reason completed (a budget's; the retry's)."""
        problem, point = self.problem, run.point
        if run.status is None:
            run.status = "max_iterations"
        if run.status in ("max_iterations", "time_budget"):
            limit = self.max_iterations if run.status == "max_iterations" else self.time_budget
            run.reason = budget_reason(run.status, run.iteration, run.prediction, run.bound,
                                       point.gaps, limit)  # fmt: skip
        if run.exact_from is not None:
            run.reason += (f"; with {exact_note(problem)} from iteration {run.exact_from}, "
                           f"where the {problem.derivatives} ones predicted a decrease no step "
                           "gave")  # fmt: skip
        wall_time = time.perf_counter() - run.start
        run.timing["other"] = max(wall_time - sum(run.timing.values()), 0.0)
        contact = ContactReport.of(run.contact_residuals, run.knot_residuals,
                                   contact_tolerance(problem))  # fmt: skip
        if self.verbose:
            print(f"{run.status}: {run.reason}")
            if contact.unconverged_linearizations:
                print_contact_note(contact, len(run.contact_residuals), problem)
        return SolveResult(
            xs=point.xs, us=point.us, status=run.status, reason=run.reason,
            iterations=run.iteration if run.status != "diverged" else 0, cost=point.cost,
            term_costs={k_: float(v) for k_, v in point.terms.items()}, history=run.history,
            forces=np.asarray(point.forces), taus=np.asarray(point.taus), defects=point.gaps,
            wall_time=wall_time, timing=run.timing, linearize_parts=run.linearize_parts,
            terms_in_jax=in_jax, terms_in_jax_seconds=jax_terms_seconds,
            feedback=None if run.feedback is None else np.asarray(run.feedback),
            exact_derivatives_from=run.exact_from, contact=contact,
        )  # fmt: skip


def solve_fddp(problem: P.Problem, xs=None, us=None, **settings) -> SolveResult:
    """`FDDP(problem, **settings).solve(xs, us)`: FDDP from `(xs, us)` (KnotState stacked
    `T+1`, `(T, nu)`; `xs=None` rolls out `us`), stopping by the rule of the module docstring.
    The result's `reason` says why it stopped, with the numbers; `timing` the seconds spent in
    `TIMING_PARTS` (they sum to `wall_time`); `contact` the contact solves' report (every
    history record also has its point's `contact_residual`)."""
    return FDDP(problem, **settings).solve(xs, us)
