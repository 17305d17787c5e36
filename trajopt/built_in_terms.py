"""The gait problem's own cost terms, as `trajopt.terms.Term`s of the knot's context.

Each is written once with the backend-generic operations of `dynamics.backend` (`ctx.ops`), so
the same function runs in JAX (the solvers) and in CasADi (IPOPT, the generated C of
`derivatives="compiled"`). `r` is the unweighted residual; the cost adds `0.5 w |r|^2`, `w`
from `ProblemData.weights`. `ref` is the knot's gait reference (`trajopt.problem.Reference`),
`s` its stance flags, `g_i` foot i's signed distance to the terrain, `v_i` its velocity in its
contact frame `[t1, t2, n]`, `tau_max` the joints' effort limits, `m g` the robot's weight.

Running (every knot t < T):

    base_linear_velocity    v[0:2] - ref.base_velocity[0:2]                  (base frame)
    base_angular_velocity   v[3:6] - (0, 0, ref.base_velocity[2])
    base_height             z - h_ground(x, y) - ref.base_height
    base_orientation        (R^T e_z)[0:2]                (the world's up, in the base frame)
    foot_clearance          (1 - s_i) (g_i - ref.swing_height_i)
    foot_slip               s_i v_i[0:2]
    gait_contact            s_i g_i
    torque                  tau / tau_max
    torque_limits           max(|tau| / tau_max - 0.95, 0)
    control_rate            (u - u_prev) / dt
    joint_posture           q_j - ref.joint_posture
    joint_limits            max(q_j - q_hi, 0) + max(q_lo - q_j, 0)
    contact_force           (f_i - s_i m g / max(sum s, 1) e_z) / (m g)

Terminal (knot T): `terminal_state`, the four base terms stacked in name order.
"""

from __future__ import annotations

import numpy as np

from dynamics import spatial

from .terms import KnotContext, Term

GRAVITY = 9.81
TORQUE_LIMIT_SHARE = 0.95  # torque_limits acts beyond this share of the effort limit


def _joints(ctx: KnotContext):
    return ctx.q[ctx.model.nq - ctx.model.nu :]


def _effort_limit(ctx: KnotContext):
    model = ctx.model
    return ctx.ops.const(np.asarray(model.effort_limit, dtype=float)[model.nv - model.nu :])


def base_linear_velocity(ctx: KnotContext):
    """`(2,)` base-frame x, y velocity minus the reference's [m/s]."""
    return ctx.v[0:2] - ctx.reference.base_velocity[0:2]


def base_angular_velocity(ctx: KnotContext):
    """`(3,)` base-frame angular velocity minus the reference yaw rate about z [rad/s]."""
    return ctx.v[3:6] - ctx.ops.const(np.array([0.0, 0.0, 1.0])) * ctx.reference.base_velocity[2]


def base_height(ctx: KnotContext):
    """`(1,)` the base's height above the ground at its x, y minus the reference [m]."""
    ground = ctx.ground_distance(ctx.q[0:2])  # of (x, y, 0): minus the ground's height there
    return ctx.ops.vec([ctx.q[2] + ground - ctx.reference.base_height])


def base_orientation(ctx: KnotContext):
    """`(2,)` the x, y components of the world's up axis in the base frame."""
    ops = ctx.ops
    rotation = spatial.quat_to_rotation(ops, ctx.q[3:7])
    return ops.mm(rotation.T, ops.const(np.array([0.0, 0.0, 1.0])))[0:2]


def foot_clearance(ctx: KnotContext):
    """`(nfeet,)` swing feet's distance to the terrain minus the reference swing height [m]."""
    ref = ctx.reference
    return (1.0 - ref.stance) * (ctx.foot_gaps() - ref.swing_height)


def foot_slip(ctx: KnotContext):
    """`(2 nfeet,)` stance feet's tangential velocity [m/s]."""
    stance, velocity = ctx.reference.stance, ctx.foot_velocities()
    return ctx.ops.vcat([stance[i] * velocity[i][0:2] for i in range(len(velocity))])


def gait_contact(ctx: KnotContext):
    """`(nfeet,)` stance feet's distance to the terrain [m]."""
    return ctx.reference.stance * ctx.foot_gaps()


def torque(ctx: KnotContext):
    """`(nu,)` the transition's peak joint torques over the effort limits."""
    return ctx.torques / _effort_limit(ctx)


def torque_limits(ctx: KnotContext):
    """`(nu,)` how far the peak torques go beyond 95 % of the effort limits."""
    return ctx.ops.maximum(ctx.ops.abs(ctx.torques) / _effort_limit(ctx) - TORQUE_LIMIT_SHARE, 0.0)


def control_rate(ctx: KnotContext):
    """`(nu,)` the control's change per second."""
    return (ctx.u - ctx.u_prev) / ctx.dt


def joint_posture(ctx: KnotContext):
    """`(nu,)` joint positions minus the reference posture [rad]."""
    return _joints(ctx) - ctx.reference.joint_posture


def joint_limits(ctx: KnotContext):
    """`(nu,)` how far the joint positions are outside their limits [rad]."""
    model, ops, q_j = ctx.model, ctx.ops, _joints(ctx)
    nqb = model.nq - model.nu
    lower = ops.const(np.asarray(model.lower_position_limit, dtype=float)[nqb:])
    upper = ops.const(np.asarray(model.upper_position_limit, dtype=float)[nqb:])
    return ops.maximum(q_j - upper, 0.0) + ops.maximum(lower - q_j, 0.0)


def contact_force(ctx: KnotContext):
    """`(3 nfeet,)` each foot's force minus its share of the weight in stance, over the
    weight."""
    ops, stance = ctx.ops, ctx.reference.stance
    weight = ctx.model.total_mass * GRAVITY
    share = weight / ops.maximum(ops.sum(stance), 1.0)
    nfeet = ctx.model.nfeet
    return ops.vcat([
        (ctx.force(i) - ops.vec([0.0, 0.0, stance[i] * share])) / weight for i in range(nfeet)
    ])  # fmt: skip


_BASE = (base_angular_velocity, base_height, base_linear_velocity, base_orientation)


def terminal_state(ctx: KnotContext):
    """The base terms at the terminal knot, stacked in name order."""
    return ctx.ops.vcat([term(ctx) for term in _BASE])


RUNNING = tuple(
    Term(f.__name__, f)
    for f in (
        base_linear_velocity, base_angular_velocity, base_height, base_orientation,
        foot_clearance, foot_slip, gait_contact, torque, torque_limits, control_rate,
        joint_posture, joint_limits, contact_force,
    )
)  # fmt: skip
TERMINAL = (Term("terminal_state", terminal_state, terminal=True),)
