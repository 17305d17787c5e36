"""`Model`: the static description of a floating-base robot, extracted from a Pinocchio model.

Conventions (Pinocchio's, used everywhere in diffloco):

- Joint 0 of Pinocchio ("universe") is dropped: `Model` joint `i` is Pinocchio joint `i + 1`.
  `parents[i]` is the index of the parent joint, `-1` for the root (the world).
- Free-flyer configuration `q = [p_xyz (world), quat_xyzw (base to world), joints]`, `nq = 7 + n`;
  velocity `v = [v_lin, omega, joint rates]` with `v_lin`, `omega` in the *base* frame,
  `nv = 6 + n`.
- Spatial motions and forces are 6-vectors `[linear; angular]`, expressed in a body's local
  frame unless the function says otherwise. World is z-up, gravity `(0, 0, -9.81)`. SI units.
- Each joint carries the rigid body attached to it (fixed links merged, as Pinocchio does):
  `body_mass (nj,)`, `body_com (nj, 3)` in the joint frame, `body_inertia (nj, 3, 3)` about the
  centre of mass, in the joint frame.

The model is a JAX pytree: the structure (names, parents, joint types and axes, index maps) is
static metadata, hashed by `jit`; every array (placements, inertias, limits, foot radii) is a
leaf, so it can be traced, randomised and differentiated, or cast with `astype`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

import jax
import numpy as np

JointType = Literal["free_flyer", "revolute", "prismatic"]
FREE_FLYER: JointType = "free_flyer"
REVOLUTE: JointType = "revolute"
PRISMATIC: JointType = "prismatic"

_ARRAY_FIELDS = (
    "joint_rotation",
    "joint_translation",
    "body_mass",
    "body_com",
    "body_inertia",
    "armature",
    "gravity",
    "frame_rotation",
    "frame_translation",
    "foot_radius",
    "lower_position_limit",
    "upper_position_limit",
    "velocity_limit",
    "effort_limit",
    "q_standing",
)


@dataclass(frozen=True, eq=False)
class Model:
    """Static kinematic tree plus traced physical arrays. Build it with `dynamics.load_robot`.

    Static fields:
        name: robot name.
        joint_names: `(nj,)` Pinocchio joint names without "universe".
        parents: `(nj,)` parent joint index, -1 for the world.
        joint_types: `(nj,)` one of "free_flyer", "revolute", "prismatic".
        joint_axes: `(nj,)` unit axis (in the joint frame) of 1-DoF joints, None otherwise.
        idx_q, idx_v: `(nj,)` first index of each joint in `q` and in `v`.
        nq_joint, nv_joint: `(nj,)` sizes of each joint in `q` and `v`.
        frame_names, frame_parents: `(nf,)` Pinocchio frames and the joint they hang on.
        foot_names: `(nfeet,)` names of the foot frames, in a fixed order.
        foot_frames: `(nfeet,)` indices of the foot frames in `frame_names`.
    Arrays (pytree leaves):
        joint_rotation `(nj, 3, 3)`, joint_translation `(nj, 3)`: placement of joint i in its
            parent joint's frame (Pinocchio `jointPlacements`).
        body_mass `(nj,)`, body_com `(nj, 3)`, body_inertia `(nj, 3, 3)`.
        armature `(nv,)`: added to the diagonal of the mass matrix (rotor inertia).
        gravity `(3,)`: world linear gravity acceleration.
        frame_rotation `(nf, 3, 3)`, frame_translation `(nf, 3)`: frame placement in its joint.
        foot_radius `(nfeet,)`: radius of the foot sphere centred at each foot frame [m].
        lower_position_limit, upper_position_limit `(nq,)`, velocity_limit, effort_limit `(nv,)`.
        q_standing `(nq,)`: default standing configuration (SRDF "standing").
    """

    name: str = field(metadata=dict(static=True))
    joint_names: tuple = field(metadata=dict(static=True))
    parents: tuple = field(metadata=dict(static=True))
    joint_types: tuple = field(metadata=dict(static=True))
    joint_axes: tuple = field(metadata=dict(static=True))
    idx_q: tuple = field(metadata=dict(static=True))
    idx_v: tuple = field(metadata=dict(static=True))
    nq_joint: tuple = field(metadata=dict(static=True))
    nv_joint: tuple = field(metadata=dict(static=True))
    frame_names: tuple = field(metadata=dict(static=True))
    frame_parents: tuple = field(metadata=dict(static=True))
    foot_names: tuple = field(metadata=dict(static=True))
    foot_frames: tuple = field(metadata=dict(static=True))

    joint_rotation: object = None
    joint_translation: object = None
    body_mass: object = None
    body_com: object = None
    body_inertia: object = None
    armature: object = None
    gravity: object = None
    frame_rotation: object = None
    frame_translation: object = None
    foot_radius: object = None
    lower_position_limit: object = None
    upper_position_limit: object = None
    velocity_limit: object = None
    effort_limit: object = None
    q_standing: object = None

    # ----------------------------------------------------------------- sizes
    @property
    def njoints(self) -> int:
        return len(self.joint_names)

    @property
    def nq(self) -> int:
        return self.idx_q[-1] + self.nq_joint[-1]

    @property
    def nv(self) -> int:
        return self.idx_v[-1] + self.nv_joint[-1]

    @property
    def nu(self) -> int:
        """Number of actuated joint coordinates (`nv - 6` for a floating base)."""
        return self.nv - (6 if self.has_free_flyer else 0)

    @property
    def nfeet(self) -> int:
        return len(self.foot_names)

    @property
    def has_free_flyer(self) -> bool:
        return self.joint_types[0] == FREE_FLYER

    @property
    def total_mass(self) -> float:
        return float(np.sum(np.asarray(self.body_mass)))

    @property
    def actuated_joint_names(self) -> tuple:
        """Names of the actuated 1-DoF joints, in `v[6:]` order."""
        return tuple(n for n, t in zip(self.joint_names, self.joint_types) if t != FREE_FLYER)

    # ----------------------------------------------------------------- queries
    def frame_id(self, frame) -> int:
        """Index of a frame given its name (or an index, returned unchanged)."""
        if isinstance(frame, int | np.integer):
            if not 0 <= frame < len(self.frame_names):
                raise IndexError(f"frame index {frame} out of range [0, {len(self.frame_names)})")
            return int(frame)
        try:
            return self.frame_names.index(frame)
        except ValueError:
            raise KeyError(
                f"unknown frame {frame!r} for robot {self.name!r}; frames are: "
                + ", ".join(self.frame_names)
            ) from None

    def supports(self, joint: int) -> tuple:
        """Joint indices from the root down to `joint` (its ancestors and itself)."""
        chain = []
        while joint >= 0:
            chain.append(joint)
            joint = self.parents[joint]
        return tuple(reversed(chain))

    def astype(self, dtype) -> Model:
        """The same model with every floating-point array cast to `dtype` (e.g. float32)."""
        import jax.numpy as jnp

        info = jnp.finfo(dtype)
        # Limits stored as float64 "infinity" (1.8e308) become the dtype's max, not inf warnings.
        return jax.tree_util.tree_map(
            lambda x: jnp.asarray(np.clip(np.asarray(x), info.min, info.max), dtype=dtype), self
        )

    def replace(self, **changes) -> Model:
        """A copy with some fields replaced (e.g. `model.replace(body_mass=m)`)."""
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        return (
            f"Model({self.name!r}, nq={self.nq}, nv={self.nv}, joints={self.njoints}, "
            f"mass={self.total_mass:.2f} kg, feet={list(self.foot_names)})"
        )


jax.tree_util.register_dataclass(
    Model,
    data_fields=list(_ARRAY_FIELDS),
    meta_fields=[f.name for f in dataclasses.fields(Model) if f.name not in _ARRAY_FIELDS],
)


def _joint_kind(jmodel) -> tuple[JointType, tuple | None]:
    """Map a Pinocchio joint model to (type, axis)."""
    short = jmodel.shortname()
    basis = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}
    if short == "JointModelFreeFlyer":
        return FREE_FLYER, None
    if short in ("JointModelRX", "JointModelRY", "JointModelRZ"):
        return REVOLUTE, basis[short[-1]]
    if short == "JointModelRevoluteUnaligned":
        return REVOLUTE, tuple(float(a) for a in np.asarray(jmodel.extract().axis).ravel())
    if short in ("JointModelPX", "JointModelPY", "JointModelPZ"):
        return PRISMATIC, basis[short[-1]]
    if short == "JointModelPrismaticUnaligned":
        return PRISMATIC, tuple(float(a) for a in np.asarray(jmodel.extract().axis).ravel())
    raise NotImplementedError(
        f"joint type {short} is not supported; supported: free-flyer, revolute (aligned or "
        "unaligned) and prismatic joints"
    )


def model_from_pinocchio(
    pin_model,
    *,
    name: str,
    foot_names: tuple,
    foot_radius,
    q_standing,
    effort_limit=None,
    velocity_limit=None,
) -> Model:
    """Extract a `Model` from a `pinocchio.Model`.

    Args:
        pin_model: a Pinocchio model with a free-flyer root (or a fixed base).
        name: robot name for messages and metadata.
        foot_names: names of the foot frames (must exist in `pin_model`).
        foot_radius: scalar or `(nfeet,)` foot sphere radii [m].
        q_standing: `(nq,)` default standing configuration.
        effort_limit, velocity_limit: optional `(nv,)` overrides of the URDF limits.
    """
    nj = pin_model.njoints - 1
    types, axes = zip(*(_joint_kind(pin_model.joints[i]) for i in range(1, nj + 1)))
    frame_names = tuple(f.name for f in pin_model.frames)
    for f in foot_names:
        if not pin_model.existFrame(f):
            raise KeyError(f"foot frame {f!r} not found in {name!r}; frames: {frame_names}")
    foot_frames = tuple(int(pin_model.getFrameId(f)) for f in foot_names)
    inertias = [pin_model.inertias[i] for i in range(1, nj + 1)]
    placements = [pin_model.jointPlacements[i] for i in range(1, nj + 1)]
    q_standing = np.asarray(q_standing, dtype=float)
    if q_standing.shape != (pin_model.nq,):
        raise ValueError(f"q_standing must have shape ({pin_model.nq},), got {q_standing.shape}")
    return Model(
        name=name,
        joint_names=tuple(pin_model.names[i] for i in range(1, nj + 1)),
        parents=tuple(int(pin_model.parents[i]) - 1 for i in range(1, nj + 1)),
        joint_types=types,
        joint_axes=axes,
        idx_q=tuple(int(pin_model.idx_qs[i]) for i in range(1, nj + 1)),
        idx_v=tuple(int(pin_model.idx_vs[i]) for i in range(1, nj + 1)),
        nq_joint=tuple(int(pin_model.nqs[i]) for i in range(1, nj + 1)),
        nv_joint=tuple(int(pin_model.nvs[i]) for i in range(1, nj + 1)),
        frame_names=frame_names,
        frame_parents=tuple(int(f.parentJoint) - 1 for f in pin_model.frames),
        foot_names=tuple(foot_names),
        foot_frames=foot_frames,
        joint_rotation=np.stack([np.array(m.rotation) for m in placements]),
        joint_translation=np.stack([np.array(m.translation) for m in placements]),
        body_mass=np.array([float(i.mass) for i in inertias]),
        body_com=np.stack([np.array(i.lever) for i in inertias]),
        body_inertia=np.stack([np.array(i.inertia) for i in inertias]),
        armature=np.array(pin_model.armature, dtype=float),
        gravity=np.array(pin_model.gravity.linear, dtype=float),
        frame_rotation=np.stack([np.array(f.placement.rotation) for f in pin_model.frames]),
        frame_translation=np.stack([np.array(f.placement.translation) for f in pin_model.frames]),
        foot_radius=np.broadcast_to(
            np.asarray(foot_radius, dtype=float), (len(foot_names),)
        ).copy(),
        lower_position_limit=np.array(pin_model.lowerPositionLimit, dtype=float),
        upper_position_limit=np.array(pin_model.upperPositionLimit, dtype=float),
        velocity_limit=np.array(
            pin_model.velocityLimit if velocity_limit is None else velocity_limit, dtype=float
        ),
        effort_limit=np.array(
            pin_model.effortLimit if effort_limit is None else effort_limit, dtype=float
        ),
        q_standing=q_standing,
    )
