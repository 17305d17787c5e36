"""MuJoCo MJCF model generated from a `dynamics.Model`, and state conversions between the two.

MuJoCo is an optional dependency (`pip install diffloco[mujoco]`); it is imported inside the
functions that need it, so `to_mjcf` and the converters work without it.

    >>> from dynamics import load_robot
    >>> from dynamics.mjcf import mujoco_model, qpos_from_q, qvel_from_v
    >>> model = load_robot("go2")
    >>> mj = mujoco_model(model, timestep=0.002, friction=0.8)
    >>> data = mujoco.MjData(mj)
    >>> data.qpos[:] = qpos_from_q(model, q); data.qvel[:] = qvel_from_v(model, v, q)

What the generated model contains (no meshes):

- One MJCF body per `Model` joint, nested by `parents`; a body's `pos`/`quat` is the joint
  placement in its parent joint's frame (`joint_rotation`, `joint_translation`), so MuJoCo's
  body frame *is* the Pinocchio joint frame. Bodies and joints are named after the Pinocchio
  joints (MuJoCo keeps separate namespaces for the two).
- `<inertial pos=body_com mass=body_mass fullinertia=...>` with no `quat`: Pinocchio's inertia is
  about the centre of mass with axes of the joint frame, which is exactly MJCF's convention for
  `fullinertia` without an orientation. `inertiafromgeom="false"`: geoms add no mass.
- The root: a free joint (`<joint type="free">`, which also takes `armature`) for a free-flyer
  model, otherwise a hinge/slide attached to the world. 1-DoF joints are hinges (revolute) or
  slides (prismatic) about `joint_axes`, with `armature` from `model.armature`, no damping, no
  friction loss. MuJoCo has no velocity limits; `velocity_limit` is not represented.
- Joint ranges: `limited="true"` only where both limits are finite, ordered and "sensible"
  (revolute range at most 2 pi, prismatic within 1e3 m). Solo12's placeholder +-10 rad and
  ANYmal C's +-3 pi are left unlimited; Go2's real limits are kept.
- A sphere geom of `foot_radius` per foot (named like the foot frame) in the body of the foot
  frame's parent joint at the frame's translation, and a `<site>` with the frame's full pose.
- With `body_collisions=True` (off by default; the simulated robots turn it on), the links
  touch the floor too, so a robot lying down rests on its trunk and legs instead of sinking
  through. No meshes: each body's shape is the uniform box of its own mass and inertia (the
  box with principal moments `I_k`, mass `m`, has edges `a_k = sqrt(6 (I_1 + I_2 + I_3 - 2 I_k)
  / m)`), centred at its centre of mass with its principal axes, for the root (the trunk); for
  the other bodies a capsule along the bone (from the body origin to each child joint, or to
  its foot frames), of radius half the inertia box's smallest edge, so a calf's capsule ends
  inside its foot sphere and never touches the floor before the foot does. Source: the link
  inertias of the URDF (for Go2 the trunk box is 0.40 x 0.17 x 0.115 m, the height of
  Unitree's own trunk collision box, 0.114 m, in MuJoCo Menagerie's go2.xml, to 1 mm; thigh and
  calf radii 31 mm and 13 mm). Named `<body>_collision`, `rgba` translucent.
- A floor plane through the world origin, optionally inclined (`floor_incline`), or the
  `ground` elements of a terrain (`contact.mjcf_terrain.ground_elements`: planes, boxes, a
  height field) in its place.
- Collision filtering: feet (and link shapes) `contype=1 conaffinity=0`, floor `contype=0
  conaffinity=1`, so the only possible contact pairs are with the floor (MuJoCo collides two
  geoms when `contype1 & conaffinity2 or contype2 & conaffinity1`): no self-collision, no
  foot-foot.
- Actuators: with `actuators="motor"` (default) one `<motor gear="1">` per 1-DoF joint in `v[6:]`
  order, `ctrl` = joint torque/force, `ctrlrange = +-effort_limit` where finite. With
  `actuators="none"` there are none, and generalised forces go through `data.qfrc_applied`
  (use `qfrc_from_tau` to map a Pinocchio-convention `tau`). Either way nothing else (no
  damping, no passive forces) acts on the joints.
- A keyframe "standing" holding `q_standing`.

Coordinate conventions (checked in tests/dynamics/test_mjcf.py against Pinocchio to 1e-9):

- Pinocchio: `q = [p (world), quat xyzw, joints]`, `v = [v_lin, omega, joint rates]` with the base
  twist in the *base* frame (the linear part is the velocity of the base origin).
- MuJoCo free joint: `qpos = [p (world), quat wxyz, ...]`; `qvel = [pdot in the WORLD frame,
  omega in the BODY (local) frame, ...]`. Documented by a MuJoCo maintainer in
  google-deepmind/mujoco issues #243 and #691 (and the "Floating objects" section of the
  Overview chapter): linear DoFs and velocities of a free joint are global, rotational
  velocities are local because they live in the quaternion's tangent space; accelerations live
  in the same space as velocities and `qfrc_*` in its dual. Confirmed here empirically: finite
  differences of `mj_integratePos` match `pinocchio.integrate` with `v_from_qvel`, and the mass
  matrices and forward dynamics agree with the map below.
- So with `R` the base rotation and `T = blockdiag(R^T, I_3, I_n)`: `v = T qvel`; the mass
  matrices satisfy `M_mj = T^T M_pin T`; forces map as `qfrc = T^T tau` (linear force rotated to
  the world, torques unchanged); since `d/dt (R^T) = -[omega]x R^T`,
  `qacc = T^-1 (a + c)` with `c = [omega x v_lin; 0; 0]`, and the bias forces are
  `qfrc_bias = T^T (nle - M_pin c)`.
- Joint order: MuJoCo numbers joints in depth-first (XML) order of the body tree; the converters
  permute if the Pinocchio joint order differs (it does not for URDF-built models).

Simulation options (`<option>`) and why:

- `timestep` (default 2 ms) and gravity from `model.gravity`.
- `integrator="implicitfast"` (default): semi-implicit Euler whose velocity update is implicit in
  the velocity derivatives of actuator and passive forces (Coriolis terms omitted). The model
  has no damping and motors have no velocity-dependent terms, so here it gives the same result
  as `"Euler"` (MuJoCo's semi-implicit Euler); it is the default because it stays stable if one
  adds joint damping or position/velocity actuators. Pass `integrator="Euler"` or `"RK4"`
  to change it. PD torques written into `qfrc_applied` are explicit with any integrator.
- `cone="elliptic"`: the friction cone is the exact Coulomb cone `|f_t| <= mu f_n` of our own
  contact model, not MuJoCo's default pyramid approximation.
- `impratio=100`: ratio of frictional to normal constraint impedance. With elliptic cones a
  large value makes the friction constraint nearly hard, removing MuJoCo's soft-contact creep
  while sticking (MuJoCo Menagerie's quadrupeds, e.g. Go2, use the same value).
- `solver="Newton"`, `iterations=100`, `tolerance=1e-10`: the exact Newton solver converges in
  a few iterations on a handful of contacts; the tight tolerance keeps the solver error well
  below the contact forces we compare with.
- Contact `solref=(2 * timestep, 1)`: MuJoCo's constraint is a critically damped spring-damper
  in acceleration space with time constant `timeconst`; the default 20 ms makes feet sink and
  bounce visibly. `2 * timestep` is the smallest value MuJoCo accepts as stable (it clamps
  smaller ones, `refsafe`), i.e. the hardest contact the time step can resolve.
- Contact `solimp=(0.95, 0.99, 0.001, 0.5, 2)`: constraint impedance 0.95 at zero penetration
  rising to 0.99 at 1 mm (defaults 0.9 / 0.95). Impedance `d` is the fraction of the
  constraint force that is kept, `1 - d` the softness; values near 1 make contact nearly
  rigid while the problem stays well conditioned: a standing Go2's feet sink less with these
  settings than with MuJoCo's default solimp, and far less than with its default solref. The
  same solref/solimp are used for joint limits.
- Friction `friction=(mu, 0.005, 0.0001)` on both feet and floor (MuJoCo takes the max of the
  two geoms), `condim=3`: sliding friction only, so torsional and rolling friction (the last
  two coefficients) are inactive; they are the MuJoCo defaults, written for completeness.
"""

