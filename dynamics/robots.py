"""Robot loading: example-robot-data names or any URDF with a free-flyer base.

    >>> from dynamics import load_robot
    >>> model = load_robot("go2")          # a dynamics.Model
    >>> model = load_robot("path/to/robot.urdf", foot_names=("lf", "rf", "lh", "rh"))

Feet are always ordered front-left, front-right, hind-left, hind-right.

Foot radii are not in the URDFs as spheres for every robot, so they are recorded here with
their source: ANYmal C's URDF has a 0.03 m foot sphere; Solo12's foot mesh
(`solo_foot.stl`) is a 0.016 m ball around the foot frame; Go2's collision mesh
(`foot_convex.stl`) reaches 0.023 m below the foot frame.

Solo12's URDF carries placeholder limits (1000 Nm); the ODRI actuator gives about 2.7 Nm at the
joint (0.025 Nm/A x 12 A x gear 9), used here. Its velocity limit is not published with the
model; 25 rad/s is an estimate of this project, not a datasheet value.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import numpy as np

from .model import Model, model_from_pinocchio


@dataclass(frozen=True)
class RobotSpec:
    """What example-robot-data does not tell us about a quadruped."""

    loader: str
    foot_names: tuple
    foot_radius: float
    effort_limit: float | None = None  # per actuated joint, overrides the URDF
    velocity_limit: float | None = None
    leg_armature: tuple | None = None  # reflected rotor inertia [kg m^2] per joint of a leg


ROBOTS: dict[str, RobotSpec] = {
    "solo12": RobotSpec(
        "solo12",
        ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"),
        0.016,
        effort_limit=2.7,
        velocity_limit=25.0,
    ),
    "go2": RobotSpec(
        "go2",
        ("FL_foot", "FR_foot", "RL_foot", "RR_foot"),
        0.023,
        leg_armature=(0.01, 0.01, 0.01 * (45.43 / 23.7) ** 2),
    ),
    "anymal_c": RobotSpec("anymal_c", ("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"), 0.03),
}


@dataclass(frozen=True)
class PinocchioRobot:
    """The Pinocchio side of a robot: kinematic/visual/collision models and where they came from."""

    name: str
    model: object  # pinocchio.Model
    visual_model: object  # pinocchio.GeometryModel
    collision_model: object  # pinocchio.GeometryModel
    urdf_path: str
    q_standing: np.ndarray


def available_robots() -> tuple:
    """Names accepted by `load_robot` (besides URDF paths)."""
    return tuple(sorted(ROBOTS))


def _unknown(name: str) -> ValueError:
    return ValueError(
        f"unknown robot {name!r}. Available robots: {', '.join(available_robots())}; "
        "or pass the path of a URDF file (ending in .urdf) with a floating base."
    )


@functools.lru_cache(maxsize=16)
def load_pinocchio(name_or_path: str) -> PinocchioRobot:
    """Load a robot's Pinocchio models by example-robot-data name or URDF path (cached)."""
    import pinocchio as pin

    if not isinstance(name_or_path, str | os.PathLike):
        raise TypeError(f"robot must be a name or a URDF path, got {type(name_or_path).__name__}")
    name_or_path = os.fspath(name_or_path)
    if name_or_path in ROBOTS:
        import example_robot_data as erd

        spec = ROBOTS[name_or_path]
        robot = erd.load(spec.loader)
        if spec.leg_armature is not None:  # rotor inertia, on the Pinocchio model itself
            armature = np.zeros(robot.model.nv)
            legs = (robot.model.nv - 6) // len(spec.leg_armature)
            armature[6:] = np.tile(spec.leg_armature, legs)
            robot.model.armature = armature
        q_standing = np.array(robot.model.referenceConfigurations["standing"])
        return PinocchioRobot(
            name_or_path,
            robot.model,
            robot.visual_model,
            robot.collision_model,
            str(robot.urdf) if isinstance(robot.urdf, str) else "",
            q_standing,
        )
    if not name_or_path.endswith(".urdf"):
        raise _unknown(name_or_path)
    if not os.path.isfile(name_or_path):
        raise FileNotFoundError(f"URDF file not found: {name_or_path!r}")
    package_dirs = [os.path.dirname(os.path.abspath(name_or_path))]
    try:
        model = pin.buildModelFromUrdf(name_or_path, pin.JointModelFreeFlyer())
    except Exception as exc:  # Pinocchio raises plain RuntimeError/ValueError with its own text
        raise ValueError(f"could not parse URDF {name_or_path!r}: {exc}") from exc
    try:
        visual = pin.buildGeomFromUrdf(model, name_or_path, pin.GeometryType.VISUAL, package_dirs)
        collision = pin.buildGeomFromUrdf(
            model, name_or_path, pin.GeometryType.COLLISION, package_dirs
        )
    except Exception:  # meshes missing: dynamics still work, the viewer draws frames only
        visual = collision = pin.GeometryModel()
    stem = os.path.splitext(os.path.basename(name_or_path))[0]
    return PinocchioRobot(stem, model, visual, collision, name_or_path, pin.neutral(model))


