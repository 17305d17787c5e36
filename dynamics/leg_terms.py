"""The base-frame terms of a legged robot one leg at a time, and their Jacobians leg by leg.

`floating_base_terms` needs, with the base at the world origin (`_B`: base frame = world),

    M_B (nv, nv),   h_B (nv,) = RNEA(q, v, 0) with gravity g_B,   J_f,B (k, 6, nv),   p_f,B (k, 3)

and their Jacobians over the joint angles `q_j` and over `(v, g_B)`. When the base's children
are `L` disjoint chains of `n` one-DoF joints (the legs: Go2, ANYmal C, Solo-12: 4 x 3), each
leg's share of these terms depends on its own `n` angles and rates only (and on `v_B = v[0:6]`,
`g_B`). With `I_i` the spatial inertia of body i about the base origin (base axes), `S_j` the
motion subspace of leg joint j (`dense_terms`: revolute `[p x R a; R a]`, prismatic `[R a; 0]`)
and joints `1..n` of leg l root first (`j <= k`: j is k or an ancestor):

    Ic_k    = sum_{j >= k} I_j                                   composite inertias of the leg
    M_bb    = I_0 + sum_l Ic_{l,1}                               base block (6, 6)
    M_b,k   = Ic_k S_k                                           coupling column of joint k
    M_jk    = S_j . Ic_k S_k  (j <= k),  M_kj = M_jk             the leg's (n, n) block
    V_k     = v_B + sum_{j <= k} S_j v_j,   c_k = V_{k-1} x V_k  (V_0 = v_B)
    A_k     = [-g_B; 0] + sum_{j <= k} c_j
    f_k     = I_k A_k + V_k x* I_k V_k,     F_k = sum_{j >= k} f_j
    h_k     = S_k . F_k                                          the leg's rows of h
    h_b     = f_0 + sum_l F_{l,1},  f_0 = I_0 [-g_B; 0] + v_B x* I_0 v_B
    J_f     = [[1, -[p_f]x] | (S_j,lin - p_f x S_j,ang; S_j,ang) for j <= k_f, else 0],  p_f

(blocks of other legs zero; the armature on the diagonal of `M`). These are the sums of
`dense_terms.mass_and_bias` and `frame_jacobians` regrouped by leg: the same values to rounding
(`tests/dynamics/test_leg_terms.py`). Hence the Jacobian over `q_j` is block-sparse: leg l's
angles move only the base rows and columns and leg l's own. `terms_and_jacobians` forms it as
`jvp`s along the `n` angles of one leg, `vmap`ped over the legs (3 directions through a quarter
of the work instead of 12 through all of it), and `dh_B / d(v, g_B)` as `jacfwd` of the leg's
bias over `(v_B, v_l)` (`6 + n` directions) with the gravity columns read off the mass terms:

    dh_k / dg_B = -(Ic_k S_k)[0:3],  dF_{l,1} / dg_B = -Ic_{l,1}[:, 0:3],  df_0 / dg_B = -I_0[:, :3]

(gravity enters as the acceleration `[-g_B; 0]` of every body; `Ic` is symmetric).

No `dot_general` between two traced arrays: products are multiply-and-sums or written out
element by element, since these functions run under `vmap` over the legs inside the callers'
`vmap`s (XLA 0.10.2 on CPU rejected some batched `dot_general`s, see `dense_terms.matmul`).
`floating_base_terms` uses this module when `legs(model, frame_ids)` finds the legs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .dense_terms import matmul
from .model import FREE_FLYER, PRISMATIC, REVOLUTE, Model

# The cross products and the sums along a chain are written out element by element: under
# `jacfwd` and `vmap` they stay elementwise operations that XLA fuses with their neighbours, where
# an `einsum` with the Levi-Civita tensor or a triangular matrix is a kernel of its own (faster
# on Go2's rule, benchmarks/bench_floating_base_rule.py). The matrix products stay
# multiply-and-sums (`dense_terms.matmul`): written out element by element they are slower.


def skew(a):
    """`(..., 3) -> (..., 3, 3)` with `skew(a) b = a x b`."""
    x, y, z = a[..., 0], a[..., 1], a[..., 2]
    zero = jnp.zeros_like(x)
    rows = ([zero, -z, y], [z, zero, -x], [-y, x, zero])
    return jnp.stack([jnp.stack(row, axis=-1) for row in rows], axis=-2)


def cross(a, b):
    """`a x b` over the last axis of `(..., 3)` arrays."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def matvec(a, x):
    """`a (..., m, K) @ x (..., K)` as a multiply-and-sum."""
    return jnp.sum(a * x[..., None, :], axis=-1)


