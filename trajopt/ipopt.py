"""CasADi + IPOPT multiple shooting over the same dynamics and contact model, for cross-checks.

The knot transition `F(x, u)` and the residual costs of `trajopt.problem` are rebuilt as CasADi
`SX` functions from the same backend-generic rigid-body algorithms (`CasadiOps`: forward
kinematics, CRBA, RNEA, frame Jacobians) and the same contact step as `contact.step` (Moreau
midpoint, `hard` or `smooth` activation with bias and margin, speculative opening for `hard`,
implicit joint damping, the fixed number of Gauss-Seidel prox sweeps of `contact.coulomb` with
its steps, initialisation and disk projection). Branches become `if_else`, norms are safe at 0.

A knot state is the flat vector `x = [q (nq), v (nv), u_prev (nu)]`. The NLP (tangent
increments around the initial guess `xbar_t`, so the quaternion needs no norm constraint):

    min   sum_t l_t(x_t, u_t) + l_T(x_T),      x_t = xbar_t (+) dx_t
    s.t.  F(x_t, u_t) (-) xbar_{t+1} = dx_{t+1}    (t = 0 .. T-1),    x_0 = x0

i.e. `F(x_t, u_t) = x_{t+1}` (the retraction is invertible near `xbar`), linear in `dx_{t+1}`.
One `ca.Function` per knot (SX inside) is mapped over the horizon with MX outside, which keeps
the graph construction fast.

Supported: `hard` and `smooth` contact, `pd` and `torque` controls, plane terrains (`Plane`:
flat or inclined), every cost term of `trajopt.problem.COST_TERMS`. Not supported (raises
`NotImplementedError`): the `penalty` contact model, `Steps` and `Heightfield` terrains,
Jacobi sweeps (problems always use Gauss-Seidel).
"""

from __future__ import annotations

import time

import casadi as ca
import jax
import jax.numpy as jnp
import numpy as np

from contact import terrain as _terrain
from dynamics import composite_inertia, newton_euler, spatial
from dynamics import kinematics as _kin
from dynamics.backend import CasadiOps
from dynamics.casadi_functions import numpy_model
from dynamics.model import Model

from . import fddp
from . import problem as P
from .trajectory import Trajectory

_OPS = CasadiOps()
_SMALL = 1e-4  # as dynamics.configuration: Taylor branches below this angle

