"""The compiled knot backend: FDDP's knots in C that CasADi generates (`derivatives="compiled"`).

Same derivative as `derivatives="implicit"` (the impulse solve differentiated at its solution,
`contact.coulomb.solve_impulses`), evaluated by compiled C instead of `jax.jacfwd` through XLA:
a Go2 knot's program is thousands of tiny XLA operations, and its time follows their count,
not the arithmetic (`benchmarks/bench_derivatives.py` compares the two).

One contact substep (Moreau midpoint, `contact/step.py`) at `(q, v, u)`, tangent directions
`e = (dq, dv, du)` (`n = 2 nv + nu`), unknowns at the solution: `v+ (nv,)`, the unit-weight
impulses `p (k, 3)` and `s_i = M'^-1 J_i^T p_i (nv,)`, with `M' = M + dt D` (joint damping):

    Phi1 = dt (RNEA(q_m, v, (v+ - v) / dt) + D v+ - tau) - J^T (w p)        = 0   (nv)
    Phi3_i = M' s_i - J_i^T p_i                                             = 0   (nv each)
    u_i = J_i v+ + (1 - w_i) J_i s_i + opening_i e_n                        contact velocity
    F_i = p_i - proj_K(p_i - R_i u_i)                                       = 0   (3 each)

The generated function (`casadi_knots.derivative_function`) returns the partial Jacobians over
`e` at fixed unknowns (RNEA-type products: `dM` is never formed), `M'`, `J`, the weights and the
projection's Jacobian `D_i`; NumPy then eliminates `v+` and `s` (`substep_jacobians`):

    A  = (I - D) + D R G~,          G~ = J M'^-1 J^T W + blockdiag((1 - w_i) G_ii)
    B  = D R (U_e - J M'^-1 Phi1_e - blockdiag((1 - w_i) J_i) M'^-1 Phi3_e)
    dp = -pinv(A) B                 (`contact.coulomb.TANGENT_RCOND`, as `coulomb` applies it;
                                     the inverse where it provably equals, `tangent_solve`)
    dv+ = -M'^-1 Phi1_e + M'^-1 J^T (w dp)

exactly the linear system `jax.lax.custom_root` solves in the implicit branch, so the values
agree with `derivatives="implicit"` to rounding (`tests/trajopt/test_compiled_knots.py`).

`CompiledKnots` is a knot backend with the calls of `trajopt.engine.jax_knots.JaxKnots`: its
linearisation (`knot_dynamics` above, and the costs' Jacobians chained through the forces' and
torques' as `shooting.knot_costs` does), its rollout, its line search's forward passes and
their costs run in the generated C (`trajopt.engine.generated_code`), its Gauss-Newton model and
Riccati pass in C (`trajopt.engine.compiled_riccati`); a trial's defects are `(1 - alpha)` times the
pass's (`CompiledKnots.evaluate_forward`), and own terms that CasADi cannot evaluate are
evaluated in JAX. `CompiledKnots.iterate_in_one_call` runs a whole FDDP iteration of these pieces in
one C call (`trajopt.engine.compiled_iteration`). Supported: what the CasADi model supports
(`trajopt.engine.casadi_model`: hard and smooth contact, plane terrains, pd and torque control).
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from contact.coulomb import TANGENT_RCOND

from .. import problem as P
from . import (
    c_kernels,
    casadi_knots,
    casadi_model,
    compiled_iteration,
    compiled_riccati,
    generated_code,
    shooting,
)
from .jax_knots import JaxKnots
from .shooting import (
    ALPHAS,
    KnotDynamics,
    Linearization,
    defects_after_pass,
    flat_states,
    index_knots,
    merit,
)


def tangent_solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`pinv(a, rcond=TANGENT_RCOND) @ b` for a batch `a (N, m, m)`, `b (N, m, n)`, as
    `contact.coulomb` applies it, by the inverse where a cheap bound proves the
    two equal. With `kappa_1 = |a|_1 |a^-1|_1` and `kappa_2 <= m kappa_1`, a matrix with
    `m kappa_1 < 1 / TANGENT_RCOND` has every singular value above the cutoff
    `TANGENT_RCOND sigma_max`, so its pseudo-inverse is its inverse; the SVD (about five times
    dearer for Go2's 12 x 12) serves the others, and the whole batch if one is exactly
    singular."""
    try:
        inverse = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(a, rcond=TANGENT_RCOND) @ b
    m = a.shape[-1]
    norm_1 = np.abs(a).sum(axis=-2).max(axis=-1)  # the largest column sum
    bound = m * norm_1 * np.abs(inverse).sum(axis=-2).max(axis=-1)
    regular = np.isfinite(bound) & (bound < 1.0 / TANGENT_RCOND)
    if regular.all():
        return inverse @ b
    out = np.empty(a.shape[:-1] + b.shape[-1:])
    out[regular] = inverse[regular] @ b[regular]
    out[~regular] = np.linalg.pinv(a[~regular], rcond=TANGENT_RCOND) @ b[~regular]
    return out


