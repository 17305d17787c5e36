"""Public JAX rigid-body dynamics: pure functions of `(model, q, v, ...)`.

Every function is jit-able, vmap-able and differentiable (forward and reverse mode). The
computation dtype is that of `q` (float64 by default; pass float32 arrays and
`model.astype(jnp.float32)` for speed). The algorithms themselves live in `kinematics.py`,
`newton_euler.py` (RNEA), `composite_inertia.py` (CRBA), `articulated_body.py` (ABA) and
`centroidal.py`, written once for JAX and CasADi.

Shapes: `q (nq,)`, `v, a, tau (nv,)`. Frames are given by name or index (static).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import articulated_body as _aba
from . import centroidal as _centroidal
from . import composite_inertia as _crba
from . import kinematics as _kin
from . import newton_euler as _rnea
from .backend import JaxOps
from .model import Model

ReferenceFrame = _kin.ReferenceFrame
LOCAL = _kin.LOCAL
WORLD = _kin.WORLD
LOCAL_WORLD_ALIGNED = _kin.LOCAL_WORLD_ALIGNED


def _ops(*arrays) -> JaxOps:
    dtype = jnp.result_type(*arrays)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    return JaxOps(dtype)


def _check(model: Model, q=None, v=None, name_v="v"):
    if q is not None and jnp.shape(q) != (model.nq,):
        raise ValueError(f"q must have shape ({model.nq},) for {model.name}, got {jnp.shape(q)}")
    if v is not None and jnp.shape(v) != (model.nv,):
        raise ValueError(
            f"{name_v} must have shape ({model.nv},) for {model.name}, got {jnp.shape(v)}"
        )


def forward_kinematics(model: Model, q):
    """World placements of all joints: `(rotations (nj, 3, 3), translations (nj, 3))`."""
    _check(model, q)
    kin = _kin.forward_kinematics(_ops(q), model, q)
    rs, ps = zip(*kin.world_placement)
    return jnp.stack(rs), jnp.stack(ps)


def frame_placement(model: Model, q, frame):
    """World placement of a frame: `(R (3, 3), p (3,))`."""
    _check(model, q)
    ops = _ops(q)
    kin = _kin.forward_kinematics(ops, model, q)
    return _kin.frame_placement(ops, model, kin, model.frame_id(frame))


def frame_placements(model: Model, q, frames):
    """World placements of several frames: `(R (k, 3, 3), p (k, 3))`, one kinematics pass."""
    _check(model, q)
    ops = _ops(q)
    kin = _kin.forward_kinematics(ops, model, q)
    rs, ps = zip(*(_kin.frame_placement(ops, model, kin, model.frame_id(f)) for f in frames))
    return jnp.stack(rs), jnp.stack(ps)


def frame_velocity(model: Model, q, v, frame, reference: ReferenceFrame = LOCAL_WORLD_ALIGNED):
    """Spatial velocity `(6,) = [linear; angular]` of a frame in `reference` (see kinematics)."""
    _check(model, q, v)
    ops = _ops(q, v)
    kin = _kin.forward_kinematics(ops, model, q)
    vel = _kin.joint_velocities(ops, model, kin, v)
    return _kin.frame_velocity(ops, model, kin, vel, model.frame_id(frame), reference)


def frame_jacobian(model: Model, q, frame, reference: ReferenceFrame = LOCAL_WORLD_ALIGNED):
    """Frame Jacobian `(6, nv)`: `frame_velocity(q, v) = J v`."""
    _check(model, q)
    ops = _ops(q)
    kin = _kin.forward_kinematics(ops, model, q)
    return _kin.frame_jacobian(ops, model, kin, model.frame_id(frame), reference)


def frame_jacobians(model: Model, q, frames, reference: ReferenceFrame = LOCAL_WORLD_ALIGNED):
    """Jacobians `(k, 6, nv)` of several frames from one kinematics pass."""
    _check(model, q)
    ops = _ops(q)
    kin = _kin.forward_kinematics(ops, model, q)
    return jnp.stack(
        [_kin.frame_jacobian(ops, model, kin, model.frame_id(f), reference) for f in frames]
    )


def rnea(model: Model, q, v, a):
    """Inverse dynamics `tau (nv,) = M(q) a + C(q, v) v + g(q)`."""
    _check(model, q, v)
    _check(model, v=a, name_v="a")
    ops = _ops(q, v, a)
    return _rnea.rnea(ops, model, _kin.forward_kinematics(ops, model, q), v, a)


def bias_forces(model: Model, q, v):
    """Nonlinear effects `h (nv,) = C(q, v) v + g(q)` (Pinocchio's `nle`)."""
    return rnea(model, q, v, jnp.zeros_like(v))


def gravity_forces(model: Model, q):
    """Generalised gravity `g(q) (nv,)`."""
    z = jnp.zeros(model.nv, dtype=_ops(q).dtype)
    return rnea(model, q, z, z)


def mass_matrix(model: Model, q):
    """Joint-space inertia `M(q) (nv, nv)` by CRBA (armature on the diagonal)."""
    _check(model, q)
    ops = _ops(q)
    return _crba.crba(ops, model, _kin.forward_kinematics(ops, model, q))


def forward_dynamics(model: Model, q, v, tau):
    """Joint accelerations `qdd (nv,) = M^-1 (tau - h)` by the articulated-body algorithm."""
    _check(model, q, v)
    _check(model, v=tau, name_v="tau")
    ops = _ops(q, v, tau)
    return _aba.aba(ops, model, _kin.forward_kinematics(ops, model, q), v, tau)


def forward_dynamics_cholesky(model: Model, q, v, tau):
    """The same accelerations as `forward_dynamics`, via CRBA + RNEA and a Cholesky solve."""
    _check(model, q, v)
    ops = _ops(q, v, tau)
    kin = _kin.forward_kinematics(ops, model, q)
    m = _crba.crba(ops, model, kin)
    h = _rnea.rnea(ops, model, kin, v, jnp.zeros_like(v))
    return ops.solve_spd(m, tau - h)


def center_of_mass(model: Model, q):
    """World position `(3,)` of the centre of mass."""
    _check(model, q)
    ops = _ops(q)
    return _centroidal.center_of_mass(ops, model, _kin.forward_kinematics(ops, model, q))


def centroidal_momentum(model: Model, q, v):
    """`h_G (6,)`: linear momentum and angular momentum about the com, world axes."""
    _check(model, q, v)
    ops = _ops(q, v)
    kin = _kin.forward_kinematics(ops, model, q)
    return _centroidal.centroidal_momentum(
        ops, model, kin, _kin.joint_velocities(ops, model, kin, v)
    )


def centroidal_momentum_matrix(model: Model, q):
    """`A_G (6, nv)` with `h_G = A_G v` (the momentum is linear in v)."""
    v0 = jnp.zeros(model.nv, dtype=_ops(q).dtype)
    return jax.jacfwd(lambda v: centroidal_momentum(model, q, v))(v0)
