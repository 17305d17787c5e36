"""The CasADi functions of FDDP's knots, for C code generation (`trajopt.engine.generated_code`).

Built from the CasADi model (`trajopt.engine.casadi_model`) at fixed step parameters and terrain:

- `forward_function`: one contact substep (Moreau midpoint, `contact/step.py`) and the unknowns
  at its solution: with the problem's `contact_tolerance`, the contact problem (SX), the
  converged impulse solve (`impulse_solve`, the C of `trajopt/engine/impulse_solve.c`, a CasADi
  external) and the step's completion (SX), composed in an MX function; without it, the
  paper's fixed sweeps, all SX;
- `derivative_function`: that substep's partial Jacobians at its solution, over the tangent
  `e = (dq, dv, du)` (the equations are in `trajopt.engine.compiled_knots`' docstring);
- `knot_forward_function`: one knot of FDDP's forward pass, for a fold over the horizon;
- `costs_function`, `terminal_function`: a knot's weighted residuals and their Jacobians.

`m` is the robot as NumPy arrays (`dynamics.casadi_functions.numpy_model`), `plane` the terrain
(`casadi_model.plane_of`), `params` the step parameters (`casadi_model.step_parameters`).
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from contact import coulomb
from dynamics import kinematics as _kin
from dynamics import newton_euler

from .. import problem as P
from .casadi_model import (
    OPS,
    activation,
    contact_problem_parts,
    difference,
    foot_contacts,
    integrate,
    joint_torque,
    moreau_step_parts,
    project_disk_cone,
    row_size,
    running_residuals,
    safe_norm,
    step_after_impulses,
    term_split,
    terminal_residuals,
    unpack_reference,
    unpack_targets,
)


def symbols(m, k):
    return {
        "q": ca.SX.sym("q", m.nq), "v": ca.SX.sym("v", m.nv), "u": ca.SX.sym("u", m.nu),
        "v_next": ca.SX.sym("v_next", m.nv), "p": ca.SX.sym("p", 3 * k),
        "s": ca.SX.sym("s", m.nv * k), "steps": ca.SX.sym("steps", 3 * k),
        "q_next": ca.SX.sym("q_next", m.nq),
    }  # fmt: skip


def forward_function(problem: P.Problem, m, plane, params: dict,
                     impulse_solve: ca.Function | None = None) -> ca.Function:  # fmt: skip
    """`(q_next, v_next, p (3k), steps (3k), s (k nv), forces (3k) world, total (nu),
    residual) = f(q, v, u)`: one substep as `contact.step` (`trajopt.moreau_step_parts`),
    with the unit impulses, the steps, `s_i = M'^-1 J_i^T p_i`, the motor torque (actuator plus
    implicit damping) and the impulse solve's residual `max_i |R_i^-1 (p_i - proj_K(p_i - R_i
    u_i))|` (`contact.coulomb.natural_residual`).

    A problem with a `contact_tolerance` solves the impulses with `impulse_solve`
    (`impulse_solve_function`'s external, for `k` contacts) to that tolerance, at most
    `num_sweeps` sweeps; one without runs `num_sweeps` fixed sweeps in SX."""
    if problem.contact_tolerance is not None:
        if impulse_solve is None:
            raise ValueError("a problem with a contact_tolerance needs impulse_solve")
        return converged_substep_function(problem, m, plane, params, impulse_solve)
    k = m.nfeet
    sym = symbols(m, k)
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
    s, total = responses_and_motor_torque(m, params, minv_jt, unit, tau, parts["v_next"])
    outputs = [
        parts["q_next"], parts["v_next"], ca.vertcat(*unit), ca.vertcat(*steps), s,
        ca.vec(parts["forces"].T), total, residual,
    ]  # fmt: skip
    return ca.Function("substep_forward", [q, v, u], outputs, ["q", "v", "u"], FORWARD_OUTPUTS)


FORWARD_OUTPUTS = ["q_next", "v_next", "p", "steps", "s", "forces", "total", "residual"]


def responses_and_motor_torque(m, params: dict, minv_jt, unit, tau, v_next):
    """`(s (k nv), total (nu))`: the contacts' unit-impulse responses `s_i = M'^-1 J_i^T p_i`
    from `minv_jt (nv, 3k)` and the unit impulses `unit[i] (3,)`, and the motor torque, the
    actuator's `tau` less the implicit joint damping at the next velocity."""
    s = ca.vertcat(*[minv_jt[:, 3 * i : 3 * i + 3] @ p_i for i, p_i in enumerate(unit)])
    return s, tau - params["joint_damping"] * v_next[m.nv - m.nu :]


