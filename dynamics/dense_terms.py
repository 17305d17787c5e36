"""The rigid-body terms of a time step (`M`, `h`, joint placements) as a few dense array operations.

`kinematics`, `composite_inertia` and `newton_euler` walk the tree one joint at a time, written
once for JAX and CasADi. Under `jax.jacfwd` each of their hundreds of tiny per-joint operations
is vectorised over the tangent directions and costs its dispatch, not its arithmetic (a step's
Jacobian time follows its HLO instruction count, `benchmarks/bench_step_jacobian.py`). This
module computes the same quantities, JAX only, with the joints of one
tree depth handled together and everything else as products of `(nj, ...)` and `(nv, ...)`
arrays, all in the world frame (`W`, z up; motions `[v_O; w]` with `v_O` the velocity of the
body point at the world origin, forces `[f; n_O]`, linear part first, as in `spatial`):

    W_M_i     = W_M_lambda(i) * jointPlacement_i * M_J(q_i)        level by level (tree depth)
    S_d       (6,)  world motion subspace of dof d:  revolute  [p x R a; R a],
                    prismatic [R a; 0], free flyer  Ad(W_M_i) (its six columns)
    V_i       = sum_{d in support(i)} S_d v_d                        body velocities (nj, 6)
    c_i       = V_lambda(i) x V_i                                    bias acceleration (S-dot qd)
    A_i       = [-g; 0] + sum_{j in support(i)} c_j                  acceleration at a = 0
    f_i       = I_i A_i + V_i x* I_i V_i                             I_i: world spatial inertia
    h_d       = S_d . sum_{i in subtree(joint(d))} f_i               = RNEA(q, v, 0)
    Ic_j      = sum_{i in subtree(j)} I_i                            composite inertias
    M_de      = S_d . Ic_joint(e) S_e   for joint(d) an ancestor of (or equal to) joint(e),
                M_ed = M_de, plus the armature on the diagonal       = CRBA(q)

The velocity of the world-origin point of body i is the fixed-frame form of Featherstone's
recursions (RBDA ch. 2 and 5): `S_d` of a joint moves with its body, so `d/dt S_d = V_i x S_d`
and `S-dot qd` of joint i is `V_lambda x (V_i - V_lambda) = V_lambda x V_i`.
`tests/dynamics/test_dense_terms.py` checks every output against Pinocchio's C++ (`crba`, `rnea`,
`getFrameJacobian`) and against the per-joint recursions.

Supported trees: any number of roots; free-flyer joints only at a root; every other joint
revolute or prismatic (1 DoF) — every robot `dynamics.load_robot` and `dynamics.free_body`
build. `supports(model)` says whether a model fits.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from . import spatial
from .backend import JaxOps
from .model import FREE_FLYER, PRISMATIC, REVOLUTE, Model


@dataclass(frozen=True)
class _Tree:
    """Static index arrays of a model's tree (NumPy, built once per structure).

    levels: joint indices of each tree depth, roots first.
    level_order: `(nj,)` position of joint i in the concatenation of `levels`.
    parent_slot: per level (after the first), the parents' positions in that concatenation.
    dof_joint: `(nv,)` joint of each velocity coordinate.
    support: `(nj, nj)` `support[i, j]`: joint j is joint i or one of its ancestors.
    dof_support: `(nj, nv)` `support[:, dof_joint]`.
    dof_ancestor: `(nv, nv)` `[d, e]`: joint(d) is joint(e) or one of its ancestors.
    parent_or_self: `(nj,)` parent of each joint, `nj` (a zero row) for roots.
    one_dof, free: indices of the 1-DoF and of the free-flyer joints.
    one_dof_axes: `(n1, 3)` axes of the 1-DoF joints; one_dof_revolute: `(n1,)` revolute or not.
    """

    levels: tuple
    level_order: np.ndarray
    parent_slot: tuple
    dof_joint: np.ndarray
    support: np.ndarray
    dof_support: np.ndarray
    dof_ancestor: np.ndarray
    parent_or_self: np.ndarray
    one_dof: np.ndarray
    free: np.ndarray
    one_dof_axes: np.ndarray
    one_dof_revolute: np.ndarray


def supports(model: Model) -> bool:
    """Whether `model`'s tree has the form this module handles (module docstring)."""
    for parent, kind in zip(model.parents, model.joint_types):
        if kind == FREE_FLYER and parent >= 0:
            return False
        if kind not in (FREE_FLYER, REVOLUTE, PRISMATIC):
            return False
    return True