from __future__ import annotations

import copy
import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Literal

import numpy as np

from .model import FREE_FLYER, PRISMATIC, REVOLUTE, JointType, Model

_HUGE = 1e10  # effort limits above this (Pinocchio's "no limit" is 1.8e308) are unbounded
_MAX_REVOLUTE_RANGE = 2.0 * math.pi
_MAX_PRISMATIC = 1e3
DEFAULT_SOLIMP = (0.95, 0.99, 0.001, 0.5, 2.0)
Actuators = Literal["motor", "none"]
ACTUATORS: tuple[Actuators, ...] = ("motor", "none")
Integrator = Literal["implicitfast", "Euler", "implicit", "RK4"]
INTEGRATORS: tuple[Integrator, ...] = ("implicitfast", "Euler", "implicit", "RK4")
Cone = Literal["pyramidal", "elliptic"]  # MuJoCo's friction cones
Solver = Literal["PGS", "CG", "Newton"]  # MuJoCo's constraint solvers


# --------------------------------------------------------------------------- small helpers
def _fmt(x) -> str:
    """Space-separated shortest round-trip representation of floats (exact in float64)."""
    return " ".join(repr(float(v)) for v in np.ravel(np.asarray(x, dtype=float)))


def _rotation_to_quat_wxyz(r) -> np.ndarray:
    """Unit quaternion `[w, x, y, z]` of a rotation matrix (Shepperd's method, w >= 0)."""
    r = np.asarray(r, dtype=float)
    t = np.trace(r)
    if t > 0.0:
        s = 2.0 * math.sqrt(1.0 + t)
        q = [0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s]
    elif r[0, 0] > r[1, 1] and r[0, 0] > r[2, 2]:
        s = 2.0 * math.sqrt(1.0 + r[0, 0] - r[1, 1] - r[2, 2])
        q = [(r[2, 1] - r[1, 2]) / s, 0.25 * s, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s]
    elif r[1, 1] > r[2, 2]:
        s = 2.0 * math.sqrt(1.0 + r[1, 1] - r[0, 0] - r[2, 2])
        q = [(r[0, 2] - r[2, 0]) / s, (r[0, 1] + r[1, 0]) / s, 0.25 * s, (r[1, 2] + r[2, 1]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + r[2, 2] - r[0, 0] - r[1, 1])
        q = [(r[1, 0] - r[0, 1]) / s, (r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, 0.25 * s]
    q = np.array(q)
    q = q / np.linalg.norm(q)
    return -q if q[0] < 0 else q


def _quat_xyzw_to_rotation(quat) -> np.ndarray:
    """Rotation matrices `(..., 3, 3)` of quaternions `(..., 4)` in `[x, y, z, w]` order
    (normalised first, as Pinocchio and MuJoCo both do)."""
    quat = np.asarray(quat, dtype=float)
    quat = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
    x, y, z, w = np.moveaxis(quat, -1, 0)
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]
    return np.stack([np.stack(r, axis=-1) for r in rows], axis=-2)


def _children(model: Model) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in range(model.njoints)]
    for i, p in enumerate(model.parents):
        if p >= 0:
            kids[p].append(i)
    return kids


