"""CasADi + IPOPT multiple shooting over the same dynamics and contact model, for cross-checks.

The knot transition `F(x, u)` and the residual costs are `trajopt.engine.casadi_model`'s CasADi
functions of the problem. A knot state is the flat vector `x = [q (nq), v (nv), u_prev (nu)]`.
The NLP (tangent increments around the initial guess `xbar_t`, so the quaternion needs no norm
constraint):

    min   sum_t l_t(x_t, u_t) + l_T(x_T),      x_t = xbar_t (+) dx_t
    s.t.  F(x_t, u_t) (-) xbar_{t+1} = dx_{t+1}    (t = 0 .. T-1),    x_0 = x0

i.e. `F(x_t, u_t) = x_{t+1}` (the retraction is invertible near `xbar`), linear in `dx_{t+1}`.
One `ca.Function` per knot (SX inside) is mapped over the horizon with MX outside, which keeps
the graph construction fast.

Supported: `hard` and `smooth` contact, `pd` and `torque` controls, plane terrains (`Plane`:
flat or inclined), every cost term of `trajopt.problem.COST_TERMS`. Not supported (raises
`NotImplementedError`): the `penalty` contact model, `Steps`, `Terraces` and `Heightfield` terrains,
Jacobi sweeps (problems always use Gauss-Seidel).
"""

from __future__ import annotations

import time

import casadi as ca
import jax
import jax.numpy as jnp
import numpy as np

from . import problem as P
from .engine import casadi_model, knot_backends
from .engine.solve_result import SolveResult
from .trajectory import Trajectory

# IPOPT return_status -> Trajectory.status
STATUS = {
    "Solve_Succeeded": "converged",
    "Solved_To_Acceptable_Level": "converged",
    "Maximum_Iterations_Exceeded": "max_iterations",
    "Maximum_CpuTime_Exceeded": "time_budget",
    "Maximum_WallTime_Exceeded": "time_budget",
    "Restoration_Failed": "line_search_failed",
    "Error_In_Step_Computation": "line_search_failed",
    "Search_Direction_Becomes_Too_Small": "line_search_failed",
    "Feasible_Point_Found": "converged",
}


