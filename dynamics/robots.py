"""Robot loading: any four-footed, floating-base robot of example-robot-data by name, or any
URDF by path, each described by one `RobotRecord` (`dynamics.robot_record`).

    >>> from dynamics import load_robot, robot_record
    >>> model = load_robot("go1")                 # a dynamics.Model
    >>> record = robot_record("go1")              # its feet, pose, gains, gait sizes, sources
    >>> model = load_robot("path/to/robot.urdf")  # reads robot.robot.toml and an SRDF beside it

Feet are always ordered front-left, front-right, hind-left, hind-right.

`BUILT_IN` holds what is given for a robot (a datasheet, a measurement), each with its source;
every other field comes from a rule of `dynamics.robot_rules`. The facts:

- Foot radii: a robot's URDF collision sphere on the foot where it has one (ANYmal C's
  0.03 m, given here as the value the shipped work was measured with); Solo12's foot mesh
  (`solo_foot.stl`) is a 0.016 m ball around the foot frame; Go2's collision mesh
  (`foot_convex.stl`) reaches 0.023 m below the foot frame. A robot with neither gets
  `DEFAULT_FOOT_RADIUS`.
- Solo12's URDF carries placeholder limits (1000 Nm); the ODRI actuator gives about 2.7 Nm at
  the joint (0.025 Nm/A x 12 A x gear 9). Its velocity limit is not published with the model;
  25 rad/s is an estimate of this project, not a datasheet value.
- Go2's rotor inertia: 0.01 kg m^2 reflected at the hip and thigh, the calf's scaled by the
  square of its gear ratio against theirs (45.43 / 23.7 Nm peak torque).
- Standing gains, given for the three robots the shipped policies and the gait library were
  measured on: they hold each standing pose on flat ground and on a 10 degree slope (mu 0.8)
  at dt = 2 ms with every contact model (`tests/contact/test_contact_physics.py`); softer
  gains (Go2 at 40/1, ANYmal C at PAPER.md's 85/3) let the legs fold on the slope.
- Gait sizes of Solo12 and ANYmal C: the gait library's 21 of 21 was measured with these
  (docs/benchmark-history.md, "Gait library defaults"); the Froude rule gives Solo12 0.33 s /
  0.048 m and ANYmal C 0.52 s / 0.12 m. Go2's are the rule's own constants.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass

import numpy as np

from . import robot_rules as rules
from .model import Model, model_from_pinocchio
from .robot_record import RobotRecord, check_record, read_record_file, record_file

DEFAULT_FOOT_RADIUS = 0.02  # [m] a robot whose record gives none

_SLOPE = "holds the standing pose on flat ground and a 10 degree slope (module docstring)"
BUILT_IN: dict[str, RobotRecord] = {
    "solo12": RobotRecord(
        "solo12",
        foot_radius=0.016,
        kp=3.0,
        kd=0.1,
        effort_limit=2.7,
        velocity_limit=25.0,
        gait_period=0.30,
        swing_height=0.05,
        sources=(
            ("foot_radius", "solo_foot.stl: a 0.016 m ball around the foot frame"),
            ("kp", _SLOPE),
            ("kd", _SLOPE),
            ("effort_limit", "ODRI actuator: 0.025 Nm/A x 12 A x gear 9"),
            ("velocity_limit", "an estimate of this project, not a datasheet value"),
            ("gait_period", "measured: the gait library's 21 of 21"),
            ("swing_height", "measured: the gait library's 21 of 21"),
        ),  # fmt: skip
    ),
    "go2": RobotRecord(
        "go2",
        foot_radius=0.023,
        kp=80.0,
        kd=2.0,
        leg_armature=(0.01, 0.01, 0.01 * (45.43 / 23.7) ** 2),
        gait_period=0.40,
        swing_height=0.07,
        # paces at 0.65 x its period: in 60 iterations the lowest cost of the scales 0.6-0.85
        # and its lateral pairs in step on 90 % of the knots (at the library's 0.7, 72 %)
        gait_overrides=(("pace", (("period_scale", 0.65),)),),
        sources=(
            ("foot_radius", "foot_convex.stl reaches 0.023 m below the foot frame"),
            ("kp", _SLOPE + "; the shipped Go2 policies were trained with it"),
            ("kd", _SLOPE + "; the shipped Go2 policies were trained with it"),
            ("leg_armature", "Unitree Go2 motors: 0.01 kg m^2 reflected, calf x (45.43/23.7)^2"),
            ("gait_period", "the Froude rule's reference robot"),
            ("swing_height", "the Froude rule's reference robot"),
        ),  # fmt: skip
    ),
    "anymal_c": RobotRecord(
        "anymal_c",
        foot_radius=0.03,
        kp=200.0,
        kd=5.0,
        gait_period=0.60,
        swing_height=0.10,
        # trots with a clean diagonal pattern from the kinematic guess (an irregular one from
        # the standing targets), after a quarter period on four feet (lifting a diagonal pair at
        # t = 0, the first stance pair alone cannot bring its 50 kg to the command: 11 % short
        # over 0.8 s; Crocoddyl's trot also starts on four feet), and bounds at 0.6 x its period
        # (at its own, the front pair stays down)
        gait_overrides=(
            ("trot", (("guess", "kinematic"), ("lead_in", 0.1))),
            ("bound", (("period_scale", 0.6),)),
        ),
        sources=(
            ("foot_radius", "the URDF's 0.03 m foot sphere"),
            ("kp", _SLOPE),
            ("kd", _SLOPE),
            ("gait_period", "measured: the gait library's 21 of 21"),
            ("swing_height", "measured: the gait library's 21 of 21"),
        ),  # fmt: skip
    ),
}


@dataclass(frozen=True)
class PinocchioRobot:
    """The Pinocchio side of a robot: kinematic/visual/collision models, where they came from,
    and the SRDF's standing configuration if it has one (else None)."""

    name: str
    model: object  # pinocchio.Model
    visual_model: object  # pinocchio.GeometryModel
    collision_model: object  # pinocchio.GeometryModel
    urdf_path: str
    srdf_standing: np.ndarray | None


