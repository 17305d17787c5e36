"""Articulated-body algorithm: forward dynamics `qdd = M^-1 (tau - C v - g)` in O(n) (generic).

Pass 1 (root to leaves): `v_i`, bias acceleration `c_i = v_i x (S_i qd_i)`, articulated inertia
`IA_i = I_i` and bias force `pA_i = v_i x* I_i v_i - f_ext_i`.
Pass 2 (leaves to root): `U = IA S`, `D = S^T U + armature`, `u = tau_i - S^T pA`,
`Ia = IA - U D^-1 U^T`, `pa = pA + Ia c + U D^-1 u`; `IA_lambda += X^T Ia X`, `pA_lambda += X^T pa`.
Pass 3 (root to leaves): `a' = X a_lambda + c`, `qdd_i = D^-1 (u - U^T a')`, `a_i = a' + S qdd_i`,
with `a_world = -g`.
"""

from __future__ import annotations

from . import spatial
from .kinematics import (
    Kinematics,
    joint_v,
    motion_subspace,
    subspace_times,
    subspace_transpose_times,
)
from .model import FREE_FLYER, Model
from .newton_euler import body_inertias, world_acceleration


def aba(ops, model: Model, kin: Kinematics, v, tau, f_ext=None):
    """Joint accelerations `(nv,)` for velocity `v (nv,)` and generalised forces `tau (nv,)`."""
    nj = model.njoints
    ia = body_inertias(ops, model)
    xs = [spatial.inv_action_matrix(ops, kin.parent_placement[i]) for i in range(nj)]
    vel, bias_acc, pa = [], [], []
    for i in range(nj):
        vj = subspace_times(ops, model, i, joint_v(model, v, i))
        lam = model.parents[i]
        vi = vj if lam < 0 else spatial.act_inv_motion(ops, kin.parent_placement[i], vel[lam]) + vj
        vel.append(vi)
        bias_acc.append(spatial.motion_cross(ops, vi, vj))
        p = spatial.force_cross(ops, vi, ops.mm(ia[i], vi))
        pa.append(p if f_ext is None else p - f_ext[i])

    u_mat, d_inv, u_vec = [None] * nj, [None] * nj, [None] * nj
    for i in reversed(range(nj)):
        s = motion_subspace(ops, model.joint_types[i], model.joint_axes[i])
        u = ops.mm(ia[i], s)  # (6, nv_j)
        nvj = model.nv_joint[i]
        arm = ops.const(model.armature[model.idx_v[i] : model.idx_v[i] + nvj])
        d = subspace_transpose_times(ops, model, i, u) + ops.diag(arm)
        tau_i = tau[model.idx_v[i] : model.idx_v[i] + nvj]
        u_vec[i] = tau_i - subspace_transpose_times(ops, model, i, pa[i])
        if model.joint_types[i] == FREE_FLYER:
            d_inv[i] = ops.inv(d)
        else:
            d_inv[i] = 1.0 / d  # (1, 1)
        u_mat[i] = u
        lam = model.parents[i]
        if lam >= 0:
            ud = ops.mm(u, d_inv[i])
            ia_a = ia[i] - ops.mm(ud, u.T)
            pa_a = pa[i] + ops.mm(ia_a, bias_acc[i]) + ops.mm(ud, u_vec[i])
            ia[lam] = ia[lam] + ops.mm(xs[i].T, ops.mm(ia_a, xs[i]))
            pa[lam] = pa[lam] + spatial.act_force(ops, kin.parent_placement[i], pa_a)

    a_world = world_acceleration(ops, model)
    acc, qdd = [], []
    for i in range(nj):
        lam = model.parents[i]
        a_par = acc[lam] if lam >= 0 else a_world
        a_prime = spatial.act_inv_motion(ops, kin.parent_placement[i], a_par) + bias_acc[i]
        qdd_i = ops.mm(d_inv[i], u_vec[i] - ops.mm(u_mat[i].T, a_prime))
        qdd.append(qdd_i)
        acc.append(a_prime + subspace_times(ops, model, i, qdd_i))
    return ops.vcat(qdd)