def substep_jacobians(parts: dict, forward: dict, nv: int, nu: int, dt: float, damping: float):
    """One substep's Jacobians over its input tangent `e (n)`, batched over N knots (leading
    axis): `(state (N, 2 nv, n), forces (N, 3k, n), total (N, nu, n))` (module docstring)."""
    mass, jac, w, proj = parts["mass"], parts["jac"], parts["w"], parts["D"]
    N, k3 = jac.shape[0], jac.shape[1]
    k = k3 // 3
    n = parts["phi1_e"].shape[-1]
    rhs = np.concatenate([parts["phi1_e"], np.swapaxes(jac, 1, 2)], axis=2)
    solved = np.linalg.solve(mass, rhs)
    x1 = solved[:, :, :n]  # M'^-1 Phi1_e
    minv_jt = solved[:, :, n:]  # (N, nv, 3k)
    delassus = jac @ minv_jt
    w3 = np.repeat(w, 3, axis=1)  # (N, 3k)
    own = np.kron(np.eye(k), np.ones((3, 3)))[None]  # the diagonal blocks
    coupled = delassus * w3[:, None, :] * (1.0 - own) + delassus * own
    proj_blocks = np.zeros((N, k3, k3))
    for i in range(k):
        proj_blocks[:, 3 * i : 3 * i + 3, 3 * i : 3 * i + 3] = proj[:, 3 * i : 3 * i + 3, :]
    steps = forward["steps"]  # (N, 3k)
    d_r = proj_blocks * steps[:, None, :]  # D R
    a = np.eye(k3)[None] - proj_blocks + d_r @ coupled
    # J_i M'^-1 Phi3_i,e = (M'^-1 J_i^T)^T Phi3_i,e: M' is symmetric
    phi3 = parts["phi3_e"].reshape(N, k, nv, n)
    own_velocity = np.stack(
        [np.swapaxes(minv_jt[:, :, 3 * i : 3 * i + 3], 1, 2) @ phi3[:, i] for i in range(k)],
        axis=1,
    ).reshape(N, k3, n)
    b_u = parts["u_e"] - jac @ x1 - (1.0 - w3)[:, :, None] * own_velocity
    b = d_r @ b_u
    dp = -tangent_solve(a, b)  # (N, 3k, n)
    dv = -x1 + minv_jt @ (w3[:, :, None] * dp)
    dq = parts["q_e"] + parts["q_v"] @ dv
    p = forward["p"]  # (N, 3k)
    w_e = np.repeat(parts["w_e"], 3, axis=1)  # (N, 3k, n)
    d_impulse = w3[:, :, None] * dp + p[:, :, None] * w_e
    frame = forward["frame"]  # (3, 3)
    d_forces = (
        np.einsum("ab,Nkbn->Nkan", frame, d_impulse.reshape(N, k, 3, n)).reshape(N, k3, n) / dt
    )
    d_total = parts["tau_e"] - damping * dv[:, nv - nu :, :]
    return np.concatenate([dq, dv], axis=1), d_forces, d_total


