"""`solve(problem)`: the one entry point to the trajectory optimisers.

    solver="fddp"   Gauss-Newton FDDP (trajopt.engine.fddp), single or multiple shooting
    solver="lbfgs"  quasi-Newton on the controls of a single-shooting rollout (SciPy L-BFGS-B
                    with exact reverse-mode gradients from JAX)
    solver="ipopt"  CasADi + IPOPT multiple shooting (trajopt.ipopt), for cross-checks

Warm start: pass a previous `Trajectory` (e.g. `trajectory.shifted(k)`) as `init`.
"""

from __future__ import annotations

import time
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from native import c_library

from . import problem as P
from .engine import fddp, knot_backends
from .engine.compile_cache import enable_persistent_cache
from .engine.solve_result import SolveResult
from .trajectory import Trajectory

enable_persistent_cache()  # executables saved on disk: a second run does not compile again

Solver = Literal["fddp", "lbfgs", "ipopt"]
SOLVERS: tuple[Solver, ...] = ("fddp", "lbfgs", "ipopt")
Shooting = Literal["single", "multiple"]
SHOOTING: tuple[Shooting, ...] = ("single", "multiple")
Guess = Literal["auto", "kinematic", "standing"]
GUESSES: tuple[Guess, ...] = ("auto", "kinematic", "standing")


def default_derivatives() -> P.ProblemDerivatives:
    """The derivatives "compiled" where the system's C compiler is found
    (`trajopt.engine.generated_code`), otherwise "implicit" (the same derivatives in JAX), with a
    note that says so."""
    if c_library.compiler_available():
        return "compiled"
    print(f"note: no C compiler ({c_library.compiler()}): FDDP runs in JAX "
          "(derivatives='implicit'), slower per iteration")  # fmt: skip
    return "implicit"


def initial_guess(problem: P.Problem, init: Trajectory | None = None, guess: Guess = "auto"):
    """`(xs, us)` to start from: the warm start `init` if given, else

    guess="kinematic": the stepping gait of `trajopt.kinematic_guess` (footholds, swing arcs,
        leg IK, PD targets that hold the weight);
    guess="standing": the standing targets, with a state guess that moves the base along the
        commanded velocity;
    guess="auto": the gait's own choice (`trajopt.gaits.default_guess`, measured per gait
        and robot), "kinematic" for problems that are not from the gait library.

    (`xs` is used by multiple shooting; single shooting rolls out `us`.)"""
    if guess not in GUESSES:
        raise ValueError(f"guess must be one of {GUESSES}, got {guess!r}")
    if guess == "auto":
        from .gaits import default_guess

        guess = default_guess(problem.model.name, problem.name)
    model = problem.model
    T = problem.horizon
    if init is None and guess == "kinematic":
        from .kinematic_guess import kinematic_guess

        q, v, us = kinematic_guess(problem)
        u_prev = np.concatenate([np.asarray(problem.data.x0.u_prev)[None], us])
        return P.KnotState(q, v, u_prev), us
    if init is not None:
        if init.u.shape != (T, model.nu):
            raise ValueError(f"init has controls of shape {init.u.shape}, expected {(T, model.nu)}")
        # NumPy: the solvers take host arrays as they are (an MPC cycle starts here every time)
        x0 = jax.device_get(problem.data.x0)
        q, v = np.array(init.q, dtype=float), np.array(init.v, dtype=float)
        q[0], v[0] = x0.q, x0.v
        u = np.array(init.u, dtype=float)
        u_prev = np.concatenate([np.asarray(x0.u_prev)[None], u])
        return P.KnotState(q, v, u_prev), u
    x0 = jax.device_get(problem.data.x0)
    u0 = np.asarray(x0.u_prev, dtype=float) if problem.control == "pd" else np.zeros(model.nu)
    us = np.tile(u0, (T, 1))
    vel = np.asarray(problem.data.reference.base_velocity)
    q = np.tile(np.asarray(x0.q), (T + 1, 1))
    q[:, 0] += np.concatenate([[0.0], np.cumsum(vel[:-1, 0]) * problem.dt_knot])
    q[:, 1] += np.concatenate([[0.0], np.cumsum(vel[:-1, 1]) * problem.dt_knot])
    v = np.zeros((T + 1, model.nv))
    v[:, 0:2] = vel[:, 0:2]
    return P.KnotState(q, v, np.tile(u0, (T + 1, 1))), us


