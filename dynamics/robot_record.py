"""`RobotRecord`: everything the toolkit knows about one robot beyond its URDF, in one place.

A record is either given (a built-in entry of `dynamics.robots`, or a TOML file a user writes
next to their URDF, `<urdf stem>.robot.toml`) or resolved: `dynamics.robot_record(name)` fills
each field the given record leaves as None by its rule (`dynamics.robot_rules`) and says where
every field came from in `sources`.

A user's file, e.g. `my_dog.robot.toml` beside `my_dog.urdf` (every key optional)::

    foot_names = ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]
    foot_radius = 0.02            # [m]
    kp = 60.0                     # [N m / rad] standing joint PD
    kd = 1.5                      # [N m s / rad]
    leg_armature = [0.01, 0.01, 0.03]   # [kg m^2] reflected rotor inertia per joint of a leg
    effort_limit = 30.0           # [N m] per actuated joint, overrides the URDF
    velocity_limit = 20.0         # [rad/s]
    gait_period = 0.4             # [s] the robot's trot period
    swing_height = 0.07           # [m]
    [sources]
    leg_armature = "motor datasheet, rotor 1.2e-4 kg m^2 x gear 9.1^2"
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass

import numpy as np

# Fields a gait may override per robot (`trajopt.gaits.Gait`)
GAIT_OVERRIDE_FIELDS = ("period_scale", "guess", "duty", "lead_in")


@dataclass(frozen=True)
class RobotRecord:
    """One robot. None means "derive by rule" in a given record; a resolved record has none.

    name: the robot's name (an example-robot-data name, or the URDF's stem).
    source: the example-robot-data loader name, or the URDF path.
    foot_names: `(4,)` foot frames, FL, FR, HL, HR.
    foot_radius: foot sphere radius [m].
    q_standing: `(nq,)` standing configuration, Pinocchio's convention, the lowest foot
        sphere on z = 0.
    kp, kd: the standing joint PD gains [N m/rad], [N m s/rad] (scalar over the joints).
    leg_armature: `(joints of a leg,)` reflected rotor inertia [kg m^2], or () for none.
    effort_limit, velocity_limit: per actuated joint [N m], [rad/s]; 0 keeps the URDF's.
    gait_period: the robot's trot period [s]; a gait's period is this times its
        `period_scale`.
    swing_height: swing-foot clearance [m].
    gait_overrides: `((gait, ((field, value), ...)), ...)`: where a gait differs on this robot.
    sources: `((field, where it came from), ...)`.
    """

    name: str
    source: str = ""
    foot_names: tuple | None = None
    foot_radius: float | None = None
    q_standing: tuple | None = None
    kp: float | None = None
    kd: float | None = None
    leg_armature: tuple | None = None
    effort_limit: float | None = None
    velocity_limit: float | None = None
    gait_period: float | None = None
    swing_height: float | None = None
    gait_overrides: tuple = ()
    sources: tuple = ()

    def source_of(self, field: str) -> str:
        """Where `field` came from (a datasheet, the SRDF, a rule), or "" if not said."""
        return dict(self.sources).get(field, "")

    def gait_override(self, gait: str) -> dict:
        """`{field: value}` this robot changes in `gait`'s library entry."""
        return dict(dict(self.gait_overrides).get(gait, ()))


POSITIVE_FIELDS = ("foot_radius", "kp", "kd", "gait_period", "swing_height")
NONNEGATIVE_FIELDS = ("effort_limit", "velocity_limit")


def check_record(record: RobotRecord, *, resolved: bool) -> None:
    """Raise `ValueError` naming the robot and the field for a missing (when `resolved`),
    non-finite or non-physical value."""

    def bad(field, why):
        return ValueError(f"robot {record.name!r}: field {field!r} {why}")

    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if value is None:
            if resolved:
                raise bad(f.name, "is missing and no rule derived it")
            continue
        if f.name in POSITIVE_FIELDS + NONNEGATIVE_FIELDS:
            if not isinstance(value, int | float | np.floating | np.integer) or not np.isfinite(
                value
            ):
                raise bad(f.name, f"must be a finite number, got {value!r}")
            if f.name in POSITIVE_FIELDS and value <= 0:
                raise bad(f.name, f"must be positive, got {value!r}")
            if value < 0:
                raise bad(f.name, f"must be >= 0, got {value!r}")
    if record.leg_armature is not None:
        a = np.asarray(record.leg_armature, dtype=float)
        if a.ndim != 1 or not np.all(np.isfinite(a)) or np.any(a < 0):
            raise bad("leg_armature", f"must be finite values >= 0, got {record.leg_armature!r}")
    if record.foot_names is not None and len(record.foot_names) != 4:
        raise bad("foot_names", f"must name four feet (FL, FR, HL, HR), got {record.foot_names}")
    if record.q_standing is not None and not np.all(np.isfinite(record.q_standing)):
        raise bad("q_standing", "must be finite")
    for gait, changes in record.gait_overrides:
        for field, _ in changes:
            if field not in GAIT_OVERRIDE_FIELDS:
                raise bad("gait_overrides", f"{gait!r} changes {field!r}; allowed: "
                          + ", ".join(GAIT_OVERRIDE_FIELDS))  # fmt: skip


TOML_FIELDS = (
    "foot_names", "foot_radius", "kp", "kd", "leg_armature", "effort_limit", "velocity_limit",
    "gait_period", "swing_height",
)  # fmt: skip


def record_file(urdf_path: str) -> str:
    """The record file a user may write beside `urdf_path`: `<stem>.robot.toml`."""
    return os.path.splitext(os.fspath(urdf_path))[0] + ".robot.toml"


def read_record_file(path: str, name: str) -> RobotRecord:
    """A given `RobotRecord` from a TOML file (module docstring); unknown keys are errors."""
    with open(path, "rb") as f:
        try:
            data = tomllib.load(f)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(
                f"robot {name!r}: record file {path!r} is not valid TOML: {exc}"
            ) from exc
    sources = dict(data.pop("sources", {}))
    unknown = sorted(set(data) - set(TOML_FIELDS))
    if unknown:
        raise ValueError(
            f"robot {name!r}: record file {path!r} has unknown fields {unknown}; "
            f"known: {', '.join(TOML_FIELDS)}"
        )
    values = {}
    for key, value in data.items():
        values[key] = tuple(value) if isinstance(value, list) else value
        sources.setdefault(key, f"given in {os.path.basename(path)}")
    record = RobotRecord(name=name, source=path, sources=tuple(sorted(sources.items())), **values)
    check_record(record, resolved=False)
    return record
