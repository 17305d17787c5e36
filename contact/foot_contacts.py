"""Contact kinematics: foot spheres against the terrain.

For foot i with frame origin `p_f` (the sphere centre) and radius `r`:

    (d, n)  = signed_distance(terrain, p_f)        d: centre distance, n: outward normal
    gap     = d - r                                 (> 0 separated, < 0 penetrating)
    point   = p_f - r n                             contact point on the sphere
    J_point = J_f,lin + r [n]x J_f,ang              velocity of the sphere's material point
                                                    at `point`: v_f + w x (-r n)
    C       = contact_frame(n)  (columns t1, t2, n)
    J_i     = C^T J_point  (3, nv)                  rows: tangential t1, t2, normal n

All Jacobians are world-aligned (`local_world_aligned`), so `J_i v` is the contact-point
velocity in contact coordinates `[u_t1, u_t2, u_n]`.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from dynamics import dense_terms, spatial
from dynamics import kinematics as _kin
from dynamics.backend import JaxOps
from dynamics.model import Model

from . import terrain as _terrain


@jax.tree_util.register_dataclass
@dataclass
class FootContacts:
    """Contact geometry of every foot for one configuration (k feet).

    gap (k,) [m]; point (k, 3) world; normal (k, 3) world; frame (k, 3, 3) columns [t1, t2, n];
    jacobian (k, 3, nv) contact-frame rows; friction (k,).
    """

    gap: jax.Array
    point: jax.Array
    normal: jax.Array
    frame: jax.Array
    jacobian: jax.Array
    friction: jax.Array


def foot_contacts(ops: JaxOps, model: Model, terrain, kin: _kin.Kinematics) -> FootContacts:
    """Contact geometry from precomputed kinematics `kin` (shared with CRBA/RNEA in `step`)."""
    gaps, points, normals, frames, jacobians, mus = [], [], [], [], [], []
    for i, frame_id in enumerate(model.foot_frames):
        radius = model.foot_radius[i]
        _, centre = _kin.frame_placement(ops, model, kin, frame_id)
        jac6 = _kin.frame_jacobian(ops, model, kin, frame_id, _kin.LOCAL_WORLD_ALIGNED)
        distance, normal = _terrain.signed_distance(terrain, centre)
        j_point = jac6[0:3] + radius * (spatial.skew(ops, normal) @ jac6[3:6])
        c = _terrain.contact_frame(normal)
        gaps.append(distance - radius)
        points.append(centre - radius * normal)
        normals.append(normal)
        frames.append(c)
        jacobians.append(c.T @ j_point)
        mus.append(_terrain.friction(terrain, centre))
    return FootContacts(
        gap=jnp.stack(gaps),
        point=jnp.stack(points),
        normal=jnp.stack(normals),
        frame=jnp.stack(frames),
        jacobian=jnp.stack(jacobians),
        friction=jnp.stack(mus),
    )


def foot_contacts_at(model: Model, terrain, rotation, translation) -> FootContacts:
    """The same geometry as `foot_contacts`, all feet at once, from the joints' world placements
    `rotation (nj, 3, 3)`, `translation (nj, 3)` (`dynamics.dense_terms.world_placements`)."""
    jac6, (_, centre) = dense_terms.frame_jacobians(model, rotation, translation, model.foot_frames)
    return foot_contacts_from_frames(model, terrain, jac6, centre)


def foot_contacts_from_frames(model: Model, terrain, jac6, centre) -> FootContacts:
    """The same geometry from the foot frames' world-aligned Jacobians `jac6 (k, 6, nv)` (rows
    `[v_origin; w]`) and world origins `centre (k, 3)` (the sphere centres)."""
    radius = jnp.asarray(model.foot_radius, centre.dtype)
    distance, normal = jax.vmap(lambda p: _terrain.signed_distance(terrain, p))(centre)
    j_point = jac6[:, 0:3] + radius[:, None, None] * (dense_terms.skew(normal) @ jac6[:, 3:6])
    frame = jax.vmap(_terrain.contact_frame)(normal)
    return FootContacts(
        gap=distance - radius,
        point=centre - radius[:, None] * normal,
        normal=normal,
        frame=frame,
        jacobian=jnp.swapaxes(frame, 1, 2) @ j_point,
        friction=jax.vmap(lambda p: _terrain.friction(terrain, p))(centre),
    )


def compute_foot_contacts(model: Model, terrain, q) -> FootContacts:
    """Contact geometry of every foot at configuration `q (nq,)` (public, JAX)."""
    if dense_terms.supports(model):
        return foot_contacts_at(model, terrain, *dense_terms.world_placements(model, q))
    ops = JaxOps(jnp.result_type(q))
    return foot_contacts(ops, model, terrain, _kin.forward_kinematics(ops, model, q))