def contact_problem_function(problem: P.Problem, m, plane, params: dict) -> ca.Function:
    """`(delassus (3k, 3k), c (3k), w (k), tau (nu), v_free (nv), minv_jt (nv, 3k)) =
    f(q, v, u)`: a substep up to its impulse solve (`casadi_model.contact_problem_parts`), with
    the actuator torque `tau`."""
    sym = symbols(m, m.nfeet)
    q, v, u = sym["q"], sym["v"], sym["u"]
    tau = joint_torque(problem, m, q, v, u)
    parts = contact_problem_parts(m, params, plane, q, v, tau, problem.contact)
    outputs = [parts["delassus"], parts["c"], ca.vertcat(*parts["active"]), tau,
               parts["v_free"], parts["minv_jt"]]  # fmt: skip
    return ca.Function("substep_contact_problem", [q, v, u], outputs, ["q", "v", "u"],
                       ["delassus", "c", "w", "tau", "v_free", "minv_jt"])  # fmt: skip


def after_impulses_function(problem: P.Problem, m, plane, params: dict) -> ca.Function:
    """`(q_next, v_next, s (k nv), forces (3k) world, total (nu)) = f(q, v, tau, v_free,
    minv_jt, w, p)`: a substep's completion from its unit impulses `p (3k)`
    (`casadi_model.step_after_impulses`), as `forward_function`'s outputs."""
    k, nv = m.nfeet, m.nv
    q, v = ca.SX.sym("q", m.nq), ca.SX.sym("v", nv)
    tau, v_free = ca.SX.sym("tau", m.nu), ca.SX.sym("v_free", nv)
    minv_jt, w, p = ca.SX.sym("minv_jt", nv, 3 * k), ca.SX.sym("w", k), ca.SX.sym("p", 3 * k)
    unit = [p[3 * i : 3 * i + 3] for i in range(k)]
    after = step_after_impulses(m, params, plane, q, v, minv_jt, v_free,
                                [w[i] for i in range(k)], unit)  # fmt: skip
    s, total = responses_and_motor_torque(m, params, minv_jt, unit, tau, after["v_next"])
    return ca.Function(
        "substep_after_impulses", [q, v, tau, v_free, minv_jt, w, p],
        [after["q_next"], after["v_next"], s, ca.vec(after["forces"].T), total],
        ["q", "v", "tau", "v_free", "minv_jt", "w", "p"],
        ["q_next", "v_next", "s", "forces", "total"],
    )  # fmt: skip


def converged_substep_function(problem: P.Problem, m, plane, params: dict,
                               impulse_solve: ca.Function) -> ca.Function:  # fmt: skip
    """`forward_function` for a problem with a `contact_tolerance`: the contact problem, the
    impulse solve to the tolerance (`impulse_solve`, settings `(mu, contact_tolerance,
    num_sweeps, coulomb.RELAXATION)`) and the completion, composed (MX: the solve is an
    external C function)."""
    problem_part = contact_problem_function(problem, m, plane, params)
    completion = after_impulses_function(problem, m, plane, params)
    q, v, u = ca.MX.sym("q", m.nq), ca.MX.sym("v", m.nv), ca.MX.sym("u", m.nu)
    delassus, c, w, tau, v_free, minv_jt = problem_part(q, v, u)
    settings = ca.DM([plane["friction"], problem.contact_tolerance, problem.num_sweeps,
                      coulomb.RELAXATION])  # fmt: skip
    p, steps, residual, _ = impulse_solve(delassus, c, w, settings)
    q_next, v_next, s, forces, total = completion(q, v, tau, v_free, minv_jt, w, p)
    outputs = [q_next, v_next, p, steps, s, forces, total, residual]
    return ca.Function("substep_forward", [q, v, u], outputs, ["q", "v", "u"], FORWARD_OUTPUTS)


