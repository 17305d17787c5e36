"""The configuration manifold: `State`, `integrate`, `difference`, random and neutral states (JAX).

For a free-flyer base, `q = [p, quat_xyzw, joints]` and `v = [v_lin, omega, joint rates]` with the
base twist in the base frame. Integration follows Pinocchio (`pinocchio.integrate`):

    M(q') = M(q) * exp6(v_base),   joints' = joints + v_joints

with `exp6([v; w]) = (exp3(w), V(w) v)`, `V(w) = 1 + (1 - cos t)/t^2 [w]x + (t - sin t)/t^3 [w]x^2`,
`t = |w|`; `difference(q0, q1)` is its inverse, `log6(M(q0)^-1 M(q1))`.
Both are smooth at `w = 0` (Taylor branches selected with the double-`where` trick).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from . import spatial
from .backend import JaxOps
from .model import Model

_SMALL = 1e-4  # below this angle the Taylor expansions are exact to float64 round-off


@jax.tree_util.register_dataclass
@dataclass
class State:
    """Robot state: `q (nq,)` configuration and `v (nv,)` velocity (batched: leading axes)."""

    q: jax.Array
    v: jax.Array


def _safe_norm(x, axis=-1):
    sq = jnp.sum(x * x, axis=axis)
    small = sq < _SMALL**2
    return jnp.sqrt(jnp.where(small, 1.0, sq)), small, sq


def quat_multiply(a, b):
    """Hamilton product of `[x, y, z, w]` quaternions."""
    av, aw = a[:3], a[3]
    bv, bw = b[:3], b[3]
    return jnp.concatenate([aw * bv + bw * av + jnp.cross(av, bv), (aw * bw - av @ bv)[None]])


def quat_exp(w):
    """Quaternion of the rotation vector `w (3,)`."""
    t, small, t2 = _safe_norm(w)
    half_sinc = jnp.where(small, 0.5 - t2 / 48.0, jnp.sin(0.5 * t) / t)
    cos_half = jnp.where(small, 1.0 - t2 / 8.0, jnp.cos(0.5 * t))
    return jnp.concatenate([half_sinc * w, cos_half[None]])


def quat_log(q):
    """Rotation vector `(3,)` of a unit quaternion, angle in `[0, pi]`."""
    q = jnp.where(q[3] < 0, -q, q)
    n, small, n2 = _safe_norm(q[:3])
    w = q[3]
    # 2 atan2(n, w) / n, and its series 2/w (1 - n^2 / (3 w^2)) for small n
    factor = jnp.where(small, 2.0 / w * (1.0 - n2 / (3.0 * w * w)), 2.0 * jnp.arctan2(n, w) / n)
    return factor * q[:3]


def _v_coefficients(w):
    """`a = (1 - cos t)/t^2`, `b = (t - sin t)/t^3` with their Taylor series near 0."""
    t, small, t2 = _safe_norm(w)
    a = jnp.where(small, 0.5 - t2 / 24.0, (1.0 - jnp.cos(t)) / (t * t))
    b = jnp.where(small, 1.0 / 6.0 - t2 / 120.0, (t - jnp.sin(t)) / (t * t * t))
    return a, b


def _v_inverse_coefficient(w):
    """`c = (1 - t sin t / (2 (1 - cos t))) / t^2` of `V^-1 = 1 - [w]x / 2 + c [w]x^2`."""
    t, small, t2 = _safe_norm(w)
    ts = jnp.where(small, 1.0, t)
    exact = (1.0 - ts * jnp.sin(ts) / (2.0 * (1.0 - jnp.cos(ts)))) / (ts * ts)
    return jnp.where(small, 1.0 / 12.0 + t2 / 720.0, exact)


def _skew(w):
    return spatial.skew(JaxOps(w.dtype), w)


def _base_integrate(q_base, v_base):
    p, quat = q_base[:3], q_base[3:7]
    v_lin, w = v_base[:3], v_base[3:6]
    a, b = _v_coefficients(w)
    wx = _skew(w)
    dp = v_lin + a * (wx @ v_lin) + b * (wx @ (wx @ v_lin))
    r0 = spatial.quat_to_rotation(JaxOps(q_base.dtype), quat)
    quat1 = quat_multiply(quat, quat_exp(w))
    quat1 = quat1 / jnp.linalg.norm(quat1)
    # Same hemisphere as the input quaternion (as Pinocchio does): q and -q are one rotation,
    # and keeping the sign makes trajectories of q continuous.
    quat1 = jnp.where(quat1 @ quat < 0, -quat1, quat1)
    return jnp.concatenate([p + r0 @ dp, quat1])


def _base_difference(q0, q1):
    r0 = spatial.quat_to_rotation(JaxOps(q0.dtype), q0[3:7])
    conj0 = q0[3:7] * jnp.array([-1.0, -1.0, -1.0, 1.0], dtype=q0.dtype)
    w = quat_log(quat_multiply(conj0, q1[3:7]))
    dp = r0.T @ (q1[:3] - q0[:3])
    wx = _skew(w)
    c = _v_inverse_coefficient(w)
    v_lin = dp - 0.5 * (wx @ dp) + c * (wx @ (wx @ dp))
    return jnp.concatenate([v_lin, w])


def integrate(model: Model, q, v):
    """`q (+) v`: configuration reached from `q (nq,)` after unit time at velocity `v (nv,)`."""
    if not model.has_free_flyer:
        return q + v
    return jnp.concatenate([_base_integrate(q[:7], v[:6]), q[7:] + v[6:]])


def difference(model: Model, q0, q1):
    """`q1 (-) q0 (nv,)`: the velocity that integrates `q0` to `q1` in unit time."""
    if not model.has_free_flyer:
        return q1 - q0
    return jnp.concatenate([_base_difference(q0[:7], q1[:7]), q1[7:] - q0[7:]])


def normalize(model: Model, q):
    """Project `q` back onto the manifold (unit base quaternion)."""
    if not model.has_free_flyer:
        return q
    quat = q[3:7] / jnp.linalg.norm(q[3:7])
    return jnp.concatenate([q[:3], quat, q[7:]])


def neutral(model: Model):
    """Neutral configuration: base at the origin, identity orientation, joints at zero."""
    q = np.zeros(model.nq)
    if model.has_free_flyer:
        q[6] = 1.0
    return jnp.asarray(q)


def random_configuration(model: Model, key, base_range: float = 1.0):
    """A uniformly random `q`: base position in `[-base_range, base_range]^3`, uniform random
    orientation, joints uniform within their limits (clipped to `[-pi, pi]`)."""
    k_pos, k_quat, k_joint = jax.random.split(key, 3)
    lo = np.clip(np.asarray(model.lower_position_limit), -np.pi, np.pi)
    hi = np.clip(np.asarray(model.upper_position_limit), -np.pi, np.pi)
    n_base = 7 if model.has_free_flyer else 0
    joints = jax.random.uniform(
        k_joint, (model.nq - n_base,), minval=lo[n_base:], maxval=hi[n_base:]
    )
    if not model.has_free_flyer:
        return joints
    pos = jax.random.uniform(k_pos, (3,), minval=-base_range, maxval=base_range)
    quat = jax.random.normal(k_quat, (4,))
    quat = quat / jnp.linalg.norm(quat)
    return jnp.concatenate([pos, quat, joints])
