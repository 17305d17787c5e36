"""FDDP's knots in C that CasADi generates (`Problem(derivatives="compiled")`).

Same derivative as `derivatives="implicit"` (the impulse solve differentiated at its solution,
`contact.coulomb.solve_impulses`), evaluated by compiled C instead of `jax.jacfwd` through XLA:
a Go2 knot's program is thousands of tiny XLA operations, and its time follows their count,
not the arithmetic (BENCHMARKS.md, "A cheaper step Jacobian three ways").

One contact substep (Moreau midpoint, `contact/step.py`) at `(q, v, u)`, tangent directions
`e = (dq, dv, du)` (`n = 2 nv + nu`), unknowns at the solution: `v+ (nv,)`, the unit-weight
impulses `p (k, 3)` and `s_i = M'^-1 J_i^T p_i (nv,)`, with `M' = M + dt D` (joint damping):

    Phi1 = dt (RNEA(q_m, v, (v+ - v) / dt) + D v+ - tau) - J^T (w p)        = 0   (nv)
    Phi3_i = M' s_i - J_i^T p_i                                             = 0   (nv each)
    u_i = J_i v+ + (1 - w_i) J_i s_i + opening_i e_n                        contact velocity
    F_i = p_i - proj_K(p_i - R_i u_i)                                       = 0   (3 each)

The generated function (`_derivative_function`) returns the partial Jacobians over `e` at fixed
unknowns (RNEA-type products: `dM` is never formed), `M'`, `J`, the weights and the
projection's Jacobian `D_i`; NumPy then eliminates `v+` and `s` (`_substep_jacobians`):

    A  = (I - D) + D R G~,          G~ = J M'^-1 J^T W + blockdiag((1 - w_i) G_ii)
    B  = D R (U_e - J M'^-1 Phi1_e - blockdiag((1 - w_i) J_i) M'^-1 Phi3_e)
    dp = -pinv(A) B                 (`contact.coulomb.TANGENT_RCOND`, as `_tangent_solve`;
                                     the inverse where it provably equals, `tangent_solve`)
    dv+ = -M'^-1 Phi1_e + M'^-1 J^T (w dp)

exactly the linear system `jax.lax.custom_root` solves in the implicit branch, so the values
agree with `derivatives="implicit"` to rounding (`tests/test_compiled_knots.py`). Also
generated: the forward substep (`_forward_function`, the same sweeps as `contact.step`), the
knot's weighted running residuals and their Jacobians (`_costs_function`, chained through the
forces' and torques' Jacobians in `trajopt.fddp.compiled_knot_costs`, as `_knot_costs` does),
the terminal residual (`_terminal_function`) and one knot of FDDP's forward pass
(`_knot_forward_function`, folded over the horizon for the line search and the rollout). So an
FDDP iteration's linearisation and forward passes never enter XLA; the trials' costs and
defects (`trajopt.fddp.evaluate_transitions`) and the backward pass stay in JAX. The
expressions come from the CasADi model (`trajopt.casadi_model`).

The C files are compiled once per robot, contact model and parameter values with the system's
C compiler (`CC`, default `gcc`; about 25 s) and kept in `library_dir()`
(`<DIFFLOCO_CACHE_DIR>/casadi/`, or a private temporary folder when that cache is off), named
by a hash of the generated code. Supported: what the IPOPT mirror
supports (`trajopt.casadi_model`: hard and smooth contact, plane terrains, pd and torque control).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import casadi as ca
import numpy as np

from contact.coulomb import TANGENT_RCOND
from dynamics import kinematics as _kin
from dynamics import newton_euler
from dynamics.casadi_functions import numpy_model

from . import compile_cache
from . import problem as P
from .casadi_model import (
    OPS,
    activation,
    base_terms,
    difference,
    foot_contacts,
    integrate,
    joint_torque,
    moreau_step_parts,
    plane_of,
    project_disk_cone,
    running_residuals,
    safe_norm,
    step_parameters,
    unpack_reference,
)
from .fingerprint import model_fingerprint

# -march=native: 1.8x faster derivative code than without (measured for 25 Go2 substeps: 0.71 ms
# at -O2 and 0.69 at -O3 with it, 1.22 and 1.29 without; gcc 23 s at -O2, 26 s at -O3); the
# library's key includes the CPU, so a shared cache folder never hands it to another processor
COMPILER_FLAGS = ("-O2", "-march=native", "-shared", "-fPIC")


# ----------------------------------------------------------------------------- the SX functions
def _symbols(m, k):
    return {
        "q": ca.SX.sym("q", m.nq), "v": ca.SX.sym("v", m.nv), "u": ca.SX.sym("u", m.nu),
        "v_next": ca.SX.sym("v_next", m.nv), "p": ca.SX.sym("p", 3 * k),
        "s": ca.SX.sym("s", m.nv * k), "steps": ca.SX.sym("steps", 3 * k),
        "q_next": ca.SX.sym("q_next", m.nq),
    }  # fmt: skip


def _forward_function(problem: P.Problem, m, plane, params: dict) -> ca.Function:
    """`(q_next, v_next, p (3k), steps (3k), s (k nv), forces (3k) world, total (nu),
    residual) = f(q, v, u)`: one substep as `contact.step` (`trajopt.moreau_step_parts`),
    with the unit impulses, the steps, `s_i = M'^-1 J_i^T p_i`, the motor torque (actuator plus
    implicit damping) and the impulse solve's residual `max_i |R_i^-1 (p_i - proj_K(p_i - R_i
    u_i))|` (`contact.coulomb.natural_residual`)."""
    k = m.nfeet
    sym = _symbols(m, k)
    q, v, u = sym["q"], sym["v"], sym["u"]
    tau = joint_torque(problem, m, q, v, u)
    parts = moreau_step_parts(m, params, plane, q, v, tau, problem.contact, problem.num_sweeps)
    unit, steps, minv_jt = parts["unit"], parts["steps"], parts["minv_jt"]
    mu = plane["friction"]
    per_contact = []
    for i in range(k):
        fixed = project_disk_cone(unit[i] - steps[i] * parts["velocity"][i], mu)
        per_contact.append(safe_norm((unit[i] - fixed) / steps[i]))
    residual = per_contact[0]
    for r in per_contact[1:]:
        residual = ca.fmax(residual, r)
    s = ca.vertcat(*[minv_jt[:, 3 * i : 3 * i + 3] @ unit[i] for i in range(k)])
    total = tau - params["joint_damping"] * parts["v_next"][m.nv - m.nu :]
    outputs = [
        parts["q_next"], parts["v_next"], ca.vertcat(*unit), ca.vertcat(*steps), s,
        ca.vec(parts["forces"].T), total, residual,
    ]  # fmt: skip
    names = ["q_next", "v_next", "p", "steps", "s", "forces", "total", "residual"]
    return ca.Function("substep_forward", [q, v, u], outputs, ["q", "v", "u"], names)


def _derivative_function(problem: P.Problem, m, plane, params: dict) -> ca.Function:
    """The partial Jacobians of one substep at its solution (module docstring), over the tangent
    `e = (dq, dv, du)` at `e = 0`:

    inputs `q, v, u, v_next, p (3k), s (k nv), steps (3k), q_next`;
    outputs `mass M' (nv, nv)`, `jac J (3k, nv)`, `w (k,)`, `D (3k, 3)` (the k projection
    Jacobians stacked), `phi1_e (nv, n)`, `phi3_e (k nv, n)`, `u_e (3k, n)`, `w_e (k, n)`,
    `q_e (nv, n)` and `q_v (nv, nv)` (the next configuration's tangent at `q_next` over `e`
    and over `v_next`), `tau_e (nu, n)` (actuator torque)."""
    k, nv, nu = m.nfeet, m.nv, m.nu
    nvb = nv - nu
    dt, d = params["dt"], params["joint_damping"]
    sym = _symbols(m, k)
    e = ca.SX.sym("e", 2 * nv + nu)
    q = integrate(m, sym["q"], e[:nv])
    v = sym["v"] + e[nv : 2 * nv]
    u = sym["u"] + e[2 * nv :]
    v_next, p, s, steps = sym["v_next"], sym["p"], sym["s"], sym["steps"]
    tau = joint_torque(problem, m, q, v, u)
    tau_gen = ca.vertcat(ca.SX.zeros(nvb), tau) if nvb else tau
    damping = ca.DM(d * np.concatenate([np.zeros(nvb), np.ones(nu)]))
    q_mid = integrate(m, q, v * (0.5 * dt))
    kin = _kin.forward_kinematics(OPS, m, q_mid)
    gaps, jac = foot_contacts(m, plane, kin)
    w = ca.vertcat(*[activation(problem.contact, params, g) for g in gaps])
    jac_i = [jac[3 * i : 3 * i + 3, :] for i in range(k)]
    p_i = [p[3 * i : 3 * i + 3] for i in range(k)]
    s_i = [s[nv * i : nv * (i + 1)] for i in range(k)]
    weighted = ca.vertcat(*[w[i] * p_i[i] for i in range(k)])
    accel = (v_next - v) / dt
    phi1 = dt * (newton_euler.rnea(OPS, m, kin, v, accel) + damping * v_next - tau_gen)
    phi1 = phi1 - jac.T @ weighted
    zero = ca.SX.zeros(nv)
    gravity = newton_euler.rnea(OPS, m, kin, zero, zero)
    phi3 = ca.vertcat(*[
        newton_euler.rnea(OPS, m, kin, zero, s_i[i]) - gravity + dt * damping * s_i[i]
        - jac_i[i].T @ p_i[i]
        for i in range(k)
    ])  # fmt: skip
    velocity = []
    for i in range(k):
        u_i = jac_i[i] @ v_next + (1.0 - w[i]) * (jac_i[i] @ s_i[i])
        if problem.contact == "hard":  # speculative opening of a separated contact
            # max(gap, 0) as (gap + |gap|) / 2: the same value, and at gap = 0 the derivative
            # 1/2 that `jnp.maximum` takes there (a touching foot at rest)
            u_i = u_i + ca.vertcat(0, 0, 0.5 * (gaps[i] + ca.fabs(gaps[i])) / dt)
        velocity.append(u_i)
    velocity = ca.vertcat(*velocity)
    # the projection's Jacobian at its argument p_i - R_i u_i
    z = ca.SX.sym("z", 3)
    proj_jac = ca.Function(
        "proj_jac", [z], [ca.jacobian(project_disk_cone(z, plane["friction"]), z)]
    )
    argument = p - steps * velocity
    proj = ca.vertcat(*[proj_jac(argument[3 * i : 3 * i + 3]) for i in range(k)])
    q_plus = integrate(m, q, (0.5 * dt) * (v + v_next))
    q_tangent = difference(m, sym["q_next"], q_plus)
    mass = ca.jacobian(phi3[:nv], s_i[0]) if k else ca.SX.zeros(nv, nv)  # M' (rnea is linear in s)
    outputs = {
        "mass": mass, "jac": jac, "w": w, "D": proj,
        "phi1_e": ca.jacobian(phi1, e), "phi3_e": ca.jacobian(phi3, e),
        "u_e": ca.jacobian(velocity, e), "w_e": ca.jacobian(w, e),
        "q_e": ca.jacobian(q_tangent, e), "q_v": ca.jacobian(q_tangent, v_next),
        "tau_e": ca.jacobian(tau, e),
    }  # fmt: skip
    zero_e = ca.DM.zeros(e.shape)
    values = [ca.substitute(ca.densify(x), e, zero_e) for x in outputs.values()]
    names = ["q", "v", "u", "v_next", "p", "s", "steps", "q_next"]
    return ca.Function("substep_derivative", [sym[n] for n in names], values, names, list(outputs))


def _knot_forward_function(problem: P.Problem, m, plane, params: dict) -> ca.Function:
    """One knot of FDDP's forward pass (`trajopt.fddp.forward_with_transitions`), for a fold
    over the horizon (`SubstepFunctions.forward_pass`):

        u    = u_t + alpha k_t + K_t local(x_t, x_hat)
        reached, forces, taus = transition(x_hat, u)        (`substeps` contact steps)
        next = reached (+) (alpha - 1) f_{t+1}

    inputs `x_hat, x_t` (flat knot states `[q, v, u_prev]`), `u_t, k_t (nu,)`, `K_t (nu, nx)`,
    `f_next (nx,)`, `alpha`; outputs `next` (flat), `u`, `reached` (flat), `forces (3k,)` (the
    substeps' mean, world, `[f_0, f_1, ...]`), `taus (nu,)` (per joint the substep of largest
    magnitude, the first on ties, as `jnp.argmax`)."""
    nq, nv, nu = m.nq, m.nv, m.nu
    nxq, nx = nq + nv + nu, 2 * nv + nu
    x_hat, x_t = ca.SX.sym("x_hat", nxq), ca.SX.sym("x_t", nxq)
    u_t, k_t = ca.SX.sym("u_t", nu), ca.SX.sym("k_t", nu)
    gains, f_next, alpha = ca.SX.sym("K_t", nu, nx), ca.SX.sym("f_next", nx), ca.SX.sym("alpha")
    local = ca.vertcat(
        difference(m, x_t[:nq], x_hat[:nq]), x_hat[nq : nq + nv] - x_t[nq : nq + nv],
        x_hat[nq + nv :] - x_t[nq + nv :],
    )  # fmt: skip
    u = u_t + alpha * k_t + gains @ local
    q, v = x_hat[:nq], x_hat[nq : nq + nv]
    forces, taus = 0, None
    for _ in range(problem.substeps):
        tau = joint_torque(problem, m, q, v, u)
        parts = moreau_step_parts(
            m, params, plane, q, v, tau, problem.contact, problem.num_sweeps
        )
        q, v = parts["q_next"], parts["v_next"]
        total = tau - params["joint_damping"] * v[nv - nu :]
        taus = total if taus is None else ca.if_else(ca.fabs(total) > ca.fabs(taus), total, taus)
        forces = forces + ca.vec(parts["forces"].T)
    forces = forces / problem.substeps
    step = (alpha - 1.0) * f_next
    following = ca.vertcat(
        integrate(m, q, step[:nv]), v + step[nv : 2 * nv], u + step[2 * nv :]
    )
    return ca.Function(
        "knot_forward", [x_hat, x_t, u_t, k_t, gains, f_next, alpha],
        [following, u, ca.vertcat(q, v, u), forces, taus],
        ["x_hat", "x_t", "u_t", "k_t", "K_t", "f_next", "alpha"],
        ["next", "u", "reached", "forces", "taus"],
    )  # fmt: skip


def running_terms(problem: P.Problem) -> list:
    """The weighted running terms, in `trajopt.problem.weighted`'s order (sorted names)."""
    return [n for n in sorted(problem.data.weights) if n in P.RUNNING_TERMS]


