"""Proprioceptive base state estimation: a linear Kalman filter on IMU and leg kinematics.

    estimator = StateEstimator(dynamics.load_robot("go2"))
    estimate = estimator.update(measurement)     # once per IMU sample (500 Hz on a Go2)
    estimate.base_linear_velocity                # (3,) [m/s], base frame, or None

The form of MIT Cheetah-Software's `LinearKFPositionVelocityEstimator` (the orientation
comes from the IMU; position and velocity are then linear). State, all in the WORLD frame:

    x (18,) = [ p (3), v (3), c_1 .. c_4 (3 each) ]

p the base origin [m], v its velocity [m/s], c_i the contact point of foot i (the bottom of
its sphere, `foot_radius` below the foot frame) [m].

Prediction, at every IMU sample (`dt` from the timestamps: the robot's own interval, nominally
2 ms, where the backend stamps samples by the robot's clock, as `hardware.go2.robot` does; a
late or bunched delivery then changes nothing):

    a = R f + g                  f the accelerometer's specific force (base frame), R base to
                                 world (the IMU quaternion), g = (0, 0, -9.81) [m/s^2]
    p+ = p + dt v + dt^2/2 a,   v+ = v + dt a,   c_i+ = c_i          (feet: random walks)
    P+ = A P A^T + Q,   Q = dt diag(q_p I3, q_v I3, q_c s_1 I3, ..., q_c s_4 I3)

Measurements (28 rows), from leg kinematics `p_i(q), J_i(q)` in the base frame
(`hardware.leg_kinematics`), with `r_i = p_i - rho_i R^T e_z` the contact point relative to
the base and `omega` the gyro:

    p - c_i   = -R r_i                                                       (3 per foot)
    v         = -R (omega x r_i + J_lin,i qd + (J_ang,i qd) x (r_i - p_i))   (3 per foot)
                  stance: the calf's material point at the contact does not move (a rolling
                  foot sphere); weighted with the prediction of v by `1 - w_i`
    c_i,z     = h_i   (stance: the ground height; weighted with the prediction by `1 - w_i`)

with measurement variances `diag(r_p, r_v s_i, r_z s_i)` and the swing inflation
`s_i = 1 + (1 - w_i) k` for a contact weight `w_i` in [0, 1] (Cheetah's "trust" and "high
suspect number" k, `EstimatorConfig.swing_inflation`). Update, in Joseph form (P stays
symmetric positive definite):

    e = y - C x+,   S = C P+ C^T + R,   K = P+ C^T S^-1
    x = x+ + K e,   P = (I - K C) P+ (I - K C)^T + K R K^T,   NIS = e^T S^-1 e

Arithmetic (`EstimatorConfig.arithmetic`): the leg measurements, the prediction and the
correction run in C (`hardware.estimator_core`, `estimator_filter.c`: the products written for
the sparse `A` and `C`, a Cholesky factorisation of S for both the gain and the NIS) where a C
compiler is found, else in NumPy (LAPACK's `potrf` / `potrs` through `scipy.linalg.lapack`).
The arrays are small (18, 28): in NumPy an update is a few dozen calls whose Python overhead is
most of its cost, which the 500 Hz path of a deployment pays at every sample.

Contact weights (`StateEstimator.contact_weights`): from `Measurement.foot_force`
(`ForceContact`: a threshold with hysteresis, a ramp-in after touchdown, a ramp with the
force), or from the caller (a `contact_schedule(t)` callable or an explicit `(4,)` array per
update; `phase_contact_weight` turns a stance phase into one, as Cheetah does).

Lifecycle: until all four feet have been in contact (weight >= 0.5) for `startup_time`,
`valid` is False and no velocity or position is output; then the filter starts at
p = (0, 0, height from kinematics), v = 0. Faults, latched until `reset()`, give
`Estimate.fault` and no estimate: a NaN/inf in the inputs or in the filter state; all joint
positions bit-identical for `frozen_encoder_samples` samples while the robot is ACTIVE, a
foot is loaded and the IMU's readings change (a frozen encoder bus); a gap between samples
longer than the gap bound once started (before, it only restarts the `startup_time` wait); the
NIS above its chi-square gate for `divergence_updates` consecutive updates.

The gap bound (`EstimatorConfig.gap_bound`). Across a gap the prediction holds the last
accelerometer sample; a walking base's acceleration stays within about g of any earlier
sample (vertical: stance pushes between 0 and 2 g; horizontal: friction, mu <= 1), so after
`dt` the predicted velocity may be off by up to `g dt`. Once that exceeds the leg-velocity
measurement's standard deviation `sqrt(foot_velocity_var)`, the correction can no longer
tell a wrong prediction from a slipping foot, and the filter's velocity is a guess:

    gap_bound = sqrt(foot_velocity_var) / g        (0.032 s with the defaults: 16 samples)

With samples stamped by the robot's clock a gap means samples lost (the link, the robot),
not a busy computer: a reader queue that outlasts the process's stalls loses none.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg.lapack
import scipy.stats

from dynamics.model import Model
from native import c_library

from . import estimator_core
from .estimator_core import NFEET, NX, NY  # feet, state size, measurement size
from .interface import GRAVITY, Measurement, RobotMode, rotation_from_quat
from .leg_kinematics import kinematic_tree, leg_kinematics, resolved_backend

POTRF, POTRS = scipy.linalg.lapack.dpotrf, scipy.linalg.lapack.dpotrs  # Cholesky, its solve


@dataclass(frozen=True)
class EstimatorConfig:
    """Noise model, contact detection, start-up and fault thresholds of the estimator.

    Process noise spectral densities (variance per second): position_process [m^2/s],
    velocity_process [m^2/s^3], foot_process [m^2/s]. Measurement variances:
    foot_position_var [m^2] (p - c_i), foot_velocity_var [m^2/s^2] (v),
    foot_height_var [m^2] (c_i,z). swing_inflation: k in `s_i = 1 + (1 - w_i) k`.
    The defaults are Cheetah-Software's tuning (its `dt`-scaled Q0 blocks and R0 scales).

    ground: "flat" (stance contact points at height 0) or "touchdown" (at the height the
        filter had for them when they touched down: steps, slopes).
    contact_on [N], contact_off [N]: foot-force hysteresis (in contact from `>= contact_on`
        until `< contact_off`); full_contact_force [N]: weight 1 from this force on;
        contact_ramp [s]: the weight's ramp-in after touchdown; a foot that was out of contact
        for less than contact_rearm [s] (a sliding foot's force chatters) does not ramp in
        again.
    startup_time [s]: all four feet in contact this long before the filter starts.
    frozen_encoder_samples: that many consecutive bit-identical joint position vectors
        (robot ACTIVE, a foot in contact, IMU readings changing) is a fault.
    max_dt [s] or None: a larger gap between samples is a fault once the filter has started;
        None: `gap_bound`, derived in the module docstring.
    nis_gate_probability: the NIS gate is the chi-square quantile of this probability with
        `NY` degrees of freedom; divergence_updates consecutive NIS above it is a fault.
    kinematics: the `hardware.leg_kinematics` backend ("auto": C where a compiler is found).
    arithmetic: "c" (`hardware.estimator_core`, the filter steps compiled), "numpy", or "auto"
        (C where a C compiler is found, else NumPy): the same equations either way.
    """

    position_process: float = 0.02 / 20.0
    velocity_process: float = 0.02 * 9.8 / 20.0
    foot_process: float = 0.002
    foot_position_var: float = 0.001
    foot_velocity_var: float = 0.1
    foot_height_var: float = 0.001
    swing_inflation: float = 100.0
    ground: str = "flat"
    contact_on: float = 20.0
    contact_off: float = 10.0
    full_contact_force: float = 30.0
    contact_ramp: float = 0.02
    contact_rearm: float = 0.05
    startup_time: float = 0.1
    frozen_encoder_samples: int = 50
    max_dt: float | None = None
    nis_gate_probability: float = 0.9999
    divergence_updates: int = 25
    kinematics: str = "auto"
    arithmetic: str = "auto"

    def __post_init__(self):
        c_library.check_arithmetic(self.arithmetic)
        if self.ground not in ("flat", "touchdown"):
            raise ValueError(f"ground must be 'flat' or 'touchdown', got {self.ground!r}")
        if not (0.0 <= self.contact_off <= self.contact_on <= self.full_contact_force
                and self.full_contact_force > 0.0):  # fmt: skip
            raise ValueError(
                "need 0 <= contact_off <= contact_on <= full_contact_force, full_contact_force "
                "> 0 [N], got "
                f"{self.contact_off}, {self.contact_on}, {self.full_contact_force}"
            )
        if not 0.0 < self.nis_gate_probability < 1.0:
            raise ValueError(f"nis_gate_probability must be in (0, 1), got "
                             f"{self.nis_gate_probability}")  # fmt: skip
        for name in ("frozen_encoder_samples", "divergence_updates"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_dt is not None and not self.max_dt > 0.0:
            raise ValueError(f"max_dt must be > 0 [s] or None, got {self.max_dt!r}")

    @property
    def gap_bound(self) -> float:
        """[s] the longest gap between samples that is not a fault (module docstring)."""
        if self.max_dt is not None:
            return float(self.max_dt)
        return float(np.sqrt(self.foot_velocity_var) / GRAVITY)


@dataclass(frozen=True, eq=False)
class Estimate:
    """The estimator's output for one measurement.

    timestamp [s]: the measurement's.
    valid: the filter has started and no fault is latched.
    fault: why there is no estimate (latched until `reset`), or None.
    base_linear_velocity (3,) [m/s]: base origin velocity in the BASE frame, or None.
    base_position (3,) [m]: base origin in the world (x, y: drift from the start; z: height
        above the ground), or None.
    base_height [m]: base origin above the stance contact points (contact-weighted mean of
        `-(R r_i)_z`), or None.
    contact_weights (4,): the weights the update used (model foot order).
    innovation (28,): `e = y - C x+` (foot i's rows `3i:3i+3` relative position,
        `12+3i:15+3i` velocity, `24+i` height), or None.
    nis: `e^T S^-1 e` (NaN without an update).
    foot_nis (4,): each foot's own 7 rows, `e_i^T S_ii^-1 e_i` (NaN without an update).
    """

    timestamp: float
    valid: bool
    fault: str | None = None
    base_linear_velocity: np.ndarray | None = None
    base_position: np.ndarray | None = None
    base_height: float | None = None
    contact_weights: np.ndarray = field(default_factory=lambda: np.zeros(NFEET))
    innovation: np.ndarray | None = None
    nis: float = float("nan")
    foot_nis: np.ndarray = field(default_factory=lambda: np.full(NFEET, np.nan))


# --------------------------------------------------------------------------- contact
def phase_contact_weight(phase, trust_window: float = 0.2) -> np.ndarray:
    """Cheetah's trust `(4,)` from the stance phase `phase (4,)` (progress through the
    stance in [0, 1]; outside: swing): `phase / window` over the first `window`,
    `(1 - phase) / window` over the last, 1 between, 0 in swing."""
    phase = np.asarray(phase, dtype=float)
    if not 0.0 < trust_window <= 0.5:
        raise ValueError(f"trust_window must be in (0, 0.5], got {trust_window}")
    stance = (phase >= 0.0) & (phase <= 1.0)
    ramp = np.minimum(np.minimum(phase, 1.0 - phase) / trust_window, 1.0)
    return np.where(stance, np.clip(ramp, 0.0, 1.0), 0.0)


class ForceContact:
    """Contact weights from foot forces `F (4,)` [N]: contact by hysteresis (`contact_on`,
    `contact_off`), then `w = min(1, time since touchdown / contact_ramp) *
    clip(F / full_contact_force, 0, 1)`, 0 out of contact. A touchdown less than
    `contact_rearm` after the lift-off keeps the earlier touchdown time. With `core` (a
    `hardware.estimator_core.CompiledFilter`) its hysteresis state is bound to the core, whose
    `measure` runs the same arithmetic in C on it."""

    def __init__(self, config: EstimatorConfig, core=None):
        self.config, self.core = config, core
        self.in_contact = np.zeros(NFEET, dtype=bool)
        self.touchdown_time, self.liftoff_time = np.zeros(NFEET), np.zeros(NFEET)
        if core is not None:
            core.bind_contact(estimator_core.contact_row(config), self.in_contact,
                              self.touchdown_time, self.liftoff_time)  # fmt: skip
        self.reset()

    def reset(self) -> None:
        self.in_contact[:] = False
        self.touchdown_time[:] = np.inf
        self.liftoff_time[:] = -np.inf

    def __call__(self, foot_force, timestamp: float) -> np.ndarray:
        cfg, f = self.config, np.asarray(foot_force, dtype=float)
        if f.shape != (NFEET,):
            raise ValueError(f"foot_force must have shape ({NFEET},), got {f.shape}")
        on = np.where(self.in_contact, f >= cfg.contact_off, f >= cfg.contact_on)
        rearmed = timestamp - self.liftoff_time >= cfg.contact_rearm
        touchdown = on & ~self.in_contact & rearmed
        self.touchdown_time[:] = np.where(touchdown, timestamp, self.touchdown_time)
        self.liftoff_time[:] = np.where(~on & self.in_contact, timestamp, self.liftoff_time)
        self.in_contact[:] = on
        since = np.maximum(timestamp - self.touchdown_time, 0.0)
        ramp = np.minimum(since / cfg.contact_ramp, 1.0) if cfg.contact_ramp > 0 else 1.0
        weight = ramp * np.clip(f / cfg.full_contact_force, 0.0, 1.0)
        return np.where(on, np.clip(weight, 0.0, 1.0), 0.0)


# --------------------------------------------------------------------------- the filter
def measurement_matrix() -> np.ndarray:
    """`C (28, 18)`: rows `p - c_i` (12), then `v` (four times, 12), then `c_i,z` (4)."""
    c = np.zeros((NY, NX))
    for i in range(NFEET):
        c[3 * i : 3 * i + 3, 0:3] = np.eye(3)
        c[3 * i : 3 * i + 3, 6 + 3 * i : 9 + 3 * i] = -np.eye(3)
        c[12 + 3 * i : 15 + 3 * i, 3:6] = np.eye(3)
        c[24 + i, 8 + 3 * i] = 1.0
    return c


def transition_matrix(dt: float) -> np.ndarray:
    """`A (18, 18)`: `p += dt v`, the rest kept."""
    a = np.eye(NX)
    a[0:3, 3:6] = dt * np.eye(3)
    return a


def foot_rows(i: int) -> np.ndarray:
    """Indices of foot `i`'s 7 measurement rows."""
    return np.r_[3 * i : 3 * i + 3, 12 + 3 * i : 15 + 3 * i, 24 + i]


