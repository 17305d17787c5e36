"""Composite rigid-body algorithm: the joint-space mass matrix `M(q) (nv, nv)` (backend-generic).

Composite inertias `Ic_i = I_i + sum_children X_c^T Ic_c X_c`; for joint i, `F = Ic_i S_i`,
`M_ii = S_i^T F`, and going up the tree `F <- X_j^T F`, `M_ji = S_j^T F` for each ancestor j.
The armature (rotor inertia) is added to the diagonal, as in Pinocchio.
"""

from __future__ import annotations

from . import spatial
from .kinematics import Kinematics, motion_subspace, subspace_transpose_times
from .model import Model
from .newton_euler import body_inertias


def crba(ops, model: Model, kin: Kinematics):
    """Joint-space mass matrix `M(q) (nv, nv)` at the kinematics `kin`, armature included."""
    nj = model.njoints
    composite = body_inertias(ops, model)
    xs = [spatial.inv_action_matrix(ops, kin.parent_placement[i]) for i in range(nj)]
    for i in reversed(range(nj)):
        lam = model.parents[i]
        if lam >= 0:
            composite[lam] = composite[lam] + ops.mm(xs[i].T, ops.mm(composite[i], xs[i]))
    blocks = [[None] * nj for _ in range(nj)]
    for i in range(nj):
        f = ops.mm(composite[i], motion_subspace(ops, model.joint_types[i], model.joint_axes[i]))
        blocks[i][i] = subspace_transpose_times(ops, model, i, f)
        j = i
        while model.parents[j] >= 0:
            f = ops.mm(xs[j].T, f)
            j = model.parents[j]
            blocks[j][i] = subspace_transpose_times(ops, model, j, f)
            blocks[i][j] = blocks[j][i].T
    rows = [
        [
            blocks[r][c] if blocks[r][c] is not None
            else ops.zeros(model.nv_joint[r], model.nv_joint[c])
            for c in range(nj)
        ]
        for r in range(nj)
    ]
    return ops.block(rows) + ops.diag(ops.const(model.armature))