def _tree(model: Model) -> _Tree:
    return _tree_of(
        model.parents, model.joint_types, model.joint_axes, model.idx_v, model.nv_joint
    )


@functools.lru_cache(maxsize=64)
def _tree_of(
    parents: tuple, joint_types: tuple, joint_axes: tuple, idx_v: tuple, nv_joint: tuple
) -> _Tree:
    nj = len(parents)
    depth = np.zeros(nj, int)
    for i, parent in enumerate(parents):
        if parent >= i:
            raise ValueError("joints must be listed after their parents (Pinocchio order)")
        depth[i] = 0 if parent < 0 else depth[parent] + 1
    levels = tuple(np.flatnonzero(depth == d) for d in range(depth.max() + 1))
    concatenated = np.concatenate(levels)
    level_order = np.empty(nj, int)
    level_order[concatenated] = np.arange(nj)
    parent_slot = tuple(level_order[np.asarray(parents)[idx]] for idx in levels[1:])
    support = np.zeros((nj, nj), bool)
    for i, parent in enumerate(parents):
        support[i, i] = True
        if parent >= 0:
            support[i] |= support[parent]
    dof_joint = np.concatenate([np.full(n, i) for i, n in enumerate(nv_joint)])
    assert np.array_equal(
        np.concatenate([idx_v[i] + np.arange(n) for i, n in enumerate(nv_joint)]),
        np.arange(len(dof_joint)),
    ), "velocity coordinates must follow the joint order"
    kinds = np.asarray(joint_types)
    one_dof = np.flatnonzero(kinds != FREE_FLYER)
    return _Tree(
        levels=levels,
        level_order=level_order,
        parent_slot=parent_slot,
        dof_joint=dof_joint,
        support=support,
        dof_support=support[:, dof_joint],
        dof_ancestor=support[dof_joint][:, dof_joint].T,
        parent_or_self=np.where(np.asarray(parents) < 0, nj, np.asarray(parents)),
        one_dof=one_dof,
        free=np.flatnonzero(kinds == FREE_FLYER),
        one_dof_axes=np.array([joint_axes[i] for i in one_dof], float).reshape(-1, 3),
        one_dof_revolute=kinds[one_dof] == REVOLUTE,
    )


def _levi_civita() -> np.ndarray:
    eps = np.zeros((3, 3, 3))
    for i, j, k in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
        eps[i, j, k], eps[i, k, j] = 1.0, -1.0
    return eps


_EPS = _levi_civita()  # (a x b)_i = eps_ijk a_j b_k


def _motion_cross_tensor() -> np.ndarray:
    """`C (6, 6, 6)` with `(m x x)_i = C_ijk m_j x_k` for motions `[v; w]` (`spatial`)."""
    c = np.zeros((6, 6, 6))
    c[0:3, 3:6, 0:3] = _EPS  # w x x_v
    c[0:3, 0:3, 3:6] = _EPS  # v x x_w
    c[3:6, 3:6, 3:6] = _EPS  # w x x_w
    return c


_MOTION_CROSS = _motion_cross_tensor()


def matmul(a, b):
    """`a (..., m, n) @ b (..., n, p)` for stacks of small matrices, as a multiply-and-sum.

    Not `@` or `einsum`: a product with batch dimensions becomes a batched `dot_general`, and
    under nested `vmap` (the batched trajectory solver: problems x knots x joints) XLA 0.10.2
    on CPU rejected it ("hlo verifier: Expected instruction to have shape f64[4,8,3,3,3],
    actual shape is f64[3,4,8,3,3]", `tests/trajopt/test_batched_trajopt.py`). Products with a
    constant (the Levi-Civita tensor) or over the joint dimension stay `dot`s."""
    return jnp.sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)


def skew(a):
    """`(..., 3) -> (..., 3, 3)` with `skew(a) b = a x b` (one product with the Levi-Civita
    tensor: under `jacfwd` a few large operations beat nine stacked scalars)."""
    return jnp.einsum("ijk,...j->...ik", jnp.asarray(_EPS, a.dtype), a)


def cross(a, b):
    """`a x b` over the last axis of `(..., 3)` arrays."""
    return jnp.einsum("...ik,...k->...i", skew(a), b)


