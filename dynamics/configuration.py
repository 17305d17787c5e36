"""The configuration manifold: `State`, `integrate`, `difference`, random and neutral states (JAX).

For a free-flyer base, `q = [p, quat_xyzw, joints]` and `v = [v_lin, omega, joint rates]` with the
base twist in the base frame. Integration follows Pinocchio (`pinocchio.integrate`):

    M(q') = M(q) * exp6(v_base),   joints' = joints + v_joints

with `exp6([v; w]) = (exp3(w), V(w) v)`, `V(w) = 1 + (1 - cos t)/t^2 [w]x + (t - sin t)/t^3 [w]x^2`,
`t = |w|`; `difference(q0, q1)` is its inverse, `log6(M(q0)^-1 M(q1))`.
Both are smooth at `w = 0` (Taylor branches selected with the double-`where` trick), and both
are written once against `dynamics.backend`'s array operations: JAX by default, CasADi symbols
with `ops=CasadiOps()`.
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


def _ops(x):
    """`JaxOps` in the dtype of `x`."""
    return JaxOps(jnp.result_type(x))


def _safe_norm(ops, x):
    """`(|x|, small, |x|^2)` with `|x|` replaced by 1 on the Taylor branch `|x| < _SMALL`."""
    sq = ops.sumsq(x)
    small = sq < _SMALL**2
    return ops.sqrt(ops.where(small, 1.0, sq)), small, sq


def quat_multiply(a, b, ops=None):
    """Hamilton product of `[x, y, z, w]` quaternions."""
    ops = ops or _ops(a)
    av, aw = a[0:3], a[3]
    bv, bw = b[0:3], b[3]
    return ops.vcat([aw * bv + bw * av + ops.cross(av, bv), ops.vec([aw * bw - ops.dot(av, bv)])])


def quat_exp(w, ops=None):
    """Quaternion of the rotation vector `w (3,)`."""
    ops = ops or _ops(w)
    t, small, t2 = _safe_norm(ops, w)
    half_sinc = ops.where(small, 0.5 - t2 / 48.0, ops.sin(0.5 * t) / t)
    cos_half = ops.where(small, 1.0 - t2 / 8.0, ops.cos(0.5 * t))
    return ops.vcat([half_sinc * w, ops.vec([cos_half])])


def quat_log(q, ops=None):
    """Rotation vector `(3,)` of a unit quaternion, angle in `[0, pi]`."""
    ops = ops or _ops(q)
    q = ops.where(q[3] < 0, -q, q)
    n, small, n2 = _safe_norm(ops, q[0:3])
    w = q[3]
    # 2 atan2(n, w) / n, and its series 2/w (1 - n^2 / (3 w^2)) for small n
    factor = ops.where(small, 2.0 / w * (1.0 - n2 / (3.0 * w * w)), 2.0 * ops.atan2(n, w) / n)
    return factor * q[0:3]


def _v_coefficients(ops, w):
    """`a = (1 - cos t)/t^2`, `b = (t - sin t)/t^3` with their Taylor series near 0."""
    t, small, t2 = _safe_norm(ops, w)
    a = ops.where(small, 0.5 - t2 / 24.0, (1.0 - ops.cos(t)) / (t * t))
    b = ops.where(small, 1.0 / 6.0 - t2 / 120.0, (t - ops.sin(t)) / (t * t * t))
    return a, b


def _v_inverse_coefficient(ops, w):
    """`c = (1 - t sin t / (2 (1 - cos t))) / t^2` of `V^-1 = 1 - [w]x / 2 + c [w]x^2` (`t` is
    1 on the Taylor branch, so the exact expression stays finite there)."""
    t, small, t2 = _safe_norm(ops, w)
    t = ops.where(small, 1.0, t)
    exact = (1.0 - t * ops.sin(t) / (2.0 * (1.0 - ops.cos(t)))) / (t * t)
    return ops.where(small, 1.0 / 12.0 + t2 / 720.0, exact)


def _base_integrate(ops, q_base, v_base):
    p, quat = q_base[0:3], q_base[3:7]
    v_lin, w = v_base[0:3], v_base[3:6]
    a, b = _v_coefficients(ops, w)
    wx = spatial.skew(ops, w)
    dp = v_lin + a * (wx @ v_lin) + b * (wx @ (wx @ v_lin))
    r0 = spatial.quat_to_rotation(ops, quat)
    quat1 = quat_multiply(quat, quat_exp(w, ops), ops)
    quat1 = quat1 / ops.norm(quat1)
    # Same hemisphere as the input quaternion (as Pinocchio does): q and -q are one rotation,
    # and keeping the sign makes trajectories of q continuous.
    quat1 = ops.where(ops.dot(quat1, quat) < 0, -quat1, quat1)
    return ops.vcat([p + r0 @ dp, quat1])


def _base_difference(ops, q0, q1):
    r0 = spatial.quat_to_rotation(ops, q0[3:7])
    conj0 = q0[3:7] * ops.const([-1.0, -1.0, -1.0, 1.0])
    w = quat_log(quat_multiply(conj0, q1[3:7], ops), ops)
    dp = r0.T @ (q1[0:3] - q0[0:3])
    wx = spatial.skew(ops, w)
    c = _v_inverse_coefficient(ops, w)
    v_lin = dp - 0.5 * (wx @ dp) + c * (wx @ (wx @ dp))
    return ops.vcat([v_lin, w])


def integrate(model: Model, q, v, ops=None):
    """`q (+) v`: configuration reached from `q (nq,)` after unit time at velocity `v (nv,)`.

    `ops`: the array backend (`dynamics.backend`; default `JaxOps` in `q`'s dtype, or
    `CasadiOps()` for CasADi symbols)."""
    if not model.has_free_flyer:
        return q + v
    ops = ops or _ops(q)
    return ops.vcat([_base_integrate(ops, q[0:7], v[0:6]), q[7:] + v[6:]])


def difference(model: Model, q0, q1, ops=None):
    """`q1 (-) q0 (nv,)`: the velocity that integrates `q0` to `q1` in unit time (`ops` as in
    `integrate`)."""
    if not model.has_free_flyer:
        return q1 - q0
    ops = ops or _ops(q0)
    return ops.vcat([_base_difference(ops, q0[0:7], q1[0:7]), q1[7:] - q0[7:]])


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