def _costs_function(problem: P.Problem, m, plane) -> ca.Function:
    """A knot's weighted running residuals `r = [sqrt(w_i) r_i]` (`running_terms` order) and
    their Jacobians at `(x, u, forces, taus)` (`trajopt.fddp.knot_costs`' pieces): over the
    configuration's tangent `dq`, `dv`, `du_prev`, `du`, `forces (3k,)` and `taus (nu,)`.

    inputs `x` (flat), `u`, `forces (3k,)` (`[f_0, f_1, ...]`), `taus`, `ref` (a row of
    `trajopt.reference_rows`), `sqrt_w` (one per running term); outputs `r, r_q, r_v,
    r_up, r_u, r_f, r_tau`."""
    nq, nv, nu, k = m.nq, m.nv, m.nu, m.nfeet
    x, u = ca.SX.sym("x", nq + nv + nu), ca.SX.sym("u", nu)
    forces, taus = ca.SX.sym("forces", 3 * k), ca.SX.sym("taus", nu)
    ref = ca.SX.sym("ref", 4 + 2 * k + nu)
    terms = running_terms(problem)
    sqrt_w = ca.SX.sym("sqrt_w", len(terms))
    sizes = {"q": nv, "v": nv, "up": nu, "u": nu, "f": 3 * k, "tau": nu}
    e = {name: ca.SX.sym("e_" + name, size) for name, size in sizes.items()}
    moved = ca.vertcat(
        integrate(m, x[:nq], e["q"]), x[nq : nq + nv] + e["v"], x[nq + nv :] + e["up"]
    )
    res = running_residuals(
        problem, m, plane, moved, u + e["u"], ca.reshape(forces + e["f"], 3, k).T,
        taus + e["tau"], unpack_reference(problem, ref),
    )  # fmt: skip
    r = ca.vertcat(*[sqrt_w[i] * res[name] for i, name in enumerate(terms)])
    zero = {name: ca.DM.zeros(sym.shape) for name, sym in e.items()}
    outputs = [r] + [ca.jacobian(r, e[name]) for name in ("q", "v", "up", "u", "f", "tau")]
    for name in e:
        outputs = [ca.substitute(ca.densify(o), e[name], zero[name]) for o in outputs]
    return ca.Function(
        "knot_costs", [x, u, forces, taus, ref, sqrt_w], outputs,
        ["x", "u", "forces", "taus", "ref", "sqrt_w"],
        ["r", "r_q", "r_v", "r_up", "r_u", "r_f", "r_tau"],
    )  # fmt: skip


