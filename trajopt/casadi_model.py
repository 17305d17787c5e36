"""The model of `trajopt.problem` rebuilt in CasADi: the knot transition and the residual costs
as `SX` functions, for the IPOPT backend (`trajopt.ipopt`) and the generated C knots
(`trajopt.compiled_knots`).

The rigid-body algorithms and the configuration manifold are `dynamics`' own, evaluated on
`CasadiOps` (forward kinematics, CRBA, RNEA, frame Jacobians, `integrate` / `difference`); the
contact step is `contact.step`'s (Moreau midpoint, `hard` or `smooth` activation with bias and
margin, speculative opening for `hard`, implicit joint damping, the fixed number of Gauss-Seidel
prox sweeps of `contact.coulomb` with its steps, initialisation and disk projection). Branches
become `if_else`, norms are safe at 0.

A knot state is the flat vector `x = [q (nq), v (nv), u_prev (nu)]`.

Supported: `hard` and `smooth` contact, `pd` and `torque` controls, plane terrains (`Plane`:
flat or inclined), every cost term of `trajopt.problem.COST_TERMS`. Not supported (raises
`NotImplementedError`): the `penalty` contact model, `Steps` and `Heightfield` terrains,
Jacobi sweeps (problems always use Gauss-Seidel).
"""

from __future__ import annotations

import casadi as ca
import jax.numpy as jnp
import numpy as np

from contact import ContactModel
from contact import terrain as _terrain
from dynamics import composite_inertia, configuration, newton_euler, spatial
from dynamics import kinematics as _kin
from dynamics.backend import CasadiOps
from dynamics.casadi_functions import numpy_model
from dynamics.model import Model

from . import problem as P

OPS = CasadiOps()

# ----------------------------------------------------------------------------- configuration
def integrate(model: Model, q, v):
    """`q (+) v` in CasADi (`dynamics.configuration.integrate` on `CasadiOps`)."""
    return configuration.integrate(model, q, v, OPS)


def difference(model: Model, q0, q1):
    """`q1 (-) q0` in CasADi (`dynamics.configuration.difference` on `CasadiOps`)."""
    return configuration.difference(model, q0, q1, OPS)


# ----------------------------------------------------------------------------- linear algebra
def cholesky_solve(a, b):
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
def plane_of(terrain):
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


def foot_contacts(m: Model, plane: dict, kin):
    """`(gaps [k], jacobian (3k, nv))` as `contact.foot_contacts` for a plane."""
    n = plane["normal"]
    n_skew = np.array([[0.0, -n[2], n[1]], [n[2], 0.0, -n[0]], [-n[1], n[0], 0.0]])
    gaps, jacs = [], []
    for i, frame_id in enumerate(m.foot_frames):
        radius = float(m.foot_radius[i])
        _, centre = _kin.frame_placement(OPS, m, kin, frame_id)
        jac6 = _kin.frame_jacobian(OPS, m, kin, frame_id, _kin.LOCAL_WORLD_ALIGNED)
        distance = ca.dot(ca.DM(n), centre) - n[2] * plane["height"]
        j_point = jac6[0:3, :] + radius * (ca.DM(n_skew) @ jac6[3:6, :])
        gaps.append(distance - radius)
        jacs.append(ca.DM(plane["frame"].T) @ j_point)
    return gaps, ca.vertcat(*jacs)


def safe_norm(x):
    sq = ca.sumsqr(x)
    positive = sq > 0.0
    return ca.if_else(positive, ca.sqrt(ca.if_else(positive, sq, 1.0)), 0.0)


def project_disk_cone(p, mu):
    """`contact.coulomb.project_disk_cone` for one contact `p (3,)`."""
    pt, pn = p[0:2], p[2]
    radius = mu * pn
    norm_t = safe_norm(pt)
    outside = norm_t > radius
    scale = ca.if_else(outside, radius / ca.if_else(outside, norm_t, 1.0), 1.0)
    projected = ca.vertcat(scale * pt, pn)
    return ca.if_else(pn > 0.0, projected, ca.SX.zeros(3))


def inverse3_times(g, c):
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
        lam = 0.5 * (a + d) + safe_norm(ca.vertcat(0.5 * (a - d), b))
        r_t = 1.0 / lam
        steps.append(ca.vertcat(r_t, r_t, 1.0 / g[2, 2]))
    p = [project_disk_cone(-inverse3_times(block(i, i), cs[i]), mu) for i in range(k)]
    for _ in range(num_sweeps):
        for i in range(k):
            u_i = cs[i]
            for j in range(k):
                u_i = u_i + coupled[i][j] @ p[j]
            p[i] = project_disk_cone(p[i] - steps[i] * u_i, mu)
    return p, steps