def _mujoco_joint_order(model: Model) -> tuple[int, ...]:
    """Model joint indices in the order MuJoCo numbers them: depth-first, children by index."""
    kids = _children(model)
    order: list[int] = []
    stack = [i for i, p in enumerate(model.parents) if p < 0][::-1]
    while stack:
        j = stack.pop()
        order.append(j)
        stack.extend(reversed(kids[j]))
    return tuple(order)


def _index_maps(model: Model) -> tuple[np.ndarray, np.ndarray]:
    """`(perm_q, perm_v)`: Pinocchio index of each MuJoCo qpos / qvel slot.

    The free-flyer slots map one-to-one (the quaternion reordering and the velocity rotation
    are applied separately)."""
    perm_q: list[int] = []
    perm_v: list[int] = []
    for j in _mujoco_joint_order(model):
        perm_q.extend(range(model.idx_q[j], model.idx_q[j] + model.nq_joint[j]))
        perm_v.extend(range(model.idx_v[j], model.idx_v[j] + model.nv_joint[j]))
    return np.array(perm_q), np.array(perm_v)


def _is_free(model: Model) -> bool:
    return model.has_free_flyer


def _limited(jtype: JointType, lo: float, hi: float) -> bool:
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        return False
    if jtype == REVOLUTE:
        return hi - lo <= _MAX_REVOLUTE_RANGE + 1e-9
    return max(abs(lo), abs(hi)) <= _MAX_PRISMATIC


