"""The model of `trajopt.problem` rebuilt in CasADi: the knot transition and the residual costs
as `SX` functions, for the IPOPT backend (`trajopt.ipopt`) and the generated C knots
(`trajopt.engine.compiled_knots`).

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
import jax
import jax.numpy as jnp
import numpy as np

from contact import ContactModel
from contact import terrain as _terrain
from dynamics import composite_inertia, configuration, newton_euler
from dynamics import kinematics as _kin
from dynamics.backend import CasadiOps
from dynamics.casadi_functions import numpy_model
from dynamics.model import Model

from .. import built_in_terms
from .. import problem as P
from ..terms import KnotContext

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
        "frame": _terrain.contact_frame(normal, xp=np),
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


def contact_problem_parts(
    m: Model, params: dict, plane: dict, q, v, tau, contact: ContactModel
) -> dict:
    """One `contact.step` (hard or smooth) in CasADi up to its impulse solve.

    `tau (nu,)` joint torques; equations in `contact/step.py`. Returns a dict: `mass` (with the
    implicit joint damping, `(nv, nv)`), `jac (3k, nv)` contact frames, `gaps`, `active`
    (weights, lists of k), `minv_jt (nv, 3k)`, `v_free (nv,)`, the Delassus matrix `delassus
    (3k, 3k)` and the free contact velocity `c (3k,)` (with the hard model's speculative
    opening).
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
    return {
        "mass": mass, "jac": jac, "gaps": gaps, "active": active, "minv_jt": minv_jt,
        "v_free": v_free, "delassus": jac @ minv_jt, "c": c,
    }  # fmt: skip


def step_after_impulses(m: Model, params: dict, plane: dict, q, v, minv_jt, v_free, active,
                        unit) -> dict:  # fmt: skip
    """The rest of `contact.step` from the unit impulses `unit` (list of k `(3,)`, the solve's
    `p_i`) and the weights `active` (list of k): `impulses` (`w_i p_i`, list of k), `v_next`,
    `q_next` and `forces (k, 3)` world."""
    dt = params["dt"]
    impulses = [active[i] * unit[i] for i in range(len(unit))]
    v_next = v_free + minv_jt @ ca.vertcat(*impulses)
    q_next = integrate(m, q, (0.5 * dt) * (v + v_next))
    frame = ca.DM(plane["frame"])
    forces = ca.horzcat(*[frame @ p / dt for p in impulses]).T  # (k, 3)
    return {"impulses": impulses, "v_next": v_next, "q_next": q_next, "forces": forces}