def solve(
    problem: P.Problem,
    init: Trajectory | None = None,
    *,
    solver: Solver = "fddp",
    shooting: Shooting = "single",
    max_iterations: int = 50,
    time_budget: float | None = None,
    tolerance: float = 1e-4,
    verbose: bool = True,
    callback=None,
    guess: Guess = "auto",
    linearize_threads: int = 1,
) -> Trajectory:
    """Solve `problem`; returns a `Trajectory` whose `status` says why the solver stopped (FDDP:
    `meta["reason"]` says it in words, with the numbers, `meta["timing"]` splits the solve's
    time, `meta["linearize_parts"]` its linearisation's where one-call iterations ran, and
    `meta["exact_derivatives_from"]` is the iteration from which it took the computed step's
    derivatives, or None: `Trajectory.from_solution` of `fddp.solve_fddp`'s `SolveResult`).

    `callback(record)` (FDDP) is called after every accepted iteration with its history record
    (iteration, time since the start [s], cost, step, defects, mu, expected change, terms).
    `guess` is the start without `init` (see `initial_guess`). `time_budget` [s] bounds every
    solver's iterations; `tolerance` is FDDP's and L-BFGS's relative stopping test (IPOPT
    keeps its own KKT tolerance, `trajopt.ipopt.solve_ipopt(tolerance=...)`).
    `linearize_threads` (FDDP): 2 linearises the two halves of the horizon at the same time
    (`JaxKnots.linearize_in_two_threads`), for a machine with a second core to spare.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if shooting not in SHOOTING:
        raise ValueError(f"shooting must be one of {SHOOTING}, got {shooting!r}")
    if max_iterations < 0:
        raise ValueError(f"max_iterations must be >= 0, got {max_iterations}")
    if fddp.check_linearize_threads(linearize_threads) == 2 and solver != "fddp":
        raise ValueError(f"linearize_threads=2 is FDDP's; solver {solver!r} takes 1")
    builds_before = len(c_library.builds())
    xs, us = initial_guess(problem, init, guess)
    if solver == "fddp":
        xs_in = xs if shooting == "multiple" else None
        result = fddp.solve_fddp(
            problem,
            xs_in,
            us,
            max_iterations=max_iterations,
            time_budget=time_budget,
            tolerance=tolerance,
            verbose=verbose,
            callback=callback,
            linearize_threads=linearize_threads,
        )
        traj = Trajectory.from_solution(problem, result, f"fddp-{shooting}")
        traj.meta.update(builds=_builds_since(builds_before, verbose))
        return traj
    if solver == "lbfgs":
        if shooting != "single":
            raise ValueError("the L-BFGS solver is single shooting only")
        return _solve_lbfgs(problem, us, max_iterations, time_budget, tolerance, verbose)
    from .ipopt import solve_ipopt

    # single shooting: IPOPT starts from the rollout of the controls, as FDDP does
    xs_in = xs if shooting == "multiple" else None
    return solve_ipopt(
        problem, xs_in, us, max_iterations=max_iterations, time_budget=time_budget, verbose=verbose
    )


def _builds_since(count: int, verbose: bool) -> list[dict]:
    """`c_library.build_rows(count)`, printed when `verbose`."""
    rows = c_library.build_rows(count)
    for row in rows if verbose else ():
        units = row["units"]
        how = "found built" if row["cached"] else (
            f"built from {units} units in parallel" if units > 1 else "built")  # fmt: skip
        print(f"C library {row['library']}: {how}, {row['seconds']:.1f} s")
    return rows


def gradient_problem(problem: P.Problem) -> P.Problem:
    """The problem whose reverse-mode gradient L-BFGS takes, in JAX (`JaxKnots`): `problem`
    itself, or the same problem with implicit derivatives where its own are compiled (C has no
    reverse mode) or unrolled through a converged contact solve (reverse mode does not pass a
    loop that runs to a tolerance). The values are the same: the converged solve's implicit
    derivative is the computed step's."""
    if problem.derivatives == "compiled" or (
        problem.contact_tolerance is not None and problem.derivatives == "unrolled"
    ):
        return problem.replace(derivatives="implicit")
    return problem


def _solve_lbfgs(problem, us, max_iterations, time_budget, tolerance, verbose):
    from scipy.optimize import minimize

    fn = knot_backends.for_problem(gradient_problem(problem))
    data = problem.data
    shape = us.shape

    def value_and_grad(data, u_flat):
        cost, gradient = fn.cost_value_and_gradient(data, u_flat.reshape(shape))
        return cost, gradient.reshape(-1)

    start = time.perf_counter()
    history = []
    status = {"value": "max_iterations"}
    last = {"x": np.asarray(us, dtype=float).ravel()}

    def fun(x):
        c, g = value_and_grad(data, jnp.asarray(x))
        c, g = float(c), np.asarray(g, dtype=float)
        if not np.isfinite(c) or not np.all(np.isfinite(g)):
            return np.inf, np.zeros_like(g)  # rejected by the line search, never a NaN
        return c, g

    def callback(xk):
        last["x"] = np.array(xk)
        c = float(value_and_grad(data, jnp.asarray(xk))[0])
        history.append(
            {"iteration": len(history) + 1, "time": time.perf_counter() - start, "cost": c}
        )
        if verbose:
            print(f"{len(history):>4} {c:>12.5g}")
        if time_budget is not None and time.perf_counter() - start > time_budget:
            status["value"] = "time_budget"
            raise StopIteration

    c0, _ = fun(last["x"])
    if not np.isfinite(c0):
        result = _rollout_result(fn, data, us, "diverged", 0, history, start)
        return Trajectory.from_solution(problem, result, "lbfgs-single")
    try:
        res = minimize(
            fun,
            last["x"],
            jac=True,
            method="L-BFGS-B",
            callback=callback,
            options={"maxiter": max_iterations, "ftol": tolerance * 1e-3, "gtol": 1e-9},
        )
        x = res.x
        if res.success:
            status["value"] = "converged"
        elif "ABNORMAL" in str(res.message):
            status["value"] = "line_search_failed"
    except StopIteration:  # the time budget ran out: keep the last accepted iterate
        x = last["x"]
    u = jnp.asarray(x).reshape(shape)
    result = _rollout_result(fn, data, u, status["value"], len(history), history, start)
    return Trajectory.from_solution(problem, result, "lbfgs-single")


def _rollout_result(fn, data, us, status, iterations, history, start):
    """The solver's result at the rollout of `us` (one simulation for states and costs)."""
    xs, *evaluation = fn.rollout_and_evaluate(data, us)
    return SolveResult.at(xs, us, status, iterations, evaluation, history, start)