def _joint_motion(model: Model, tree: _Tree, q, dtype):
    """`M_J(q)` of every joint as `(R (nj, 3, 3), p (nj, 3))` in joint order."""
    nj = model.njoints
    rotation = jnp.broadcast_to(jnp.eye(3, dtype=dtype), (nj, 3, 3))
    translation = jnp.zeros((nj, 3), dtype)
    if tree.one_dof.size:
        idx, revolute = tree.one_dof, tree.one_dof_revolute
        axes = jnp.asarray(tree.one_dof_axes, dtype)
        angle = q[np.asarray(model.idx_q)[idx]]
        c, s = jnp.cos(angle)[:, None, None], jnp.sin(angle)[:, None, None]
        rodrigues = (
            c * jnp.eye(3, dtype=dtype)[None]
            + s * skew(axes)
            + (1.0 - c) * axes[:, :, None] * axes[:, None, :]
        )
        eye = jnp.broadcast_to(jnp.eye(3, dtype=dtype), rodrigues.shape)
        rotation = rotation.at[idx].set(jnp.where(revolute[:, None, None], rodrigues, eye))
        slide = jnp.where(revolute[:, None], 0.0, axes * angle[:, None])
        translation = translation.at[idx].set(slide)
    if tree.free.size:
        start = np.asarray(model.idx_q)[tree.free]
        coords = q[start[:, None] + np.arange(7)]  # (nfree, 7): [p, quat xyzw]
        to_rotation = functools.partial(spatial.quat_to_rotation, JaxOps(dtype))
        rotation = rotation.at[tree.free].set(jax.vmap(to_rotation)(coords[:, 3:7]))
        translation = translation.at[tree.free].set(coords[:, 0:3])
    return rotation, translation


def world_placements(model: Model, q):
    """`W_M_i` of every joint: `(R (nj, 3, 3), p (nj, 3))`, tree depth by tree depth."""
    tree = _tree(model)
    dtype = jnp.result_type(q)
    joint_r, joint_p = _joint_motion(model, tree, q, dtype)
    fixed_r = jnp.asarray(model.joint_rotation, dtype)
    fixed_p = jnp.asarray(model.joint_translation, dtype)
    local_r = fixed_r @ joint_r  # lambda_M_i = jointPlacement_i * M_J(q_i)
    local_p = jnp.einsum("nab,nb->na", fixed_r, joint_p) + fixed_p
    roots = tree.levels[0]
    rs, ps = [local_r[roots]], [local_p[roots]]
    for idx, slot in zip(tree.levels[1:], tree.parent_slot):
        done_r, done_p = jnp.concatenate(rs), jnp.concatenate(ps)
        parent_r, parent_p = done_r[slot], done_p[slot]
        rs.append(matmul(parent_r, local_r[idx]))
        ps.append(jnp.einsum("nab,nb->na", parent_r, local_p[idx]) + parent_p)
    order = tree.level_order
    return jnp.concatenate(rs)[order], jnp.concatenate(ps)[order]


def motion_subspace(model: Model, rotation, translation):
    """World motion subspace `S (nv, 6)`: row d is the motion `[v_O; w]` of a unit rate of dof d."""
    tree = _tree(model)
    dtype = rotation.dtype
    rows = jnp.zeros((model.nv, 6), dtype)
    if tree.one_dof.size:
        idx, revolute = tree.one_dof, tree.one_dof_revolute
        axes = jnp.asarray(tree.one_dof_axes, dtype)
        direction = jnp.einsum("nab,nb->na", rotation[idx], axes)  # R a, world
        spin = cross(translation[idx], direction)  # p x R a
        lin = jnp.where(revolute[:, None], spin, direction)
        ang = jnp.where(revolute[:, None], direction, 0.0)
        rows = rows.at[np.asarray(model.idx_v)[idx]].set(jnp.concatenate([lin, ang], axis=1))
    for i in tree.free:  # Ad(W_M_i) = [[R, [p]x R], [0, R]]; its columns are the rows of S
        r, p = rotation[i], translation[i]
        adjoint = jnp.block([[r, skew(p) @ r], [jnp.zeros((3, 3), dtype), r]])
        start = model.idx_v[i]
        rows = rows.at[start : start + 6].set(adjoint.T)
    return rows


def _motion_cross_matrix(m):
    """`(..., 6) -> (..., 6, 6)`: the matrix of `x -> m x x` (Featherstone's `crm(m)`)."""
    return jnp.einsum("ijk,...j->...ik", jnp.asarray(_MOTION_CROSS, m.dtype), m)


def _motion_cross(m, x):
    """`m x x` for `(..., 6)` motions `[v; w]`."""
    return jnp.einsum("...ik,...k->...i", _motion_cross_matrix(m), x)


def _force_cross(m, f):
    """`m x* f = -crm(m)^T f` for `(..., 6)` motions `[v; w]` and forces `[f; n]`."""
    return -jnp.einsum("...ki,...k->...i", _motion_cross_matrix(m), f)