def motion_cross(m, x):
    """`m x x = [w x x_v + v x x_w; w x x_w]` for `(..., 6)` motions `m = [v; w]`."""
    v, w = m[..., 0:3], m[..., 3:6]
    xv, xw = x[..., 0:3], x[..., 3:6]
    return jnp.concatenate([cross(w, xv) + cross(v, xw), cross(w, xw)], axis=-1)


def force_cross(m, f):
    """`m x* f = [w x f_f; w x f_n + v x f_f]` for a motion `m = [v; w]`, a force `[f_f; f_n]`."""
    v, w = m[..., 0:3], m[..., 3:6]
    ff, fn = f[..., 0:3], f[..., 3:6]
    return jnp.concatenate([cross(w, ff), cross(w, fn) + cross(v, ff)], axis=-1)


def prefix_sums(x):
    """`[x_0, x_0 + x_1, ...]` along axis 0 (sums down a chain, root first)."""
    sums = [x[0]]
    for k in range(1, x.shape[0]):
        sums.append(sums[-1] + x[k])
    return jnp.stack(sums)


def suffix_sums(x):
    """`[x_0 + ... + x_{n-1}, ..., x_{n-1}]` along axis 0 (sums over a joint's subtree)."""
    sums = [x[-1]]
    for k in range(x.shape[0] - 2, -1, -1):
        sums.append(sums[-1] + x[k])
    return jnp.stack(sums[::-1])


@dataclass(frozen=True)
class Legs:
    """Static layout of a robot's legs (NumPy, built once per structure).

    joints, dofs, coords: `(L, n)` model joint, velocity index and index in `q_j = q[7:]` of
    each leg joint, root first. revolute: `(n,)` kind of each chain position (the same on
    every leg). axes: `(L, n, 3)` joint axes. frames: `(L, m)` the requested frames of each
    leg, `frame_link (m,)` the chain position of their joint (the same on every leg),
    `frame_order (k,)` the position of each requested frame in the `(L * m)` flattening.
    dof_order: `(nv,)` the velocity index of each entry of `[base (6), leg 0 (n), leg 1, ...]`.
    """

    joints: np.ndarray
    dofs: np.ndarray
    coords: np.ndarray
    revolute: tuple
    axes: np.ndarray
    frames: np.ndarray
    frame_link: tuple
    frame_order: np.ndarray
    dof_order: np.ndarray

    @property
    def count(self) -> int:
        return self.joints.shape[0]

    @property
    def length(self) -> int:
        return self.joints.shape[1]


def legs(model: Model, frame_ids: tuple) -> Legs | None:
    """The legs of `model` with the frames `frame_ids` on them, or None when the tree is not a
    free-flyer base with disjoint, equally long chains of 1-DoF joints of the same kinds (and
    every frame on a leg joint, the same number per leg at the same chain positions)."""
    return _legs_of(
        model.parents, model.joint_types, model.joint_axes, model.idx_q, model.idx_v,
        model.nv_joint, tuple(model.frame_parents[int(f)] for f in frame_ids),
        tuple(int(f) for f in frame_ids),
    )  # fmt: skip