def inertia_box(mass: float, inertia) -> tuple[np.ndarray, np.ndarray]:
    """`(edges (3,) [m], axes (3, 3))`: the uniform box of `mass` [kg] with the inertia
    `(3, 3)` [kg m^2] about its centre, `a_k = sqrt(6 (I_1 + I_2 + I_3 - 2 I_k) / m)` along the
    principal axes (the columns of `axes`, right-handed)."""
    moments, axes = np.linalg.eigh(np.asarray(inertia, dtype=float))
    if np.linalg.det(axes) < 0:
        axes[:, 2] = -axes[:, 2]
    edges = np.sqrt(np.maximum(6.0 * (moments.sum() - 2.0 * moments) / mass, 0.0))
    return edges, axes


def _collision_geoms(jtype, mass, com, inertia, ends) -> list:
    """The floor-touching shapes of one body (module docstring): the inertia box for the root
    (`jtype` FREE_FLYER), else a capsule from the origin to each point of `ends` (its child
    joints and feet, body frame)."""
    edges, axes = inertia_box(mass, inertia)
    common = dict(contype="1", conaffinity="0", rgba="0.5 0.5 0.6 0.3")
    if jtype == FREE_FLYER:
        quat = _rotation_to_quat_wxyz(axes)
        box = ET.Element("geom", type="box", size=_fmt(edges / 2), pos=_fmt(com), **common)
        box.set("quat", _fmt(quat))
        return [box]
    radius = 0.5 * float(np.min(edges))
    out = []
    for k, end in enumerate(ends):
        if np.linalg.norm(end) < 1e-3 or radius <= 0.0:
            continue
        capsule = ET.Element(
            "geom", type="capsule", size=repr(radius), fromto=_fmt([0.0, 0.0, 0.0, *end]),
            **common,
        )  # fmt: skip
        capsule.set("name", f"_{k}" if k else "")
        out.append(capsule)
    return out


def _add_ground(root, world, ground) -> None:
    """Copies of the `ground` elements: `<hfield>`s into an `<asset>`, `<geom>`s into `world`,
    touching the robot's geoms only."""
    if any(e.tag not in ("hfield", "geom") for e in ground):
        raise ValueError(f"ground: expected <geom> or <hfield> elements, got {list(ground)}")
    ET.SubElement(root, "asset").extend(copy.deepcopy(e) for e in ground if e.tag == "hfield")
    for geom in (copy.deepcopy(e) for e in ground if e.tag == "geom"):
        geom.set("contype", "0")
        geom.set("conaffinity", "1")
        world.append(geom)