def world_inertias(model: Model, rotation, translation):
    """Spatial inertia `(nj, 6, 6)` of every body about the world origin, world axes:

        I = [[m 1, -m [c]x], [m [c]x, R I_c R^T - m [c]x [c]x]],   c = R com + p (world)
    """
    dtype = rotation.dtype
    mass = jnp.asarray(model.body_mass, dtype)[:, None, None]
    com = jnp.einsum("nab,nb->na", rotation, jnp.asarray(model.body_com, dtype)) + translation
    inertia = rotation @ jnp.asarray(model.body_inertia, dtype) @ jnp.swapaxes(rotation, 1, 2)
    cx = skew(com)
    mcx = mass * cx
    eye = jnp.eye(3, dtype=dtype)[None] * mass
    top = jnp.concatenate([eye, -mcx], axis=2)
    bottom = jnp.concatenate([mcx, inertia - mcx @ cx], axis=2)
    return jnp.concatenate([top, bottom], axis=1)


def mass_and_bias(model: Model, rotation, translation, v, gravity=None):
    """`M(q) (nv, nv)` (armature included) and `h(q, v) = RNEA(q, v, 0) (nv,)` (gravity
    included), from the world placements of `world_placements`; module docstring.

    `gravity (3,)`: the linear gravity acceleration in the frame of the placements (default
    `model.gravity`, world); `floating_base_terms` passes it in the base frame."""
    tree = _tree(model)
    dtype = jnp.result_type(rotation, v)
    subspace = motion_subspace(model, rotation, translation)  # (nv, 6)
    inertia = world_inertias(model, rotation, translation)  # (nj, 6, 6)
    support = jnp.asarray(tree.support, dtype)
    velocity = jnp.asarray(tree.dof_support, dtype) @ (subspace * v[:, None])  # (nj, 6)
    padded = jnp.concatenate([velocity, jnp.zeros((1, 6), dtype)])
    bias_acc = _motion_cross(padded[tree.parent_or_self], velocity)  # roots: 0
    gravity = model.gravity if gravity is None else gravity
    gravity = jnp.concatenate([-jnp.asarray(gravity, dtype), jnp.zeros(3, dtype)])
    acceleration = gravity[None, :] + support @ bias_acc
    force = jnp.einsum("nab,nb->na", inertia, acceleration) + _force_cross(
        velocity, jnp.einsum("nab,nb->na", inertia, velocity)
    )
    subtree_force = support.T @ force  # (nj, 6)
    bias = jnp.sum(subspace * subtree_force[tree.dof_joint], axis=1)
    composite = jnp.einsum("ij,iab->jab", support, inertia)  # (nj, 6, 6)
    column = jnp.einsum("dab,db->da", composite[tree.dof_joint], subspace)  # Ic_joint(e) S_e
    products = subspace @ column.T  # [d, e] = S_d . Ic_joint(e) S_e
    upper = tree.dof_ancestor
    mass = jnp.where(upper, products, jnp.where(upper.T, products.T, 0.0))
    return mass + jnp.diag(jnp.asarray(model.armature, dtype)), bias


def frame_jacobians(model: Model, rotation, translation, frame_ids):
    """World-aligned Jacobians `(k, 6, nv)` (rows `[v_origin; w]`, the `local_world_aligned`
    convention) and world placements `(R (k, 3, 3), p (k, 3))` of the frames `frame_ids`."""
    tree = _tree(model)
    frame_ids = np.asarray(frame_ids, int)
    joints = np.asarray(model.frame_parents)[frame_ids]
    if np.any(joints < 0):
        raise ValueError("frames fixed to the world have no Jacobian here")
    dtype = rotation.dtype
    local_r = jnp.asarray(model.frame_rotation, dtype)[frame_ids]
    local_p = jnp.asarray(model.frame_translation, dtype)[frame_ids]
    frame_r = rotation[joints] @ local_r
    frame_p = jnp.einsum("kab,kb->ka", rotation[joints], local_p) + translation[joints]
    subspace = motion_subspace(model, rotation, translation)  # (nv, 6)
    mask = jnp.asarray(tree.dof_support[joints], dtype)  # (k, nv)
    ang = mask[:, None, :] * subspace[:, 3:6].T[None]  # (k, 3, nv)
    lin = mask[:, None, :] * subspace[:, 0:3].T[None] - skew(frame_p) @ ang
    return jnp.concatenate([lin, ang], axis=1), (frame_r, frame_p)