@functools.cache
def _elimination() -> ctypes.CDLL:
    """`trajopt/engine/substep_elimination.c` (`substep_jacobians` in C), built on first use."""
    return c_kernels.load("substep_elimination", {"substep_elimination": (
        ctypes.c_int,
        [ctypes.c_int] * 5 + [ctypes.c_double] * 3 + [c_kernels.DOUBLES] * 17
        + [c_kernels.INTS],
    )})  # fmt: skip


def substep_jacobians_in_c(parts: dict, forward: dict, nv: int, nu: int, dt: float,
                           damping: float, rcond: float = TANGENT_RCOND):  # fmt: skip
    """`substep_jacobians` with every knot's elimination in C (`substep_elimination.c`), except
    the knots whose `A` the C code cannot prove regular at `rcond` (`tangent_solve`'s bound),
    which take `substep_jacobians` (the pseudo-inverse at `TANGENT_RCOND`): the same values to
    rounding."""
    jac = parts["jac"]
    N, k3 = jac.shape[0], jac.shape[1]
    k, n = k3 // 3, parts["phi1_e"].shape[-1]
    state, forces, total = np.empty((N, 2 * nv, n)), np.empty((N, k3, n)), np.empty((N, nu, n))
    irregular = np.zeros(N, dtype=np.int32)
    b = c_kernels.buffer
    status = _elimination().substep_elimination(
        N, nv, nu, k, n, dt, damping, rcond, b(parts["mass"]), b(jac), b(parts["w"]),
        b(parts["D"]), b(forward["steps"]), b(parts["phi1_e"]), b(parts["phi3_e"]),
        b(parts["u_e"]), b(parts["q_e"]), b(parts["q_v"]), b(parts["w_e"]), b(parts["tau_e"]),
        b(forward["p"]), b(forward["frame"]), state, forces, total, irregular,
    )  # fmt: skip
    if status < 0:
        raise MemoryError("the substep elimination could not allocate its work space")
    rest = np.flatnonzero(irregular)
    if rest.size:
        batched = {name: value[rest] for name, value in parts.items()}
        fwd = {"steps": forward["steps"][rest], "p": forward["p"][rest], "frame": forward["frame"]}
        state[rest], forces[rest], total[rest] = substep_jacobians(batched, fwd, nv, nu, dt,
                                                                   damping)  # fmt: skip
    return state, forces, total