# --------------------------------------------------------------------------- MJCF generation
def to_mjcf(
    model: Model,
    *,
    timestep: float = 0.002,
    friction: float = 0.8,
    floor_incline: float = 0.0,
    floor: bool = True,
    actuators: Actuators = "motor",
    joint_limits: bool = True,
    integrator: Integrator = "implicitfast",
    cone: Cone = "elliptic",
    impratio: float = 100.0,
    solver: Solver = "Newton",
    iterations: int = 100,
    tolerance: float = 1e-10,
    solref: tuple | None = None,
    solimp: tuple = DEFAULT_SOLIMP,
    body_collisions: bool = False,
    ground: Sequence[ET.Element] | None = None,
) -> str:
    """MJCF (MuJoCo XML) text of `model`: bodies, inertias, joints, foot spheres and a floor.

    Args:
        model: the robot (`dynamics.load_robot`). Arrays may be NumPy or JAX (not traced).
        timestep: simulation time step [s].
        friction: Coulomb coefficient `mu` (MuJoCo sliding friction) of feet and floor.
        floor_incline: floor slope [rad], a rotation about the world y axis such that the
            ground rises along +x (height `x tan(incline)`); the plane passes through the origin.
        floor: add the floor plane (False: a free-floating robot with nothing to touch).
        actuators: "motor" (one gear-1 motor per 1-DoF joint, `ctrl` = torque, range from
            `effort_limit`) or "none" (apply forces through `data.qfrc_applied`).
        joint_limits: add limit constraints on joints with finite, sensible ranges.
        integrator: MuJoCo integrator: "implicitfast" (default), "Euler", "implicit" or "RK4".
        cone, impratio, solver, iterations, tolerance: MuJoCo `<option>` solver settings.
        solref: contact/limit `(timeconst, dampratio)`; default `(2 * timestep, 1)`.
        solimp: contact/limit impedance `(dmin, dmax, width, midpoint, power)`.
        body_collisions: the links (trunk box, leg capsules) collide with the floor too
            (module docstring); False: the feet alone, as this project's contact model.
        ground: MJCF elements in place of the floor plane (with `floor`, not with
            `floor_incline`): `<hfield>`s go to `<asset>`, `<geom>`s to the worldbody, made to
            touch the robot alone (`contype="0" conaffinity="1"`); copies are written.
    Returns:
        The XML document as a string, loadable with `mujoco.MjModel.from_xml_string`.
    """
    if actuators not in ACTUATORS:
        raise ValueError(f"actuators must be 'motor' or 'none', got {actuators!r}")
    if integrator not in INTEGRATORS:
        raise ValueError(f"unknown MuJoCo integrator {integrator!r}")
    if not timestep > 0:
        raise ValueError(f"timestep must be > 0, got {timestep}")
    if not friction >= 0:
        raise ValueError(f"friction must be >= 0, got {friction}")
    if solref is None:
        solref = (2.0 * timestep, 1.0)
    if ground is not None and floor_incline:
        raise ValueError("give floor_incline or ground, not both")

    rot = np.asarray(model.joint_rotation, dtype=float)
    trans = np.asarray(model.joint_translation, dtype=float)
    mass = np.asarray(model.body_mass, dtype=float)
    com = np.asarray(model.body_com, dtype=float)
    inertia = np.asarray(model.body_inertia, dtype=float)
    armature = np.asarray(model.armature, dtype=float)
    lower = np.asarray(model.lower_position_limit, dtype=float)
    upper = np.asarray(model.upper_position_limit, dtype=float)
    effort = np.asarray(model.effort_limit, dtype=float)
    frame_rot = np.asarray(model.frame_rotation, dtype=float)
    frame_trans = np.asarray(model.frame_translation, dtype=float)
    radii = np.asarray(model.foot_radius, dtype=float)

    root = ET.Element("mujoco", model=model.name)
    ET.SubElement(root, "compiler", angle="radian", inertiafromgeom="false", autolimits="false")
    ET.SubElement(
        root,
        "option",
        timestep=repr(float(timestep)),
        gravity=_fmt(model.gravity),
        integrator=integrator,
        cone=cone,
        impratio=repr(float(impratio)),
        solver=solver,
        iterations=str(int(iterations)),
        tolerance=repr(float(tolerance)),
    )
    default = ET.SubElement(root, "default")
    ET.SubElement(
        default,
        "geom",
        condim="3",
        friction=_fmt([friction, 0.005, 0.0001]),
        solref=_fmt(solref),
        solimp=_fmt(solimp),
        mass="0",
    )
    ET.SubElement(
        default,
        "joint",
        damping="0",
        frictionloss="0",
        solreflimit=_fmt(solref),
        solimplimit=_fmt(solimp),
    )

    world = ET.SubElement(root, "worldbody")
    if floor and ground is not None:
        _add_ground(root, world, ground)
    elif floor:
        phi = -float(floor_incline)  # rotation about y taking +z to (-sin a, 0, cos a)
        ET.SubElement(
            world,
            "geom",
            name="floor",
            type="plane",
            size="0 0 0.05",
            quat=_fmt([math.cos(phi / 2), 0.0, math.sin(phi / 2), 0.0]),
            contype="0",
            conaffinity="1",
            rgba="0.8 0.8 0.8 1",
        )

    feet_by_joint: dict[int, list[int]] = {}
    for k, f in enumerate(model.foot_frames):
        feet_by_joint.setdefault(model.frame_parents[f], []).append(k)
    if any(j < 0 for j in feet_by_joint):
        raise ValueError("a foot frame is attached to the world, not to a robot joint")

    kids = _children(model)

    def add_body(parent_el, j: int) -> None:
        jtype = model.joint_types[j]
        body = ET.SubElement(parent_el, "body", name=model.joint_names[j])
        if jtype == FREE_FLYER:
            if model.parents[j] >= 0:
                raise NotImplementedError("a free-flyer joint is only supported at the root")
            if not (np.allclose(rot[j], np.eye(3)) and np.allclose(trans[j], 0.0)):
                raise NotImplementedError("the free-flyer joint placement must be the identity")
            q0 = np.asarray(model.q_standing, dtype=float)[model.idx_q[j] : model.idx_q[j] + 7]
            body.set("pos", _fmt(q0[:3]))
            body.set("quat", _fmt(q0[[6, 3, 4, 5]]))
        else:
            body.set("pos", _fmt(trans[j]))
            body.set("quat", _fmt(_rotation_to_quat_wxyz(rot[j])))
        if mass[j] > 0.0:
            i = inertia[j]
            body_in = ET.SubElement(body, "inertial", pos=_fmt(com[j]), mass=repr(float(mass[j])))
            body_in.set("fullinertia", _fmt([i[0, 0], i[1, 1], i[2, 2], i[0, 1], i[0, 2], i[1, 2]]))
        iv = model.idx_v[j]
        if jtype == FREE_FLYER:
            arm = armature[iv : iv + 6]
            if not np.allclose(arm, arm[0]):
                raise NotImplementedError(
                    "MuJoCo's free joint takes one armature for its 6 DoFs; got " + str(arm)
                )
            ET.SubElement(
                body,
                "joint",
                name=model.joint_names[j],
                type="free",
                armature=repr(float(arm[0])),
            )
        elif jtype in (REVOLUTE, PRISMATIC):
            el = ET.SubElement(
                body,
                "joint",
                name=model.joint_names[j],
                type="hinge" if jtype == REVOLUTE else "slide",
                axis=_fmt(model.joint_axes[j]),
                armature=repr(float(armature[iv])),
            )
            iq = model.idx_q[j]
            if joint_limits and _limited(jtype, lower[iq], upper[iq]):
                el.set("limited", "true")
                el.set("range", _fmt([lower[iq], upper[iq]]))
            else:
                el.set("limited", "false")
        else:  # pragma: no cover - Model only holds the three types
            raise NotImplementedError(f"joint type {jtype!r}")
        if body_collisions and mass[j] > 0.0:
            ends = [trans[c] for c in kids[j]]
            ends += [frame_trans[model.foot_frames[k]] for k in feet_by_joint.get(j, [])]
            for el in _collision_geoms(jtype, mass[j], com[j], inertia[j], ends):
                el.set("name", f"{model.joint_names[j]}_collision" + el.get("name", ""))
                body.append(el)
        for k in feet_by_joint.get(j, []):
            f = model.foot_frames[k]
            name = model.foot_names[k]
            ET.SubElement(
                body,
                "geom",
                name=name,
                type="sphere",
                size=repr(float(radii[k])),
                pos=_fmt(frame_trans[f]),
                contype="1",
                conaffinity="0",
                rgba="0.2 0.2 0.2 1",
            )
            ET.SubElement(
                body,
                "site",
                name=name,
                pos=_fmt(frame_trans[f]),
                quat=_fmt(_rotation_to_quat_wxyz(frame_rot[f])),
                size="0.005",
            )
        for c in kids[j]:
            add_body(body, c)

    for j, p in enumerate(model.parents):
        if p < 0:
            add_body(world, j)

    if actuators == "motor":
        act = ET.SubElement(root, "actuator")
        for j in _mujoco_joint_order(model):
            if model.joint_types[j] == FREE_FLYER:
                continue
            el = ET.SubElement(
                act, "motor", name=model.joint_names[j], joint=model.joint_names[j], gear="1"
            )
            lim = effort[model.idx_v[j]]
            if np.isfinite(lim) and 0 < lim < _HUGE:
                el.set("ctrllimited", "true")
                el.set("ctrlrange", _fmt([-lim, lim]))
            else:
                el.set("ctrllimited", "false")

    key = ET.SubElement(root, "keyframe")
    ET.SubElement(
        key,
        "key",
        name="standing",
        qpos=_fmt(qpos_from_q(model, np.asarray(model.q_standing, dtype=float))),
    )

    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def mujoco_model(model: Model, **kwargs):
    """`mujoco.MjModel` compiled from `to_mjcf(model, **kwargs)` (requires `mujoco`)."""
    import mujoco

    return mujoco.MjModel.from_xml_string(to_mjcf(model, **kwargs))