def derivative_function(problem: P.Problem, m, plane, params: dict) -> ca.Function:
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
    sym = symbols(m, k)
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


def knot_forward_function(problem: P.Problem, m, plane, params: dict,
                          impulse_solve: ca.Function | None = None) -> ca.Function:  # fmt: skip
    """One knot of FDDP's forward pass (`trajopt.engine.shooting.forward_with_transitions`), for a
    fold over the horizon (`trajopt.engine.generated_code.SubstepFunctions.forward_pass`):

        u    = u_t + alpha k_t + K_t local(x_t, x_hat)
        reached, forces, taus = transition(x_hat, u)        (`substeps` contact steps)
        next = reached (+) (alpha - 1) f_{t+1}

    inputs `x_hat, x_t` (flat knot states `[q, v, u_prev]`), `u_t, k_t (nu,)`, `K_t (nu, nx)`,
    `f_next (nx,)`, `alpha`; outputs `next` (flat), `u`, `reached` (flat), `forces (3k,)` (the
    substeps' mean, world, `[f_0, f_1, ...]`), `taus (nu,)` (per joint the substep of largest
    magnitude, the first on ties, as `jnp.argmax`).

    The knot is an MX graph of calls: the control law, the substeps (`forward_function`; with
    the problem's `contact_tolerance`, `converged_substep_function`'s, `impulse_solve` needed)
    and the defect step. The substep's code is generated once and called `substeps` times, so
    the knot's C does not grow with the substeps."""
    substep = forward_function(problem, m, plane, params, impulse_solve)
    return knot_forward_around(problem, m, substep)


KNOT_FORWARD_INPUTS = ["x_hat", "x_t", "u_t", "k_t", "K_t", "f_next", "alpha"]
KNOT_FORWARD_OUTPUTS = ["next", "u", "reached", "forces", "taus"]


def knot_forward_around(problem: P.Problem, m, substep: ca.Function) -> ca.Function:
    """`knot_forward_function` around the substep function `substep` (`forward_function`'s
    signature): the control law, the peak torque and the defect step are SX functions, called
    with MX symbols (calls, not inlined copies)."""
    nq, nv, nu = m.nq, m.nv, m.nu
    nxq, nx = nq + nv + nu, 2 * nv + nu
    sx = {"x_hat": ca.SX.sym("x_hat", nxq), "x_t": ca.SX.sym("x_t", nxq),
          "u_t": ca.SX.sym("u_t", nu), "k_t": ca.SX.sym("k_t", nu),
          "K_t": ca.SX.sym("K_t", nu, nx), "f_next": ca.SX.sym("f_next", nx),
          "alpha": ca.SX.sym("alpha")}  # fmt: skip
    x_hat, x_t = sx["x_hat"], sx["x_t"]
    local = ca.vertcat(
        difference(m, x_t[:nq], x_hat[:nq]), x_hat[nq : nq + nv] - x_t[nq : nq + nv],
        x_hat[nq + nv :] - x_t[nq + nv :],
    )  # fmt: skip
    control_law = ca.Function(
        "knot_control", [sx[n] for n in KNOT_FORWARD_INPUTS],
        [sx["u_t"] + sx["alpha"] * sx["k_t"] + sx["K_t"] @ local],
    )  # fmt: skip
    total, taus = ca.SX.sym("total", nu), ca.SX.sym("taus", nu)
    peak = ca.Function("peak_torque", [total, taus],
                       [ca.if_else(ca.fabs(total) > ca.fabs(taus), total, taus)])  # fmt: skip
    q, v, u = ca.SX.sym("q", nq), ca.SX.sym("v", nv), ca.SX.sym("u", nu)
    step = (sx["alpha"] - 1.0) * sx["f_next"]
    defect_step = ca.Function(
        "knot_defect_step", [q, v, u, sx["f_next"], sx["alpha"]],
        [ca.vertcat(integrate(m, q, step[:nv]), v + step[nv : 2 * nv], u + step[2 * nv :])],
    )  # fmt: skip
    outer = {"x_hat": ca.MX.sym("x_hat", nxq), "x_t": ca.MX.sym("x_t", nxq),
             "u_t": ca.MX.sym("u_t", nu), "k_t": ca.MX.sym("k_t", nu),
             "K_t": ca.MX.sym("K_t", nu, nx), "f_next": ca.MX.sym("f_next", nx),
             "alpha": ca.MX.sym("alpha")}  # fmt: skip
    inputs = [outer[n] for n in KNOT_FORWARD_INPUTS]
    u_mx = control_law(*inputs)
    q_mx, v_mx = outer["x_hat"][:nq], outer["x_hat"][nq : nq + nv]
    forces, peak_taus = 0, None
    for _ in range(problem.substeps):
        out = dict(zip(FORWARD_OUTPUTS, substep(q_mx, v_mx, u_mx), strict=True))
        q_mx, v_mx = out["q_next"], out["v_next"]
        peak_taus = out["total"] if peak_taus is None else peak(out["total"], peak_taus)
        forces = forces + out["forces"]
    forces = forces / problem.substeps
    following = defect_step(q_mx, v_mx, u_mx, outer["f_next"], outer["alpha"])
    return ca.Function(
        "knot_forward", inputs,
        [following, u_mx, ca.vertcat(q_mx, v_mx, u_mx), forces, peak_taus],
        KNOT_FORWARD_INPUTS, KNOT_FORWARD_OUTPUTS,
    )  # fmt: skip


