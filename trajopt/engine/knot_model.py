"""`KnotModel`: the contract of the knots of one problem structure, what every shooting solver
calls (Crocoddyl's `ActionModelAbstract`, over a whole horizon at once).

Knot `t` maps its state `x_t = (q, v, u_prev)` and control `u_t` to `x_{t+1} = F(x_t, u_t)` by
`problem.substeps` contact steps, with the running cost `0.5 |r(x_t, u_t)|^2` and the terminal
cost `0.5 |r_T(x_T)|^2`. Shapes: `xs` a `problem.KnotState` stacked `(T+1, ...)`, `us (T, nu)`,
`defects (T+1, nx)` (tangent, `f_{t+1} = F(x_t, u_t) (-) x_{t+1}`, `f_0 = 0`), `forces
(T, substeps, nfeet, 3)` and `taus (T, substeps, nu)` the knots' contact impulses over the
substep [N] and joint torques [N m]. Every call takes the problem's data (`ProblemData`) as an
argument, never a constant, so problems of one structure share one model.

    calc                  rollout(data, us) -> (xs, forces, taus)
                          evaluate(data, xs, us) -> (cost, terms, defects, forces, taus)
                          rollout_and_evaluate(data, us) -> (xs, cost, terms, defects, forces, taus)
    calcDiff              linearize_all(data, xs, us) -> shooting.Linearization
                          linearizer(threads) -> the linearize_all to use with 1 or 2 threads
    the Riccati pass      gauss_newton(lin) -> its model of the linearisation;
                          backward(model, defects, mu) -> (k (T, nu), K (T, nu, nx), dV1, dV2, ok)
    the line search       line_search(data, xs, us, k, K, defects, merit_old)
                              -> (index of the accepted step length or -1, trials run, trial)
    a whole iteration     iterate_in_one_call(data, xs, us, cost, defects, mu, deadline)
                              -> fddp_step.Iteration, or None where the model has no such call
                              (then `fddp_step.iterate` runs it over the calls above)
    terms_in_jax          {name: why} of a user's terms evaluated in JAX beside another
                          backend's code (empty where all run in one), and jax_terms_seconds,
                          their linearisation's seconds so far

`trajopt.engine.jax_knots.JaxKnots` (jitted JAX) and `trajopt.engine.compiled_knots.CompiledKnots`
(generated C) implement it; `trajopt.engine.knot_backends.for_problem` picks one.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .. import problem as P


@runtime_checkable
class KnotModel(Protocol):
    """The knots of one problem structure (module docstring for the calls' shapes)."""

    problem: P.Problem
    terms_in_jax: dict
    jax_terms_seconds: float

    def rollout(self, data, us): ...

    def evaluate(self, data, xs, us): ...

    def rollout_and_evaluate(self, data, us): ...

    def linearize_all(self, data, xs, us): ...

    def linearizer(self, threads: int): ...

    def gauss_newton(self, lin): ...

    def backward(self, model, defects, mu: float): ...

    def line_search(self, data, xs, us, k, K, defects, merit_old): ...

    def iterate_in_one_call(self, data, xs, us, cost, defects, mu, deadline=float("inf")): ...
