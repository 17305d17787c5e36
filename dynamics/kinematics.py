"""Forward kinematics, frame placements, frame velocities and frame Jacobians (backend-generic).

For joint i with parent lambda(i), joint placement `lambda_M_i(q) = jointPlacement_i * M_J(q_i)`
and world placement `o_M_i = o_M_lambda * lambda_M_i`. Joint velocities (local frame):

    v_i = X_i v_lambda + S_i qd_i,    X_i = act_inv(lambda_M_i)

with motion subspace `S = 1_6` (free flyer), `[0; a]` (revolute about a), `[a; 0]` (prismatic).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import spatial
from .model import FREE_FLYER, PRISMATIC, REVOLUTE, JointType, Model

ReferenceFrame = Literal["local", "world", "local_world_aligned"]
LOCAL: ReferenceFrame = "local"
WORLD: ReferenceFrame = "world"
LOCAL_WORLD_ALIGNED: ReferenceFrame = "local_world_aligned"
REFERENCE_FRAMES: tuple[ReferenceFrame, ...] = (LOCAL, WORLD, LOCAL_WORLD_ALIGNED)


@dataclass
class Kinematics:
    """Per-joint placements for one configuration (lists of length `nj`).

    parent_placement[i]: `(R, p)` of joint i in its parent joint (`lambda_M_i`).
    world_placement[i]: `(R, p)` of joint i in the world (`o_M_i`).
    """

    parent_placement: list
    world_placement: list


def motion_subspace(ops, jtype: JointType, axis):
    """`S` as a constant `(6, nv_j)` block."""
    import numpy as np

    if jtype == FREE_FLYER:
        return ops.const(np.eye(6))
    s = np.zeros((6, 1))
    if jtype == REVOLUTE:
        s[3:6, 0] = axis
    elif jtype == PRISMATIC:
        s[0:3, 0] = axis
    else:
        raise NotImplementedError(jtype)
    return ops.const(s)


def joint_transform(ops, jtype: JointType, axis, q_joint):
    """`M_J(q_j)` as `(R, p)` for the joint's own coordinates `q_joint (nq_j,)`."""
    if jtype == FREE_FLYER:
        return spatial.quat_to_rotation(ops, q_joint[3:7]), q_joint[0:3]
    if jtype == REVOLUTE:
        return spatial.axis_rotation(ops, axis, q_joint[0]), ops.zeros(3)
    if jtype == PRISMATIC:
        return ops.eye(3), ops.const(axis) * q_joint[0]
    raise NotImplementedError(jtype)


def joint_q(model: Model, q, i: int):
    return q[model.idx_q[i] : model.idx_q[i] + model.nq_joint[i]]


def joint_v(model: Model, v, i: int):
    return v[model.idx_v[i] : model.idx_v[i] + model.nv_joint[i]]


def subspace_times(ops, model: Model, i: int, qd_joint):
    """`S_i qd_i (6,)` without a matrix product for 1-DoF joints."""
    jtype, axis = model.joint_types[i], model.joint_axes[i]
    if jtype == FREE_FLYER:
        return qd_joint
    a = ops.const(axis) * qd_joint[0]
    z = ops.zeros(3)
    return ops.vcat([z, a]) if jtype == REVOLUTE else ops.vcat([a, z])


def subspace_transpose_times(ops, model: Model, i: int, f):
    """`S_i^T f (nv_j,)` for a force or a 6 x k block `f`."""
    jtype, axis = model.joint_types[i], model.joint_axes[i]
    if jtype == FREE_FLYER:
        return f
    return ops.mm(motion_subspace(ops, jtype, axis).T, f)


def forward_kinematics(ops, model: Model, q) -> Kinematics:
    """Placements of every joint for configuration `q (nq,)`."""
    parent, world = [], []
    for i in range(model.njoints):
        fixed = (ops.const(model.joint_rotation[i]), ops.const(model.joint_translation[i]))
        jm = joint_transform(ops, model.joint_types[i], model.joint_axes[i], joint_q(model, q, i))
        li = spatial.compose(ops, fixed, jm)
        parent.append(li)
        lam = model.parents[i]
        world.append(li if lam < 0 else spatial.compose(ops, world[lam], li))
    return Kinematics(parent, world)