# --------------------------------------------------------------------------- conventions
def _base_rotation(q) -> np.ndarray:
    return _quat_xyzw_to_rotation(np.asarray(q, dtype=float)[..., 3:7])


def qpos_from_q(model: Model, q) -> np.ndarray:
    """MuJoCo `qpos` of a Pinocchio configuration `q (..., nq)`: quaternion xyzw -> wxyz."""
    q = np.asarray(q, dtype=float)
    perm_q, _ = _index_maps(model)
    qpos = q[..., perm_q]
    if _is_free(model):
        qpos[..., 3:7] = q[..., [6, 3, 4, 5]]
    return qpos


def q_from_qpos(model: Model, qpos) -> np.ndarray:
    """Pinocchio `q` of a MuJoCo `qpos (..., nq)`: quaternion wxyz -> xyzw."""
    qpos = np.asarray(qpos, dtype=float)
    perm_q, _ = _index_maps(model)
    q = np.empty_like(qpos)
    q[..., perm_q] = qpos
    if _is_free(model):
        q[..., 3:7] = qpos[..., [4, 5, 6, 3]]
    return q


def _rotate(r, x) -> np.ndarray:
    return np.einsum("...ij,...j->...i", r, x)


def _rotate_t(r, x) -> np.ndarray:
    return np.einsum("...ji,...j->...i", r, x)