def activation(contact: ContactModel, params: dict, gap):
    if contact == "hard":
        return ca.if_else(gap < params["margin"], 1.0, 0.0)
    z = params["kappa"] * gap - params["bias"]
    weight = 1.0 / (1.0 + ca.exp(ca.fmin(ca.fmax(z, -100.0), 50.0)))
    cutoff = max(params["margin"], (params["bias"] + 30.0) / params["kappa"])
    return ca.if_else(gap < cutoff, weight, 0.0)


def moreau_step_parts(
    m: Model, params: dict, plane: dict, q, v, tau, contact: ContactModel, num_sweeps: int
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
    kin = _kin.forward_kinematics(OPS, m, q_mid)
    damping = params["joint_damping"] * np.concatenate([np.zeros(nvb), np.ones(m.nu)])
    mass = composite_inertia.crba(OPS, m, kin) + ca.DM(np.diag(dt * damping))
    bias = newton_euler.rnea(OPS, m, kin, v, ca.SX.zeros(m.nv)) + ca.DM(damping) * v
    gaps, jac = foot_contacts(m, plane, kin)
    tau_gen = ca.vertcat(ca.SX.zeros(nvb), tau) if nvb else tau
    solved = cholesky_solve(mass, ca.horzcat(jac.T, tau_gen - bias))
    minv_jt, minv_f = solved[:, :-1], solved[:, -1]
    v_free = v + dt * minv_f
    active = [activation(contact, params, g) for g in gaps]
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


def moreau_step(
    m: Model, params: dict, plane: dict, q, v, tau, contact: ContactModel, num_sweeps: int
):
    """One `contact.step` (hard or smooth) in CasADi: `(q+, v+, forces (k, 3) world)`.

    `tau (nu,)` joint torques; equations in `contact/step.py`.
    """
    parts = moreau_step_parts(m, params, plane, q, v, tau, contact, num_sweeps)
    return parts["q_next"], parts["v_next"], parts["forces"]


# ----------------------------------------------------------------------------- problem pieces
def check_supported(problem: P.Problem):
    if problem.terms:
        raise NotImplementedError(
            f"the IPOPT backend evaluates the knots in CasADi, which does not run the problem's "
            f"own terms {[t.name for t in problem.terms]}: solve it with FDDP or L-BFGS"
        )
    if problem.contact not in P.CASADI_CONTACTS:
        raise NotImplementedError(
            f"the IPOPT backend supports the hard and smooth contact models, "
            f"not {problem.contact!r}"
        )


def step_parameters(problem: P.Problem) -> dict:
    p = problem.data.params
    names = ("dt", "kappa", "bias", "margin", "joint_damping")
    return {n: float(getattr(p, n)) for n in names}


def split_knot(problem: P.Problem, x):
    m = problem.model
    return x[0 : m.nq], x[m.nq : m.nq + m.nv], x[m.nq + m.nv :]


def reference_rows(reference: P.Reference) -> np.ndarray:
    """Every knot's reference flattened, `(T + 1, 4 + 2k + nu)`: rows `[base_velocity (3),
    base_height, stance (k), swing_height (k), joint_posture (nu)]` (`unpack_reference`)."""
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


def unpack_reference(problem: P.Problem, r):
    k, nu = problem.model.nfeet, problem.model.nu
    return {
        "base_velocity": r[0:3],
        "base_height": r[3],
        "stance": r[4 : 4 + k],
        "swing_height": r[4 + k : 4 + 2 * k],
        "joint_posture": r[4 + 2 * k : 4 + 2 * k + nu],
    }


def joint_torque(problem: P.Problem, m: Model, q, v, u):
    """`trajopt.problem.joint_torque` in CasADi."""
    limit = np.asarray(m.effort_limit, dtype=float)[m.nv - m.nu :]
    if problem.control == "pd":
        kp, kd = (float(g) for g in np.asarray(problem.data.gains))
        tau = kp * (u - q[m.nq - m.nu :]) + kd * (0.0 - v[m.nv - m.nu :])
        return ca.fmin(ca.fmax(tau, -limit), limit)
    return limit * ca.tanh(u / limit)


def base_terms(problem: P.Problem, plane: dict, q, v, ref) -> dict:
    n = plane["normal"]
    ground = n[0] * q[0] + n[1] * q[1] - n[2] * plane["height"]  # signed_distance at z = 0
    rot = spatial.quat_to_rotation(OPS, q[3:7])
    up_in_base = rot.T @ ca.DM([0.0, 0.0, 1.0])
    bv = ref["base_velocity"]
    return {
        "base_linear_velocity": v[0:2] - bv[0:2],
        "base_angular_velocity": v[3:6] - ca.DM([0.0, 0.0, 1.0]) * bv[2],
        "base_height": q[2] + ground - ref["base_height"],
        "base_orientation": up_in_base[0:2],
    }


def running_residuals(problem, m, plane, x, u, forces, taus, ref) -> dict:
    """`trajopt.problem.running_residuals` in CasADi; `forces (k, 3)`."""
    q, v, u_prev = split_knot(problem, x)
    nqb, nvb = m.nq - m.nu, m.nv - m.nu
    q_j = q[nqb:]
    kin = _kin.forward_kinematics(OPS, m, q)
    gaps, jac = foot_contacts(m, plane, kin)
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
    res = base_terms(problem, plane, q, v, ref)
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


def weighted_cost(problem: P.Problem, residuals: dict):
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
    check_supported(problem)
    m = numpy_model(problem.model)
    plane = plane_of(problem.data.params.terrain)
    params = step_parameters(problem)
    nxq = m.nq + m.nv + m.nu
    x = ca.SX.sym("x", nxq)
    u = ca.SX.sym("u", m.nu)
    r = ca.SX.sym("ref", 4 + 2 * m.nfeet + m.nu)
    q, v, _ = split_knot(problem, x)
    forces, taus = 0, None
    for _ in range(problem.substeps):
        tau = joint_torque(problem, m, q, v, u)
        q, v, f = moreau_step(m, params, plane, q, v, tau, problem.contact, problem.num_sweeps)
        total = tau - params["joint_damping"] * v[m.nv - m.nu :]  # motor torque incl. damping
        # per joint, the sub-step of largest magnitude (first one on ties, as jnp.argmax)
        taus = total if taus is None else ca.if_else(ca.fabs(total) > ca.fabs(taus), total, taus)
        forces = forces + f
    forces = forces / problem.substeps
    res = running_residuals(problem, m, plane, x, u, forces, taus, unpack_reference(problem, r))
    return ca.Function(
        "knot",
        [x, u, r],
        [ca.vertcat(q, v, u), weighted_cost(problem, res), forces, taus],
        ["x", "u", "ref"],
        ["x_next", "cost", "forces", "taus"],
    )


def terminal_function(problem: P.Problem) -> ca.Function:
    """`cost = f(x, ref)`: the terminal cost (`trajopt.problem.terminal_residuals`)."""
    check_supported(problem)
    m = numpy_model(problem.model)
    plane = plane_of(problem.data.params.terrain)
    x = ca.SX.sym("x", m.nq + m.nv + m.nu)
    r = ca.SX.sym("ref", 4 + 2 * m.nfeet + m.nu)
    q, v, _ = split_knot(problem, x)
    base = base_terms(problem, plane, q, v, unpack_reference(problem, r))
    res = {"terminal_state": ca.vertcat(*[base[k] for k in sorted(base)])}
    return ca.Function("terminal", [x, r], [weighted_cost(problem, res)], ["x", "ref"], ["cost"])


def retract_function(problem: P.Problem) -> ca.Function:
    """`x (+) dx` on flat knot vectors (`trajopt.problem.retract`)."""
    m = problem.model
    x = ca.SX.sym("x", m.nq + m.nv + m.nu)
    dx = ca.SX.sym("dx", problem.nx)
    q, v, up = split_knot(problem, x)
    out = ca.vertcat(integrate(m, q, dx[0 : m.nv]), v + dx[m.nv : 2 * m.nv], up + dx[2 * m.nv :])
    return ca.Function("retract", [x, dx], [out])


def local_function(problem: P.Problem) -> ca.Function:
    """`y (-) x (nx,)` on flat knot vectors (`trajopt.problem.local`)."""
    m = problem.model
    x = ca.SX.sym("x", m.nq + m.nv + m.nu)
    y = ca.SX.sym("y", m.nq + m.nv + m.nu)
    qx, vx, ux = split_knot(problem, x)
    qy, vy, uy = split_knot(problem, y)
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
    """The total cost of `(xs, us)` evaluated with the CasADi functions (as `shooting.evaluate`)."""
    knot, terminal = knot_function(problem), terminal_function(problem)
    T = problem.horizon
    x = flatten(xs)
    refs = reference_rows(problem.data.reference).T
    _, costs, _, _ = knot.map(T)(x[:T].T, np.asarray(us).T, refs[:, :T])
    return float(np.sum(np.asarray(costs))) + float(terminal(x[T], refs[:, T]))