def running_terms(problem: P.Problem) -> list:
    """The weighted running terms of the generated code, sorted by name: the built-in ones and
    the own running terms that CasADi evaluates (`casadi_model.term_split`)."""
    own = {t.name for t in term_split(problem)[0] if not t.terminal}
    return [n for n in sorted(problem.data.weights) if n in P.RUNNING_TERMS or n in own]


def terminal_terms(problem: P.Problem) -> list:
    """The weighted terminal terms of the generated code, sorted by name (as `running_terms`)."""
    own = {t.name for t in term_split(problem)[0] if t.terminal}
    return [n for n in sorted(problem.data.weights) if n in P.TERMINAL_TERMS or n in own]


def running_symbols(problem: P.Problem, m):
    """A running knot's inputs as CasADi symbols: `x` (flat `[q, v, u_prev]`), `u`, `forces
    (3k,)`, `taus (nu,)`, `ref` (a `casadi_model.knot_rows` row), with the generated own terms
    `own` and the running term names `terms` (`running_terms`)."""
    nq, nv, nu, k = m.nq, m.nv, m.nu, m.nfeet
    x, u = ca.SX.sym("x", nq + nv + nu), ca.SX.sym("u", nu)
    forces, taus = ca.SX.sym("forces", 3 * k), ca.SX.sym("taus", nu)
    own = term_split(problem)[0]
    ref = ca.SX.sym("ref", row_size(problem, own))
    return x, u, forces, taus, ref, own, running_terms(problem)