@functools.lru_cache(maxsize=64)
def _legs_of(parents, joint_types, joint_axes, idx_q, idx_v, nv_joint, frame_joints, frame_ids):
    nj = len(parents)
    if nj < 2 or joint_types[0] != FREE_FLYER or parents[0] >= 0 or idx_v[0] != 0:
        return None
    if any(kind not in (REVOLUTE, PRISMATIC) for kind in joint_types[1:]):
        return None
    children = [[i for i in range(nj) if parents[i] == j] for j in range(nj)]
    chains = []
    for root in children[0]:
        chain = [root]
        while children[chain[-1]]:
            if len(children[chain[-1]]) != 1:
                return None
            chain.append(children[chain[-1]][0])
        chains.append(chain)
    if len({len(c) for c in chains}) != 1 or sum(len(c) for c in chains) != nj - 1:
        return None
    joints = np.asarray(chains, int)
    kinds = {tuple(joint_types[j] for j in chain) for chain in chains}
    if len(kinds) != 1:
        return None
    leg_of = {j: (leg, pos) for leg, chain in enumerate(chains) for pos, j in enumerate(chain)}
    if any(j not in leg_of for j in frame_joints):  # a frame on the base (or nothing)
        return None
    per_leg = [[] for _ in chains]
    for index, j in enumerate(frame_joints):
        leg, pos = leg_of[j]
        per_leg[leg].append((pos, frame_ids[index], index))
    per_leg = [sorted(entries) for entries in per_leg]
    links = {tuple(pos for pos, _, _ in entries) for entries in per_leg}
    if len(links) != 1 or not frame_joints:
        return None
    m = len(per_leg[0])
    frame_order = np.empty(len(frame_ids), int)
    for leg, entries in enumerate(per_leg):
        for slot, (_, _, index) in enumerate(entries):
            frame_order[index] = leg * m + slot
    dofs = np.asarray(idx_v)[joints]
    return Legs(
        joints=joints,
        dofs=dofs,
        coords=np.asarray(idx_q)[joints] - 7,
        revolute=tuple(kind == REVOLUTE for kind in kinds.pop()),
        axes=np.array([[joint_axes[j] for j in chain] for chain in chains], float),
        frames=np.asarray([[f for _, f, _ in entries] for entries in per_leg], int),
        frame_link=links.pop(),
        frame_order=frame_order,
        dof_order=np.concatenate([np.arange(6), dofs.ravel()]),
    )


def _leg_constants(model: Model, legs: Legs, dtype) -> dict:
    """The model's arrays of each leg, stacked `(L, ...)` (pytree leaves, possibly traced)."""

    def pick(array, index):
        return jnp.asarray(array, dtype)[index]

    return {
        "axis": jnp.asarray(legs.axes, dtype),
        "fixed_r": pick(model.joint_rotation, legs.joints),
        "fixed_p": pick(model.joint_translation, legs.joints),
        "mass": pick(model.body_mass, legs.joints),
        "com": pick(model.body_com, legs.joints),
        "inertia": pick(model.body_inertia, legs.joints),
        "frame_p": pick(model.frame_translation, legs.frames),
    }


def _spatial_inertia(mass, com, inertia):
    """`(..., 6, 6)` spatial inertias about the origin from `mass (...)`, world `com (..., 3)`
    and world `inertia (..., 3, 3)` about the centre of mass (`dense_terms.world_inertias`)."""
    cx = skew(com)
    mcx = mass[..., None, None] * cx
    eye = jnp.eye(3, dtype=com.dtype).reshape((1,) * mass.ndim + (3, 3)) * mass[..., None, None]
    top = jnp.concatenate([eye, -mcx], axis=-1)
    bottom = jnp.concatenate([mcx, inertia - matmul(mcx, cx)], axis=-1)
    return jnp.concatenate([top, bottom], axis=-2)


def leg_kinematics(revolute: tuple, const: dict, angles):
    """One leg's placements, subspace and inertias at its angles `(n,)`, base frame:
    `(R (n, 3, 3), p (n, 3), S (n, 6), I (n, 6, 6))` (`const`: one leg's `_leg_constants`)."""
    dtype = angles.dtype
    axes = const["axis"]
    eye = jnp.eye(3, dtype=dtype)[None]
    c, s = jnp.cos(angles)[:, None, None], jnp.sin(angles)[:, None, None]
    rodrigues = c * eye + s * skew(axes) + (1.0 - c) * axes[:, :, None] * axes[:, None, :]
    is_revolute = np.asarray(revolute)
    joint_r = jnp.where(is_revolute[:, None, None], rodrigues, eye)
    joint_p = jnp.where(is_revolute[:, None], 0.0, axes * angles[:, None])
    fixed_r = const["fixed_r"]
    local_r = matmul(fixed_r, joint_r)
    local_p = matvec(fixed_r, joint_p) + const["fixed_p"]
    rs, ps = [local_r[0]], [local_p[0]]
    for k in range(1, angles.shape[0]):
        rs.append(matmul(rs[-1], local_r[k]))
        ps.append(matvec(rs[-2], local_p[k]) + ps[-1])
    rotation, translation = jnp.stack(rs), jnp.stack(ps)
    direction = matvec(rotation, axes)  # R a
    lin = jnp.where(is_revolute[:, None], cross(translation, direction), direction)
    ang = jnp.where(is_revolute[:, None], direction, 0.0)
    subspace = jnp.concatenate([lin, ang], axis=1)
    com = matvec(rotation, const["com"]) + translation
    inertia = matmul(matmul(rotation, const["inertia"]), jnp.swapaxes(rotation, -1, -2))
    return rotation, translation, subspace, _spatial_inertia(const["mass"], com, inertia)


