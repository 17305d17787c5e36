"""Foot positions and leg Jacobians relative to the base, for the state estimator.

For joint angles `q_j (nu,)` and rates `qd_j (nu,)` (the model's actuated order), with the
base at the origin and level (so every quantity is in the BASE frame):

    p_i = B_p_foot_i(q_j)                (4, 3)     [m]    foot frame origin (sphere centre)
    J_i = [J_lin; J_ang]_i               (4, 6, nu)
    B_v_foot_i (relative to the base)   = J_lin_i qd_j     [m/s]    (J_lin = d p_i / d q_j)
    B_omega_calf_i (relative to the base) = J_ang_i qd_j   [rad/s]

Two implementations behind one call, `kinematics(q_j) -> (p, J)`, the Jacobians in the
base frame (Pinocchio's LOCAL_WORLD_ALIGNED at a base placed at the origin):

- `PinocchioLegKinematics`: Pinocchio's C++ (`computeJointJacobians`,
  `updateFramePlacements`, `getFrameJacobian` in LOCAL_WORLD_ALIGNED), on
  `dynamics.load_pinocchio(name)`.
- `NumpyLegKinematics`: this project's own algorithms (`dynamics.kinematics`, the code
  that runs on JAX and CasADi) on plain NumPy arrays through `NumpyOps`, a NumPy
  implementation of the `dynamics.backend` interface (no jit: an estimator runs one small
  update at a time, where dispatching to XLA costs more than the arithmetic).

`leg_kinematics(model, backend)` builds one; `benchmarks/bench_estimator.py` times both and
the estimator defaults to the faster (`DEFAULT_BACKEND`).
"""

from __future__ import annotations

import numpy as np

from dynamics import kinematics as kin
from dynamics.model import Model

DEFAULT_BACKEND = "pinocchio"
BACKENDS = ("pinocchio", "numpy")


class NumpyOps:
    """`dynamics.backend`'s array interface on NumPy float64 arrays (vectors `(n,)`)."""

    name = "numpy"

    def const(self, x):
        return np.asarray(x, dtype=float)

    def zeros(self, *shape):
        return np.zeros(shape)

    def eye(self, n):
        return np.eye(n)

    def vec(self, items):
        return np.array([float(x) for x in items])

    def vcat(self, blocks):
        return np.concatenate(blocks, axis=0)

    def hcat(self, blocks):
        return np.concatenate([b[:, None] if b.ndim == 1 else b for b in blocks], axis=1)

    def mat(self, rows):
        return np.array(rows, dtype=float)

    def block(self, rows):
        return np.block(rows)

    def col(self, x):
        return x[:, None] if x.ndim == 1 else x

    def mm(self, a, b):
        return a @ b

    def diag(self, x):
        return np.diag(x)

    def dot(self, a, b):
        return np.dot(a, b)

    def cross(self, a, b):
        return np.cross(a, b)

    def outer(self, a, b):
        return np.outer(a, b)

    def sin(self, x):
        return np.sin(x)

    def cos(self, x):
        return np.cos(x)

    def sqrt(self, x):
        return np.sqrt(x)

    def atan2(self, y, x):
        return np.arctan2(y, x)

    def sumsq(self, x):
        return np.sum(x * x, axis=-1)

    def norm(self, x):
        return np.linalg.norm(x)

    def where(self, condition, a, b):
        return np.where(condition, a, b)

    def inv(self, a):
        return np.linalg.inv(a)

    def solve_spd(self, a, b):
        return np.linalg.solve(a, b)


def _base_at_origin(nq: int, q_joints) -> np.ndarray:
    """`q (nq,)` with the base at the origin, identity orientation, and the given joints."""
    q = np.zeros(nq)
    q[6] = 1.0  # quaternion [x, y, z, w] = identity
    q[7:] = q_joints
    return q


def _check_joints(q_joints, nu: int) -> np.ndarray:
    q_joints = np.asarray(q_joints, dtype=float)
    if q_joints.shape != (nu,):
        raise ValueError(f"q_joints must have shape ({nu},), got {q_joints.shape}")
    return q_joints


class NumpyLegKinematics:
    """Foot positions `(4, 3)` and Jacobians `(4, 6, nu)` in the base frame, by
    `dynamics.kinematics` on NumPy (module docstring)."""

    def __init__(self, model: Model):
        if model.joint_types[0] != "free_flyer":
            raise ValueError(f"{model.name} has no floating base: the estimator needs one")
        # the model's arrays as NumPy (indexing JAX arrays one element at a time is slow)
        arrays = ("joint_rotation", "joint_translation", "frame_rotation", "frame_translation")
        self.model = model.replace(**{a: np.asarray(getattr(model, a)) for a in arrays})
        self.ops = NumpyOps()
        self.nu = model.nu
        self.nq = model.nq

    def __call__(self, q_joints) -> tuple[np.ndarray, np.ndarray]:
        q = _base_at_origin(self.nq, _check_joints(q_joints, self.nu))
        k = kin.forward_kinematics(self.ops, self.model, q)
        positions, jacobians = [], []
        for f in self.model.foot_frames:
            positions.append(kin.frame_placement(self.ops, self.model, k, f)[1])
            jac = kin.frame_jacobian(self.ops, self.model, k, f, kin.LOCAL_WORLD_ALIGNED)
            jacobians.append(jac[:, 6:])
        return np.array(positions), np.array(jacobians)


class PinocchioLegKinematics:
    """Foot positions `(4, 3)` and Jacobians `(4, 6, nu)` in the base frame, by Pinocchio
    (module docstring). `name_or_path`: what `dynamics.load_pinocchio` takes."""

    def __init__(self, model: Model, name_or_path: str | None = None):
        import pinocchio as pin

        from dynamics import load_pinocchio

        self._pin = pin
        self.pin_model = load_pinocchio(name_or_path or model.name).model
        self.data = self.pin_model.createData()
        self.frames = [self.pin_model.getFrameId(n) for n in model.foot_names]
        self.nu = model.nu
        self.nq = self.pin_model.nq
        if self.pin_model.nv - 6 != self.nu:
            raise ValueError(f"Pinocchio's {model.name} has {self.pin_model.nv - 6} joints, "
                             f"the model {self.nu}")  # fmt: skip
        self._aligned = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED

    def __call__(self, q_joints) -> tuple[np.ndarray, np.ndarray]:
        pin, model, data = self._pin, self.pin_model, self.data
        q = _base_at_origin(self.nq, _check_joints(q_joints, self.nu))
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        positions = np.empty((len(self.frames), 3))
        jacobians = np.empty((len(self.frames), 6, self.nu))
        for i, f in enumerate(self.frames):
            positions[i] = data.oMf[f].translation
            jacobians[i] = pin.getFrameJacobian(model, data, f, self._aligned)[:, 6:]
        return positions, jacobians


def leg_kinematics(model: Model, backend: str = DEFAULT_BACKEND):
    """The `kinematics(q_joints (nu,)) -> (p (4, 3), J (4, 6, nu))` of `backend` (`BACKENDS`)."""
    if backend == "pinocchio":
        return PinocchioLegKinematics(model)
    if backend == "numpy":
        return NumpyLegKinematics(model)
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
