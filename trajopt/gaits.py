"""Gait library: ready problems for stand, walk, trot, pace, bound, pronk and turn-in-place.

A gait is a periodic contact pattern: each foot (FL, FR, HL, HR) lifts at a phase offset within
the period and stays in swing for `(1 - duty)` of it. The pattern becomes the soft references
of `trajopt.problem` (stance flags, swing-foot clearance profile `h sin(pi s)` over the swing
fraction s); the contacts themselves come out of the optimisation through the smooth contact
model.

    >>> problem = make_problem("go2", "trot", velocity=0.5, duration=1.0)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from contact import ContactModel, StepParams, flat
from dynamics import load_robot
from dynamics.actuator import default_gains
from dynamics.configuration import State
from dynamics.robots import record_of, record_of_name

from . import problem as P


@dataclass(frozen=True)
class Gait:
    """Phase offsets `(FL, FR, HL, HR)` in [0, 1), duty factor (stance fraction) and period [s]
    relative to the robot's natural period."""

    offsets: tuple
    duty: float
    period_scale: float = 1.0
    yaw: bool = False  # turn in place: velocity argument is a yaw rate
    guess: str = "kinematic"  # the solver's default start (see trajopt.solver.initial_guess)
    # False: at t = 0 the offset-0 feet begin their swing; True: they begin their stance (a
    # pronk from rest must push off before it can fly: starting in flight it fell 7 cm)
    starts_in_stance: bool = False
    # [periods] all feet in stance before the pattern begins (the weight shift a gait needs
    # from rest when it never has more than two feet down)
    lead_in: float = 0.0
    # overrides of DEFAULT_WEIGHTS for this gait, `((term, weight), ...)`
    weights: tuple = ()


# Why these defaults (the measurements: docs/benchmark-history.md, "Gait library defaults";
# `trajopt.gait_metrics.gait_checks` scores a solve against its pattern):
# - the trot reaches a lower cost from the standing targets, while pace and bound only lift
#   their feet from the kinematic stepping guess;
# - pace and bound start with a quarter period on four feet (lifting a pair at t = 0 sinks the
#   base), and the pronk starts in stance (starting in flight, it falls);
# - the walk, pace and bound weight the contact force by 1.0 (at the default 0.05, stance feet
#   unload early and the pattern is kept only loosely);
# - the pace runs at 0.7 x the robot's period: a shorter time on one lateral pair, less roll.
LOAD_SHARING = (("contact_force", 1.0),)

GAITS = {
    "stand": Gait((0.0, 0.0, 0.0, 0.0), 1.0, guess="standing"),
    "walk": Gait((0.0, 0.5, 0.75, 0.25), 0.75, 1.6, weights=LOAD_SHARING),
    "trot": Gait((0.0, 0.5, 0.5, 0.0), 0.5, guess="standing"),
    "pace": Gait((0.0, 0.5, 0.0, 0.5), 0.5, 0.7, lead_in=0.25, weights=LOAD_SHARING),
    "bound": Gait((0.0, 0.0, 0.5, 0.5), 0.5, lead_in=0.25, weights=LOAD_SHARING),
    "pronk": Gait((0.0, 0.0, 0.0, 0.0), 0.7, 1.2, starts_in_stance=True),
    "turn": Gait((0.0, 0.5, 0.5, 0.0), 0.5, 1.0, yaw=True),
}

def gait_spec(robot: str, gait: str) -> Gait:
    """The `Gait` of `gait` for `robot`: `GAITS[gait]` with the robot record's
    `gait_overrides` applied (`dynamics.robot_record`)."""
    check_gait(gait)
    return dataclasses.replace(GAITS[gait], **record_of_name(robot).gait_override(gait))



def gait_weights(robot: str, gait: str, overrides: dict | None = None) -> dict:
    """Cost weights of a gait-library problem: `DEFAULT_WEIGHTS`, then the gait's own
    (`Gait.weights`), then `overrides`."""
    w = dict(DEFAULT_WEIGHTS)
    w.update(dict(gait_spec(robot, gait).weights))
    if overrides:
        w.update(overrides)
    return w


def traced_weights(weights: dict) -> dict:
    """`{term: weight}` as `ProblemData.weights`: float scalars as JAX arrays (traced, so a
    change of weights, e.g. of gait, reuses the compiled functions)."""
    return {k: jnp.asarray(float(v)) for k, v in weights.items()}