def leg_mass_terms(subspace, inertia):
    """`(Ic_1 (6, 6), columns Ic_k S_k (n, 6), M_ll (n, n))` of one leg (module docstring)."""
    n = subspace.shape[0]
    composite = suffix_sums(inertia)  # Ic_j = sum_{k >= j} I_k
    column = matvec(composite, subspace)  # Ic_k S_k
    products = jnp.sum(subspace[:, None, :] * column[None, :, :], axis=-1)  # S_j . Ic_k S_k
    upper_mask = np.triu(np.ones((n, n), bool))
    block = jnp.where(upper_mask, products, products.T)
    return composite[0], column, block


def leg_bias_terms(subspace, inertia, base_velocity, rates, gravity):
    """`(F_1 (6,), h_l (n,))` of one leg at base twist `v_B (6,)`, its rates `(n,)` and the
    base-frame gravity `(3,)` (module docstring)."""
    velocity = base_velocity[None, :] + prefix_sums(subspace * rates[:, None])  # (n, 6)
    previous = jnp.concatenate([base_velocity[None, :], velocity[:-1]])
    bias_acc = motion_cross(previous, velocity)
    acc0 = jnp.concatenate([-gravity, jnp.zeros(3, gravity.dtype)])
    acceleration = acc0[None, :] + prefix_sums(bias_acc)
    force = matvec(inertia, acceleration) + force_cross(velocity, matvec(inertia, velocity))
    subtree = suffix_sums(force)  # F_k = sum_{j >= k} f_j
    return subtree[0], jnp.sum(subspace * subtree, axis=-1)


def leg_frame_terms(frame_link: tuple, const: dict, rotation, translation, subspace):
    """`(leg columns of J_f (m, 6, n), p_f (m, 3))` of one leg's frames (module docstring)."""
    n = subspace.shape[0]
    link = np.asarray(frame_link)
    origin = matvec(rotation[link], const["frame_p"]) + translation[link]
    mask = jnp.asarray(np.arange(n)[None, :] <= link[:, None], subspace.dtype)  # (m, n)
    ang = mask[:, None, :] * subspace[:, 3:6].T[None]  # (m, 3, n)
    lin = mask[:, None, :] * subspace[:, 0:3].T[None] - matmul(skew(origin), ang)
    return jnp.concatenate([lin, ang], axis=1), origin


def base_inertia(model: Model, dtype):
    """`I_0 (6, 6)`: the base body's spatial inertia about its own origin, base axes."""
    return _spatial_inertia(
        jnp.asarray(model.body_mass, dtype)[0],
        jnp.asarray(model.body_com, dtype)[0],
        jnp.asarray(model.body_inertia, dtype)[0],
    )


def _base_force(inertia0, base_velocity, gravity):
    """`f_0 = I_0 [-g_B; 0] + v_B x* I_0 v_B (6,)`."""
    acc0 = jnp.concatenate([-gravity, jnp.zeros(3, gravity.dtype)])
    return matvec(inertia0, acc0) + force_cross(base_velocity, matvec(inertia0, base_velocity))


def _leg_terms(legs: Legs, const, angles, base_velocity, rates, gravity):
    """One leg's share of the terms (`dict` of its `leg_*_terms`) and its `(S, I)`."""
    rotation, translation, subspace, inertia = leg_kinematics(legs.revolute, const, angles)
    composite, column, block = leg_mass_terms(subspace, inertia)
    force, bias = leg_bias_terms(subspace, inertia, base_velocity, rates, gravity)
    jac, origin = leg_frame_terms(legs.frame_link, const, rotation, translation, subspace)
    parts = dict(composite=composite, column=column, block=block, force=force, bias=bias,
                 jac=jac, origin=origin)  # fmt: skip
    return parts, (subspace, inertia)


