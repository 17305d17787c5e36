"""Building blocks of the exact signed distance to piecewise-flat ground (`contact.terrain`).

World frame z up, SI units. Each block returns `(gap, normal)` with `gap > 0` above (outside)
the ground and `normal` the unit outward normal, equal to the gradient of the gap wherever the
gap is differentiable; every gap has finite first derivatives everywhere (on the surface, at
edges, where a norm vanishes).

    safe_norm(v)                      |v| with a zero (not NaN) gradient at v = 0
    nearest_feature(delta, ...)       face interior: linear offset; edge or corner: s |delta|
    staircase_distance(x, z, ...)     exact distance to a window of treads and the risers
                                      between them, in the (x, z) plane (Steps, Terraces)
"""

from __future__ import annotations

import jax.numpy as jnp


def safe_norm(v):
    """`|v|` with a zero (not NaN) gradient at `v = 0`; returns `(norm, v != 0)`."""
    sq = jnp.sum(v * v)
    positive = sq > 0.0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0), positive


def nearest_feature(delta, interior, offset, face_normal, sign, fallback):
    """`(gap, normal)` from the nearest feature of a piecewise-flat surface, `delta = p - c`
    to its closest point `c`: a face interior gives the face's linear offset and normal (smooth
    and finite on the surface); an edge or corner gives `s |delta|` and `s delta / |delta|`,
    `s` the side of the surface (`fallback` where `delta = 0`)."""
    dist, nonzero = safe_norm(delta)
    edge_normal = jnp.where(nonzero, sign * delta / jnp.where(nonzero, dist, 1.0), fallback)
    return (jnp.where(interior, offset, sign * dist),
            jnp.where(interior, face_normal, edge_normal))  # fmt: skip


def staircase_distance(x, z, x_lo, x_hi, z_tread, centre: int, limit):
    """Exact signed distance of the point `(x, z)` to a staircase profile in the (x, z) plane,
    as `(gap (), normal (3,))` (the normal has no y component: the profile is extruded in y).

    The profile is the polyline of the treads `j` (horizontal segments `[x_lo_j, x_hi_j] x
    {z_j}`, `x_lo (n,)`, `x_hi (n,)`, `z_tread (n,)` in order along x, consecutive ones meeting:
    `x_hi_j = x_lo_{j+1}`, or the same tread repeated) and the risers between them (vertical
    segments at `x_hi_j` from `z_j` to `z_{j+1}`, outward normal -x when rising, +x when
    falling); `z_tread[centre]` is the tread under the point. For each segment: the clamped
    closest point `c`, `delta = p - c`; the nearest segment wins (`nearest_feature`), the side
    `s = sign(z - z_centre)`. The gap is clipped to `[-limit, limit]`: the caller's window holds
    every feature nearer than `limit`, so the gap is exact when `|gap| < limit` and continuous
    where the window shifts. Derivatives jump only on the medial axis (points equidistant
    from two faces), as for any exact distance to a non-smooth surface.
    """
    # treads: outward normal +z
    tread_delta = jnp.stack([x - jnp.clip(x, x_lo, x_hi), z - z_tread], axis=-1)
    tread_interior = (x >= x_lo) & (x <= x_hi)
    tread_normal = jnp.broadcast_to(jnp.array([0.0, 1.0], dtype=x.dtype), tread_delta.shape)

    # risers at x_hi[m] from z_tread[m] to z_tread[m+1]
    xr, za, zb = x_hi[:-1], z_tread[:-1], z_tread[1:]
    lo, hi = jnp.minimum(za, zb), jnp.maximum(za, zb)
    riser_delta = jnp.stack([x - xr, z - jnp.clip(z, lo, hi)], axis=-1)
    riser_interior = (z >= lo) & (z <= hi) & (hi > lo)
    facing = jnp.where(zb > za, -1.0, 1.0)
    riser_normal = jnp.stack([facing, jnp.zeros_like(facing)], axis=-1)

    delta = jnp.concatenate([tread_delta, riser_delta])
    interior = jnp.concatenate([tread_interior, riser_interior])
    offset = jnp.concatenate([z - z_tread, facing * (x - xr)])
    face_normal = jnp.concatenate([tread_normal, riser_normal])
    best = jnp.argmin(jnp.sum(delta * delta, axis=-1))

    sign = jnp.where(z >= z_tread[centre], 1.0, -1.0)
    gap, normal_xz = nearest_feature(delta[best], interior[best], offset[best],
                                     face_normal[best], sign, jnp.array([0.0, 1.0]))  # fmt: skip
    gap = jnp.clip(gap, -limit, limit)
    return gap, jnp.stack([normal_xz[0], jnp.zeros_like(x), normal_xz[1]])


__all__ = ["nearest_feature", "safe_norm", "staircase_distance"]