def default_guess(robot: str, gait: str) -> str:
    """The solver's start for a gait-library problem (see `GAITS` and the robot record's
    `gait_overrides`)."""
    return gait_spec(robot, gait).guess if gait in GAITS else "kinematic"


DEFAULT_WEIGHTS = {
    "base_linear_velocity": 20.0,
    "base_angular_velocity": 0.5,
    "base_height": 200.0,
    "base_orientation": 50.0,
    "foot_clearance": 500.0,
    "foot_slip": 5.0,
    "gait_contact": 500.0,
    "torque": 0.05,
    "torque_limits": 1e3,
    "control_rate": 1e-5,
    "joint_posture": 0.5,
    "joint_limits": 1e3,
    "contact_force": 0.05,
    "terminal_state": 50.0,
}


def check_gait(gait: str) -> None:
    """Raise `ValueError` naming the available gaits unless `gait` is one of them."""
    if gait not in GAITS:
        raise ValueError(f"unknown gait {gait!r}; available gaits: {', '.join(GAITS)}")


def available_gaits() -> tuple:
    return tuple(GAITS)


def gait_period(robot: str, gait: str) -> float:
    """The period [s] of `gait` on `robot` in the library's problems and the MPC: the robot's
    trot period (its record's `gait_period`) times the gait's `period_scale`."""
    return record_of_name(robot).gait_period * gait_spec(robot, gait).period_scale


def stance_pattern(gait: Gait, period: float, times: np.ndarray):
    """`(stance (n, 4), swing_fraction (n, 4))` at `times`: stance flags and the fraction of
    the current swing that has elapsed (0 in stance).

    Foot i's phase is `(t / period - lead_in - offset_i + s0) mod 1` with `s0 = 1 - duty` if the
    gait starts in stance, else 0; it swings while the phase is below `1 - duty`, and never
    before `t = lead_in * period`. (`trajopt.gait_clock`: the gait clock's phase is
    `(t / period) mod 1`, before the lead-in, offsets and start.)"""
    swing_len = 1.0 - gait.duty
    start = swing_len if gait.starts_in_stance else 0.0
    cycles = times[:, None] / period - gait.lead_in
    phase = (cycles - np.asarray(gait.offsets)[None, :] + start) % 1.0
    if gait.starts_in_stance:  # exactly at the stance's start, not rounded into the swing
        phase = np.where(np.isclose(phase, swing_len), swing_len, phase)
    in_swing = (phase < swing_len) if swing_len > 0 else np.zeros_like(phase, dtype=bool)
    in_swing = in_swing & (cycles >= 0.0)
    fraction = np.where(in_swing, phase / max(swing_len, 1e-9), 0.0)
    return (~in_swing).astype(float), fraction


def gait_reference(
    model,
    gait: str,
    velocity: float,
    horizon: int,
    dt: float,
    *,
    start_time: float = 0.0,
    lateral_velocity: float = 0.0,
    period: float | None = None,
    lead_in: float | None = None,
    host: bool = False,
) -> P.Reference:
    """The references of `gait` over knots `start_time + dt * (0 .. horizon)` [s]: stance flags
    and swing clearance from the gait's phase at those times (so a receding horizon keeps the
    phase), the commanded base velocity (base frame; for "turn" the yaw rate), the standing
    height and joint posture. `period` [s] and `lead_in` [periods] replace the robot's (None:
    `gait_period`, `gait_spec`). `host`: NumPy arrays rather than JAX ones (a jitted function
    or the generated C takes them as they are: an MPC cycle skips a transfer per array)."""
    spec = gait_spec(model.name, gait)
    if lead_in is not None:
        spec = dataclasses.replace(spec, lead_in=float(lead_in))
    clearance = record_of(model).swing_height
    period = gait_period(model.name, gait) if period is None else period
    times = start_time + dt * np.arange(horizon + 1)
    stance, fraction = stance_pattern(spec, period, times)
    swing_height = clearance * np.sin(np.pi * fraction) * (1.0 - stance)
    base_velocity = np.zeros((horizon + 1, 3))
    if spec.yaw:
        base_velocity[:, 2] = velocity
    else:
        base_velocity[:, 0] = velocity
        base_velocity[:, 1] = lateral_velocity
    nq_base = model.nq - model.nu
    q_joint = np.asarray(model.q_standing)[nq_base:]
    array = np.asarray if host else jnp.asarray
    return P.Reference(
        base_velocity=array(base_velocity),
        base_height=array(np.full((horizon + 1,), float(model.q_standing[2]))),
        stance=array(stance),
        swing_height=array(swing_height),
        joint_posture=array(np.tile(q_joint, (horizon + 1, 1))),
    )