def _bordered(legs: Legs, corner, top, left, diagonal):
    """`(nv, nv)` from a base block `corner (6, 6)`, each leg's base rows `top (L, 6, n)`, base
    columns `left (L, n, 6)` and own block `diagonal (L, n, n)`; zero across legs."""
    count, n = legs.count, legs.length
    eye = jnp.eye(count, dtype=corner.dtype)
    blocks = (diagonal[:, :, None, :] * eye[:, None, :, None]).reshape(count * n, count * n)
    upper = jnp.concatenate([corner, jnp.swapaxes(top, 0, 1).reshape(6, count * n)], axis=1)
    lower = jnp.concatenate([left.reshape(count * n, 6), blocks], axis=1)
    return _to_dofs(legs, jnp.concatenate([upper, lower]), (0, 1))


def _to_dofs(legs: Legs, array, axes):
    """Reorder the `axes` of `array` from `[base, leg 0, leg 1, ...]` to velocity order."""
    if np.array_equal(legs.dof_order, np.arange(legs.dof_order.size)):
        return array
    inverse = np.argsort(legs.dof_order)
    for axis in axes:
        array = jnp.take(array, inverse, axis=axis)
    return array


def assemble(legs: Legs, parts: dict):
    """`(M_B, h_B, J_f,B, p_f,B)` without the base body, the armature and the base columns'
    identity: the part linear in the legs' `parts` (stacked `(L, ...)`)."""
    count, n = legs.count, legs.length
    column = parts["column"]  # (L, n, 6)
    mass = _bordered(legs, jnp.sum(parts["composite"], 0), jnp.swapaxes(column, 1, 2), column,
                     parts["block"])  # fmt: skip
    bias = jnp.concatenate([jnp.sum(parts["force"], 0), parts["bias"].reshape(count * n)])
    bias = _to_dofs(legs, bias, (0,))
    origin = parts["origin"].reshape(-1, 3)  # (L * m, 3)
    eye = jnp.eye(count, dtype=origin.dtype)
    jac = parts["jac"]  # (L, m, 6, n)
    leg_columns = jac[:, :, :, None, :] * eye[:, None, None, :, None]
    leg_columns = leg_columns.reshape(origin.shape[0], 6, count * n)
    zeros = jnp.zeros((origin.shape[0], 3, 3), origin.dtype)
    base_columns = jnp.concatenate([
        jnp.concatenate([zeros, -skew(origin)], axis=2),
        jnp.concatenate([zeros, zeros], axis=2),
    ], axis=1)  # fmt: skip
    jac = _to_dofs(legs, jnp.concatenate([base_columns, leg_columns], axis=2), (2,))
    order = legs.frame_order
    return mass, bias, jac[order], origin[order]


def _constants(model: Model, legs: Legs, inertia0, base_velocity, gravity, dtype):
    """What `assemble` leaves out: `(I_0 + armature, f_0, base columns' identity)`."""
    nv, k = legs.dof_order.size, legs.frame_order.size
    mass = jnp.zeros((nv, nv), dtype).at[0:6, 0:6].set(inertia0)
    mass = mass + jnp.diag(jnp.asarray(model.armature, dtype))
    bias = jnp.zeros(nv, dtype).at[0:6].set(_base_force(inertia0, base_velocity, gravity))
    jac = jnp.zeros((k, 6, nv), dtype).at[:, :, 0:6].set(jnp.eye(6, dtype=dtype))
    return mass, bias, jac


def base_frame_terms(model: Model, legs: Legs, q_joints, v, gravity_base):
    """`(M_B, h_B, J_f,B (k, 6, nv), p_f,B (k, 3))` leg by leg (module docstring): the same
    values as `floating_base_terms.base_frame_terms` to rounding."""
    return terms_and_jacobians(model, legs, q_joints, v, gravity_base)[0]