def joint_velocities(ops, model: Model, kin: Kinematics, v) -> list:
    """Spatial velocity of every joint frame, in that frame, `[(6,)] * nj`."""
    vel = []
    for i in range(model.njoints):
        vj = subspace_times(ops, model, i, joint_v(model, v, i))
        lam = model.parents[i]
        vel.append(
            vj if lam < 0 else spatial.act_inv_motion(ops, kin.parent_placement[i], vel[lam]) + vj
        )
    return vel


def frame_placement(ops, model: Model, kin: Kinematics, frame_id: int):
    """World placement `(R (3, 3), p (3,))` of a frame."""
    local = (
        ops.const(model.frame_rotation[frame_id]),
        ops.const(model.frame_translation[frame_id]),
    )
    joint = model.frame_parents[frame_id]
    return local if joint < 0 else spatial.compose(ops, kin.world_placement[joint], local)


def frame_velocity(
    ops, model: Model, kin: Kinematics, joint_vel: list, frame_id: int, reference: ReferenceFrame
):
    """Spatial velocity `(6,)` of a frame, expressed in `reference` (see `REFERENCE_FRAMES`).

    local: in the frame itself; world: in the world frame, linear part = velocity of the point
    at the world origin; local_world_aligned: linear velocity of the frame origin and angular
    velocity, both in world axes.
    """
    joint = model.frame_parents[frame_id]
    if joint < 0:
        return ops.zeros(6)
    local_in_joint = (
        ops.const(model.frame_rotation[frame_id]),
        ops.const(model.frame_translation[frame_id]),
    )
    v_frame = spatial.act_inv_motion(ops, local_in_joint, joint_vel[joint])
    if reference == LOCAL:
        return v_frame
    r, p = frame_placement(ops, model, kin, frame_id)
    if reference == LOCAL_WORLD_ALIGNED:
        return ops.vcat([ops.mm(r, v_frame[0:3]), ops.mm(r, v_frame[3:6])])
    if reference == WORLD:
        return spatial.act_motion(ops, (r, p), v_frame)
    raise ValueError(f"reference must be one of {REFERENCE_FRAMES}, got {reference!r}")


def frame_jacobian(ops, model: Model, kin: Kinematics, frame_id: int, reference: ReferenceFrame):
    """Frame Jacobian `(6, nv)` with `J v` = `frame_velocity(..., reference)`.

    Column block of an ancestor joint j in the world frame: `o_M_j . S_j`; the
    local_world_aligned form shifts the linear rows to the frame origin p:
    `J_lin = J_lin^world - [p]x J_ang^world`.
    """
    joint = model.frame_parents[frame_id]
    support = set(model.supports(joint)) if joint >= 0 else set()
    r_f, p_f = frame_placement(ops, model, kin, frame_id)
    blocks = []
    for j in range(model.njoints):
        nvj = model.nv_joint[j]
        if j not in support:
            blocks.append(ops.zeros(6, nvj))
            continue
        r, p = kin.world_placement[j]
        s = motion_subspace(ops, model.joint_types[j], model.joint_axes[j])
        ang = ops.mm(r, s[3:6, :])
        lin = ops.mm(r, s[0:3, :]) + ops.mm(spatial.skew(ops, p), ang)  # world: v_O
        if reference == WORLD:
            blocks.append(ops.vcat([lin, ang]))
            continue
        lin = lin - ops.mm(spatial.skew(ops, p_f), ang)  # velocity of the frame origin
        if reference == LOCAL_WORLD_ALIGNED:
            blocks.append(ops.vcat([lin, ang]))
        elif reference == LOCAL:
            blocks.append(ops.vcat([ops.mm(r_f.T, lin), ops.mm(r_f.T, ang)]))
        else:
            raise ValueError(f"reference must be one of {REFERENCE_FRAMES}, got {reference!r}")
    return ops.hcat(blocks)