# ----------------------------------------------------------------- example-robot-data
def _erd_loader(name: str):
    import example_robot_data.robots_loader as rl

    return rl.ROBOTS.get(name)


def _erd_files(name: str) -> tuple:
    """`(urdf, srdf or "", free_flyer)` of an example-robot-data robot, without loading it."""
    from os.path import join

    import example_robot_data.robots_loader as rl

    loader = _erd_loader(name)
    if loader is None or not loader.urdf_filename:
        return "", "", False
    rel = join(loader.path, loader.urdf_subpath, loader.urdf_filename)
    root = loader.model_path or rl.getModelPath(rel)
    srdf = (
        join(root, loader.path, loader.srdf_subpath, loader.srdf_filename)
        if loader.srdf_filename
        else ""
    )
    return (
        os.path.normpath(join(root, rel)),
        srdf and os.path.normpath(srdf),
        bool(loader.free_flyer),
    )


def _is_quadruped(pin_model) -> bool:
    """Four feet found by `robot_rules.find_feet`, every actuated joint on their legs, and
    every joint free to move (example-robot-data's `quadruped` locks its knees at 0)."""
    try:
        feet = rules.find_feet(pin_model, "")
    except rules.RobotRuleError:
        return False
    on_legs = {j for f in feet for j in rules.leg_chain(pin_model, pin_model.getFrameId(f))}
    movable = np.all(pin_model.upperPositionLimit[7:] > pin_model.lowerPositionLimit[7:])
    return on_legs == set(range(2, pin_model.njoints)) and bool(movable)


@functools.cache
def available_robots() -> tuple:
    """Names `load_robot` takes besides URDF paths: every four-footed, floating-base robot of
    example-robot-data whose actuated joints all lie on its legs."""
    import example_robot_data.robots_loader as rl
    import pinocchio as pin

    names = set(BUILT_IN)
    for name in rl.ROBOTS:
        urdf, _, free_flyer = _erd_files(name)
        if not (free_flyer and urdf and os.path.isfile(urdf)):
            continue
        try:
            model = pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer())
        except Exception:  # a URDF Pinocchio cannot parse is not loadable by name either
            continue
        if _is_quadruped(model):
            names.add(name)
    return tuple(sorted(names))