def _terminal_function(problem: P.Problem, m, plane) -> ca.Function:
    """The weighted terminal residual `sqrt(w) r_T` (`trajopt.problem.terminal_residuals`) and
    its Jacobian over the knot's tangent `dx (nx,)`: inputs `x` (flat), `ref`, `sqrt_w` (1,)."""
    nq, nv, nu, k = m.nq, m.nv, m.nu, m.nfeet
    x, ref, sqrt_w = ca.SX.sym("x", nq + nv + nu), ca.SX.sym("ref", 4 + 2 * k + nu), ca.SX.sym("w")
    dx = ca.SX.sym("dx", 2 * nv + nu)
    q = integrate(m, x[:nq], dx[:nv])
    v = x[nq : nq + nv] + dx[nv : 2 * nv]
    base = base_terms(problem, plane, q, v, unpack_reference(problem, ref))
    r = sqrt_w * ca.vertcat(*[base[name] for name in sorted(base)])
    outputs = [ca.substitute(ca.densify(o), dx, ca.DM.zeros(dx.shape))
               for o in (r, ca.jacobian(r, dx))]  # fmt: skip
    return ca.Function("terminal_costs", [x, ref, sqrt_w], outputs, ["x", "ref", "sqrt_w"],
                       ["r", "r_x"])  # fmt: skip