def costs_function(problem: P.Problem, m, plane) -> ca.Function:
    """A knot's weighted running residuals `r = [sqrt(w_i) r_i]` (`running_terms` order) and
    their Jacobians at `(x, u, forces, taus)` (`trajopt.engine.shooting.knot_costs`' pieces): over
    the configuration's tangent `dq`, `dv`, `du_prev`, `du`, `forces (3k,)` and `taus (nu,)`.

    inputs `x` (flat), `u`, `forces (3k,)` (`[f_0, f_1, ...]`), `taus`, `ref` (a row of
    `casadi_model.knot_rows`: the reference, then the own terms' targets), `sqrt_w` (one per
    running term); outputs `r, r_q, r_v, r_up, r_u, r_f, r_tau`."""
    nq, nv, nu, k = m.nq, m.nv, m.nu, m.nfeet
    x, u, forces, taus, ref, own, terms = running_symbols(problem, m)
    sqrt_w = ca.SX.sym("sqrt_w", len(terms))
    sizes = {"q": nv, "v": nv, "up": nu, "u": nu, "f": 3 * k, "tau": nu}
    e = {name: ca.SX.sym("e_" + name, size) for name, size in sizes.items()}
    moved = ca.vertcat(
        integrate(m, x[:nq], e["q"]), x[nq : nq + nv] + e["v"], x[nq + nv :] + e["up"]
    )
    res = running_residuals(
        problem, m, plane, moved, u + e["u"], ca.reshape(forces + e["f"], 3, k).T,
        taus + e["tau"], unpack_reference(problem, ref), unpack_targets(problem, own, ref), own,
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


def cost_values_function(problem: P.Problem, m, plane) -> ca.Function:
    """A knot's running term costs `0.5 w_i |r_i|^2` (`running_terms` order) at `(x, u, forces,
    taus)`, without derivatives (a line search's trials): inputs as `costs_function` with the
    weights `w` (one per running term) in place of their square roots; output `costs`."""
    x, u, forces, taus, ref, own, terms = running_symbols(problem, m)
    w = ca.SX.sym("w", len(terms))
    res = running_residuals(
        problem, m, plane, x, u, ca.reshape(forces, 3, m.nfeet).T, taus,
        unpack_reference(problem, ref), unpack_targets(problem, own, ref), own,
    )  # fmt: skip
    costs = ca.vertcat(*[0.5 * w[i] * ca.sumsqr(res[name]) for i, name in enumerate(terms)])
    return ca.Function("knot_cost_values", [x, u, forces, taus, ref, w], [costs],
                       ["x", "u", "forces", "taus", "ref", "w"], ["costs"])  # fmt: skip


def terminal_values_function(problem: P.Problem, m, plane) -> ca.Function:
    """The terminal term costs `0.5 w_i |r_i|^2` (`terminal_terms` order) at `x`: inputs `x`,
    `ref` (a `knot_rows` row), `w` (one per term); output `costs`."""
    nq, nv, nu = m.nq, m.nv, m.nu
    own = term_split(problem)[0]
    terms = terminal_terms(problem)
    x, ref = ca.SX.sym("x", nq + nv + nu), ca.SX.sym("ref", row_size(problem, own))
    w = ca.SX.sym("w", len(terms))
    res = terminal_residuals(problem, m, plane, x, unpack_reference(problem, ref),
                             unpack_targets(problem, own, ref), own)  # fmt: skip
    costs = ca.vertcat(*[0.5 * w[i] * ca.sumsqr(res[name]) for i, name in enumerate(terms)])
    return ca.Function("terminal_cost_values", [x, ref, w], [costs], ["x", "ref", "w"],
                       ["costs"])  # fmt: skip


def terminal_function(problem: P.Problem, m, plane) -> ca.Function:
    """The weighted terminal residuals `[sqrt(w_i) r_i]` (`terminal_terms` order;
    `trajopt.problem.terminal_residuals`) and their Jacobian over the knot's tangent
    `dx (nx,)`: inputs `x` (flat), `ref` (a `knot_rows` row), `sqrt_w` (one per term)."""
    nq, nv, nu = m.nq, m.nv, m.nu
    own = term_split(problem)[0]
    terms = terminal_terms(problem)
    x, ref = ca.SX.sym("x", nq + nv + nu), ca.SX.sym("ref", row_size(problem, own))
    sqrt_w = ca.SX.sym("sqrt_w", len(terms))
    dx = ca.SX.sym("dx", 2 * nv + nu)
    moved = ca.vertcat(integrate(m, x[:nq], dx[:nv]), x[nq : nq + nv] + dx[nv : 2 * nv],
                       x[nq + nv :] + dx[2 * nv :])  # fmt: skip
    res = terminal_residuals(problem, m, plane, moved, unpack_reference(problem, ref),
                             unpack_targets(problem, own, ref), own)  # fmt: skip
    r = ca.vertcat(*[sqrt_w[i] * res[name] for i, name in enumerate(terms)])
    outputs = [ca.substitute(ca.densify(o), dx, ca.DM.zeros(dx.shape))
               for o in (r, ca.jacobian(r, dx))]  # fmt: skip
    return ca.Function("terminal_costs", [x, ref, sqrt_w], outputs, ["x", "ref", "sqrt_w"],
                       ["r", "r_x"])  # fmt: skip