def moreau_step_parts(
    m: Model, params: dict, plane: dict, q, v, tau, contact: ContactModel, num_sweeps: int
) -> dict:
    """One `contact.step` (hard or smooth) in CasADi, with `num_sweeps` fixed sweeps (the
    paper's model), with its intermediate quantities.

    `tau (nu,)` joint torques; equations in `contact/step.py`. Returns a dict: `q_next`,
    `v_next`, `forces (k, 3)` world; `mass` (with the implicit joint damping, `(nv, nv)`), `jac`
    `(3k, nv)` contact frames, `gaps`, `active` (weights, lists of k), `impulses` (`w_i p_i`),
    `unit` (`p_i`) and `steps` (`R_i`) (lists of k `(3,)`), `minv_jt (nv, 3k)`, `velocity`: the
    solver's contact velocity `G~ p + c` of each contact (list of k `(3,)`).
    """
    parts = contact_problem_parts(m, params, plane, q, v, tau, contact)
    delassus, c, active = parts["delassus"], parts["c"], parts["active"]
    unit, steps = solve_unit_impulses(delassus, c, plane["friction"], active, num_sweeps)
    k = len(active)
    velocity = [
        c[3 * i : 3 * i + 3]
        + sum(
            ((1.0 if j == i else active[j]) * delassus[3 * i : 3 * i + 3, 3 * j : 3 * j + 3]
             @ unit[j] for j in range(k)),
            ca.SX.zeros(3),
        )  # fmt: skip
        for i in range(k)
    ]
    after = step_after_impulses(
        m, params, plane, q, v, parts["minv_jt"], parts["v_free"], active, unit
    )
    return {**parts, **after, "unit": unit, "steps": steps, "velocity": velocity}


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
    """IPOPT's knots are all CasADi: every own term must evaluate there (`term_split`)."""
    _, in_jax = term_split(problem)
    if in_jax:
        raise NotImplementedError(
            "the IPOPT backend evaluates the knots in CasADi, which cannot evaluate the "
            "problem's own terms " + "; ".join(f"{name!r} ({why})" for name, why in in_jax.items())
            + ": write them with ctx.ops (dynamics.backend), or solve with FDDP or L-BFGS"
        )
    if problem.contact not in P.CASADI_CONTACTS:
        raise NotImplementedError(
            f"the IPOPT backend supports the hard and smooth contact models, "
            f"not {problem.contact!r}"
        )
    if problem.contact_tolerance is not None:
        raise NotImplementedError(
            "the IPOPT backend differentiates through a fixed number of prox sweeps, not a "
            "solve to a tolerance: make the problem with contact_tolerance=None and num_sweeps "
            f"(say 10), got contact_tolerance={problem.contact_tolerance!r}"
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


class PlaneSurface:
    """The ground of a CasADi knot (`trajopt.terms.KnotContext.surface`): a plane (`plane_of`)."""

    def __init__(self, plane: dict):
        self.plane = plane

    def ground_distance(self, ctx: KnotContext, xy):
        """Signed distance [m] of the point `(x, y, 0)` above the plane (`contact.terrain`)."""
        n = self.plane["normal"]
        return n[0] * xy[0] + n[1] * xy[1] - n[2] * self.plane["height"]

    def foot_contacts(self, ctx: KnotContext) -> tuple:
        """`(gaps (k,), [velocity (3,) per foot])` in the contact frames, as `foot_contacts`."""
        gaps, jac = foot_contacts(ctx.model, self.plane, ctx.kinematics)
        velocity = jac @ ctx.v
        return ca.vertcat(*gaps), [velocity[3 * i : 3 * i + 3] for i in range(len(gaps))]


def knot_context(problem: P.Problem, m, plane: dict, x, u, forces, taus, ref,
                 terminal: bool) -> KnotContext:  # fmt: skip
    """The CasADi `KnotContext` of a knot: `x` flat `[q, v, u_prev]`, `forces (k, 3)` world,
    `ref` a dict of `unpack_reference`."""
    q, v, u_prev = split_knot(problem, x)
    return KnotContext(m, q, v, u, u_prev, forces, taus, None, None, None, terminal,
                       problem.dt_knot, P.Reference(**ref), PlaneSurface(plane), OPS)  # fmt: skip


def evaluate_terms(terms, ctx: KnotContext, targets: dict) -> dict:
    """`{name: activated residual}` of `terms` at `ctx`, each reading its target row from
    `targets` (`{name: SX}`, shaped by `target_symbol`)."""
    return {term.name: term.evaluate(ctx.with_target(targets.get(term.name))) for term in terms}


def target_shape(problem: P.Problem, term) -> tuple | None:
    """The shape of one knot's row of `term`'s target, or None without a target."""
    rows = problem.data.targets.get(term.name)
    return None if rows is None else tuple(np.shape(rows)[1:])


def target_symbol(flat, shape: tuple):
    """A target row as the function reads it, from its flat `SX (n,)` (NumPy's row-major
    order): a scalar, a vector `(n,)` or a matrix `(a, b)`."""
    if len(shape) == 0:
        return flat[0]
    if len(shape) == 1:
        return flat
    return ca.reshape(flat, shape[1], shape[0]).T


def _symbolic_residual(problem: P.Problem, m, plane: dict, term):
    """`(f, size)`: `term` as a CasADi function of `(x, u, forces (3k,), taus, ref, target)`,
    or raises what its function raised."""
    k = m.nfeet
    x, u = ca.SX.sym("x", m.nq + m.nv + m.nu), ca.SX.sym("u", m.nu)
    forces, taus = ca.SX.sym("forces", 3 * k), ca.SX.sym("taus", m.nu)
    ref = ca.SX.sym("ref", 4 + 2 * k + m.nu)
    shape = target_shape(problem, term) or ()
    flat = ca.SX.sym("target", int(np.prod(shape)))
    ctx = knot_context(problem, m, plane, x, u, ca.reshape(forces, 3, k).T, taus,
                       unpack_reference(problem, ref), term.terminal)  # fmt: skip
    targets = {term.name: target_symbol(flat, shape)} if term.name in problem.data.targets else {}
    r = evaluate_terms((term,), ctx, targets)[term.name]
    if not isinstance(r, ca.SX | ca.DM) or r.shape[1] != 1:
        raise TypeError(f"it returned {type(r).__name__} {getattr(r, 'shape', '')}, not an SX "
                        f"column")  # fmt: skip
    f = ca.Function("term", [x, u, forces, taus, ref, flat], [ca.densify(ca.SX(r))])
    return f, r.shape[0]


_SPLITS: dict = {}  # (term, model, horizon, plane) -> None (in CasADi) or why not


def _casadi_reason(problem: P.Problem, term) -> str | None:
    """None where `term` evaluates in CasADi and equals its JAX value at the problem's initial
    state (at zero forces and torques, its first or terminal knot), else why not."""
    plane = plane_of(problem.data.params.terrain)
    key = (term, model_key(problem.model), problem.horizon,
           tuple(plane["normal"].tolist()) + (plane["height"],))  # fmt: skip
    if key in _SPLITS:
        return _SPLITS[key]
    m = numpy_model(problem.model)
    data = problem.data
    try:
        f, size = _symbolic_residual(problem, m, plane, term)
    except Exception as exc:  # what a JAX-only function does with CasADi symbols
        _SPLITS[key] = reason = f"its function raised {type(exc).__name__} on CasADi symbols"
        return reason
    t = problem.horizon if term.terminal else 0
    x0 = data.x0
    k, nu = problem.model.nfeet, problem.model.nu
    forces, taus = jnp.zeros((k, 3), dtype=x0.v.dtype), jnp.zeros(nu, dtype=x0.v.dtype)
    ctx = P.knot_context(problem, data, x0, x0.u_prev, forces, taus, t, term.terminal)
    expected = np.asarray(P.evaluate_terms((term,), ctx, data.targets)[term.name])
    rows = data.targets.get(term.name)
    target = np.zeros(0) if rows is None else np.asarray(rows[t], dtype=float).reshape(-1)
    got = np.asarray(f(flatten(jax.tree_util.tree_map(lambda a: a[None], x0))[0],
                       np.asarray(x0.u_prev), np.zeros(3 * k), np.zeros(nu),
                       reference_rows(data.reference)[t], target)).reshape(-1)  # fmt: skip
    reason = None
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=1e-9, atol=1e-9):
        reason = (f"its CasADi value differs from its JAX value at the initial state "
                  f"({got[:4]} against {expected[:4]})")  # fmt: skip
    _SPLITS[key] = reason
    return reason


