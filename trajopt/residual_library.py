"""A library of residual terms (`trajopt.terms.Term`) for any frame of a model.

    from trajopt import residual_library as lib
    problem = problem.with_terms(
        lib.frame_translation(model, "FL_foot", [0.3, 0.15, 0.0], weight=10.0, knot=30),
        lib.com_position(model, [0.0, 0.0, 0.3], weight=5.0),
        lib.friction_cone_margin(model, "RR_foot", mu=0.6, weight=1.0),
    )

Each returns a `Term` whose residual `r` is below (targets `*` traced; a frame by name or
index, checked against the model when the term is made). Frames and velocities follow
Pinocchio: world placement `(R, p)`; "local_world_aligned" velocity = the frame origin's
velocity in world axes; `log3` is SO(3)'s logarithm.

    frame_translation     p_f - p*                                   (3,)
    frame_placement       [p_f - p*; log3(R*^T R_f)]                 (6,)
    frame_velocity        v_f - v*  (linear, angular or both)        (3,) or (6,)
    com_position          c - c*                                     (3,)
    com_velocity          h_G,lin / m - c'*                          (3,)
    centroidal_momentum   h_G - h*                                   (6,)
    base_pose             [p_b - p*; log3(R*^T R_b)]                 (6,)
    joint_state           [q_j - q*; qd_j - qd*]                     (2 nu,)
    control               u - u*                                     (nu,)
    contact_force         f_i - f*  (world frame)                    (3,)
    friction_cone_margin  Bounds below at 0 of mu f_z - |f_xy|_eps   (1,)
    footholds             s_i (p_i,xy - p*_i,xy) for every foot i    (2 nfeet,)

`knot=k` (frame translation and placement) makes a term act at one knot only (a foot on a
stone at knot k): `r` is multiplied by `[t == k]`; `knot="terminal"` makes it a terminal term.

Every residual but the `knot=k` ones is written with `ctx.ops` (`dynamics.backend`), so it runs
in JAX and in CasADi (the generated C of `derivatives="compiled"`, IPOPT).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dynamics.kinematics import REFERENCE_FRAMES
from dynamics.model import Model

from .terms import Bounds, KnotContext, Quadratic, Term

VELOCITY_PARTS = ("linear", "angular", "both")
FRICTION_EPS = 1e-6  # [N^2] under the square root of |f_t|: a smooth norm at f_t = 0
QUADRATIC = Quadratic()
IDENTITY = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


def log3(ops, r):
    """SO(3) logarithm `(3,)` of a rotation `(3, 3)`: the axis times the angle in [0, pi). Safe
    at the identity (its first-order series); not for angles near pi. `ops`: the backend."""
    cos = ops.minimum(ops.maximum(0.5 * (r[0, 0] + r[1, 1] + r[2, 2] - 1.0), -1.0), 1.0)
    angle = ops.acos(cos)
    vee = 0.5 * ops.vec([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    small = angle < 1e-6
    safe = ops.where(small, 1.0, angle)
    factor = ops.where(small, 1.0 + angle**2 / 6.0, safe / ops.sin(safe))
    return factor * vee


def _rotation_of(ops, flat):
    """The `(3, 3)` rotation of a row-major `(9,)` vector."""
    return ops.mat([[flat[3 * i + j] for j in range(3)] for i in range(3)])


def _pose_target(translation, rotation, name: str) -> np.ndarray:
    """The `(12,)` target row `[p*, R*.ravel()]` of a pose term."""
    rotation = np.asarray(rotation, dtype=float)
    if rotation.shape != (3, 3):
        raise ValueError(f"term {name!r}: rotation must be (3, 3), got {rotation.shape}")
    return np.concatenate([_vector(translation, 3, name, "translation"), rotation.ravel()])


def _pose_error(ctx: KnotContext, r, p):
    """`(6,)` `[p - p*; log3(R*^T R)]` of the world pose `(R, p)` against the target row."""
    ops = ctx.ops
    r_target = _rotation_of(ops, ctx.target[3:12])
    return ops.vcat([p - ctx.target[0:3], log3(ops, ops.mm(r_target.T, r))])


def _frame(model: Model, frame, name: str) -> int:
    try:
        return model.frame_id(frame)
    except (KeyError, ValueError, IndexError) as exc:
        raise ValueError(f"term {name!r}: {exc.args[0]}") from None


def _frame_term_name(model: Model, frame, suffix: str) -> str:
    """`<frame name>_<suffix>` (the name as given, or the model's for an index)."""
    if isinstance(frame, int | np.integer) and 0 <= frame < len(model.frame_names):
        frame = model.frame_names[int(frame)]
    return f"{frame}_{suffix}"


def _foot(model: Model, foot, name: str) -> int:
    if isinstance(foot, int | np.integer) and 0 <= foot < model.nfeet:
        return int(foot)
    if foot in model.foot_names:
        return model.foot_names.index(foot)
    raise ValueError(f"term {name!r}: unknown foot {foot!r} for robot {model.name!r}; feet are "
                     f"{model.foot_names}")  # fmt: skip


def _vector(value, size: int, name: str, what: str) -> np.ndarray:
    out = np.asarray(value, dtype=float)
    if out.shape != (size,):
        raise ValueError(f"term {name!r}: {what} must have shape ({size},), got {out.shape}")
    return out


def _at_knot(residual, knot):
    """`residual` at one running knot `knot` only (zero elsewhere)."""
    if knot is None or knot == "terminal":
        return residual
    k = int(knot)
    return lambda ctx: jnp.where(ctx.t == k, 1.0, 0.0) * residual(ctx)


def _term(name, residual, weight, target, knot=None, terminal=False, activation=QUADRATIC):
    if knot is not None and knot != "terminal" and (not isinstance(knot, int | np.integer)
                                                    or knot < 0):  # fmt: skip
        raise ValueError(f"term {name!r}: knot must be a knot index >= 0 or 'terminal', got "
                         f"{knot!r}")  # fmt: skip
    return Term(name, _at_knot(residual, knot), weight=weight, target=target,
                terminal=terminal or knot == "terminal", activation=activation)  # fmt: skip


# --------------------------------------------------------------------------- frames
def frame_translation(model: Model, frame, target, *, weight=1.0, knot=None, terminal=False,
                      name=None) -> Term:  # fmt: skip
    """`p_f - p*`: the frame's world position at its target `(3,)` [m]."""
    name = name or _frame_term_name(model, frame, "translation")
    fid = _frame(model, frame, name)
    target = _vector(target, 3, name, "target")
    return _term(name, lambda ctx: ctx.frame_placement(fid)[1] - ctx.target, weight, target,
                 knot, terminal)  # fmt: skip


def frame_placement(model: Model, frame, translation, rotation=IDENTITY, *, weight=1.0,
                    knot=None, terminal=False, name=None) -> Term:  # fmt: skip
    """`[p_f - p*; log3(R*^T R_f)]`: the frame's world placement at `(R* (3, 3), p* (3,))`; the
    target row is `[p*, R*.ravel()]` (12,)."""
    name = name or _frame_term_name(model, frame, "placement")
    fid = _frame(model, frame, name)
    target = _pose_target(translation, rotation, name)

    def residual(ctx: KnotContext):
        r, p = ctx.frame_placement(fid)
        return _pose_error(ctx, r, p)

    return _term(name, residual, weight, target, knot, terminal)


def frame_velocity(model: Model, frame, target=None, *, part="linear",
                   reference="local_world_aligned", weight=1.0, terminal=False,
                   name=None) -> Term:  # fmt: skip
    """`v_f - v*`: the frame's spatial velocity in `reference` (`[linear; angular]`), its
    `part` ("linear", "angular" or "both"), at `target` (zeros by default)."""
    name = name or _frame_term_name(model, frame, "velocity")
    fid = _frame(model, frame, name)
    if part not in VELOCITY_PARTS:
        raise ValueError(f"term {name!r}: part must be one of {VELOCITY_PARTS}, got {part!r}")
    if reference not in REFERENCE_FRAMES:
        raise ValueError(f"term {name!r}: reference must be one of {REFERENCE_FRAMES}, got "
                         f"{reference!r}")  # fmt: skip
    rows = {"linear": slice(0, 3), "angular": slice(3, 6), "both": slice(0, 6)}[part]
    size = 6 if part == "both" else 3
    target = _vector(np.zeros(size) if target is None else target, size, name, "target")
    return _term(name, lambda ctx: ctx.frame_velocity(fid, reference)[rows] - ctx.target,
                 weight, target, terminal=terminal)  # fmt: skip


# --------------------------------------------------------------------------- centroidal
def com_position(model: Model, target, *, weight=1.0, terminal=False,
                 name="com_position") -> Term:  # fmt: skip
    """`c - c*`: the centre of mass's world position `(3,)` [m]."""
    target = _vector(target, 3, name, "target")
    return _term(name, lambda ctx: ctx.center_of_mass() - ctx.target, weight, target,
                 terminal=terminal)  # fmt: skip


def com_velocity(model: Model, target=None, *, weight=1.0, terminal=False,
                 name="com_velocity") -> Term:  # fmt: skip
    """`h_G,lin / m - c'*`: the centre of mass's world velocity `(3,)` [m/s]."""
    target = _vector(np.zeros(3) if target is None else target, 3, name, "target")
    mass = float(model.total_mass)
    return _term(name, lambda ctx: ctx.centroidal_momentum()[0:3] / mass - ctx.target, weight,
                 target, terminal=terminal)  # fmt: skip


def centroidal_momentum(model: Model, target=None, *, weight=1.0, terminal=False,
                        name="centroidal_momentum") -> Term:  # fmt: skip
    """`h_G - h*`: linear and angular momentum about the com, world axes `(6,)`."""
    target = _vector(np.zeros(6) if target is None else target, 6, name, "target")
    return _term(name, lambda ctx: ctx.centroidal_momentum() - ctx.target, weight, target,
                 terminal=terminal)  # fmt: skip


# --------------------------------------------------------------------------- state, control
def base_pose(model: Model, translation, rotation=IDENTITY, *, weight=1.0, terminal=False,
              name="base_pose") -> Term:  # fmt: skip
    """`[p_b - p*; log3(R*^T R_b)]`: the floating base's world pose (from `q`); the target row
    is `[p*, R*.ravel()]` (12,)."""
    if not model.has_free_flyer:
        raise ValueError(f"term {name!r}: robot {model.name!r} has no floating base")
    target = _pose_target(translation, rotation, name)

    def residual(ctx: KnotContext):
        return _pose_error(ctx, ctx.base_rotation(), ctx.q[0:3])

    return _term(name, residual, weight, target, terminal=terminal)


def joint_state(model: Model, positions, velocities=None, *, weight=1.0, terminal=False,
                name="joint_state") -> Term:  # fmt: skip
    """`[q_j - q*; qd_j - qd*]`: the actuated joints' positions [rad] and rates [rad/s]
    `(2 nu,)` (rates zero by default)."""
    nu = model.nu
    velocities = np.zeros(nu) if velocities is None else velocities
    target = np.concatenate([_vector(positions, nu, name, "positions"),
                             _vector(velocities, nu, name, "velocities")])  # fmt: skip
    nqb, nvb = model.nq - nu, model.nv - nu
    return _term(name, lambda ctx: ctx.ops.vcat([ctx.q[nqb:], ctx.v[nvb:]]) - ctx.target,
                 weight, target, terminal=terminal)  # fmt: skip


def control(model: Model, target, *, weight=1.0, name="control") -> Term:
    """`u - u*`: the knot's control `(nu,)` (PD targets [rad] or torques [N m])."""
    target = _vector(target, model.nu, name, "target")
    return _term(name, lambda ctx: ctx.u - ctx.target, weight, target)


def footholds(model: Model, rows, *, weight=1.0, name="footholds") -> Term:
    """`s_i (p_i,xy - p*_i,xy)` for every foot i `(2 nfeet,)` [m]: each stance foot's frame at
    its foothold. `rows (T+1, nfeet, 3)`, one `[x*, y*, s]` per knot and foot (world xy, and
    `s = 1` where the foot should stand there, 0 where it is free), as
    `trajopt.footholds.stance_footholds` makes them."""
    rows = np.asarray(rows, dtype=float)
    if rows.ndim != 3 or rows.shape[1:] != (model.nfeet, 3):
        raise ValueError(f"term {name!r}: rows must be (T+1, {model.nfeet}, 3) [x, y, stance] "
                         f"per knot and foot, got shape {rows.shape}")  # fmt: skip
    fids = [_frame(model, foot, name) for foot in model.foot_names]

    def residual(ctx: KnotContext):
        rows, out = ctx.target, []
        for i, f in enumerate(fids):
            p = ctx.frame_placement(f)[1]
            out += [rows[i, 2] * (p[0] - rows[i, 0]), rows[i, 2] * (p[1] - rows[i, 1])]
        return ctx.ops.vec(out)

    return Term(name, residual, weight=weight, target=rows, per_knot=True)


# --------------------------------------------------------------------------- contact
def contact_force(model: Model, foot, target=None, *, weight=1.0, name=None) -> Term:
    """`f_i - f*`: foot `i`'s average contact force over the knot's transition, world frame
    [N] `(3,)` (zero target by default)."""
    name = name or f"{_foot_name(model, foot)}_force"
    i = _foot(model, foot, name)
    target = _vector(np.zeros(3) if target is None else target, 3, name, "target")
    return _term(name, lambda ctx: ctx.force(i) - ctx.target, weight, target)


def friction_cone_margin(model: Model, foot, mu: float, *, weight=1.0, name=None) -> Term:
    """`m = mu f_z - sqrt(f_x^2 + f_y^2 + eps)` held above 0 by `Bounds(lower=0)`: foot `i`'s
    world force inside a friction cone of coefficient `mu` about the world's z (level ground)
    `(1,)` [N]."""
    name = name or f"{_foot_name(model, foot)}_friction_cone"
    i = _foot(model, foot, name)
    if not (np.isfinite(mu) and mu > 0):
        raise ValueError(f"term {name!r}: mu must be positive, got {mu!r}")

    def residual(ctx: KnotContext):
        f = ctx.force(i)
        return ctx.ops.vec([mu * f[2] - ctx.ops.sqrt(f[0] ** 2 + f[1] ** 2 + FRICTION_EPS)])

    return _term(name, residual, weight, None, activation=Bounds(lower=0.0))


def _foot_name(model: Model, foot) -> str:
    if isinstance(foot, int | np.integer) and 0 <= foot < model.nfeet:
        return model.foot_names[int(foot)]
    return str(foot)
