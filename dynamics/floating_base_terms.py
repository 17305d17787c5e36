"""A floating-base robot's rigid-body terms with a derivative rule that forms their Jacobian once.

For a robot whose root joint is a free flyer (base velocity `v[0:6]` a body twist in the base
frame, Pinocchio's convention), the terms a time step needs depend on the base pose only
through two rotations:

    M(q)             = M_B(q_j)                          (nv, nv)  base-pose invariant
    h(q, v)          = h_B(q_j, v, g_B),  g_B = R^T g    (nv,)     RNEA(q, v, 0), gravity g
    J_f(q) (6, nv)   = diag(R, R) J_f,B(q_j)             world-aligned frame Jacobian rows
                                                                   `[v_origin; w]`
    p_f(q) (3,)      = p + R p_f,B(q_j)                  frame origin, world

with `(p, R)` the base placement, `q_j (nq - 7,)` the joint coordinates and the `_B` terms those
of the same robot with its base at the world origin (`dynamics.dense_terms` at
`q = [0, 0, 0, 0, 0, 0, 1, q_j]`). `frame_terms` returns the left-hand sides.

Derivatives. Under `jax.jacfwd` of a whole time step every tangent direction (Go2: 36 state + 12
control) is otherwise pushed through the `_B` terms, although they depend on only 12 + 18 + 3
numbers and `M_B`, `J_f,B`, `p_f,B` on only the 12 joint angles. With `jacobian_rule=True` the
`_B` terms are a `jax.custom_jvp` whose rule forms

    d(M_B, h_B, J_f,B, p_f,B) / dq_j   (12 directions)       and     dh_B / d(v, g_B)   (21)

once from the primal point and returns each tangent as a product with them: linear in the
tangents, so `jacfwd`, `jvp`, `vmap` and (by transposition) `grad` work, and the values are the
same as plain AD's to rounding (`tests/dynamics/test_floating_base_terms.py` checks both against
Pinocchio's C++ and against AD). It pays off when many directions are pushed at once (a knot's
Jacobian); for one direction or reverse mode plain AD (`jacobian_rule=False`) is cheaper. The
base rotations stay plain AD either way: they are a few 3x3 products.

Two ways to form those Jacobians, the same values to rounding (`tests/dynamics/test_leg_terms.py`):

- leg by leg (`dynamics.leg_terms`), when the base's children are equal chains of 1-DoF joints
  holding the frames (every quadruped here): the terms regrouped by leg, whose angle Jacobian is
  block-sparse, formed with 3 directions per leg, the bias's with 9 per leg and its gravity
  columns read off `M`: cheaper than the dense rule, for the rule's Jacobians and for a whole
  step's `jacfwd` (`benchmarks/bench_floating_base_rule.py`);
- otherwise `jacfwd` of the dense terms: 12 directions through all of them, 21 through `h_B`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import dense_terms, leg_terms, spatial
from .backend import JaxOps
from .model import FREE_FLYER, Model


def supports(model: Model) -> bool:
    """Whether `model` has the form `frame_terms` handles: one tree rooted at joint 0, a free
    flyer placed at the world origin, at least one joint beyond it, the rest as
    `dense_terms.supports`."""
    if not dense_terms.supports(model) or model.nv <= 6:
        return False
    if model.joint_types[0] != FREE_FLYER or any(p < 0 for p in model.parents[1:]):
        return False
    return bool(
        np.allclose(model.joint_rotation[0], np.eye(3))
        and np.allclose(model.joint_translation[0], 0.0)
    )


def base_frame_terms(model: Model, frame_ids: tuple, q_joints, v, gravity_base):
    """`(M_B, h_B, J_f,B (k, 6, nv), p_f,B (k, 3))` with the base at the world origin."""
    dtype = jnp.result_type(q_joints, v, gravity_base)
    identity = jnp.asarray([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], dtype)
    q = jnp.concatenate([identity, q_joints.astype(dtype)])
    rotation, translation = dense_terms.world_placements(model, q)
    mass, bias = dense_terms.mass_and_bias(model, rotation, translation, v, gravity_base)
    jac6, (_, origin) = dense_terms.frame_jacobians(model, rotation, translation, frame_ids)
    return mass, bias, jac6, origin


def _contract(jacobian, tangent):
    """`jacobian (..., n) . tangent (n,)` -> `(...)`."""
    return jnp.tensordot(jacobian, tangent, axes=1)


def with_jacobian_rule(model: Model, frame_ids: tuple, *, per_leg: bool = True):
    """`base_frame_terms` as a `custom_jvp` whose tangent is a product with its Jacobian:
    formed leg by leg (`leg_terms`) when the robot's legs allow it and `per_leg`, else by
    `jacfwd` of the dense terms."""
    legs = leg_terms.legs(model, frame_ids) if per_leg else None
    if legs is None:
        return _with_dense_jacobian_rule(model, frame_ids)
    return _with_leg_jacobian_rule(model, legs)


def _is_zero(tangent) -> bool:
    return isinstance(tangent, jax.custom_derivatives.SymbolicZero)


def _speed_tangent(v, gravity_base, dv, dg):
    """`[dv; dg_B]` with symbolic zeros made zeros."""
    return jnp.concatenate([
        jnp.zeros_like(v) if _is_zero(dv) else dv,
        jnp.zeros_like(gravity_base) if _is_zero(dg) else dg,
    ])  # fmt: skip


def _with_dense_jacobian_rule(model: Model, frame_ids: tuple):
    """The rule by `jacfwd` of the dense terms: 12 directions through all of them for the
    angles, 21 through `h_B` for `(v, g_B)`. Any tree `supports` accepts."""

    @jax.custom_jvp
    def terms(q_joints, v, gravity_base):
        return base_frame_terms(model, frame_ids, q_joints, v, gravity_base)

    def rule(primals, tangents):
        q_joints, v, gravity_base = primals
        dq, dv, dg = tangents
        out = terms(q_joints, v, gravity_base)
        tangent_out = [jnp.zeros_like(o) for o in out]
        if not _is_zero(dq):
            by_angle = jax.jacfwd(
                lambda a: base_frame_terms(model, frame_ids, a, v, gravity_base)
            )(q_joints)
            tangent_out = [t + _contract(j, dq) for t, j in zip(tangent_out, by_angle)]
        if not (_is_zero(dv) and _is_zero(dg)):
            nv = v.shape[0]

            def bias(vg):
                return base_frame_terms(model, frame_ids, q_joints, vg[:nv], vg[nv:])[1]

            by_speed = jax.jacfwd(bias)(jnp.concatenate([v, gravity_base]))
            tangent_out[1] = tangent_out[1] + by_speed @ _speed_tangent(v, gravity_base, dv, dg)
        return out, tuple(tangent_out)

    terms.defjvp(rule, symbolic_zeros=True)
    return terms


def _with_leg_jacobian_rule(model: Model, legs: leg_terms.Legs):
    """The rule with the Jacobians formed leg by leg (`leg_terms.terms_and_jacobians`: 3
    directions per leg for the angles, 9 per leg for the speeds, gravity's read off `M`); the
    primal is the same leg-by-leg computation."""

    @jax.custom_jvp
    def terms(q_joints, v, gravity_base):
        return leg_terms.base_frame_terms(model, legs, q_joints, v, gravity_base)

    def rule(primals, tangents):
        q_joints, v, gravity_base = primals
        dq, dv, dg = tangents
        angle_free, speed_free = _is_zero(dq), _is_zero(dv) and _is_zero(dg)
        out, by_angle, by_speed = leg_terms.terms_and_jacobians(
            model, legs, q_joints, v, gravity_base, by_angle=not angle_free,
            by_speed=not speed_free,
        )  # fmt: skip
        tangent_out = [jnp.zeros_like(o) for o in out]
        if not angle_free:
            dq_legs = dq[legs.coords.ravel()]
            tangent_out = [t + _contract(j, dq_legs) for t, j in zip(tangent_out, by_angle)]
        if not speed_free:
            tangent_out[1] = tangent_out[1] + by_speed @ _speed_tangent(v, gravity_base, dv, dg)
        return out, tuple(tangent_out)

    terms.defjvp(rule, symbolic_zeros=True)
    return terms


def frame_terms(model: Model, q, v, frame_ids, *, jacobian_rule: bool = False):
    """`(M (nv, nv), h (nv,), J_f (k, 6, nv), p_f (k, 3))` at `q (nq,)`, `v (nv,)`: the mass
    matrix (armature included), `RNEA(q, v, 0)` (gravity included), the world-aligned Jacobians
    and the world positions of the frames `frame_ids` (module docstring; `supports(model)` must
    hold). `jacobian_rule`: differentiate the base-frame terms by their Jacobian (static)."""
    frame_ids = tuple(int(i) for i in frame_ids)
    dtype = jnp.result_type(q, v)
    base_position = q[0:3]
    base_rotation = spatial.quat_to_rotation(JaxOps(dtype), q[3:7])
    gravity_base = base_rotation.T @ jnp.asarray(model.gravity, dtype)
    if jacobian_rule:
        terms = with_jacobian_rule(model, frame_ids)
        mass, bias, jac6, origin = terms(q[7:], v, gravity_base)
    else:
        mass, bias, jac6, origin = base_frame_terms(model, frame_ids, q[7:], v, gravity_base)
    jac6 = jnp.concatenate([base_rotation @ jac6[:, 0:3], base_rotation @ jac6[:, 3:6]], axis=1)
    return mass, bias, jac6, base_position[None, :] + origin @ base_rotation.T