def qvel_from_v(model: Model, v, q) -> np.ndarray:
    """MuJoCo `qvel` of a Pinocchio velocity `v (..., nv)` at configuration `q (..., nq)`.

    Free joint: the base linear velocity goes from the base frame to the world frame
    (`qvel[:3] = R v[:3]`); the angular velocity stays in the base frame."""
    v = np.asarray(v, dtype=float)
    _, perm_v = _index_maps(model)
    qvel = v[..., perm_v]
    if _is_free(model):
        qvel[..., 0:3] = _rotate(_base_rotation(q), v[..., 0:3])
    return qvel


def v_from_qvel(model: Model, qvel, qpos) -> np.ndarray:
    """Pinocchio `v` of a MuJoCo `qvel (..., nv)` at MuJoCo configuration `qpos (..., nq)`
    (`v[:3] = R^T qvel[:3]`)."""
    qvel = np.asarray(qvel, dtype=float)
    _, perm_v = _index_maps(model)
    v = np.empty_like(qvel)
    v[..., perm_v] = qvel
    if _is_free(model):
        q = q_from_qpos(model, qpos)
        v[..., 0:3] = _rotate_t(_base_rotation(q), qvel[..., 0:3])
    return v


def qacc_from_a(model: Model, a, v, q) -> np.ndarray:
    """MuJoCo `qacc` of a Pinocchio acceleration `a = dv/dt` at state `(q, v)`.

    `qacc[:3] = R (a[:3] + omega x v[:3])`, the time derivative of `R v[:3]`."""
    a = np.asarray(a, dtype=float)
    v = np.asarray(v, dtype=float)
    _, perm_v = _index_maps(model)
    qacc = a[..., perm_v]
    if _is_free(model):
        lin = a[..., 0:3] + np.cross(v[..., 3:6], v[..., 0:3])
        qacc[..., 0:3] = _rotate(_base_rotation(q), lin)
    return qacc