def _unknown(name: str) -> ValueError:
    return ValueError(
        f"unknown robot {name!r}. Available robots: {', '.join(available_robots())}; "
        "or pass the path of a URDF file (ending in .urdf) with a floating base."
    )


# ----------------------------------------------------------------- loading
def _source(name_or_path: str) -> str:
    """The URDF path of a robot `load_robot` loaded from one, by its model's name; else the
    argument (so a trajectory's robot name finds its URDF again)."""
    record = _LOADED.get(name_or_path)
    return record.source if record is not None and record.source.endswith(".urdf") else name_or_path


def _package_dirs(urdf_path: str) -> list:
    """Where `package://` meshes may be found: every folder above the URDF (a package
    `name/...` resolves in the folder that holds `name`) and example-robot-data's own."""
    dirs, d = [], os.path.dirname(os.path.abspath(urdf_path))
    while True:
        dirs.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    erd_urdf = _erd_files("go2")[0]
    if erd_urdf:  # .../share/example-robot-data/robots/go2_description/urdf/go2.urdf
        dirs.append(os.path.abspath(os.path.join(os.path.dirname(erd_urdf), *[".."] * 4)))
    return dirs


def _srdf_beside(urdf_path: str) -> str:
    """An SRDF for `urdf_path`: `<stem>.srdf` beside it or in `../srdf/`, else ""."""
    stem = os.path.splitext(os.path.basename(urdf_path))[0]
    folder = os.path.dirname(os.path.abspath(urdf_path))
    for candidate in (os.path.join(folder, stem + ".srdf"),
                      os.path.join(folder, "..", "srdf", stem + ".srdf")):  # fmt: skip
        if os.path.isfile(candidate):
            return os.path.normpath(candidate)
    return ""


def _read_urdf(urdf: str, srdf: str, name: str) -> PinocchioRobot:
    import pinocchio as pin

    try:
        model = pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer())
    except Exception as exc:  # Pinocchio raises plain RuntimeError/ValueError with its own text
        raise ValueError(f"could not parse URDF {urdf!r}: {exc}") from exc
    model.name = name
    try:
        dirs = _package_dirs(urdf)
        visual = pin.buildGeomFromUrdf(model, urdf, pin.GeometryType.VISUAL, package_dirs=dirs)
        collision = pin.buildGeomFromUrdf(
            model, urdf, pin.GeometryType.COLLISION, package_dirs=dirs
        )
    except Exception:  # meshes missing: dynamics still work, the viewer draws frames only
        visual = collision = pin.GeometryModel()
    standing = None
    if srdf:
        try:
            pin.loadReferenceConfigurations(model, srdf, False)
        except Exception as exc:
            raise ValueError(f"robot {name!r}: could not read SRDF {srdf!r}: {exc}") from exc
        if "standing" in model.referenceConfigurations:
            standing = np.array(model.referenceConfigurations["standing"], dtype=float)
    return PinocchioRobot(name, model, visual, collision, urdf, standing)


@functools.lru_cache(maxsize=32)
def load_pinocchio(name_or_path: str) -> PinocchioRobot:
    """A robot's Pinocchio models by example-robot-data name or URDF path (cached), with the
    rotor inertia its given record states (`Model.armature` is the same)."""
    robot = _load_pinocchio(name_or_path)
    given = _given_record(_source(os.fspath(name_or_path)), robot.name)
    if given.leg_armature:
        robot.model.armature = _armature(robot.model, given.leg_armature)
    return robot


def _load_pinocchio(name_or_path: str) -> PinocchioRobot:
    if not isinstance(name_or_path, str | os.PathLike):
        raise TypeError(f"robot must be a name or a URDF path, got {type(name_or_path).__name__}")
    name_or_path = _source(os.fspath(name_or_path))
    if name_or_path.endswith(".urdf"):
        if not os.path.isfile(name_or_path):
            raise FileNotFoundError(f"URDF file not found: {name_or_path!r}")
        stem = os.path.splitext(os.path.basename(name_or_path))[0]
        # a user's variant of a known robot must not take that robot's record: its path names it
        name = os.path.abspath(name_or_path) if stem in available_robots() else stem
        return _read_urdf(name_or_path, _srdf_beside(name_or_path), name)
    urdf, srdf, free_flyer = _erd_files(name_or_path)
    if not urdf:
        raise _unknown(name_or_path)
    if not free_flyer:
        raise ValueError(
            f"robot {name_or_path!r} has no floating base (a fixed-base robot of "
            f"example-robot-data); available robots: {', '.join(available_robots())}"
        )
    return _read_urdf(urdf, srdf, name_or_path)