def terms_and_jacobians(model: Model, legs: Legs, q_joints, v, gravity_base, *,
                        by_angle: bool = False, by_speed: bool = False):  # fmt: skip
    """`(terms, by_angle, by_speed)`: `base_frame_terms` and, if asked for, their Jacobians

    by_angle: `(M_B, h_B, J_f,B, p_f,B)`, each `(..., L * n)`, over the leg angles in
              leg-major order (`q_joints[legs.coords.ravel()]`), else None;
    by_speed: `dh_B / d(v, g_B) (nv, nv + 3)`, else None.
    """
    dtype = jnp.result_type(q_joints, v, gravity_base)
    q_joints, v, gravity_base = (x.astype(dtype) for x in (q_joints, v, gravity_base))
    const = _leg_constants(model, legs, dtype)
    angles, base_velocity, rates = q_joints[legs.coords], v[0:6], v[legs.dofs]
    inertia0 = base_inertia(model, dtype)
    constants = _constants(model, legs, inertia0, base_velocity, gravity_base, dtype)

    def one_leg(const, angles, rates):
        def terms(angles):
            return _leg_terms(legs, const, angles, base_velocity, rates, gravity_base)

        if not by_angle:
            return terms(angles) + (None,)

        def push(tangent):  # one direction of the leg's angles
            return jax.jvp(terms, (angles,), (tangent,))

        basis = jnp.eye(angles.shape[0], dtype=dtype)
        (parts, kinematics), (tangents, _) = jax.vmap(push, out_axes=(None, 0))(basis)
        return parts, kinematics, tangents

    def one_leg_speeds(kinematics, rates):
        subspace, inertia = kinematics

        def bias(speeds):  # [v_B (6), rates (n)]
            return leg_bias_terms(subspace, inertia, speeds[:6], speeds[6:], gravity_base)

        return jax.jacfwd(bias)(jnp.concatenate([base_velocity, rates]))

    parts, kinematics, angle_tangents = jax.vmap(one_leg)(const, angles, rates)
    terms = _with_constants(assemble(legs, parts), constants)
    angle_jacobians = _angle_jacobians(legs, angle_tangents) if by_angle else None
    speed_jacobian = None
    if by_speed:
        force_by_speed, bias_by_speed = jax.vmap(one_leg_speeds)(kinematics, rates)
        speed_jacobian = _speed_jacobian(legs, parts, force_by_speed, bias_by_speed, inertia0,
                                         base_velocity, gravity_base)  # fmt: skip
    return terms, angle_jacobians, speed_jacobian


def _with_constants(out, constants):
    mass, bias, jac, origin = out
    return mass + constants[0], bias + constants[1], jac + constants[2], origin


def _angle_jacobians(legs: Legs, by_angle: dict):
    """The terms' Jacobians `(..., L * n)` over the leg angles (leg-major) from each leg's
    `(L, n, ...)` (direction second): `assemble` of each direction, the other legs zero."""
    count, n = legs.count, legs.length
    eye = np.eye(count)

    def spread(x):  # (L, n, ...) -> (L * n, L, ...): direction (l, k) moves leg l only
        mask = jnp.asarray(eye.reshape((count, 1, count) + (1,) * (x.ndim - 2)), x.dtype)
        return (jnp.swapaxes(x, 0, 1)[None] * mask).reshape((count * n, count) + x.shape[2:])

    directions = {key: spread(x) for key, x in by_angle.items()}
    full = jax.vmap(lambda parts: assemble(legs, parts))(directions)
    return tuple(jnp.moveaxis(x, 0, -1) for x in full)


def _speed_jacobian(legs, parts, force_by_speed, bias_by_speed, inertia0, base_velocity,
                    gravity):  # fmt: skip
    """`dh_B / d(v, g_B) (nv, nv + 3)` from each leg's `d(F_1, h_l) / d(v_B, v_l)` and the
    gravity columns of the module docstring."""
    base = jax.jacfwd(_base_force, argnums=1)(inertia0, base_velocity, gravity)
    corner = base + jnp.sum(force_by_speed[:, :, 0:6], axis=0)
    by_speed = _bordered(legs, corner, force_by_speed[:, :, 6:], bias_by_speed[:, :, 0:6],
                         bias_by_speed[:, :, 6:])  # fmt: skip
    composite = inertia0 + jnp.sum(parts["composite"], axis=0)
    by_gravity = -jnp.concatenate([composite[:, 0:3], parts["column"][:, :, 0:3].reshape(-1, 3)])
    by_gravity = _to_dofs(legs, by_gravity, (0,))
    return jnp.concatenate([by_speed, by_gravity], axis=1)
