"""An MPC whose solver is scripted (no FDDP, no compilation), built inside a solver process by
`controllers.mpc_process.SolverProcess(..., factory="scripted_mpc:scripted_mpc")`
(tests/controllers/test_mpc_process.py). The plan of a solve from `x0` has the controls
`x0.u_prev + 0.01 (k + 1)` at knot k and every knot state equal to `x0`."""

import numpy as np

import controllers.mpc as mpc_module
from trajopt.trajectory import Trajectory


def scripted_solve(problem, init=None, *, max_iterations, time_budget=None, verbose=True,
                   guess=None, linearize_threads=1):  # fmt: skip
    T, nu = problem.horizon, problem.nu
    x0 = problem.data.x0
    u = np.asarray(x0.u_prev)[None] + 0.01 * (np.arange(T)[:, None] + 1.0) * np.ones((1, nu))
    q = np.tile(np.asarray(x0.q), (T + 1, 1))
    v = np.tile(np.asarray(x0.v), (T + 1, 1))
    status = f"scripted {max_iterations} from {'init' if init is not None else 'guess'}"
    return Trajectory(q=q, v=v, u=u, dt=problem.dt_knot, cost=1.0, status=status,
                      u_prev0=np.asarray(x0.u_prev))  # fmt: skip


def scripted_mpc(**options):
    """`controllers.mpc.MPC(**options)` with `scripted_solve` as its solver."""
    mpc_module.solve = scripted_solve
    return mpc_module.MPC(**options)