# IPOPT return_status -> Trajectory.status
_STATUS = {
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


# ----------------------------------------------------------------------------- configuration
def _small_norm(w):
    """`(|w|, small, |w|^2)` with `|w|` safe (1) on the Taylor branch `|w| < _SMALL`."""
    sq = ca.sumsqr(w)
    small = sq < _SMALL**2
    return ca.sqrt(ca.if_else(small, 1.0, sq)), small, sq


def _quat_multiply(a, b):
    av, aw, bv, bw = a[0:3], a[3], b[0:3], b[3]
    return ca.vertcat(aw * bv + bw * av + ca.cross(av, bv), aw * bw - ca.dot(av, bv))


def _quat_exp(w):
    t, small, t2 = _small_norm(w)
    half_sinc = ca.if_else(small, 0.5 - t2 / 48.0, ca.sin(0.5 * t) / t)
    cos_half = ca.if_else(small, 1.0 - t2 / 8.0, ca.cos(0.5 * t))
    return ca.vertcat(half_sinc * w, cos_half)


def _quat_log(q):
    q = ca.if_else(q[3] < 0, -q, q)
    n, small, n2 = _small_norm(q[0:3])
    w = q[3]
    factor = ca.if_else(small, 2.0 / w * (1.0 - n2 / (3.0 * w * w)), 2.0 * ca.atan2(n, w) / n)
    return factor * q[0:3]


def _base_integrate(q_base, v_base):
    p, quat = q_base[0:3], q_base[3:7]
    v_lin, w = v_base[0:3], v_base[3:6]
    t, small, t2 = _small_norm(w)
    a = ca.if_else(small, 0.5 - t2 / 24.0, (1.0 - ca.cos(t)) / (t * t))
    b = ca.if_else(small, 1.0 / 6.0 - t2 / 120.0, (t - ca.sin(t)) / (t * t * t))
    wx = spatial.skew(_OPS, w)
    dp = v_lin + a * (wx @ v_lin) + b * (wx @ (wx @ v_lin))
    r0 = spatial.quat_to_rotation(_OPS, quat)
    quat1 = _quat_multiply(quat, _quat_exp(w))
    quat1 = quat1 / ca.norm_2(quat1)
    quat1 = ca.if_else(ca.dot(quat1, quat) < 0, -quat1, quat1)
    return ca.vertcat(p + r0 @ dp, quat1)


def _base_difference(q0, q1):
    r0 = spatial.quat_to_rotation(_OPS, q0[3:7])
    conj0 = ca.vertcat(-q0[3], -q0[4], -q0[5], q0[6])
    w = _quat_log(_quat_multiply(conj0, q1[3:7]))
    dp = r0.T @ (q1[0:3] - q0[0:3])
    wx = spatial.skew(_OPS, w)
    t, small, t2 = _small_norm(w)
    exact = (1.0 - t * ca.sin(t) / (2.0 * (1.0 - ca.cos(t)))) / (t * t)
    c = ca.if_else(small, 1.0 / 12.0 + t2 / 720.0, exact)
    return ca.vertcat(dp - 0.5 * (wx @ dp) + c * (wx @ (wx @ dp)), w)


def integrate(model: Model, q, v):
    """`q (+) v` in CasADi (as `dynamics.configuration.integrate`)."""
    if not model.has_free_flyer:
        return q + v
    return ca.vertcat(_base_integrate(q[0:7], v[0:6]), q[7:] + v[6:])


def difference(model: Model, q0, q1):
    """`q1 (-) q0` in CasADi (as `dynamics.configuration.difference`)."""
    if not model.has_free_flyer:
        return q1 - q0
    return ca.vertcat(_base_difference(q0[0:7], q1[0:7]), q1[7:] - q0[7:])


# ----------------------------------------------------------------------------- linear algebra
def _cholesky_solve(a, b):
    """`a^-1 b` for SPD `a (n, n)` by a scalar Cholesky factorisation in reversed index order.

    For a kinematic tree (parents before children) the reversed order has no fill-in (the
    `L^T L` factorisation of Featherstone), and CasADi drops the structural zeros, so the graph
    stays small; `ca.solve` would build a dense symbolic QR.
    """
    n = a.shape[0]
    order = list(reversed(range(n)))
    A = [[a[order[i], order[j]] for j in range(n)] for i in range(n)]
    L = [[ca.SX(0) for _ in range(n)] for _ in range(n)]
    for j in range(n):
        d = A[j][j] - sum((L[j][k] * L[j][k] for k in range(j)), ca.SX(0))
        L[j][j] = ca.sqrt(d)
        for i in range(j + 1, n):
            num = A[i][j] - sum((L[i][k] * L[j][k] for k in range(j)), ca.SX(0))
            L[i][j] = ca.SX(0) if num.is_zero() else num / L[j][j]
    cols = []
    for c in range(b.shape[1]):
        rhs = [b[order[i], c] for i in range(n)]
        y = [None] * n
        for i in range(n):
            y[i] = (rhs[i] - sum((L[i][k] * y[k] for k in range(i)), ca.SX(0))) / L[i][i]
        x = [None] * n
        for i in reversed(range(n)):
            x[i] = (y[i] - sum((L[k][i] * x[k] for k in range(i + 1, n)), ca.SX(0))) / L[i][i]
        col = [None] * n
        for i in range(n):
            col[order[i]] = x[i]
        cols.append(ca.vertcat(*col))
    return ca.horzcat(*cols)


# ----------------------------------------------------------------------------- contact
def _plane(terrain):
    if not isinstance(terrain, _terrain.Plane):
        raise NotImplementedError(
            f"the IPOPT backend supports plane terrains only, got {type(terrain).__name__}"
        )
    normal = np.asarray(terrain.normal, dtype=float)
    return {
        "normal": normal,
        "height": float(terrain.height),
        "friction": float(terrain.friction),
        "frame": np.asarray(_terrain.contact_frame(jnp.asarray(normal)), dtype=float),
    }


def _foot_contacts(m: Model, plane: dict, kin):
    """`(gaps [k], jacobian (3k, nv))` as `contact.foot_contacts` for a plane."""
    n = plane["normal"]
    n_skew = np.array([[0.0, -n[2], n[1]], [n[2], 0.0, -n[0]], [-n[1], n[0], 0.0]])
    gaps, jacs = [], []
    for i, frame_id in enumerate(m.foot_frames):
        radius = float(m.foot_radius[i])
        _, centre = _kin.frame_placement(_OPS, m, kin, frame_id)
        jac6 = _kin.frame_jacobian(_OPS, m, kin, frame_id, _kin.LOCAL_WORLD_ALIGNED)
        distance = ca.dot(ca.DM(n), centre) - n[2] * plane["height"]
        j_point = jac6[0:3, :] + radius * (ca.DM(n_skew) @ jac6[3:6, :])
        gaps.append(distance - radius)
        jacs.append(ca.DM(plane["frame"].T) @ j_point)
    return gaps, ca.vertcat(*jacs)


def _safe_norm(x):
    sq = ca.sumsqr(x)
    positive = sq > 0.0
    return ca.if_else(positive, ca.sqrt(ca.if_else(positive, sq, 1.0)), 0.0)


def _project_disk_cone(p, mu):
    """`contact.coulomb.project_disk_cone` for one contact `p (3,)`."""
    pt, pn = p[0:2], p[2]
    radius = mu * pn
    norm_t = _safe_norm(pt)
    outside = norm_t > radius
    scale = ca.if_else(outside, radius / ca.if_else(outside, norm_t, 1.0), 1.0)
    projected = ca.vertcat(scale * pt, pn)
    return ca.if_else(pn > 0.0, projected, ca.SX.zeros(3))


def _inverse3_times(g, c):
    """`g^-1 c` for `g (3, 3)` by the adjugate, as `coulomb._inverse3`."""
    cols = [g[:, 0], g[:, 1], g[:, 2]]
    rows = [ca.cross(cols[1], cols[2]), ca.cross(cols[2], cols[0]), ca.cross(cols[0], cols[1])]
    adjugate = ca.horzcat(*rows).T
    det = ca.dot(cols[0], rows[0])
    return (adjugate / det) @ c


def solve_unit_impulses(delassus, c, mu, weights, num_sweeps):
    """`contact.coulomb.solve_impulses` (Gauss-Seidel) for `delassus (3k, 3k)`, `c (3k,)`.

    Returns `(p, steps)`: the k contacts' unit-weight impulses `p_i (3,)` (the impulses are
    `w_i p_i`) and their steps `R_i (3,)`, as lists.
    """
    k = len(weights)
    block = lambda i, j: delassus[3 * i : 3 * i + 3, 3 * j : 3 * j + 3]  # noqa: E731
    coupled = [[block(i, j) if i == j else weights[j] * block(i, j) for j in range(k)]
               for i in range(k)]  # fmt: skip
    cs = [c[3 * i : 3 * i + 3] for i in range(k)]
    steps = []
    for i in range(k):
        g = block(i, i)
        a, b, d = g[0, 0], 0.5 * (g[0, 1] + g[1, 0]), g[1, 1]
        lam = 0.5 * (a + d) + _safe_norm(ca.vertcat(0.5 * (a - d), b))
        r_t = 1.0 / lam
        steps.append(ca.vertcat(r_t, r_t, 1.0 / g[2, 2]))
    p = [_project_disk_cone(-_inverse3_times(block(i, i), cs[i]), mu) for i in range(k)]
    for _ in range(num_sweeps):
        for i in range(k):
            u_i = cs[i]
            for j in range(k):
                u_i = u_i + coupled[i][j] @ p[j]
            p[i] = _project_disk_cone(p[i] - steps[i] * u_i, mu)
    return p, steps


def _activation(contact: str, params: dict, gap):
    if contact == "hard":
        return ca.if_else(gap < params["margin"], 1.0, 0.0)
    z = params["kappa"] * gap - params["bias"]
    weight = 1.0 / (1.0 + ca.exp(ca.fmin(ca.fmax(z, -100.0), 50.0)))
    cutoff = max(params["margin"], (params["bias"] + 30.0) / params["kappa"])
    return ca.if_else(gap < cutoff, weight, 0.0)


def moreau_step_parts(
    m: Model, params: dict, plane: dict, q, v, tau, contact: str, num_sweeps: int
) -> dict:
    """One `contact.step` (hard or smooth) in CasADi, with its intermediate quantities.

    `tau (nu,)` joint torques; equations in `contact/step.py`. Returns a dict: `q_next`,
    `v_next`, `forces (k, 3)` world; `mass` (with the implicit joint damping, `(nv, nv)`), `jac`
    `(3k, nv)` contact frames, `gaps`, `active` (weights, lists of k), `impulses` (`w_i p_i`),
    `unit` (`p_i`) and `steps` (`R_i`) (lists of k `(3,)`), `minv_jt (nv, 3k)`, `velocity`: the
    solver's contact velocity `G~ p + c` of each contact (list of k `(3,)`).
    """
    dt = params["dt"]
    nvb = m.nv - m.nu
    q_mid = integrate(m, q, v * (0.5 * dt))
    kin = _kin.forward_kinematics(_OPS, m, q_mid)
    damping = params["joint_damping"] * np.concatenate([np.zeros(nvb), np.ones(m.nu)])
    mass = composite_inertia.crba(_OPS, m, kin) + ca.DM(np.diag(dt * damping))
    bias = newton_euler.rnea(_OPS, m, kin, v, ca.SX.zeros(m.nv)) + ca.DM(damping) * v
    gaps, jac = _foot_contacts(m, plane, kin)
    tau_gen = ca.vertcat(ca.SX.zeros(nvb), tau) if nvb else tau
    solved = _cholesky_solve(mass, ca.horzcat(jac.T, tau_gen - bias))
    minv_jt, minv_f = solved[:, :-1], solved[:, -1]
    v_free = v + dt * minv_f
    active = [_activation(contact, params, g) for g in gaps]
    c = jac @ v_free
    if contact == "hard":  # speculative opening of separated contacts
        c = ca.vertcat(
            *[
                c[3 * i : 3 * i + 3] + ca.vertcat(0, 0, ca.fmax(g, 0.0) / dt)
                for i, g in enumerate(gaps)
            ]  # fmt: skip
        )
    delassus = jac @ minv_jt
    unit, steps = solve_unit_impulses(delassus, c, plane["friction"], active, num_sweeps)
    k = len(gaps)
    impulses = [active[i] * unit[i] for i in range(k)]
    velocity = [
        c[3 * i : 3 * i + 3]
        + sum(
            ((1.0 if j == i else active[j]) * delassus[3 * i : 3 * i + 3, 3 * j : 3 * j + 3]
             @ unit[j] for j in range(k)),
            ca.SX.zeros(3),
        )  # fmt: skip
        for i in range(k)
    ]
    v_next = v_free + minv_jt @ ca.vertcat(*impulses)
    q_next = integrate(m, q, (0.5 * dt) * (v + v_next))
    frame = ca.DM(plane["frame"])
    forces = ca.horzcat(*[frame @ p / dt for p in impulses]).T  # (k, 3)
    return {
        "q_next": q_next, "v_next": v_next, "forces": forces, "mass": mass, "jac": jac,
        "gaps": gaps, "active": active, "impulses": impulses, "unit": unit, "steps": steps,
        "minv_jt": minv_jt, "velocity": velocity,
    }  # fmt: skip


def moreau_step(m: Model, params: dict, plane: dict, q, v, tau, contact: str, num_sweeps: int):
    """One `contact.step` (hard or smooth) in CasADi: `(q+, v+, forces (k, 3) world)`.

    `tau (nu,)` joint torques; equations in `contact/step.py`.
    """
    parts = moreau_step_parts(m, params, plane, q, v, tau, contact, num_sweeps)
    return parts["q_next"], parts["v_next"], parts["forces"]


# ----------------------------------------------------------------------------- problem pieces
def _check(problem: P.Problem):
    if problem.contact not in P.CASADI_CONTACTS:
        raise NotImplementedError(
            f"the IPOPT backend supports the hard and smooth contact models, "
            f"not {problem.contact!r}"
        )


def _params(problem: P.Problem) -> dict:
    p = problem.data.params
    names = ("dt", "kappa", "bias", "margin", "joint_damping")
    return {n: float(getattr(p, n)) for n in names}


def _split(problem: P.Problem, x):
    m = problem.model
    return x[0 : m.nq], x[m.nq : m.nq + m.nv], x[m.nq + m.nv :]


def reference_rows(reference: P.Reference) -> np.ndarray:
    """Every knot's reference flattened, `(T + 1, 4 + 2k + nu)`: rows `[base_velocity (3),
    base_height, stance (k), swing_height (k), joint_posture (nu)]` (`_unpack_reference`)."""
    return np.concatenate(
        [
            np.asarray(reference.base_velocity, dtype=float),
            np.asarray(reference.base_height, dtype=float)[:, None],
            np.asarray(reference.stance, dtype=float),
            np.asarray(reference.swing_height, dtype=float),
            np.asarray(reference.joint_posture, dtype=float),
        ],
        axis=1,
    )


def reference_vector(problem: P.Problem, t: int) -> np.ndarray:
    """Knot t's reference flattened (a row of `reference_rows`)."""
    return reference_rows(problem.data.reference)[t]


def _unpack_reference(problem: P.Problem, r):
    k, nu = problem.model.nfeet, problem.model.nu
    return {
        "base_velocity": r[0:3],
        "base_height": r[3],
        "stance": r[4 : 4 + k],
        "swing_height": r[4 + k : 4 + 2 * k],
        "joint_posture": r[4 + 2 * k : 4 + 2 * k + nu],
    }


def _joint_torque(problem: P.Problem, m: Model, q, v, u):
    """`trajopt.problem.joint_torque` in CasADi."""
    limit = np.asarray(m.effort_limit, dtype=float)[m.nv - m.nu :]
    if problem.control == "pd":
        kp, kd = (float(g) for g in np.asarray(problem.data.gains))
        tau = kp * (u - q[m.nq - m.nu :]) + kd * (0.0 - v[m.nv - m.nu :])
        return ca.fmin(ca.fmax(tau, -limit), limit)
    return limit * ca.tanh(u / limit)


def _base_terms(problem: P.Problem, plane: dict, q, v, ref) -> dict:
    n = plane["normal"]
    ground = n[0] * q[0] + n[1] * q[1] - n[2] * plane["height"]  # signed_distance at z = 0
    rot = spatial.quat_to_rotation(_OPS, q[3:7])
    up_in_base = rot.T @ ca.DM([0.0, 0.0, 1.0])
    bv = ref["base_velocity"]
    return {
        "base_linear_velocity": v[0:2] - bv[0:2],
        "base_angular_velocity": v[3:6] - ca.DM([0.0, 0.0, 1.0]) * bv[2],
        "base_height": q[2] + ground - ref["base_height"],
        "base_orientation": up_in_base[0:2],
    }


def _running_residuals(problem, m, plane, x, u, forces, taus, ref) -> dict:
    """`trajopt.problem.running_residuals` in CasADi; `forces (k, 3)`."""
    q, v, u_prev = _split(problem, x)
    nqb, nvb = m.nq - m.nu, m.nv - m.nu
    q_j = q[nqb:]
    kin = _kin.forward_kinematics(_OPS, m, q)
    gaps, jac = _foot_contacts(m, plane, kin)
    gap = ca.vertcat(*gaps)
    foot_vel = jac @ v  # (3k,), contact frames [t1, t2, n]
    k = m.nfeet
    stance = ref["stance"]
    weight = m.total_mass * 9.81
    n_stance = ca.fmax(ca.sum1(stance), 1.0)
    nominal = ca.horzcat(ca.SX.zeros(k, 2), stance * (weight / n_stance))  # (k, 3)
    tau_max = np.asarray(m.effort_limit, dtype=float)[nvb:]
    lo = np.asarray(m.lower_position_limit, dtype=float)[nqb:]
    hi = np.asarray(m.upper_position_limit, dtype=float)[nqb:]
    res = _base_terms(problem, plane, q, v, ref)
    res.update(
        {
            "foot_clearance": (1.0 - stance) * (gap - ref["swing_height"]),
            "foot_slip": ca.vertcat(*[stance[i] * foot_vel[3 * i : 3 * i + 2] for i in range(k)]),
            "gait_contact": stance * gap,
            "torque": taus / tau_max,
            "torque_limits": ca.fmax(ca.fabs(taus) / tau_max - 0.95, 0.0),
            "control_rate": (u - u_prev) / problem.dt_knot,
            "joint_posture": q_j - ref["joint_posture"],
            "joint_limits": ca.fmax(q_j - hi, 0.0) + ca.fmax(lo - q_j, 0.0),
            "contact_force": ca.vec(((forces - nominal) / weight).T),
        }
    )
    return res


def _weighted_cost(problem: P.Problem, residuals: dict):
    weights = problem.data.weights
    total = ca.SX(0)
    for name in weights:
        if name in residuals:
            total = total + 0.5 * float(weights[name]) * ca.sumsqr(residuals[name])
    return total


def knot_function(problem: P.Problem) -> ca.Function:
    """`(x_next, cost, forces (k, 3), taus (nu,)) = f(x (nx_q,), u (nu,), ref)`: one knot.

    `x = [q, v, u_prev]` (nq + nv + nu); `ref` from `reference_vector`; `cost` is the knot's
    running cost `sum 0.5 w |r|^2`; as `trajopt.problem.transition`, forces are averaged over
    the substeps and torques are the per-joint peak of the motor torque (actuator torque plus
    the implicit joint damping `-d qd+`).
    """
    _check(problem)
    m = numpy_model(problem.model)
    plane = _plane(problem.data.params.terrain)
    params = _params(problem)
    nxq = m.nq + m.nv + m.nu
    x = ca.SX.sym("x", nxq)
    u = ca.SX.sym("u", m.nu)
    r = ca.SX.sym("ref", 4 + 2 * m.nfeet + m.nu)
    q, v, _ = _split(problem, x)
    forces, taus = 0, None
    for _ in range(problem.substeps):
        tau = _joint_torque(problem, m, q, v, u)
        q, v, f = moreau_step(m, params, plane, q, v, tau, problem.contact, problem.num_sweeps)
        total = tau - params["joint_damping"] * v[m.nv - m.nu :]  # motor torque incl. damping
        # per joint, the sub-step of largest magnitude (first one on ties, as jnp.argmax)
        taus = total if taus is None else ca.if_else(ca.fabs(total) > ca.fabs(taus), total, taus)
        forces = forces + f
    forces = forces / problem.substeps
    res = _running_residuals(problem, m, plane, x, u, forces, taus, _unpack_reference(problem, r))
    return ca.Function(
        "knot",
        [x, u, r],
        [ca.vertcat(q, v, u), _weighted_cost(problem, res), forces, taus],
        ["x", "u", "ref"],
        ["x_next", "cost", "forces", "taus"],
    )


def terminal_function(problem: P.Problem) -> ca.Function:
    """`cost = f(x, ref)`: the terminal cost (`trajopt.problem.terminal_residuals`)."""
    _check(problem)
    m = numpy_model(problem.model)
    plane = _plane(problem.data.params.terrain)
    x = ca.SX.sym("x", m.nq + m.nv + m.nu)
    r = ca.SX.sym("ref", 4 + 2 * m.nfeet + m.nu)
    q, v, _ = _split(problem, x)
    base = _base_terms(problem, plane, q, v, _unpack_reference(problem, r))
    res = {"terminal_state": ca.vertcat(*[base[k] for k in sorted(base)])}
    return ca.Function("terminal", [x, r], [_weighted_cost(problem, res)], ["x", "ref"], ["cost"])


def retract_function(problem: P.Problem) -> ca.Function:
    """`x (+) dx` on flat knot vectors (`trajopt.problem.retract`)."""
    m = problem.model
    x = ca.SX.sym("x", m.nq + m.nv + m.nu)
    dx = ca.SX.sym("dx", problem.nx)
    q, v, up = _split(problem, x)
    out = ca.vertcat(integrate(m, q, dx[0 : m.nv]), v + dx[m.nv : 2 * m.nv], up + dx[2 * m.nv :])
    return ca.Function("retract", [x, dx], [out])


def local_function(problem: P.Problem) -> ca.Function:
    """`y (-) x (nx,)` on flat knot vectors (`trajopt.problem.local`)."""
    m = problem.model
    x = ca.SX.sym("x", m.nq + m.nv + m.nu)
    y = ca.SX.sym("y", m.nq + m.nv + m.nu)
    qx, vx, ux = _split(problem, x)
    qy, vy, uy = _split(problem, y)
    return ca.Function("local", [x, y], [ca.vertcat(difference(m, qx, qy), vy - vx, uy - ux)])


def flatten(xs: P.KnotState) -> np.ndarray:
    """Stacked `KnotState` (leading axis N) -> `(N, nq + nv + nu)`."""
    return np.concatenate([np.asarray(xs.q), np.asarray(xs.v), np.asarray(xs.u_prev)], axis=-1)


def unflatten(problem: P.Problem, x) -> P.KnotState:
    m = problem.model
    x = np.asarray(x, dtype=float)
    return P.KnotState(
        jnp.asarray(x[..., 0 : m.nq]),
        jnp.asarray(x[..., m.nq : m.nq + m.nv]),
        jnp.asarray(x[..., m.nq + m.nv :]),
    )


def total_cost(problem: P.Problem, xs, us) -> float:
    """The total cost of `(xs, us)` evaluated with the CasADi functions (as `fddp.evaluate`)."""
    knot, terminal = knot_function(problem), terminal_function(problem)
    T = problem.horizon
    x = flatten(xs)
    refs = reference_rows(problem.data.reference).T
    _, costs, _, _ = knot.map(T)(x[:T].T, np.asarray(us).T, refs[:, :T])
    return float(np.sum(np.asarray(costs))) + float(terminal(x[T], refs[:, T]))


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
            10-knot solo12 crouch of `tests/test_ipopt_backend.py` (2 cm, 1 core): exact
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
    _check(problem)
    start = time.perf_counter()
    T, nx, nu = problem.horizon, problem.nx, problem.nu
    data = problem.data
    if xs is None:
        xs, _, _ = fddp.compiled(problem).rollout(data, jnp.asarray(us))
    guess = flatten(xs).copy()
    guess[0] = flatten(jax.tree_util.tree_map(lambda a: a[None], data.x0))[0]
    us0 = np.asarray(us, dtype=float)
    refs = reference_rows(problem.data.reference).T

    knot = knot_function(problem)
    terminal = terminal_function(problem)
    retract, local = retract_function(problem), local_function(problem)

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
    status = _STATUS.get(message, "diverged")
    if not np.all(np.isfinite(w_opt)):
        w_opt, status = w0, "diverged"
    dx_opt = w_opt[: nx * (T + 1)].reshape(T + 1, nx)
    u_opt = w_opt[nx * (T + 1) :].reshape(T, nu)
    x_opt = np.asarray(retract.map(T + 1)(guess.T, dx_opt.T), dtype=float).T
    xs_out, us_out = unflatten(problem, x_opt), jnp.asarray(u_opt)

    fn = fddp.compiled(problem)
    cost, terms, gaps, forces, taus = fn.evaluate(data, xs_out, us_out)
    if not np.isfinite(float(cost)):  # never hand back NaN: fall back to the guess
        xs_out, us_out, status = unflatten(problem, guess), jnp.asarray(us0), "diverged"
        cost, terms, gaps, forces, taus = fn.evaluate(data, xs_out, us_out)
    iterations = int(stats.get("iter_count", 0))
    objectives = stats.get("iterations", {}).get("obj", [])
    infeasibility = stats.get("iterations", {}).get("inf_pr", [])
    history = [
        {"iteration": i, "cost": float(c), "defects": float(d)}
        for i, (c, d) in enumerate(zip(objectives, infeasibility, strict=False))
    ]
    info = {
        "status": status,
        "iterations": iterations,
        "cost": float(cost),
        "term_costs": {k: float(c) for k, c in terms.items()},
        "history": history,
        "forces": np.asarray(forces),
        "taus": np.asarray(taus),
        "defects": float(np.sum(np.abs(np.asarray(gaps)))),
        "wall_time": time.perf_counter() - start,
    }
    traj = fddp.to_trajectory(problem, xs_out, us_out, info, "ipopt-multiple")
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
