"""What a trajectory solver returns: `SolveResult`, and its `ContactReport`.

Every solver (FDDP, batched FDDP, L-BFGS, IPOPT) returns one; `trajopt.Trajectory.from_solution`
turns it into the user's trajectory. Shapes: `xs` a `problem.KnotState` stacked `(T+1, ...)`,
`us (T, nu)`, `forces (T, substeps, nfeet, 3)` contact impulses over a substep [N] in the
contact frames' world axes, `taus (T, substeps, nu)` joint torques [N m], `feedback (T, nu, nx)`
the last accepted step's Riccati gains `K` (tangent space), where the solver has them.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class ContactReport:
    """A solve's contact solves at its linearisation points.

    residual: the largest impulse-solve residual over the points [m/s] (None: no iteration);
    unconverged_linearizations: how many points exceeded the tolerance;
    knot_residuals: each knot's largest residual at the last point (None: no iteration);
    unconverged_knots: the knots above the tolerance there."""

    residual: float | None = None
    unconverged_linearizations: int = 0
    knot_residuals: list | None = None
    unconverged_knots: list = field(default_factory=list)

    @staticmethod
    def of(residuals: list, knot_residuals, tolerance: float) -> ContactReport:
        """The report of the largest residual at each linearisation point, `residuals`, and
        each knot's at the last point, `knot_residuals (T,)`, against `tolerance` [m/s]."""
        per_knot = (None if knot_residuals is None
                    else np.asarray(knot_residuals, float).reshape(-1).tolist())  # fmt: skip
        return ContactReport(
            residual=max(residuals) if residuals else None,
            unconverged_linearizations=sum(r > tolerance for r in residuals),
            knot_residuals=per_knot,
            unconverged_knots=[] if per_knot is None else [
                t for t, r in enumerate(per_knot) if r > tolerance],
        )  # fmt: skip


@dataclass(frozen=True)
class SolveResult:
    """A solve's final iterate and how it got there.

    status: why it stopped ("converged", "max_iterations", "time_budget",
        "line_search_failed", "diverged", or the solver's own), and `reason`, in words, with
        the numbers;
    iterations, cost (the final total), term_costs ({term: cost}), history (one record per
        accepted iteration: iteration, time [s], cost, ...), defects (sum_t |f_t|_1 of the
        final iterate), wall_time [s];
    timing: the wall time split into the iteration's parts and "other" [s] (FDDP),
        linearize_parts: the linearisation's seconds in generated code and elimination
        (one-call iterations), terms_in_jax ({name: why}) and terms_in_jax_seconds: a user's
        terms evaluated in JAX beside the generated C;
    exact_derivatives_from: the iteration from which the derivatives were the computed step's
        (None: never switched);
    contact: the contact solves' report (None: the solver does not linearise the contact);
    devices: how many devices the solve was split over (a batched solve's; else 1)."""

    xs: object
    us: np.ndarray
    status: str
    iterations: int
    cost: float
    term_costs: dict
    history: list
    forces: np.ndarray
    taus: np.ndarray
    defects: float
    wall_time: float
    reason: str = ""
    feedback: np.ndarray | None = None
    timing: dict = field(default_factory=dict)
    linearize_parts: dict = field(default_factory=dict)
    terms_in_jax: dict = field(default_factory=dict)
    terms_in_jax_seconds: float = 0.0
    exact_derivatives_from: int | None = None
    contact: ContactReport | None = None
    devices: int = 1

    @staticmethod
    def at(xs, us, status: str, iterations: int, evaluation, history: list,
           start: float) -> SolveResult:  # fmt: skip
        """The result at the final iterate `(xs, us)` from its evaluation `(cost, {term:
        cost}, defects (T+1, nx), forces, taus)` (a knot model's `evaluate`), the status,
        iteration count, history and the solve's start time (`time.perf_counter()`)."""
        cost, terms, defects, forces, taus = evaluation
        return SolveResult(
            xs=xs, us=us, status=status, iterations=iterations, cost=float(cost),
            term_costs={k: float(v) for k, v in terms.items()}, history=history,
            forces=np.asarray(forces), taus=np.asarray(taus),
            defects=float(np.sum(np.abs(np.asarray(defects)))),
            wall_time=time.perf_counter() - start,
        )  # fmt: skip

    def replace(self, **changes) -> SolveResult:
        """A copy with `changes` (`dataclasses.replace`)."""
        return dataclasses.replace(self, **changes)