FOOT_ROWS = np.stack([foot_rows(i) for i in range(NFEET)])  # (4, 7)


def cross(a, b) -> np.ndarray:
    """`a x b` along the last axis of broadcastable `(..., 3)` arrays (`np.cross`, without
    its axis handling: this is on the estimator's 500 Hz path)."""
    a, b = np.broadcast_arrays(a, b)
    out = np.empty(a.shape)
    out[..., 0] = a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]
    out[..., 1] = a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2]
    out[..., 2] = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return out


def leg_measurements(rotation, gyro, foot_positions, jacobians, joint_qd, foot_radius):
    """Per foot, in the WORLD frame: the contact point relative to the base, `R r_i (4, 3)`,
    and the base velocity that a still contact point implies, `-R (omega x r_i + J_lin qd +
    (J_ang qd) x (r_i - p_i)) (4, 3)` (module docstring). Inputs: `rotation (3, 3)` base to
    world, `gyro (3,)` [rad/s] base frame, `foot_positions (4, 3)` and `jacobians (4, 6, nu)`
    in the base frame, `joint_qd (nu,)`, `foot_radius (4,)` [m]."""
    down = -rotation[2, :]  # world -z in the base frame
    offset = np.asarray(foot_radius, dtype=float)[:, None] * down[None, :]  # r_i - p_i
    contact = foot_positions + offset
    lin = jacobians[:, 0:3, :] @ joint_qd
    ang = jacobians[:, 3:6, :] @ joint_qd
    relative_velocity = cross(gyro, contact) + lin + cross(ang, offset)
    return contact @ rotation.T, -relative_velocity @ rotation.T


