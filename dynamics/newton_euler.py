"""Recursive Newton-Euler: inverse dynamics `tau = M(q) a + C(q, v) v + g(q)` (backend-generic).

Forward pass (local frames, gravity as a fictitious base acceleration `a_world = -g`):

    v_i = X_i v_lambda + S_i qd_i
    a_i = X_i a_lambda + S_i qdd_i + v_i x (S_i qd_i)
    f_i = I_i a_i + v_i x* I_i v_i - f_ext_i

Backward pass: `tau_i = S_i^T f_i`, `f_lambda += X_i^T f_i`.
"""

from __future__ import annotations

from . import spatial
from .kinematics import Kinematics, joint_v, subspace_times, subspace_transpose_times
from .model import Model


def body_inertias(ops, model: Model) -> list:
    """6x6 spatial inertia of each joint's body about the joint frame origin."""
    return [
        spatial.spatial_inertia(
            ops, model.body_mass[i], ops.const(model.body_com[i]), ops.const(model.body_inertia[i])
        )
        for i in range(model.njoints)
    ]


def world_acceleration(ops, model: Model):
    """`a_world = [-g; 0]`: gravity enters as an upward acceleration of the world."""
    return ops.vcat([-ops.const(model.gravity), ops.zeros(3)])


def rnea(ops, model: Model, kin: Kinematics, v, a, f_ext=None):
    """Joint torques `(nv,)` for velocity `v (nv,)`, acceleration `a (nv,)`.

    `f_ext`: optional list of external forces `(6,)` per joint, in the joint's local frame.
    """
    inertia = body_inertias(ops, model)
    a_world = world_acceleration(ops, model)
    vel, force = [], []
    acc = []
    for i in range(model.njoints):
        vj = subspace_times(ops, model, i, joint_v(model, v, i))
        aj = subspace_times(ops, model, i, joint_v(model, a, i))
        lam = model.parents[i]
        x = kin.parent_placement[i]
        v_par = vel[lam] if lam >= 0 else None
        a_par = acc[lam] if lam >= 0 else a_world
        vi = vj if v_par is None else spatial.act_inv_motion(ops, x, v_par) + vj
        ai = spatial.act_inv_motion(ops, x, a_par) + aj + spatial.motion_cross(ops, vi, vj)
        fi = ops.mm(inertia[i], ai) + spatial.force_cross(ops, vi, ops.mm(inertia[i], vi))
        if f_ext is not None:
            fi = fi - f_ext[i]
        vel.append(vi)
        acc.append(ai)
        force.append(fi)
    tau = [None] * model.njoints
    for i in reversed(range(model.njoints)):
        tau[i] = subspace_transpose_times(ops, model, i, force[i])
        lam = model.parents[i]
        if lam >= 0:
            force[lam] = force[lam] + spatial.act_force(ops, kin.parent_placement[i], force[i])
    return ops.vcat(tau) + ops.const(model.armature) * a  # rotor inertia, as Pinocchio's RNEA
