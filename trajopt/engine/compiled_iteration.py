"""FDDP's iteration in one C call, for `derivatives="compiled"`: `trajopt/engine/fddp_iteration.c`.

The iteration of `trajopt.engine.fddp_step` (the linearisation with the substeps' elimination and
chaining and the costs' chain rule of `trajopt.engine.compiled_knots`, the Gauss-Newton model and
the Riccati passes of `trajopt.engine.compiled_riccati`, the line search's forward passes and
trial costs), with the generated knot functions called from C through their symbols in the
generated library (`generated_code.SubstepFunctions.library`), and nothing in Python between them.

`iterate(knots, data, xs, us, cost, defects, mu, deadline)` returns the `fddp_step.Iteration`,
or None where the C call does not cover the iterate: a knot whose contact map the C
elimination cannot prove regular (`compiled_knots.substep_jacobians_in_c` takes the NumPy
pseudo-inverse there). The caller then runs `fddp_step.iterate`.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from contact.coulomb import TANGENT_RCOND
from native import c_library

from .. import problem as P
from . import c_kernels
from .fddp_step import ITERATION_PARTS, LINEARIZE_PARTS, MU_MAX, Iteration
from .shooting import ALPHAS, MERIT_DEFECT_WEIGHT, defects_after_pass, flat_states, merit

# the generated functions, in the order the C driver takes them (`trajopt.engine.casadi_knots`)
GENERATED = ("substep_forward", "substep_derivative", "knot_forward", "knot_costs",
             "terminal_costs", "knot_cost_values", "terminal_cost_values")  # fmt: skip
REPORT_SIZE = 19  # fddp_iteration.c's report
MAX_TRIALS = 32  # rejected searches recorded (mu from 1e-9 to MU_MAX is 20)
_STATUS = {1: "accepted", 0: "no_step", 2: "out_of_time"}
_TABLES: dict = {}  # generated library path -> (its handle, its function table)


@functools.cache
def library() -> ctypes.CDLL:
    """`fddp_iteration.c`, built after `riccati.c` and `substep_elimination.c` in one library."""
    D = c_kernels.DOUBLES
    return c_kernels.load("fddp_iteration", {"fddp_iteration": (ctypes.c_int, [
        c_kernels.INTS, D, np.ctypeslib.ndpointer(dtype=np.uint64, flags="C_CONTIGUOUS"),
    ] + [D] * 20)}, after=(c_library.DENSE_CHOLESKY, "riccati", "substep_elimination"))  # fmt: skip


def function_table(functions) -> np.ndarray:
    """The addresses of the generated functions of `functions` (`SubstepFunctions`) and their
    work-size queries, as the C driver takes them: `(f_0, f_0_work, f_1, ...)`. The driver
    reads every output as dense, which `trajopt.engine.casadi_knots` builds them to be: checked once
    per library."""
    path = str(functions.library)
    if path in _TABLES:
        return _TABLES[path][1]
    for f in (functions.forward, functions.derivative, functions.knot_forward, functions.costs,
              functions.terminal, functions.cost_values, functions.terminal_values):  # fmt: skip
        if not all(f.sparsity_out(i).is_dense() for i in range(f.n_out())):
            raise ValueError(f"the generated function {f.name()} has a sparse output")
    generated = ctypes.CDLL(path)  # held: the table's addresses stay mapped while it is loaded
    _TABLES[path] = generated, np.array([
        ctypes.cast(getattr(generated, symbol), ctypes.c_void_p).value
        for name in GENERATED for symbol in (name, name + "_work")
    ], dtype=np.uint64)  # fmt: skip
    return _TABLES[path][1]


def iterate(
    knots, data, xs, us, cost: float, defects, mu: float, deadline: float = float("inf"),
    rcond: float = TANGENT_RCOND,
) -> Iteration | None:
    """One FDDP iteration of the `compiled_knots.CompiledKnots` `knots` in one C call (module
    docstring); None where a knot's contact map is not provably regular at `rcond`."""
    problem = knots.problem
    m = problem.model
    T, nq, nv, nu, nf, nx = problem.horizon, m.nq, m.nv, problem.nu, m.nfeet, problem.nx
    functions = knots.functions(data)
    refs, w, w_T = knots.data_arrays(data)
    flat = c_kernels.buffer(flat_states(xs))
    x0 = c_kernels.buffer(flat_states(data.x0))
    us = c_kernels.buffer(us)
    defects = c_kernels.buffer(defects)
    running, terminal = knots.running_terms, knots.terminal_terms
    nr = functions.costs.size_out(0)[0]
    nr_T = functions.terminal.size_out(0)[0] if terminal else 0
    dims = np.array([T, problem.substeps, nq, nv, nu, nf, refs.shape[1], len(running),
                     len(terminal), nr, nr_T, len(ALPHAS), MAX_TRIALS], dtype=np.int32)  # fmt: skip
    merit_old = merit(cost, defects)
    numbers = np.concatenate([
        [functions.numbers["dt"], functions.numbers["joint_damping"], rcond, merit_old, mu,
         MU_MAX, deadline, MERIT_DEFECT_WEIGHT],
        np.asarray(functions.plane["frame"], dtype=float).reshape(9),
    ])  # fmt: skip
    nxq = nq + nv + nu
    xs_new, us_new = np.empty((T + 1, nxq)), np.empty((T, nu))
    forces, taus = np.empty((T, nf, 3)), np.empty((T, nu))
    terms = np.empty(len(running) + len(terminal))
    k, K, residuals = np.zeros((T, nu)), np.zeros((T, nu, nx)), np.empty(T)
    report, trials = np.zeros(REPORT_SIZE), np.zeros((MAX_TRIALS, 2))
    status = library().fddp_iteration(
        dims, numbers, function_table(functions), x0, flat, us, defects,
        c_kernels.buffer(refs), np.sqrt(w), c_kernels.buffer(w), np.sqrt(w_T),
        c_kernels.buffer(w_T), np.asarray(ALPHAS, dtype=float), xs_new, us_new, forces, taus,
        terms, k, K, residuals, report, trials,
    )  # fmt: skip
    if status == -2:
        return None
    if status < 0:
        raise RuntimeError(
            "the compiled FDDP iteration could not allocate its work space" if status == -1
            else "a generated knot function failed in the compiled FDDP iteration"
        )  # fmt: skip
    (index, mu_end, dV1, dV2, k_max, has_first, first_dV1, first_kmax, first_mu, first_dV2,
     cost_new, *seconds, n_trials, passes, rollouts, generated,
     elimination) = report.tolist()  # fmt: skip
    first = (first_dV1, first_kmax, first_mu, first_dV2) if has_first else None
    trial, alpha = None, None
    if status == 1:
        alpha = ALPHAS[int(index)]
        states = P.KnotState(xs_new[:, :nq], xs_new[:, nq : nq + nv], xs_new[:, nq + nv :])
        trial = (states, us_new, cost_new, dict(zip(running + terminal, terms.tolist(),
                                                    strict=True)),
                 defects_after_pass(defects, alpha), forces, taus)  # fmt: skip
    return Iteration(
        _STATUS[status], alpha, trial, k, K, dV1, dV2, k_max, mu_end, first,
        [tuple(row) for row in trials[: int(n_trials)].tolist()], float(np.max(residuals)),
        dict(zip(ITERATION_PARTS, seconds, strict=True)), int(passes), int(rollouts),
        dict(zip(LINEARIZE_PARTS, (generated, elimination), strict=True)), residuals,
    )  # fmt: skip