# ----------------------------------------------------------------- the record
def _given_record(name_or_path: str, name: str) -> RobotRecord:
    if name_or_path.endswith(".urdf"):
        path = record_file(name_or_path)
        if os.path.isfile(path):
            return read_record_file(path, name)
        return RobotRecord(name, source=name_or_path)
    return dataclasses.replace(BUILT_IN.get(name, RobotRecord(name)), source=name_or_path)


@functools.lru_cache(maxsize=32)
def robot_record(name_or_path: str, *, foot_names: tuple | None = None,
                 foot_radius: float | None = None) -> RobotRecord:  # fmt: skip
    """The resolved `RobotRecord` of a robot: its given fields (`BUILT_IN`, or
    `<stem>.robot.toml` beside a URDF), `foot_names` / `foot_radius` if passed, and every
    other field by its rule (`dynamics.robot_rules`), each with its source.

    Raises ValueError naming the robot and the field that is missing, non-physical or that no
    rule can derive (three or five feet, unreachable standing pose, zero gains, ...)."""
    name_or_path = _source(os.fspath(name_or_path))
    robot = load_pinocchio(name_or_path)
    pm = robot.model
    given = _given_record(name_or_path, robot.name)
    changes, sources = {}, dict(given.sources)
    if foot_names is not None:
        changes["foot_names"], sources["foot_names"] = tuple(foot_names), "passed to load_robot"
    if foot_radius is not None:
        changes["foot_radius"], sources["foot_radius"] = foot_radius, "passed to load_robot"
    given = dataclasses.replace(given, **changes)
    check_record(given, resolved=False)
    if any(float(i.mass) < 0 for i in pm.inertias):
        raise ValueError(f"robot {robot.name!r}: field 'body_mass' is negative in the URDF")
    if sum(float(i.mass) for i in pm.inertias) <= 0:
        raise ValueError(f"robot {robot.name!r}: field 'body_mass': the URDF has no mass")

    def derive(field, value, source):
        if getattr(given, field) is None:
            changes[field] = value
            sources[field] = source
        return getattr(given, field) if getattr(given, field) is not None else value

    feet = given.foot_names
    if feet is None:
        feet = derive("foot_names", rules.find_feet(pm, robot.name), "rule: find_feet")
    for f in feet:
        if not pm.existFrame(f):
            raise KeyError(
                f"robot {robot.name!r}: field 'foot_names': foot frame {f!r} not found; frames: "
                + ", ".join(fr.name for fr in pm.frames)
            )
    if given.foot_radius is None:
        spheres = [rules.foot_radius_from_collision(pm, robot.collision_model, f) for f in feet]
        if all(r is not None for r in spheres):
            derive("foot_radius", max(spheres), "rule: the URDF's collision sphere on the foot")
        else:
            derive("foot_radius", DEFAULT_FOOT_RADIUS, "default: DEFAULT_FOOT_RADIUS")
    radius = changes.get("foot_radius", given.foot_radius)
    derive("leg_armature", (), "default: the URDF's rotor inertia (none)")
    derive("effort_limit", 0.0, "the URDF's")
    derive("velocity_limit", 0.0, "the URDF's")
    if given.q_standing is None:
        if robot.srdf_standing is not None:
            q, source = robot.srdf_standing.copy(), "the SRDF's 'standing' configuration"
        else:
            q = rules.computed_standing_pose(pm, tuple(feet), robot.name)
            source = "rule: computed_standing_pose"
        q[2] = rules.standing_base_height(pm, q, feet, radius)
        derive("q_standing", tuple(float(x) for x in q), source)
    q_standing = np.asarray(changes.get("q_standing", given.q_standing), dtype=float)
    height = float(q_standing[2])
    i_max, i_min, tau_g = rules.leg_load(pm, q_standing, feet)  # pm: with the rotor inertia
    kp, kd = rules.standing_gains(i_max, i_min, tau_g, height)
    derive("kp", kp, "rule: standing_gains")
    derive("kd", kd, "rule: standing_gains")
    period, swing = rules.gait_sizes(height)
    derive("gait_period", period, "rule: gait_sizes (Froude)")
    derive("swing_height", swing, "rule: gait_sizes (Froude)")
    record = dataclasses.replace(given, **changes, sources=tuple(sorted(sources.items())))
    check_record(record, resolved=True)
    if len(record.q_standing) != pm.nq:
        raise ValueError(
            f"robot {robot.name!r}: field 'q_standing' has {len(record.q_standing)} values, "
            f"the model nq = {pm.nq}"
        )
    return record