def _standing_height(pin_model, q, foot_frames, foot_radius) -> float:
    """Base height that puts the lowest foot sphere on z = 0 for configuration `q`."""
    import pinocchio as pin

    data = pin_model.createData()
    pin.framesForwardKinematics(pin_model, data, q)
    lowest = min(data.oMf[f].translation[2] - r for f, r in zip(foot_frames, foot_radius))
    return float(q[2] - lowest)


@functools.lru_cache(maxsize=32)
def load_robot(
    name_or_path: str,
    *,
    foot_names: tuple | None = None,
    foot_radius: float | None = None,
) -> Model:
    """Load a robot `Model` by name (see `available_robots()`) or from a URDF path.

    Args:
        name_or_path: "solo12", "go2", "anymal_c", or a path to a `.urdf` (free-flyer base added).
        foot_names: foot frame names (FL, FR, HL, HR order); required for URDF paths unless
            exactly four frames have "foot" in their name.
        foot_radius: foot sphere radius [m]; default from the robot table (0.02 for URDFs).
    Raises:
        ValueError: unknown name (the message lists available robots) or a URDF that does not
            parse; FileNotFoundError: missing URDF; KeyError: a foot frame that does not exist.

    Cached: the same arguments return the same `Model` object, so compiled functions keyed on
    the model are reused.
    """
    robot = load_pinocchio(name_or_path)
    pm = robot.model
    spec = ROBOTS.get(robot.name) if robot.name == name_or_path else None
    if foot_names is None:
        if spec is not None:
            foot_names = spec.foot_names
        else:
            import pinocchio as pin

            found = [f.name for f in pm.frames if "foot" in f.name.lower() and f.type == pin.BODY]
            if len(found) != 4:
                raise ValueError(
                    f"could not guess the four feet of {name_or_path!r} (frames with 'foot' in "
                    f"their name: {found}); pass foot_names=(FL, FR, HL, HR)"
                )
            foot_names = tuple(found)
    if foot_radius is None:
        foot_radius = spec.foot_radius if spec is not None else 0.02
    if not (np.all(np.isfinite(foot_radius)) and np.all(np.asarray(foot_radius) >= 0)):
        raise ValueError(f"foot_radius must be finite and >= 0, got {foot_radius}")
    effort = velocity = None
    if spec is not None and spec.effort_limit is not None:
        effort = np.array(pm.effortLimit, dtype=float)
        effort[6:] = spec.effort_limit
    if spec is not None and spec.velocity_limit is not None:
        velocity = np.array(pm.velocityLimit, dtype=float)
        velocity[6:] = spec.velocity_limit
    # Standing pose: the SRDF's joints (neutral joints for URDFs), with the base height set so
    # that the lowest foot sphere touches z = 0 (ANYmal C's SRDF pose puts its foot spheres
    # below the ground; Go2's and Solo12's nearly touch it).
    q_standing = np.array(robot.q_standing, dtype=float)
    radii = np.broadcast_to(np.asarray(foot_radius, float), (len(foot_names),))
    frames = [pm.getFrameId(f) for f in foot_names if pm.existFrame(f)]
    if len(frames) == len(foot_names):
        q_standing[2] = _standing_height(pm, q_standing, frames, radii)
    return model_from_pinocchio(
        pm,
        name=robot.name,
        foot_names=tuple(foot_names),
        foot_radius=foot_radius,
        q_standing=q_standing,
        effort_limit=effort,
        velocity_limit=velocity,
    )