def a_from_qacc(model: Model, qacc, qvel, qpos) -> np.ndarray:
    """Pinocchio acceleration `a = dv/dt` of a MuJoCo `qacc` at MuJoCo state `(qpos, qvel)`."""
    qacc = np.asarray(qacc, dtype=float)
    _, perm_v = _index_maps(model)
    a = np.empty_like(qacc)
    a[..., perm_v] = qacc
    if _is_free(model):
        v = v_from_qvel(model, qvel, qpos)
        r = _base_rotation(q_from_qpos(model, qpos))
        a[..., 0:3] = _rotate_t(r, qacc[..., 0:3]) - np.cross(v[..., 3:6], v[..., 0:3])
    return a


def qfrc_from_tau(model: Model, tau, q) -> np.ndarray:
    """MuJoCo generalised force (e.g. for `qfrc_applied`) of a Pinocchio `tau (..., nv)`.

    Forces are dual to velocities, `qfrc = T^T tau`: the base linear force is rotated to the
    world frame, base torque and joint torques are unchanged (power `tau . v` is preserved)."""
    tau = np.asarray(tau, dtype=float)
    _, perm_v = _index_maps(model)
    qfrc = tau[..., perm_v]
    if _is_free(model):
        qfrc[..., 0:3] = _rotate(_base_rotation(q), tau[..., 0:3])
    return qfrc


def tau_from_qfrc(model: Model, qfrc, qpos) -> np.ndarray:
    """Pinocchio generalised force of a MuJoCo `qfrc (..., nv)` at MuJoCo `qpos`."""
    qfrc = np.asarray(qfrc, dtype=float)
    _, perm_v = _index_maps(model)
    tau = np.empty_like(qfrc)
    tau[..., perm_v] = qfrc
    if _is_free(model):
        r = _base_rotation(q_from_qpos(model, qpos))
        tau[..., 0:3] = _rotate_t(r, qfrc[..., 0:3])
    return tau


def velocity_transform(model: Model, q) -> np.ndarray:
    """`T (nv, nv)` with `v = T qvel` (Pinocchio velocity from MuJoCo velocity) at `q`.

    Rows/columns are in Pinocchio order; `M_mj = P (T^T M_pin T) P^T` where `P` is the joint
    permutation (the identity for URDF-built models)."""
    t = np.eye(model.nv)
    if _is_free(model):
        t[0:3, 0:3] = _base_rotation(q).T
    return t


__all__ = [
    "a_from_qacc",
    "inertia_box",
    "mujoco_model",
    "q_from_qpos",
    "qacc_from_a",
    "qfrc_from_tau",
    "qpos_from_q",
    "qvel_from_v",
    "tau_from_qfrc",
    "to_mjcf",
    "v_from_qvel",
    "velocity_transform",
]