def term_split(problem: P.Problem) -> tuple:
    """`(in_casadi, in_jax)`: the problem's own terms that the CasADi model evaluates (a tuple,
    in the problem's order) and `{name: why not}` of the others (JAX only)."""
    in_casadi, in_jax = [], {}
    for term in problem.terms:
        reason = _casadi_reason(problem, term)
        if reason is None:
            in_casadi.append(term)
        else:
            in_jax[term.name] = reason
    return tuple(in_casadi), in_jax


def model_key(model: Model):
    return (model.name, model.nq, model.nv, model.nfeet)


def target_sizes(problem: P.Problem, terms) -> list:
    """The flat size of each of `terms`' target rows (0 without a target)."""
    return [int(np.prod(target_shape(problem, t))) if t.name in problem.data.targets else 0
            for t in terms]  # fmt: skip


def knot_rows(problem: P.Problem, data: P.ProblemData, terms) -> np.ndarray:
    """`(T + 1, n)`: every knot's reference row (`reference_rows`) followed by the flat target
    rows of `terms` (those with a target, in order)."""
    parts = [reference_rows(data.reference)]
    for term in terms:
        if term.name in data.targets:
            rows = np.asarray(data.targets[term.name], dtype=float)
            parts.append(rows.reshape(rows.shape[0], -1))
    return np.concatenate(parts, axis=1)