def knot_dynamics(problem: P.Problem, functions: generated_code.SubstepFunctions, q, v, u) -> dict:
    """N knots' transitions and their Jacobians over `(dq, dv, du)` at `x = (q (N, nq), v (N, nv))`
    under `u (N, nu)`, as `trajopt.engine.shooting.knot_dynamics` computes them with
    `derivatives="implicit"` (`substeps` substeps chained; forces averaged, torques the per-joint
    peak). Returns NumPy arrays: `state (N, 2 nv, n)` (the next state's tangent at the nominal
    next state), `forces (N, k, 3)`, `forces_jac (N, 3k, n)`, `taus (N, nu)`, `taus_jac (N, nu,
    n)`, `residual (N,)` (largest impulse-solve residual [m/s]), `q_next`, `v_next`."""
    m = problem.model
    nv, nu, k = m.nv, m.nu, m.nfeet
    n = 2 * nv + nu
    q, v, u = (np.asarray(a, dtype=float) for a in (q, v, u))
    N = q.shape[0]
    forward_map, derivative_map = functions.mapped(N)
    plane, numbers = functions.plane, functions.numbers
    chain = None  # the substep's input tangent over the knot's (None: the identity, at first)
    control_rows = np.broadcast_to(np.eye(n)[2 * nv :], (N, nu, n))
    forces_sum, forces_jac_sum = 0.0, 0.0
    totals, totals_jac, residual = [], [], None
    for _ in range(problem.substeps):
        fwd = {name: value[..., 0] for name, value in forward_map(q, v, u).items()}
        fwd["frame"] = plane["frame"]
        parts = derivative_map(
            q, v, u, fwd["v_next"], fwd["p"], fwd["s"], fwd["steps"], fwd["q_next"]
        )
        parts["w"] = parts["w"][..., 0]
        state, forces_jac, total_jac = substep_jacobians_in_c(
            parts, fwd, nv, nu, numbers["dt"], numbers["joint_damping"]
        )
        if chain is not None:  # chained through the earlier substeps of the knot
            forces_jac, total_jac, state = (a @ chain for a in (forces_jac, total_jac, state))
        forces_sum = forces_sum + fwd["forces"]
        forces_jac_sum = forces_jac_sum + forces_jac
        totals.append(fwd["total"])
        totals_jac.append(total_jac)
        residual = fwd["residual"] if residual is None else np.maximum(residual, fwd["residual"])
        chain = np.concatenate([state, control_rows], axis=1)
        q, v = fwd["q_next"], fwd["v_next"]
    totals, totals_jac = np.stack(totals), np.stack(totals_jac)  # (S, N, nu), (S, N, nu, n)
    peak = np.argmax(np.abs(totals), axis=0)  # (N, nu): first substep on ties, as jnp.argmax
    taus = np.take_along_axis(totals, peak[None], axis=0)[0]
    taus_jac = np.take_along_axis(totals_jac, peak[None, :, :, None], axis=0)[0]
    return {
        "state": chain[:, : 2 * nv], "forces": (forces_sum / problem.substeps).reshape(N, k, 3),
        "forces_jac": forces_jac_sum / problem.substeps, "taus": taus, "taus_jac": taus_jac,
        "residual": residual, "q_next": q, "v_next": v,
    }  # fmt: skip