# ----------------------------------------------------------------------------- compilation
_LOCK = threading.Lock()


def library_dir() -> Path:
    """Where the compiled libraries live: `<DIFFLOCO_CACHE_DIR>/casadi`, or, with the cache off,
    a folder of this user's in the temporary directory (mode 0700: a library is code that gets
    loaded, so the folder must not be writable by others). A library's name is a hash of its
    code, compiler, flags and CPU, so a stale one is never loaded."""
    root = compile_cache.cache_dir()
    if root is not None:
        return root / "casadi"
    folder = Path(tempfile.gettempdir()) / f"diffloco-casadi-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise RuntimeError(f"{folder} is not a private folder of this user: no code loaded from it")
    return folder


def compiler() -> str:
    """The C compiler the libraries are built with: `CC`, default `gcc`."""
    return os.environ.get("CC", "gcc")


def compiler_available() -> bool:
    """Whether `compiler()` is on the PATH (derivatives="compiled" needs it at the first use)."""
    return shutil.which(compiler()) is not None


@functools.cache
def _cpu_identity() -> str:
    """The processor the code is compiled for (`-march=native`): model name and flags."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    lines = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))]
    return platform.machine() + "".join(sorted(set(lines)))


def _compile(functions: list[ca.Function]) -> list[ca.Function]:
    """The functions as C, compiled into one shared library (cached by the code's hash), loaded
    with `casadi.external`."""
    folder = library_dir()
    folder.mkdir(parents=True, exist_ok=True)
    generator = ca.CodeGenerator("knots.c", {"with_header": False})
    for f in functions:
        generator.add(f)
    with tempfile.TemporaryDirectory(prefix="diffloco-cg-") as scratch:
        generator.generate(scratch + os.sep)
        source = Path(scratch, "knots.c").read_bytes()
        cc = compiler()
        machine = repr((cc, COMPILER_FLAGS, _cpu_identity())).encode()
        key = hashlib.sha256(source + machine).hexdigest()[:24]
        library = folder / f"knots-{key}.so"
        with _LOCK:
            if not library.exists():
                if not compiler_available():
                    raise RuntimeError(
                        f"derivatives='compiled' needs a C compiler: {cc!r} was not found "
                        "(install gcc or set CC, or use derivatives='implicit')"
                    )
                partial = Path(scratch, "knots.so")
                subprocess.run(
                    [cc, *COMPILER_FLAGS, "-o", str(partial), str(Path(scratch, "knots.c"))],
                    check=True, capture_output=True,
                )  # fmt: skip
                # a unique name in the folder, then an atomic rename: processes compiling the
                # same library at once each write a whole file
                handle, staged = tempfile.mkstemp(suffix=".so.part", dir=folder)
                os.close(handle)
                shutil.copyfile(partial, staged)
                os.replace(staged, library)
    return [ca.external(f.name(), str(library)) for f in functions]


class _MappedCall:
    """A CasADi function mapped (or folded, `mapped`) over `n` evaluations, called on NumPy
    buffers (no `DM` conversions): inputs `(n, r)` arrays (or `(r,)` for an accumulator's
    start), outputs a dict of `(n, r, c)` arrays (fresh each call)."""

    def __init__(self, function: ca.Function, n: int, mapped: ca.Function | None = None):
        self.mapped = function.map(n) if mapped is None else mapped
        self.n = n
        self.lock = threading.Lock()  # one buffer: one call at a time
        self.names = function.name_out()
        self.shapes = [function.size_out(i) for i in range(function.n_out())]
        self.buffer, self.evaluate = self.mapped.buffer()

    def __call__(self, *inputs) -> dict:
        keep = [np.ascontiguousarray(a, dtype=float) for a in inputs]
        results = {}
        with self.lock:
            for i, a in enumerate(keep):
                self.buffer.set_arg(i, memoryview(a))
            for i, (name, (r, c)) in enumerate(zip(self.names, self.shapes, strict=True)):
                out = np.empty((self.n, c, r))  # column-major (r, c) blocks side by side
                self.buffer.set_res(i, memoryview(out))
                results[name] = np.swapaxes(out, 1, 2)
            self.evaluate()
        return results


class SubstepFunctions:
    """The compiled functions of one problem setting: a substep's forward and derivative
    functions, mapped over `n` knots at a time (`mapped(n)`, cached), a knot of FDDP's forward
    pass, folded over the horizon (`forward_pass(n)`), and the knot and terminal costs
    (`costs_mapped(n)`, `terminal_call()`)."""

    def __init__(self, forward, derivative, knot_forward, costs, terminal, plane, numbers):
        self.forward, self.derivative, self.knot_forward = forward, derivative, knot_forward
        self.costs, self.terminal = costs, terminal
        self.plane, self.numbers = plane, numbers  # the terrain and step parameters built in
        self._calls: dict = {}  # (name, n) -> _MappedCall

    def _call(self, name: str, n: int, fold: bool = False) -> _MappedCall:
        """The function `name` mapped (or, `fold`, folded) over `n` knots, made on first use."""
        if (name, n) not in self._calls:
            function = getattr(self, name)
            folded = function.mapaccum(name + "_pass", n) if fold else None
            self._calls[name, n] = _MappedCall(function, n, folded)
        return self._calls[name, n]

    def forward_pass(self, n: int) -> _MappedCall:
        """`knot_forward` folded over `n` knots (`casadi.Function.mapaccum`: `x_hat` carried)."""
        return self._call("knot_forward", n, fold=True)

    def mapped(self, n: int) -> tuple[_MappedCall, _MappedCall]:
        """The substep's forward and derivative functions over `n` knots."""
        return self._call("forward", n), self._call("derivative", n)

    def costs_mapped(self, n: int) -> _MappedCall:
        """`costs` over `n` knots."""
        return self._call("costs", n)

    def terminal_call(self) -> _MappedCall:
        """`terminal` for one knot."""
        return self._call("terminal", 1)


def _key(problem: P.Problem) -> tuple:
    """What a library depends on, as plain numbers (no JAX operation: an MPC looks it up when
    its data's parameters change)."""

    terrain = problem.data.params.terrain  # a plane: `Problem` validated it
    numbers = tuple(sorted(step_parameters(problem).items()))
    plane = tuple(np.asarray(terrain.normal, dtype=float).tolist()) + (
        float(np.asarray(terrain.height)), float(np.asarray(terrain.friction)),
    )  # fmt: skip
    gains = tuple(np.asarray(problem.data.gains, dtype=float).tolist())
    return (
        model_fingerprint(problem.model), problem.contact, problem.num_sweeps, problem.control,
        problem.substeps, plane, numbers, gains, tuple(sorted(problem.data.weights)),
    )  # fmt: skip


# The loaded libraries, by content (robot, static choices, parameter values), most recent last;
# a few: each is a loaded shared library of about 1 MB
MAX_LOADED = 8
_FUNCTIONS: collections.OrderedDict = collections.OrderedDict()


def substep_functions(problem: P.Problem, data=None) -> SubstepFunctions:
    """The compiled substep functions of `problem` with `data`'s step parameters and PD gains
    (default the problem's own), built on first use: about 25 s of the C compiler per robot,
    contact model and parameter set, then loaded from the cache folder (about 1 s to rebuild
    the symbolic graph and hash its code)."""
    if problem.derivatives != "compiled":
        # `Problem`'s validation of "compiled" is what says the generated code covers it
        raise ValueError(
            f"substep_functions needs a derivatives='compiled' problem, got {problem.derivatives!r}"
        )
    if data is not None and data is not problem.data:
        problem = problem.replace(data=data)  # validated again with the new data
    key = _key(problem)
    if key in _FUNCTIONS:
        _FUNCTIONS.move_to_end(key)
        return _FUNCTIONS[key]
    m = numpy_model(problem.model)
    plane, numbers = plane_of(problem.data.params.terrain), step_parameters(problem)
    built = [
        _forward_function(problem, m, plane, numbers),
        _derivative_function(problem, m, plane, numbers),
        _knot_forward_function(problem, m, plane, numbers),
        _costs_function(problem, m, plane),
        _terminal_function(problem, m, plane),
    ]
    _FUNCTIONS[key] = SubstepFunctions(*_compile(built), plane, numbers)
    while len(_FUNCTIONS) > MAX_LOADED:
        _FUNCTIONS.popitem(last=False)
    return _FUNCTIONS[key]


# ----------------------------------------------------------------------------- the Jacobians
def tangent_solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`pinv(a, rcond=TANGENT_RCOND) @ b` for a batch `a (N, m, m)`, `b (N, m, n)`, as
    `contact.coulomb._tangent_solve` applies it, by the inverse where a cheap bound proves the
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


def _substep_jacobians(parts: dict, forward: dict, nv: int, nu: int, dt: float, damping: float):
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


def knot_dynamics(problem: P.Problem, functions: SubstepFunctions, q, v, u) -> dict:
    """N knots' transitions and their Jacobians over `(dq, dv, du)` at `x = (q (N, nq), v (N, nv))`
    under `u (N, nu)`, as `trajopt.fddp.knot_dynamics` computes them with
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
    chain = np.broadcast_to(np.eye(n), (N, n, n))  # substep input tangent over the knot's
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
        state, forces_jac, total_jac = _substep_jacobians(
            parts, fwd, nv, nu, numbers["dt"], numbers["joint_damping"]
        )
        forces_sum = forces_sum + fwd["forces"]
        forces_jac_sum = forces_jac_sum + forces_jac @ chain
        totals.append(fwd["total"])
        totals_jac.append(total_jac @ chain)
        residual = fwd["residual"] if residual is None else np.maximum(residual, fwd["residual"])
        chain = np.concatenate([state @ chain, control_rows], axis=1)
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