def with_swing_peak(reference: P.Reference, peak: float) -> P.Reference:
    """`reference` with its swing clearance profile `swing_height (T+1, nfeet)` scaled so that
    its highest value is `peak` [m] (the profile's shape, `h sin(pi s)`, kept)."""
    profile = np.asarray(reference.swing_height, dtype=float)
    scale = peak / max(float(np.max(profile)), 1e-9)
    return dataclasses.replace(reference, swing_height=jnp.asarray(profile * scale))


def make_problem(
    robot: str = "go2",
    gait: str = "trot",
    velocity: float = 0.5,
    *,
    duration: float = 1.0,
    dt: float = 0.02,
    substeps: int = 2,
    contact: ContactModel = "smooth",
    control: str = "pd",
    num_sweeps: int = P.MAX_SWEEPS,
    contact_tolerance: float | None = P.CONTACT_TOLERANCE,
    lateral_velocity: float = 0.0,
    weights: dict | None = None,
    params: StepParams | None = None,
    initial_state: State | None = None,
    period: float | None = None,
    lead_in: float | None = None,
    derivatives: P.ProblemDerivatives = "implicit",
) -> P.Problem:
    """A gait problem for a robot.

    Args:
        robot: "solo12", "go2", "anymal_c" (or a URDF path, with generic gait sizes).
        gait: one of `available_gaits()`.
        velocity: forward speed [m/s] (for "turn": yaw rate [rad/s]).
        duration: horizon [s]; dt: knot duration [s]; substeps: simulation steps per knot.
        contact, control, num_sweeps, contact_tolerance: see `trajopt.problem.Problem`.
        weights: overrides of the gait's weights (`gait_weights`; a weight of 0 keeps the
            term, reported).
        params: contact parameters (default: flat ground, mu 0.8, `dt / substeps`, the PD's
            damping integrated implicitly in the step).
        initial_state: default: the standing pose at rest.
        period: gait period [s] (default per robot).
        lead_in: periods on all four feet before the pattern begins (default: the gait's on
            this robot, `gait_spec`).
        derivatives: "unrolled", "implicit" or "compiled" (`trajopt.problem.Problem`).
    """
    check_gait(gait)
    for name, value in (("duration", duration), ("dt", dt)):
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be positive, got {value}")
    if not np.isfinite(velocity):
        raise ValueError(f"velocity must be finite, got {velocity}")
    if lead_in is not None and not (np.isfinite(lead_in) and lead_in >= 0):
        raise ValueError(f"lead_in must be a finite number of periods >= 0, got {lead_in}")
    horizon = int(round(duration / dt))
    if horizon < 1:
        raise ValueError(f"duration {duration} s is shorter than one knot of {dt} s")
    model = load_robot(robot)
    kp, kd = default_gains(model)
    if params is None:
        params = StepParams(terrain=flat(friction=0.8), dt=dt / substeps, joint_damping=kd)
    reference = gait_reference(
        model, gait, velocity, horizon, dt, lateral_velocity=lateral_velocity, period=period,
        lead_in=lead_in,
    )
    w = gait_weights(model.name, gait, weights)
    if initial_state is None:
        initial_state = State(jnp.asarray(model.q_standing), jnp.zeros(model.nv))
    data = P.ProblemData(
        x0=P.initial_knot_state(model, initial_state),
        params=params,
        weights=traced_weights(w),
        reference=reference,
        # the PD's damping is in the step (params.joint_damping): the controller adds Kp only
        gains=jnp.asarray([kp, 0.0]),
    )
    return P.Problem(
        model=model,
        data=data,
        horizon=horizon,
        substeps=substeps,
        contact=contact,
        num_sweeps=num_sweeps,
        contact_tolerance=contact_tolerance,
        control=control,
        name=gait,
        derivatives=derivatives,
    )