def nonfinite_input(measurement: Measurement, use_force: bool) -> str | None:
    """The name of the first estimator input with a NaN/inf (or a zero quaternion), or None."""
    m = measurement
    if not np.isfinite(m.timestamp):
        return "timestamp"
    names = ["base_quat", "base_angular_velocity", "base_linear_acceleration", "joint_q",
             "joint_qd"] + (["foot_force"] if use_force else [])  # fmt: skip
    values = np.concatenate([getattr(m, name) for name in names])  # (n,) each
    if np.isfinite(values).all() and values[:4] @ values[:4] >= 0.25:
        return None
    for name in names:
        if not np.all(np.isfinite(getattr(m, name))):
            return name
    if np.linalg.norm(m.base_quat) < 0.5:
        return "base_quat"
    return None


class StateEstimator:
    """The linear Kalman filter of the module docstring, one `update` per measurement.

    Args:
        model: the robot (`dynamics.Model` with a floating base and four feet).
        config: `EstimatorConfig`.
        contact_schedule: `t [s] -> (4,)` contact weights, `t` the measurement's timestamp;
            None: from `Measurement.foot_force` (or an explicit `contact` to `update`).
        kinematics: `kinematics(q_joints (nu,)) -> (p (4, 3), J (4, 6, nu))` in the base
            frame; None: `hardware.leg_kinematics.leg_kinematics(model, config.kinematics)`,
            or with the compiled arithmetic and the "c" backend, the same C inside its call.
    """

    def __init__(
        self,
        model: Model,
        config: EstimatorConfig | None = None,
        *,
        contact_schedule: Callable | None = None,
        kinematics: Callable | None = None,
    ):
        if model.nfeet != NFEET:
            raise ValueError(f"the estimator needs {NFEET} feet, {model.name} has "
                             f"{model.nfeet}")  # fmt: skip
        self.model = model
        self.config = cfg = config or EstimatorConfig()
        self.contact_schedule = contact_schedule
        self.foot_radius = np.asarray(model.foot_radius, dtype=float)
        self.C = measurement_matrix()
        self.nis_gate = float(scipy.stats.chi2.ppf(cfg.nis_gate_probability, NY))
        self.core = None
        # the compiled arithmetic runs the C kinematics inside its own call (`kinematics` None
        # here) unless the caller gives a callable or asks for another backend
        own = kinematics is None and resolved_backend(cfg.kinematics) == "c"
        if c_library.compiled_arithmetic(cfg.arithmetic):
            row = estimator_core.config_row(cfg, cfg.ground == "touchdown")
            tree = kinematic_tree(model) if own else None
            self.core = estimator_core.CompiledFilter(row, model.nu, self.foot_radius, tree)
        own = own and self.core is not None
        self.kinematics = kinematics or (None if own else leg_kinematics(model, cfg.kinematics))
        self.x, self.P, self.ground_height = np.zeros(NX), np.eye(NX), np.zeros(NFEET)
        if self.core is not None:
            self.core.bind_state(self.x, self.P, self.ground_height)
        self.force_contact = ForceContact(cfg, self.core)
        self.reset()

    def reset(self) -> None:
        """Forget everything: not started, no fault."""
        self.x[:] = 0.0
        self.P[:] = np.eye(NX)
        self.initialised = False
        self.fault: str | None = None
        self.last_timestamp: float | None = None
        self.all_down_since: float | None = None
        self.last_joint_q: np.ndarray | None = None
        self.last_imu: np.ndarray | None = None
        if self.core is not None:
            self.core.forget_last_sample()
        self.frozen_count = 0
        self.over_gate = 0
        self.was_down = np.zeros(NFEET, dtype=bool)
        self.ground_height[:] = 0.0
        self.force_contact.reset()
        self.estimate = Estimate(timestamp=float("nan"), valid=False)

    # ------------------------------------------------------------- per measurement
    def contact_weights(self, m: Measurement, contact=None) -> np.ndarray:
        """`(4,)` weights in [0, 1]: `contact` if given, else the schedule, else the forces."""
        if contact is None and self.contact_schedule is not None:
            contact = self.contact_schedule(m.timestamp)
        if contact is not None:
            w = np.asarray(contact, dtype=float)
            if w.shape != (NFEET,) or not np.all(np.isfinite(w)):
                raise ValueError(f"contact weights must be finite with shape ({NFEET},), got "
                                 f"{w!r}")  # fmt: skip
            return np.clip(w, 0.0, 1.0)
        if m.foot_force is None:
            raise ValueError(
                "the measurement has no foot_force: give the estimator a contact_schedule "
                "or pass contact weights to update()"
            )
        return self.force_contact(m.foot_force, m.timestamp)

    def _fail(self, timestamp: float, fault: str) -> Estimate:
        self.fault = self.fault or fault
        self.estimate = Estimate(timestamp=timestamp, valid=False, fault=self.fault)
        return self.estimate

    def _encoders_alive(self, same_joints: bool, same_imu: bool, mode, loaded: bool) -> bool:
        """False once the joint positions have been bit-identical (`same_joints` as the sample
        before) for `frozen_encoder_samples` consecutive samples while the robot is ACTIVE
        (`mode`), a foot is `loaded` and the IMU readings change (not `same_imu`; a noiseless
        simulator repeats the joints of legs in the air exactly)."""
        if not same_joints:
            self.frozen_count = 0
        elif mode == RobotMode.ACTIVE and loaded and not same_imu:
            self.frozen_count += 1  # the IMU lives on while the joints do not
        return self.frozen_count + 1 < self.config.frozen_encoder_samples

    def _not_started(self, t: float, weights: np.ndarray) -> Estimate:
        self.estimate = Estimate(timestamp=t, valid=False, contact_weights=weights)
        return self.estimate

    def update(self, measurement: Measurement, contact=None) -> Estimate:
        """Run the filter on `measurement` (module docstring); `contact (4,)` overrides the
        contact weights. Returns the `Estimate` (also kept in `self.estimate`). A sample no
        newer than the last one changes nothing and returns the last estimate."""
        m, cfg = measurement, self.config
        t = float(m.timestamp)
        if self.fault is not None:
            return self._fail(t, self.fault)
        if not math.isfinite(t):
            return self._fail(t, "non-finite input: timestamp")
        use_force = contact is None and self.contact_schedule is None and m.foot_force is not None
        measure = self._measure_numpy if self.core is None else self._measure_compiled
        measured = measure(m, t, use_force)
        if measured is None:
            return self.estimate  # not newer than the last sample
        if isinstance(measured, str):
            return self._fail(t, f"non-finite input: {measured}")
        rotation, rel, v_leg, acceleration, weights, same_joints, same_imu = measured
        if weights is None:
            weights = self.contact_weights(m, contact)
        loaded = bool((weights >= 0.5).any())
        if not self._encoders_alive(same_joints, same_imu, m.robot_mode, loaded):
            return self._fail(t, f"frozen encoders: joint positions bit-identical for "
                                 f"{cfg.frozen_encoder_samples} samples")  # fmt: skip
        dt = None if self.last_timestamp is None else t - self.last_timestamp
        self.last_timestamp = t
        if dt is not None and dt > cfg.gap_bound and not self.initialised:
            self.all_down_since = None  # nothing to integrate yet: wait `startup_time` again
            return self._not_started(t, weights)
        if dt is not None and dt > cfg.gap_bound:
            return self._fail(t, f"gap of {dt * 1e3:.1f} ms between samples "
                                 f"(bound {cfg.gap_bound * 1e3:.1f} ms)")  # fmt: skip
        down = weights >= 0.5
        if not self.initialised:
            if not down.all():
                self.all_down_since = None
                return self._not_started(t, weights)
            if self.all_down_since is None:
                self.all_down_since = t
            if t - self.all_down_since < cfg.startup_time - 1e-9:
                return self._not_started(t, weights)
            self._initialise(rel)
            self.was_down = down
            return self._output(t, rotation, rel, weights, None, float("nan"),
                                np.full(NFEET, np.nan))  # fmt: skip
        if self.core is None:
            self._predict(dt, acceleration, weights)
            self._touchdowns(down)
            innovation, nis, foot_nis = self._correct(rel, v_leg, weights)
            finite = np.isfinite(self.x).all() and np.isfinite(self.P).all()
        else:
            innovation, nis, foot_nis, info = self._compiled_step(dt, weights, down)
            finite = info == 0
        if not finite:
            return self._fail(t, "non-finite filter state")
        self.over_gate = self.over_gate + 1 if nis > self.nis_gate else 0
        if self.over_gate >= cfg.divergence_updates:
            return self._fail(t, f"diverged: NIS above the gate {self.nis_gate:.1f} for "
                                 f"{self.over_gate} updates")  # fmt: skip
        return self._output(t, rotation, rel, weights, innovation, nis, foot_nis)

    def _measure_numpy(self, m: Measurement, t: float, use_force: bool):
        """The sample's inputs checked and turned into the filter's (module docstring): the
        name of the first non-finite input; None for a sample no newer than the last (nothing
        changed); else `(R (3, 3), rel (4, 3), v_leg (4, 3), a (3,), weights (4,) from the
        forces (None without use_force), same_joints, same_imu)`, the last two: bit-identical
        to the sample before."""
        bad = nonfinite_input(m, use_force)
        if bad is not None:
            return bad
        if self.last_timestamp is not None and t <= self.last_timestamp:
            return None
        weights = self.force_contact(m.foot_force, t) if use_force else None
        q = np.asarray(m.joint_q, dtype=float)
        imu = np.concatenate([m.base_angular_velocity, m.base_linear_acceleration])
        same_joints = self.last_joint_q is not None and np.array_equal(q, self.last_joint_q)
        same_imu = self.last_imu is not None and np.array_equal(imu, self.last_imu)
        self.last_joint_q, self.last_imu = q.copy(), imu
        rotation = rotation_from_quat(m.base_quat)
        p_foot, jac = self.kinematics(q)
        gyro, joint_qd = np.asarray(m.base_angular_velocity, float), np.asarray(m.joint_qd, float)
        rel, v_leg = leg_measurements(rotation, gyro, p_foot, jac, joint_qd, self.foot_radius)
        specific_force = np.asarray(m.base_linear_acceleration, dtype=float)
        acceleration = rotation @ specific_force + np.array([0.0, 0.0, -GRAVITY])
        return rotation, rel, v_leg, acceleration, weights, same_joints, same_imu

    def _measure_compiled(self, m: Measurement, t: float, use_force: bool):
        """`_measure_numpy` in one C call (`estimator_core.CompiledFilter.measure`); the
        arrays returned are the core's buffers, valid until its next call."""
        core = self.core
        core.quat[...], core.gyro[...] = m.base_quat, m.base_angular_velocity
        core.specific_force[...] = m.base_linear_acceleration
        core.joint_q[...], core.joint_qd[...] = m.joint_q, m.joint_qd
        if use_force:
            core.force[...] = m.foot_force
        if not core.own_kinematics:  # a kinematics callable of the caller's
            core.positions[...], core.jacobians[...] = self.kinematics(core.joint_q.copy())
        last = math.nan if self.last_timestamp is None else self.last_timestamp
        code = core.measure(t, last, use_force, GRAVITY)
        if code == estimator_core.STALE:
            return None
        if code != estimator_core.MEASURED:
            return estimator_core.BAD_INPUT[code]
        weights = core.contact_weights.copy() if use_force else None
        return (core.rotation, core.rel, core.v_leg, core.acceleration, weights,
                core.same_joints, core.same_imu)  # fmt: skip

    # ------------------------------------------------------------- filter steps
    def _initialise(self, rel: np.ndarray) -> None:
        """p = (0, 0, mean height of the base above the contact points), v = 0, c_i below."""
        self.x[:] = 0.0
        self.x[2] = float(np.mean(-rel[:, 2]))
        self.x[6:] = (self.x[0:3][None, :] + rel).ravel()
        self.P[:] = np.diag(np.r_[np.full(3, 1e-6), np.full(3, 1e-4), np.full(12, 1e-6)])
        self.ground_height[:] = 0.0
        self.initialised = True
        self.over_gate = 0

    def _predict(self, dt: float, acceleration: np.ndarray, weights: np.ndarray) -> None:
        cfg, x = self.config, self.x
        x[0:3] += dt * x[3:6] + 0.5 * dt * dt * acceleration
        x[3:6] += dt * acceleration
        a = transition_matrix(dt)
        inflation = 1.0 + (1.0 - weights) * cfg.swing_inflation
        q = np.empty(NX)
        q[0:3], q[3:6] = cfg.position_process, cfg.velocity_process
        q[6:] = np.repeat(cfg.foot_process * inflation, 3)
        p = a @ self.P @ a.T
        p[np.diag_indices(NX)] += dt * q
        self.P[:] = p

    def _compiled_step(self, dt, weights, down):
        """`_predict`, `_touchdowns` and `_correct` in C (`hardware.estimator_core`) on the
        core's `acceleration`, `rel` and `v_leg` (from its `measure`); returns the innovation,
        NIS, per-foot NIS and the filter's result (0: finite)."""
        core = self.core
        core.weights[...], core.down[...], core.was_down[...] = weights, down, self.was_down
        info = core.filter(dt)
        self.was_down = down
        return core.innovation.copy(), float(core.nis[0]), core.foot_nis.copy(), info

    def _touchdowns(self, down: np.ndarray) -> None:
        """With `ground="touchdown"`, a foot's ground height is its height at touchdown."""
        if self.config.ground == "touchdown":
            new = down & ~self.was_down
            self.ground_height[:] = np.where(new, self.x[8::3], self.ground_height)
        self.was_down = down

    def _correct(self, rel, v_leg, weights):
        cfg, x = self.config, self.x
        inflation = 1.0 + (1.0 - weights) * cfg.swing_inflation
        y_v = (1.0 - weights)[:, None] * x[3:6][None, :] + weights[:, None] * v_leg
        z_kinematic = x[2] + rel[:, 2]  # where kinematics puts each contact point
        y_z = weights * self.ground_height + (1.0 - weights) * z_kinematic
        y = np.concatenate([-rel.ravel(), y_v.ravel(), y_z])
        r = np.empty(NY)
        r[0:12] = cfg.foot_position_var
        r[12:24] = np.repeat(cfg.foot_velocity_var * inflation, 3)
        r[24:28] = cfg.foot_height_var * inflation
        c, p = self.C, self.P
        innovation = y - c @ x
        pct = p @ c.T
        s = c @ pct
        s[np.diag_indices(NY)] += r
        factor, info = POTRF(s, lower=1, clean=0)
        if info != 0:  # S not positive definite, P is broken: a non-finite state (a fault)
            self.x[:] = np.nan
            return innovation, float("nan"), np.full(NFEET, np.nan)
        rhs = np.empty((NY, NX + 1))
        rhs[:, :NX], rhs[:, NX] = pct.T, innovation
        solved, _ = POTRS(factor, rhs, lower=1)  # S^-1 [C P, e]
        gain, s_inv_e = solved[:, :NX].T, solved[:, NX]  # P C^T S^-1
        self.x[:] = x + gain @ innovation
        ikc = np.eye(NX) - gain @ c
        p_new = ikc @ p @ ikc.T + (gain * r) @ gain.T
        self.P[:] = 0.5 * (p_new + p_new.T)
        e_feet = innovation[FOOT_ROWS]  # (4, 7)
        s_feet = s[FOOT_ROWS[:, :, None], FOOT_ROWS[:, None, :]]  # (4, 7, 7)
        foot_nis = np.einsum("fi,fi->f", e_feet, np.linalg.solve(s_feet, e_feet[..., None])[..., 0])
        return innovation, float(innovation @ s_inv_e), foot_nis

    def _output(self, t, rotation, rel, weights, innovation, nis, foot_nis) -> Estimate:
        x, total = self.x, float(np.sum(weights))
        height = float(np.sum(weights * -rel[:, 2]) / total) if total > 1e-9 else None
        self.estimate = Estimate(
            timestamp=t,
            valid=True,
            base_linear_velocity=rotation.T @ x[3:6],
            base_position=x[0:3].copy(),
            base_height=height,
            contact_weights=weights,
            innovation=innovation,
            nis=nis,
            foot_nis=foot_nis,
        )
        return self.estimate

    @property
    def world_velocity(self) -> np.ndarray:
        """`v (3,)` [m/s], world frame (the state's)."""
        return self.x[3:6].copy()

    @property
    def contact_points(self) -> np.ndarray:
        """`c (4, 3)` [m], world frame (the state's)."""
        return self.x[6:].reshape(NFEET, 3).copy()