# ----------------------------------------------------------------------------- the solver
def solve_ipopt(
    problem: P.Problem,
    xs: P.KnotState | None,
    us,
    *,
    max_iterations: int = 100,
    verbose: bool = True,
    tolerance: float = 1e-6,
    time_budget: float | None = None,
    hessian: str = "exact",
    options: dict | None = None,
) -> Trajectory:
    """Multiple-shooting NLP of `problem` solved by IPOPT from the guess `(xs, us)`.

    Args:
        xs: stacked `KnotState` `(T+1)` (the guess; its first knot is replaced by `x0`), or
            None: the rollout of `us` (the single-shooting start of `solve_fddp`).
        us: `(T, nu)` controls.
        tolerance: IPOPT's `tol` (its scaled KKT error).
        time_budget: wall-clock seconds for IPOPT's iterations (`max_wall_time`; building the
            CasADi functions comes first and is not counted); status "time_budget" when spent.
        hessian: "exact" (CasADi's second derivatives through the unrolled contact solve) or
            "limited-memory" (L-BFGS: cheaper iterations, many more of them). Measured on the
            10-knot solo12 crouch of `tests/trajopt/test_ipopt_backend.py` (2 cm, 1 core): exact
            Solve_Succeeded in 4 iterations (3.3 s in IPOPT); L-BFGS not converged after 200
            (52 s, cost 1.5 % higher, defects 0.08).
        options: extra IPOPT options (`{"ipopt.xxx": ...}` style or plain names).
    Returns a `Trajectory`; `meta["ipopt_status"]` keeps IPOPT's message, `meta["ipopt_cost"]`
    its objective. Costs, forces and torques in the trajectory are evaluated by the JAX model.

    IPOPT's convergence test needs a smooth optimum. The fixed-sweep contact solve is only
    piecewise smooth: where a foot's load goes to zero (the cone projection's `p_n > 0` switch
    and its disk of radius `mu p_n`), the cost has a kink, and an optimum sitting on it (e.g. a
    3 cm crouch, which unloads the stance at the first knot) leaves the dual infeasibility at
    ~1e-2: IPOPT then oscillates and stops at `max_iterations` (FDDP stops there "converged":
    no step decreases its merit). Cross-check on problems whose stance stays loaded.
    """
    casadi_model.check_supported(problem)
    start = time.perf_counter()
    T, nx, nu = problem.horizon, problem.nx, problem.nu
    data = problem.data
    if xs is None:
        xs, _, _ = knot_backends.for_problem(problem).rollout(data, jnp.asarray(us))
    guess = casadi_model.flatten(xs).copy()
    guess[0] = casadi_model.flatten(jax.tree_util.tree_map(lambda a: a[None], data.x0))[0]
    us0 = np.asarray(us, dtype=float)
    refs = casadi_model.knot_rows(problem, data, casadi_model.term_split(problem)[0]).T

    knot = casadi_model.knot_function(problem)
    terminal = casadi_model.terminal_function(problem)
    retract, local = casadi_model.retract_function(problem), casadi_model.local_function(problem)

    dx = ca.MX.sym("dx", nx, T + 1)
    u = ca.MX.sym("u", nu, T)
    x_all = retract.map(T + 1)(ca.DM(guess.T), dx)
    x_next, costs, _, _ = knot.map(T, "thread", 4)(x_all[:, :T], u, ca.DM(refs[:, :T]))
    objective = ca.sum2(costs) + terminal(x_all[:, T], ca.DM(refs[:, T]))
    defects = local.map(T)(ca.DM(guess[1:].T), x_next) - dx[:, 1:]
    w = ca.veccat(dx, u)
    g = ca.vec(defects)
    lbx = -np.inf * np.ones(w.shape[0])
    ubx = np.inf * np.ones(w.shape[0])
    lbx[:nx] = ubx[:nx] = 0.0  # x_0 = x0 (dx_0 = 0 since xbar_0 = x0)
    opts = {
        "ipopt.max_iter": int(max_iterations),
        "ipopt.tol": tolerance,
        "ipopt.print_level": 5 if verbose else 0,
        "print_time": bool(verbose),
        "ipopt.hessian_approximation": hessian,
        "ipopt.sb": "yes",
    }
    if time_budget is not None:
        if not time_budget > 0:
            raise ValueError(f"time_budget must be positive seconds, got {time_budget}")
        opts["ipopt.max_wall_time"] = float(time_budget)
    for key, value in (options or {}).items():
        opts[key if "." in key or key == "print_time" else f"ipopt.{key}"] = value
    nlp = {"x": w, "f": objective, "g": g}
    solver = ca.nlpsol("diffloco_ipopt", "ipopt", nlp, opts)
    build_time = time.perf_counter() - start
    w0 = np.concatenate([np.zeros(nx * (T + 1)), us0.reshape(-1)])
    sol = solver(x0=w0, lbx=lbx, ubx=ubx, lbg=0.0, ubg=0.0)
    stats = solver.stats()
    message = stats.get("return_status", "unknown")
    w_opt = np.asarray(sol["x"], dtype=float).ravel()
    status = STATUS.get(message, "diverged")
    if not np.all(np.isfinite(w_opt)):
        w_opt, status = w0, "diverged"
    dx_opt = w_opt[: nx * (T + 1)].reshape(T + 1, nx)
    u_opt = w_opt[nx * (T + 1) :].reshape(T, nu)
    x_opt = np.asarray(retract.map(T + 1)(guess.T, dx_opt.T), dtype=float).T
    xs_out, us_out = casadi_model.unflatten(problem, x_opt), jnp.asarray(u_opt)

    fn = knot_backends.for_problem(problem)
    cost, terms, gaps, forces, taus = fn.evaluate(data, xs_out, us_out)
    if not np.isfinite(float(cost)):  # never hand back NaN: fall back to the guess
        xs_out, us_out = casadi_model.unflatten(problem, guess), jnp.asarray(us0)
        status = "diverged"
        cost, terms, gaps, forces, taus = fn.evaluate(data, xs_out, us_out)
    iterations = int(stats.get("iter_count", 0))
    objectives = stats.get("iterations", {}).get("obj", [])
    infeasibility = stats.get("iterations", {}).get("inf_pr", [])
    history = [
        {"iteration": i, "cost": float(c), "defects": float(d)}
        for i, (c, d) in enumerate(zip(objectives, infeasibility, strict=False))
    ]
    result = SolveResult.at(xs_out, us_out, status, iterations,
                            (cost, terms, gaps, forces, taus), history, start)  # fmt: skip
    traj = Trajectory.from_solution(problem, result, "ipopt-multiple")
    traj.meta.update(
        {
            "ipopt_status": message,
            "ipopt_cost": float(sol["f"]),
            "ipopt_hessian": hessian,
            "build_time_s": build_time,
            "ipopt_timings_s": {
                k[len("t_wall_") :]: float(v) for k, v in stats.items() if k.startswith("t_wall_")
            },
        }
    )
    return traj
