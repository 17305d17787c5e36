"""Foot positions and leg Jacobians relative to the base, for the state estimator.

For joint angles `q_j (nu,)` and rates `qd_j (nu,)` (the model's actuated order), with the
base at the origin and level (so every quantity is in the BASE frame):

    p_i = B_p_foot_i(q_j)                (4, 3)     [m]    foot frame origin (sphere centre)
    J_i = [J_lin; J_ang]_i               (4, 6, nu)
    B_v_foot_i (relative to the base)   = J_lin_i qd_j     [m/s]    (J_lin = d p_i / d q_j)
    B_omega_calf_i (relative to the base) = J_ang_i qd_j   [rad/s]

Three implementations behind one call, `kinematics(q_j) -> (p, J)`, the Jacobians in the
base frame (Pinocchio's LOCAL_WORLD_ALIGNED at a base placed at the origin):

- `PinocchioLegKinematics`: Pinocchio's C++ (`computeJointJacobians`,
  `updateFramePlacements`, `getFrameJacobian` in LOCAL_WORLD_ALIGNED), on
  `dynamics.load_pinocchio(name)`.
- `NumpyLegKinematics`: this project's own algorithms (`dynamics.kinematics`, the code
  that runs on JAX and CasADi) on plain NumPy arrays through `NumpyOps`, a NumPy
  implementation of the `dynamics.backend` interface (no jit: an estimator runs one small
  update at a time, where dispatching to XLA costs more than the arithmetic).
- `CompiledLegKinematics`: the same recursion in C (`leg_kinematics.c`, built by
  `native.c_library`), on the model's tree packed once (`kinematic_tree`); the compiled
  estimator (`hardware.estimator_core`) runs the same C inside its own call.

`leg_kinematics(model, backend)` builds one; `benchmarks/bench_estimator.py` times them.
The estimator's default (`EstimatorConfig.kinematics`, "auto") is the C where a C compiler is
found (`native.c_library.compiled_arithmetic`), else Pinocchio.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from dynamics import kinematics as kin
from dynamics.model import FREE_FLYER, PRISMATIC, REVOLUTE, Model
from native import c_library

BACKENDS = ("auto", "c", "pinocchio", "numpy")
SOURCE = Path(__file__).with_name("leg_kinematics.c")
FLAGS = ("-O2", *c_library.MACHINE_FLAGS)
JOINT_SIZE, FOOT_SIZE = 19, 4  # the records of `leg_kinematics.c`
_TYPE_CODES = {FREE_FLYER: 0, REVOLUTE: 1, PRISMATIC: 2}
_P = ctypes.c_void_p


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


def kinematic_tree(model: Model) -> tuple[np.ndarray, np.ndarray]:
    """`(joints (njoints, JOINT_SIZE), feet (nfeet, FOOT_SIZE))`, the records
    `leg_kinematics.c` reads: per joint its type code, parent, coordinate index in the joint
    angles and column in the Jacobian (-1 for the free flyer), axis, and placement in its
    parent (R row-major, p); per foot its parent joint and position in it. Raises ValueError
    for a model without a floating base or with a joint type the C does not know."""
    if model.joint_types[0] != FREE_FLYER:
        raise ValueError(f"{model.name} has no floating base: the estimator needs one")
    joints = np.zeros((model.njoints, JOINT_SIZE))
    for i in range(model.njoints):
        jtype = model.joint_types[i]
        if jtype not in _TYPE_CODES or (i > 0 and jtype == FREE_FLYER):
            raise ValueError(f"{model.name}'s joint {i} is {jtype!r}: the compiled leg "
                             "kinematics take revolute and prismatic joints below one "
                             "free flyer")  # fmt: skip
        moving = jtype != FREE_FLYER
        joints[i, :4] = (_TYPE_CODES[jtype], model.parents[i],
                         model.idx_q[i] - 7 if moving else -1,
                         model.idx_v[i] - 6 if moving else -1)  # fmt: skip
        joints[i, 4:7] = model.joint_axes[i] if moving else 0.0
        joints[i, 7:16] = np.asarray(model.joint_rotation[i], dtype=float).ravel()
        joints[i, 16:19] = np.asarray(model.joint_translation[i], dtype=float)
    feet = np.zeros((len(model.foot_frames), FOOT_SIZE))
    for k, f in enumerate(model.foot_frames):
        if model.frame_parents[f] < 0:
            raise ValueError(f"{model.name}'s foot frame {f} has no parent joint")
        feet[k, 0] = model.frame_parents[f]
        feet[k, 1:] = np.asarray(model.frame_translation[f], dtype=float)  # its orientation: unused
    return joints, feet


@functools.cache
def _library() -> ctypes.CDLL:
    library = ctypes.CDLL(str(c_library.build_library(SOURCE, "leg_kinematics", FLAGS)))
    library.leg_kinematics.restype = None
    library.leg_kinematics.argtypes = [ctypes.c_int, _P, ctypes.c_int, _P, ctypes.c_int,
                                       _P, _P, _P, _P]  # fmt: skip
    return library


class CompiledLegKinematics:
    """Foot positions `(4, 3)` and Jacobians `(4, 6, nu)` in the base frame, by
    `leg_kinematics.c` (module docstring) on `kinematic_tree(model)`."""

    def __init__(self, model: Model):
        self.joints, self.feet = kinematic_tree(model)
        self.nu = model.nu
        self.q = np.zeros(self.nu)
        self.positions = np.zeros((len(self.feet), 3))
        self.jacobians = np.zeros((len(self.feet), 6, self.nu))
        self.work = np.zeros(12 * len(self.joints))
        self._call = _library().leg_kinematics
        self._args = (len(self.joints), self.joints.ctypes.data, len(self.feet),
                      self.feet.ctypes.data, self.nu, self.q.ctypes.data, self.work.ctypes.data,
                      self.positions.ctypes.data, self.jacobians.ctypes.data)  # fmt: skip

    def __reduce__(self):
        raise TypeError("CompiledLegKinematics holds its buffers' addresses: not pickled")

    def __call__(self, q_joints) -> tuple[np.ndarray, np.ndarray]:
        self.q[...] = _check_joints(q_joints, self.nu)
        self._call(*self._args)
        return self.positions.copy(), self.jacobians.copy()


def resolved_backend(backend: str) -> str:
    """`backend` with "auto" made concrete: "c" where a C compiler is found, else
    "pinocchio" (`native.c_library.compiled_arithmetic`)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend != "auto":
        return backend
    return "c" if c_library.compiled_arithmetic("auto") else "pinocchio"


def leg_kinematics(model: Model, backend: str = "auto"):
    """The `kinematics(q_joints (nu,)) -> (p (4, 3), J (4, 6, nu))` of `backend` (`BACKENDS`;
    "auto": `resolved_backend`)."""
    backend = resolved_backend(backend)
    if backend == "c":
        return CompiledLegKinematics(model)
    if backend == "pinocchio":
        return PinocchioLegKinematics(model)
    return NumpyLegKinematics(model)