def row_size(problem: P.Problem, terms) -> int:
    """The length of a `knot_rows` row with `terms`' targets."""
    return 4 + 2 * problem.model.nfeet + problem.model.nu + sum(target_sizes(problem, terms))


def unpack_targets(problem: P.Problem, terms, row) -> dict:
    """`{name: target}` of `terms` from the tail of a `knot_rows` row."""
    offset = 4 + 2 * problem.model.nfeet + problem.model.nu
    out = {}
    for term, size in zip(terms, target_sizes(problem, terms), strict=True):
        if term.name in problem.data.targets:
            out[term.name] = target_symbol(row[offset : offset + size], target_shape(problem, term))
            offset += size
    return out


def running_residuals(problem, m, plane, x, u, forces, taus, ref, targets=None,
                      own=()) -> dict:  # fmt: skip
    """`trajopt.problem.running_residuals` in CasADi: the built-in running terms
    (`trajopt.built_in_terms`) and the own running terms `own` (of `term_split`'s CasADi
    ones) on the CasADi context; `forces (k, 3)`, `targets` `{name: SX}`."""
    ctx = knot_context(problem, m, plane, x, u, forces, taus, ref, False)
    terms = built_in_terms.RUNNING + tuple(t for t in own if not t.terminal)
    return evaluate_terms(terms, ctx, targets or {})


def terminal_residuals(problem, m, plane, x, ref, targets=None, own=()) -> dict:
    """`trajopt.problem.terminal_residuals` in CasADi (control `u_prev`, no forces or
    torques), with the own terminal terms of `own`."""
    ctx = knot_context(problem, m, plane, x, x[m.nq + m.nv :], ca.SX.zeros(m.nfeet, 3),
                       ca.SX.zeros(m.nu), ref, True)  # fmt: skip
    terms = built_in_terms.TERMINAL + tuple(t for t in own if t.terminal)
    return evaluate_terms(terms, ctx, targets or {})


def weighted_cost(problem: P.Problem, residuals: dict):
    weights = problem.data.weights
    total = ca.SX(0)
    for name in weights:
        if name in residuals:
            total = total + 0.5 * float(weights[name]) * ca.sumsqr(residuals[name])
    return total


def knot_function(problem: P.Problem) -> ca.Function:
    """`(x_next, cost, forces (k, 3), taus (nu,)) = f(x (nx_q,), u (nu,), ref)`: one knot.

    `x = [q, v, u_prev]` (nq + nv + nu); `ref` a row of `knot_rows` (the reference, then the own
    terms' targets); `cost` is the knot's running cost `sum 0.5 w |r|^2` (built-in and own
    terms); as `trajopt.problem.transition`, forces are averaged over
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
    own, _ = term_split(problem)
    r = ca.SX.sym("ref", row_size(problem, own))
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
    res = running_residuals(problem, m, plane, x, u, forces, taus, unpack_reference(problem, r),
                            unpack_targets(problem, own, r), own)  # fmt: skip
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
    own, _ = term_split(problem)
    r = ca.SX.sym("ref", row_size(problem, own))
    res = terminal_residuals(problem, m, plane, x, unpack_reference(problem, r),
                             unpack_targets(problem, own, r), own)  # fmt: skip
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
    refs = knot_rows(problem, problem.data, term_split(problem)[0]).T
    _, costs, _, _ = knot.map(T)(x[:T].T, np.asarray(us).T, refs[:, :T])
    return float(np.sum(np.asarray(costs))) + float(terminal(x[T], refs[:, T]))