def _armature(pin_model, leg_armature: tuple) -> np.ndarray:
    """`(nv,)` rotor inertia: `leg_armature` tiled over the legs' joints, none on the base."""
    legs, rem = divmod(pin_model.nv - 6, len(leg_armature))
    if rem:
        raise ValueError(
            f"robot {pin_model.name!r}: field 'leg_armature' has {len(leg_armature)} values, "
            f"which does not divide the {pin_model.nv - 6} actuated joints"
        )
    armature = np.zeros(pin_model.nv)
    armature[6:] = np.tile(leg_armature, legs)
    return armature


@functools.lru_cache(maxsize=32)
def load_robot(
    name_or_path: str,
    *,
    foot_names: tuple | None = None,
    foot_radius: float | None = None,
) -> Model:
    """Load a robot `Model` by name (see `available_robots()`) or from a URDF path.

    Args:
        name_or_path: an example-robot-data quadruped's name ("go2", "go1", "anymal", ...) or
            the path of a `.urdf` (a free-flyer base is added; a `<stem>.robot.toml` record
            and an SRDF beside it are read).
        foot_names: foot frame names (FL, FR, HL, HR order); default: the record's, else found
            by `robot_rules.find_feet`.
        foot_radius: foot sphere radius [m]; default: the record's, else 0.02.
    Raises:
        ValueError: unknown name (the message lists available robots), a URDF that does not
            parse, or a record field that is missing or non-physical (named);
        FileNotFoundError: missing URDF; KeyError: a foot frame that does not exist.

    Cached: the same arguments return the same `Model` object, so compiled functions keyed on
    the model are reused. The standing pose puts the lowest foot sphere on z = 0.
    """
    record = robot_record(name_or_path, foot_names=foot_names, foot_radius=foot_radius)
    _LOADED[record.name] = record
    pm = load_pinocchio(name_or_path).model  # with the given record's rotor inertia
    effort = velocity = None
    if record.effort_limit:
        effort = np.array(pm.effortLimit, dtype=float)
        effort[6:] = record.effort_limit
    if record.velocity_limit:
        velocity = np.array(pm.velocityLimit, dtype=float)
        velocity[6:] = record.velocity_limit
    return model_from_pinocchio(
        pm,
        name=record.name,
        foot_names=record.foot_names,
        foot_radius=record.foot_radius,
        q_standing=np.asarray(record.q_standing, dtype=float),
        effort_limit=effort,
        velocity_limit=velocity,
    )


def record_of(model: Model) -> RobotRecord:
    """The record `load_robot` used for `model`, by the model's name (a model changed with
    `Model.replace`, e.g. randomised, keeps its name and so its record; the last robot
    loaded under a name wins)."""
    record = _LOADED.get(model.name)
    if record is None:
        raise ValueError(f"robot {model.name!r} has no record: load it with dynamics.load_robot")
    return record


def record_of_name(name_or_path: str) -> RobotRecord:
    """The record of a robot by the name of a model `load_robot` returned (a URDF-loaded
    robot's name is its stem), else by name or path, loading it."""
    if name_or_path not in _LOADED:
        load_robot(name_or_path)
    return _LOADED[name_or_path] if name_or_path in _LOADED else robot_record(name_or_path)


_LOADED: dict[str, RobotRecord] = {}  # the record of each name load_robot has returned
