"""Spatial algebra written against `backend.Ops` (runs on JAX arrays and CasADi symbols).

A placement `(R, p)` maps coordinates of a child frame C into its parent P:
`x_P = R x_C + p` (Pinocchio's `SE3`, `P_M_C`). Motions `m = [v; w]` and forces
`f = [f; n]` are 6-vectors, linear part first.

    act_motion(R, p, m_C)      = [R v + p x (R w); R w]            (C -> P)
    act_inv_motion(R, p, m_P)  = [R^T (v - p x w); R^T w]          (P -> C)
    act_force(R, p, f_C)       = [R f; R n + p x (R f)]            (C -> P)
    motion_cross(m, x)         = [w x x_v + v x x_w; w x x_w]      (m x x)
    force_cross(m, f)          = [w x f_f; w x f_n + v x f_f]      (m x* f)
"""

from __future__ import annotations


def skew(ops, a):
    """`(3,) -> (3, 3)` with `skew(a) b = a x b`."""
    return ops.mat([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def quat_to_rotation(ops, quat):
    """Unit quaternion `[x, y, z, w]` -> rotation matrix `(3, 3)` (no normalisation)."""
    x, y, z, w = quat[0], quat[1], quat[2], quat[3]
    return ops.mat(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def axis_rotation(ops, axis: tuple, angle):
    """Rotation by `angle` about the constant unit `axis` (Rodrigues), specialised for x, y, z."""
    c, s = ops.cos(angle), ops.sin(angle)
    if axis == (1.0, 0.0, 0.0):
        return ops.mat([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    if axis == (0.0, 1.0, 0.0):
        return ops.mat([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    if axis == (0.0, 0.0, 1.0):
        return ops.mat([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    x, y, z = axis
    t = 1 - c
    return ops.mat(
        [
            [c + x * x * t, x * y * t - z * s, x * z * t + y * s],
            [y * x * t + z * s, c + y * y * t, y * z * t - x * s],
            [z * x * t - y * s, z * y * t + x * s, c + z * z * t],
        ]
    )


def compose(ops, a, b):
    """Placement product `a * b` of two `(R, p)` pairs."""
    ra, pa = a
    rb, pb = b
    return ops.mm(ra, rb), ops.mm(ra, pb) + pa


def act_motion(ops, placement, m):
    r, p = placement
    w = ops.mm(r, m[3:6])
    return ops.vcat([ops.mm(r, m[0:3]) + ops.cross(p, w), w])


def act_inv_motion(ops, placement, m):
    r, p = placement
    w = m[3:6]
    return ops.vcat([ops.mm(r.T, m[0:3] - ops.cross(p, w)), ops.mm(r.T, w)])


def act_force(ops, placement, f):
    r, p = placement
    lin = ops.mm(r, f[0:3])
    return ops.vcat([lin, ops.mm(r, f[3:6]) + ops.cross(p, lin)])


def motion_cross(ops, m, x):
    v, w = m[0:3], m[3:6]
    return ops.vcat([ops.cross(w, x[0:3]) + ops.cross(v, x[3:6]), ops.cross(w, x[3:6])])


def force_cross(ops, m, f):
    v, w = m[0:3], m[3:6]
    return ops.vcat([ops.cross(w, f[0:3]), ops.cross(w, f[3:6]) + ops.cross(v, f[0:3])])


def inv_action_matrix(ops, placement):
    """6x6 matrix X of `act_inv_motion` (parent -> child): `X = [[R^T, -R^T [p]x], [0, R^T]]`.

    Its transpose maps child forces to the parent: `X^T f = act_force(placement, f)`.
    """
    r, p = placement
    rt = r.T
    return ops.block([[rt, -ops.mm(rt, skew(ops, p))], [ops.zeros(3, 3), rt]])


def spatial_inertia(ops, mass, com, inertia_com):
    """6x6 spatial inertia about the frame origin from mass, `com (3,)`, `I_c (3, 3)`:

        I = [[m 1, -m [c]x], [m [c]x, I_c - m [c]x [c]x]]
    """
    cx = skew(ops, com)
    mcx = cx * mass
    return ops.block([[ops.eye(3) * mass, -mcx], [mcx, inertia_com - ops.mm(mcx, cx)]])