class CompiledKnots:
    """The knot backend of a `derivatives="compiled"` problem structure, a `KnotModel`: the calls of
    `JaxKnots` (`trajopt.engine.jax_knots`), with the linearisation, the rollout, the line search's
    forward passes and their costs in generated C, and the Riccati pass in C
    (`trajopt.engine.compiled_riccati`)."""

    def __init__(self, problem: P.Problem):
        self.problem = problem
        self.jax = JaxKnots(problem)  # the evaluation, and the pieces for tests
        self.rollout = self.jax.rollout
        self.evaluate = self.jax.evaluate
        self.evaluate_transitions = self.jax.evaluate_transitions
        self.linearize = self.jax.linearize
        self.linearize_terminal = self.jax.linearize_terminal
        self.forward = self.jax.forward
        self.gauss_newton = compiled_riccati.gauss_newton  # the Riccati pass in C
        self.backward = compiled_riccati.backward
        self._recent = None  # (params, gains, generated_code.SubstepFunctions)
        # the own terms: generated into the C library, or evaluated in JAX (`{name: why}`)
        self.generated_terms, self.terms_in_jax = casadi_model.term_split(problem)
        # the generated code's weighted terms, in its order (fixed by the structure)
        self.running_terms = casadi_knots.running_terms(problem)
        self.terminal_terms = casadi_knots.terminal_terms(problem)
        self._jax_costs = None
        self._arrays = None  # (data, data_arrays(data)) of the last data read
        self._weights = None  # (data.weights, (w_running, w_terminal)) of the last weights read
        self.jax_terms_seconds = 0.0  # the linearisation time of `terms_in_jax`, accumulated

    one_call = True  # FDDP's iteration in one C call (`iterate_in_one_call`) where that covers it

    def linearizer(self, threads: int):
        """`linearize_all`: the linearisation runs in C, on one thread."""
        if threads != 1:
            raise ValueError(f"derivatives='compiled' linearises on 1 thread, got {threads!r}")
        return self.linearize_all

    def iterate_in_one_call(self, data, xs, us, cost, defects, mu, deadline=float("inf")):
        """FDDP's iteration from `(xs, us)` in one C call (`trajopt.engine.compiled_iteration`): a
        `fddp_step.Iteration`, or None where that does not cover it (own terms that run in
        JAX, a knot whose contact map is not provably regular, or `one_call` off): then
        `fddp_step.iterate` runs it on this backend's calls."""
        if not self.one_call or self.terms_in_jax:
            return None
        return compiled_iteration.iterate(self, data, xs, us, cost, defects, mu, deadline)

    def functions(self, data) -> generated_code.SubstepFunctions:
        """The compiled functions at `data`'s step parameters and PD gains, looked up again
        only when those are other objects than last time."""
        recent = self._recent
        if recent is None or recent[0] is not data.params or recent[1] is not data.gains:
            functions = generated_code.substep_functions(self.problem, data)
            recent = self._recent = (data.params, data.gains, functions)
        return recent[2]

    def knot_dynamics(self, data, xs, us) -> KnotDynamics:
        """Every running knot's `KnotDynamics` (stacked `(T, ...)`, NumPy): the values of
        `shooting.knot_dynamics` with implicit derivatives, to rounding."""
        problem = self.problem
        T, nv, nu, nx = problem.horizon, problem.model.nv, problem.nu, problem.nx
        q, v = (np.asarray(a)[:T] for a in (xs.q, xs.v))
        out = knot_dynamics(problem, self.functions(data), q, v, np.asarray(us))
        state, forces_jac, taus_jac = out["state"], out["forces_jac"], out["taus_jac"]
        A = np.zeros((T, nx, nx))
        A[:, : 2 * nv, : 2 * nv] = state[:, :, : 2 * nv]  # next u_prev is u: zero along x
        B = np.zeros((T, nx, nu))
        B[:, : 2 * nv] = state[:, :, 2 * nv :]
        B[:, 2 * nv :] = np.eye(nu)
        return KnotDynamics(
            A, B, out["forces"], out["taus"], forces_jac[:, :, : 2 * nv],
            forces_jac[:, :, 2 * nv :], taus_jac[:, :, : 2 * nv], taus_jac[:, :, 2 * nv :],
            out["residual"],
        )  # fmt: skip

    def knot_costs(self, data, xs, us, dyn: KnotDynamics):
        """`(r, R_x, R_u, r_T, R_T)` of every knot (NumPy): the weighted residuals and their
        Jacobians (`casadi_knots.costs_function`), chained through the forces' and torques'
        Jacobians of `dyn` as `shooting.knot_costs` does, and the terminal knot's. The
        residuals' order within a term may differ from `shooting.knot_costs`'; the backward
        pass reads only `R^T r` and `R^T R`, which do not depend on it."""
        problem = self.problem
        functions = self.functions(data)
        T, nx = problem.horizon, problem.nx
        flat = flat_states(xs)
        refs, w, w_T = self.data_arrays(data)
        terms = self.running_terms
        sqrt_w = np.sqrt(w)
        out = functions.costs_mapped(T)(
            flat[:T], us, np.reshape(dyn.forces, (T, -1)), dyn.taus, refs[:T],
            np.broadcast_to(sqrt_w, (T, len(terms))),
        )  # fmt: skip
        r_f, r_tau = out["r_f"], out["r_tau"]
        R_x = np.concatenate(
            [np.concatenate([out["r_q"], out["r_v"]], axis=2) + r_f @ dyn.forces_x
             + r_tau @ dyn.taus_x, out["r_up"]],
            axis=2,
        )  # fmt: skip
        R_u = out["r_u"] + r_f @ dyn.forces_u + r_tau @ dyn.taus_u
        r = out["r"][..., 0]
        if self.terminal_terms:
            terminal = functions.terminal_call()(flat[T:], refs[T:], np.sqrt(w_T)[None])
            r_T, R_T = terminal["r"][0, :, 0], terminal["r_x"][0]
        else:
            r_T, R_T = np.zeros(0), np.zeros((0, nx))
        if self.terms_in_jax:  # their rows after the generated ones (R^T r and R^T R alike)
            tic = time.perf_counter()
            jr, jR_x, jR_u, jr_T, jR_T = jax.device_get(self._jax_term_costs(data, xs, us, dyn))
            self.jax_terms_seconds += time.perf_counter() - tic
            r = np.concatenate([r, np.asarray(jr)], axis=1)
            R_x = np.concatenate([R_x, np.asarray(jR_x)], axis=1)
            R_u = np.concatenate([R_u, np.asarray(jR_u)], axis=1)
            r_T = np.concatenate([r_T, np.asarray(jr_T)])
            R_T = np.concatenate([R_T, np.asarray(jR_T)], axis=0)
        return r, R_x, R_u, r_T, R_T

    def _jax_term_costs(self, data, xs, us, dyn: KnotDynamics):
        """The weighted residuals and Jacobians of the own terms that run in JAX
        (`terms_in_jax`), every knot's by `shooting.knot_costs` with the generated dynamics'
        force and torque Jacobians, and the terminal knot's."""
        weights = {name: data.weights[name] for name in self.terms_in_jax}
        if self._jax_costs is None:
            problem = self.problem

            def costs(data, xs, us, dyn):
                T = problem.horizon
                running = jax.vmap(lambda t, d: shooting.knot_costs(
                    problem, data, index_knots(xs, t), us[t], t, d))(jnp.arange(T), dyn)
                r_T, R_T = shooting.linearize_terminal(problem, data, index_knots(xs, T))
                return running + (r_T, R_T)

            self._jax_costs = jax.jit(costs)
        dyn = dyn._replace(A=None, B=None, contact_residual=None)
        return self._jax_costs(dataclasses.replace(data, weights=weights), xs, us, dyn)

    def linearize_all(self, data, xs, us) -> Linearization:
        """Every knot's linearisation, all in the generated code and NumPy: the knots'
        dynamics (`knot_dynamics`) and costs (`knot_costs`)."""
        dyn = self.knot_dynamics(data, xs, us)
        r, R_x, R_u, r_T, R_T = self.knot_costs(data, xs, us, dyn)
        return Linearization(dyn.A, dyn.B, r, R_x, R_u, r_T, R_T, dyn.contact_residual)

    def forward_with_transitions(self, data, xs, us, k, K, defects, alpha):
        """`shooting.forward_with_transitions` by the generated C fold: `(xs, us, reached,
        forces, taus)` as NumPy (knot states as `KnotState`)."""
        problem = self.problem
        T, m = problem.horizon, problem.model
        nq, nv = m.nq, m.nv
        x0 = flat_states(data.x0)
        out = self.functions(data).forward_pass(T)(
            x0, flat_states(index_knots(xs, slice(0, T))), us, k,
            np.swapaxes(np.asarray(K), 1, 2), np.asarray(defects)[1:], np.full(T, float(alpha)),
        )  # fmt: skip

        def states(flat):
            return P.KnotState(flat[:, :nq], flat[:, nq : nq + nv], flat[:, nq + nv :])

        following = np.concatenate([x0[None], out["next"][..., 0]])
        return (
            states(following), out["u"][..., 0], states(out["reached"][..., 0]),
            out["forces"][..., 0].reshape(T, m.nfeet, 3), out["taus"][..., 0],
        )  # fmt: skip

    def data_arrays(self, data) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`(rows, w_running, w_terminal)` of `data`: its `casadi_model.knot_rows` (references
        and the generated terms' targets) and the weights of `running_terms` and
        `terminal_terms`, as NumPy, kept for the last `data` object (read at every
        linearisation and line-search trial), the weights for the last `data.weights` object
        (an MPC cycle's data is new, its weights are the last cycle's: one transfer less)."""
        if self._arrays is None or self._arrays[0] is not data:
            if self._weights is None or self._weights[0] is not data.weights:
                weights = jax.device_get(data.weights)
                self._weights = (data.weights, tuple(
                    np.array([float(weights[name]) for name in names], dtype=float)
                    for names in (self.running_terms, self.terminal_terms)
                ))  # fmt: skip
            rows = casadi_model.knot_rows(self.problem, data, self.generated_terms)
            self._arrays = (data, (rows, *self._weights[1]))
        return self._arrays[1]

    def evaluate_forward(self, data, xs, us, forces, taus, defects):
        """`(cost, terms, defects, forces, taus)` of a forward pass's result, as
        `shooting.evaluate_transitions` returns them, with the costs in the generated C (no
        derivatives) and the defects given: a forward pass at step `alpha` from defects `f`
        leaves `local(x_{t+1}, F(x_t, u_t)) = local(retract(y, (alpha - 1) f), y) =
        (1 - alpha) f` (`y` the knot's reached state; `local(retract(y, d), y) = -d` on the
        state's manifold), and `f_0 = 0` (the pass starts at `x0`). Own terms that run in JAX
        (`terms_in_jax`) take `evaluate_transitions` instead."""
        problem, functions = self.problem, self.functions(data)
        T = problem.horizon
        flat, (refs, w, w_T) = flat_states(xs), self.data_arrays(data)
        running, terminal = self.running_terms, self.terminal_terms
        terms = {}
        if running:
            values = functions.cost_values_mapped(T)(
                flat[:T], us, np.reshape(forces, (T, -1)), taus, refs[:T],
                np.broadcast_to(w, (T, len(running))),
            )["costs"][..., 0].sum(axis=0)  # fmt: skip
            terms.update(zip(running, values.tolist(), strict=True))
        if terminal:
            values = functions.terminal_values_call()(flat[T:], refs[T:], w_T[None])
            values = values["costs"][0, :, 0]
            terms.update(zip(terminal, values.tolist(), strict=True))
        return sum(terms.values()), terms, np.asarray(defects), forces, taus

    def evaluate_pass(self, data, xs, us, reached, forces, taus, defects):
        """A forward pass's result evaluated: `evaluate_forward` (in C, from the pass's
        `defects`), or, where own terms run in JAX (`terms_in_jax`), `evaluate_transitions`
        (from the knots' `reached` states), brought to the host."""
        if self.terms_in_jax:
            return jax.device_get(self.evaluate_transitions(data, xs, us, reached, forces, taus))
        return self.evaluate_forward(data, xs, us, forces, taus, defects)

    def line_search(self, data, xs, us, k, K, defects, merit_old):
        """`shooting.line_search_trials` with each trial's forward pass and costs in C
        (`evaluate_pass`); the same trials, in the same order, and the same return values."""
        k, K, defects = (np.asarray(a) for a in (k, K, defects))
        trial = None
        for i, alpha in enumerate(ALPHAS):
            xs_t, us_t, reached, forces_t, taus_t = self.forward_with_transitions(
                data, xs, us, k, K, defects, alpha
            )
            cost, terms, d, forces, taus = self.evaluate_pass(
                data, xs_t, us_t, reached, forces_t, taus_t, defects_after_pass(defects, alpha)
            )
            trial = (xs_t, us_t, cost, terms, d, forces, taus)
            if np.isfinite(cost) and np.all(np.isfinite(d)) and merit(cost, d) < merit_old:
                return i, i + 1, trial
        return -1, len(ALPHAS), trial

    def rollout_and_evaluate(self, data, us):
        """`shooting.rollout_and_evaluate` with the rollout in C: the forward pass at
        `alpha = 1` with no feedback and no defects, from `data.x0`."""
        T, nu, nx = self.problem.horizon, self.problem.nu, self.problem.nx
        start = jax.tree_util.tree_map(
            lambda a: np.broadcast_to(np.asarray(a), (T + 1,) + a.shape), data.x0
        )
        xs, us_t, reached, forces, taus = self.forward_with_transitions(
            data, start, np.asarray(us), np.zeros((T, nu)), np.zeros((T, nu, nx)),
            np.zeros((T + 1, nx)), 1.0,
        )  # fmt: skip
        return (xs,) + self.evaluate_pass(data, xs, us_t, reached, forces, taus,
                                          np.zeros((T + 1, nx)))  # fmt: skip
