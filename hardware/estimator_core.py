"""The state estimator's per-sample arithmetic in C (`estimator_filter.c`), called on NumPy
buffers: the check of a sample's inputs, the contact weights, the leg kinematics and
measurements, then the prediction, the touchdown heights and the Joseph-form correction of
`hardware.estimator` (whose module docstring has the equations).

    core = CompiledFilter(config_row(config, False), nu, foot_radius, tree)  # built, then found
    core.bind_state(x, P, ground)              # (18,), (18, 18), (4,): changed in place
    core.bind_contact(contact_row(config), in_contact, touchdown_time, liftoff_time)
    core.quat[...] = m.base_quat; ...          # copy the sample's inputs into its buffers
    code = core.measure(t, last_t, use_force)  # MEASURED -> weights, rotation, rel, v_leg, ...
    info = core.filter(dt)                     # -> x, P, ground, core.innovation, nis, foot_nis

The library is built by `native.c_library.build_joined` (after `native/dense_cholesky.c` and
`hardware/leg_kinematics.c`; the system's C compiler, `-O2`, cached by a hash of the code, the
compiler and the CPU). Without a compiler the estimator uses the NumPy arithmetic
(`EstimatorConfig.arithmetic`).

Inputs, in the buffers of `CompiledFilter`: `quat (4,)` `[x, y, z, w]` base to world, `gyro
(3,)` [rad/s] and `specific_force (3,)` [m/s^2] base frame, `joint_q`, `joint_qd (nu,)`,
`force (4,)` [N]; with `tree` None, `positions (4, 3)` and `jacobians (4, 6, nu)` too (base
frame, `hardware.leg_kinematics`), else the C computes them from the tree
(`leg_kinematics.kinematic_tree`); `weights (4,)` where the caller gives the contact
weights; `down`, `was_down (4,)` uint8 stance flags now and at the last update. `measure`
fills `weights` (from the forces), `rotation (3, 3)`, `rel`, `v_leg (4, 3)`, `acceleration
(3,)` [m/s^2] world frame (gravity included) and `same_joints`, `same_imu` (bit-identical to
the last sample's). The C takes the buffers' addresses, taken once (a ctypes call with a dozen
arrays converted per call costs more than the arithmetic).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from native import c_library

from . import leg_kinematics

NFEET = 4  # the filter's sizes (`hardware.estimator`; `estimator_filter.c` defines the same)
NX = 6 + 3 * NFEET  # state size
NY = 7 * NFEET  # measurement size: relative position (3), velocity (3), height (1) per foot
SOURCE = Path(__file__).with_name("estimator_filter.c")
FLAGS = ("-O2", *c_library.MACHINE_FLAGS)
CONFIG_FIELDS = ("position_process", "velocity_process", "foot_process", "foot_position_var",
                 "foot_velocity_var", "foot_height_var", "swing_inflation")  # fmt: skip
# `measure`'s results (`estimator_filter.c`): measured, the first non-finite input, or stale
MEASURED, STALE = 0, 7
BAD_INPUT = {1: "base_quat", 2: "base_angular_velocity", 3: "base_linear_acceleration",
             4: "joint_q", 5: "joint_qd", 6: "foot_force"}  # fmt: skip
CONTACT_FIELDS = ("contact_on", "contact_off", "full_contact_force", "contact_ramp",
                  "contact_rearm")  # fmt: skip
_P = ctypes.c_void_p


class Sample(ctypes.Structure):
    """The `Sample` struct of `estimator_filter.c`: sizes, then the buffers' addresses."""

    _POINTERS = ("joints", "feet", "foot_radius", "work", "quat", "gyro", "specific_force",
                 "q", "qd", "force", "contact_config", "in_contact", "touchdown_time",
                 "liftoff_time", "weights", "rotation", "positions", "jacobians", "rel",
                 "v_leg", "acceleration", "last_q", "last_imu", "flags")  # fmt: skip
    _fields_ = [(n, ctypes.c_int) for n in ("nu", "njoints", "nfeet")] + [
        (n, _P) for n in _POINTERS
    ]


@functools.cache
def _library() -> ctypes.CDLL:
    # the shared Cholesky and the leg kinematics first
    sources = (c_library.DENSE_CHOLESKY, leg_kinematics.SOURCE, SOURCE)
    library = ctypes.CDLL(str(c_library.build_joined(sources, "estimator_filter", FLAGS)))
    library.estimator_measure.restype = ctypes.c_int
    library.estimator_measure.argtypes = [ctypes.POINTER(Sample), ctypes.c_double,
                                          ctypes.c_double, ctypes.c_int, ctypes.c_int,
                                          ctypes.c_double]  # fmt: skip
    library.estimator_filter.restype = ctypes.c_int
    library.estimator_filter.argtypes = [ctypes.c_double] + [_P] * 13
    return library


def contact_row(config) -> np.ndarray:
    """`(5,)` the C contact weights' configuration: `CONTACT_FIELDS` of `config`."""
    return np.array([float(getattr(config, n)) for n in CONTACT_FIELDS])


def config_row(config, touchdown_ground: bool) -> np.ndarray:
    """`(8,)` the C filter's configuration: `CONFIG_FIELDS` of `config` (an `EstimatorConfig`),
    then 1.0 for `ground="touchdown"`, else 0.0."""
    return np.array([float(getattr(config, n)) for n in CONFIG_FIELDS] + [float(touchdown_ground)])


class CompiledFilter:
    """The C arithmetic of one `StateEstimator`, with its configuration `config (8,)`
    (`config_row`), for `nu` joints, feet of radius `foot_radius (4,)` [m], and the model's
    `tree` (`leg_kinematics.kinematic_tree`; None: the caller computes the kinematics). It owns
    the buffers the C reads and writes, their addresses taken once: a caller copies its inputs
    in (module docstring), calls, and reads the outputs; the filter's state (`x`, `P`,
    `ground`) and the contact hysteresis live in `StateEstimator`'s arrays, bound by
    `bind_state` and `bind_contact` and changed in place."""

    def __init__(self, config: np.ndarray, nu: int, foot_radius, tree=None):
        config = np.ascontiguousarray(config, dtype=np.float64)
        if config.shape != (len(CONFIG_FIELDS) + 1,):
            raise ValueError(f"config must have shape ({len(CONFIG_FIELDS) + 1},), got "
                             f"{config.shape}")  # fmt: skip
        self.config = config
        self.nu = int(nu)
        self.foot_radius = np.array(foot_radius, dtype=float)
        if self.foot_radius.shape != (NFEET,):
            raise ValueError(f"foot_radius must have shape ({NFEET},), got "
                             f"{self.foot_radius.shape}")  # fmt: skip
        self.own_kinematics = tree is not None
        if tree is None:  # no tree: the C reads the caller's positions and Jacobians
            tree = (
                np.zeros((0, leg_kinematics.JOINT_SIZE)),
                np.zeros((NFEET, leg_kinematics.FOOT_SIZE)),
            )
        joints, feet = tree
        self.joints, self.feet = np.ascontiguousarray(joints), np.ascontiguousarray(feet)
        self.quat, self.gyro, self.specific_force = np.zeros(4), np.zeros(3), np.zeros(3)
        self.joint_q, self.joint_qd, self.force = np.zeros(nu), np.zeros(nu), np.zeros(NFEET)
        self.positions, self.jacobians = np.zeros((NFEET, 3)), np.zeros((NFEET, 6, self.nu))
        self.rotation, self.acceleration = np.zeros((3, 3)), np.zeros(3)
        self.rel, self.v_leg = np.zeros((NFEET, 3)), np.zeros((NFEET, 3))
        self.weights, self.contact_weights = np.zeros(NFEET), np.zeros(NFEET)
        self.down, self.was_down = np.zeros(NFEET, np.uint8), np.zeros(NFEET, np.uint8)
        self.innovation, self.nis, self.foot_nis = np.zeros(NY), np.zeros(1), np.zeros(NFEET)
        self.last_q, self.last_imu = np.zeros(nu), np.zeros(6)
        self.flags = np.zeros(3, np.intc)  # has a last sample, same joints, same IMU
        self.work = np.zeros(12 * max(len(self.joints), 1))
        library = _library()
        self._measure, self._filter = library.estimator_measure, library.estimator_filter
        self.sample = Sample(self.nu, len(self.joints), NFEET)
        for name in ("joints", "feet", "foot_radius", "work", "quat", "gyro", "specific_force",
                     "force", "rotation", "positions", "jacobians", "rel", "v_leg",
                     "acceleration", "last_q", "last_imu", "flags"):  # fmt: skip
            setattr(self.sample, name, getattr(self, name).ctypes.data)
        self.sample.q, self.sample.qd = self.joint_q.ctypes.data, self.joint_qd.ctypes.data
        self.sample.weights = self.contact_weights.ctypes.data
        self._sample = ctypes.pointer(self.sample)
        self._inputs = _addresses(self.acceleration, self.rel, self.v_leg, self.weights,
                                  self.down, self.was_down, self.config)  # fmt: skip
        self._outputs = _addresses(self.innovation, self.nis, self.foot_nis)
        self._state: tuple = ()
        self._contact_bound: tuple = ()

    def __reduce__(self):
        raise TypeError("a CompiledFilter holds its estimator's addresses: it is not pickled")

    def bind_state(self, x: np.ndarray, p: np.ndarray, ground: np.ndarray) -> None:
        """The filter's state, changed in place by `filter`: `x (18,)`, `P (18, 18)`,
        `ground (4,)`, C-contiguous float64."""
        for a, shape, name in ((x, (NX,), "x"), (p, (NX, NX), "P"), (ground, (NFEET,), "ground")):
            if a.dtype != np.float64 or a.shape != shape or not a.flags.c_contiguous:
                raise ValueError(f"{name} must be a C-contiguous float64 array of shape {shape}")
        self._bound = (x, p, ground)  # kept alive while their addresses are in use
        self._state = _addresses(x, p, ground)

    def bind_contact(self, config: np.ndarray, in_contact: np.ndarray, touchdown_time: np.ndarray,
                     liftoff_time: np.ndarray) -> None:  # fmt: skip
        """The contact weights' configuration `(5,)` (`contact_row`) and hysteresis state,
        changed in place by `measure`: `in_contact (4,)` bool, `touchdown_time`,
        `liftoff_time (4,)` [s] float64, C-contiguous."""
        checks = ((in_contact, np.bool_, "in_contact"),
                  (touchdown_time, np.float64, "touchdown_time"),
                  (liftoff_time, np.float64, "liftoff_time"))  # fmt: skip
        for a, dtype, name in checks:
            if a.dtype != dtype or a.shape != (NFEET,) or not a.flags.c_contiguous:
                raise ValueError(f"{name} must be a C-contiguous {np.dtype(dtype).name} array "
                                 f"of shape ({NFEET},)")  # fmt: skip
        self._contact_config = np.ascontiguousarray(config, dtype=np.float64)
        self._contact_bound = (in_contact, touchdown_time, liftoff_time)
        self.sample.contact_config = self._contact_config.ctypes.data
        self.sample.in_contact = in_contact.ctypes.data
        self.sample.touchdown_time = touchdown_time.ctypes.data
        self.sample.liftoff_time = liftoff_time.ctypes.data

    def forget_last_sample(self) -> None:
        """No last sample: the next `measure` compares its joints and IMU with nothing."""
        self.flags[0] = 0

    def measure(self, t: float, last_t: float, use_force: bool, gravity: float) -> int:
        """The sample in the input buffers at `t` [s] (`last_t`: the last sample's, NaN for
        none): MEASURED (the outputs filled, module docstring; `contact_weights` from `force`
        with `use_force`), STALE (`t <= last_t`: nothing changed), or a key of `BAD_INPUT` (the
        first non-finite input, or a quaternion of norm below 0.5: nothing changed)."""
        if not self._contact_bound:
            raise RuntimeError("bind_contact first: the contact weights have no state")
        return self._measure(self._sample, t, last_t, use_force, self.own_kinematics, gravity)

    @property
    def same_joints(self) -> bool:
        """The last `measure`'s joints are bit-identical to the sample's before."""
        return bool(self.flags[1])

    @property
    def same_imu(self) -> bool:
        """The last `measure`'s gyro and accelerometer are bit-identical to the sample's
        before."""
        return bool(self.flags[2])

    def filter(self, dt: float) -> int:
        """One prediction and correction over `dt` [s] (module docstring) on the bound state;
        0, 1 when `S` was not positive definite (then `x` is NaN), 2 when `x` or `P` is not
        finite after it."""
        if not self._state:
            raise RuntimeError("bind_state first: the filter has no state to update")
        return self._filter(float(dt), *self._inputs, *self._state, *self._outputs)


def _addresses(*arrays: np.ndarray) -> tuple[int, ...]:
    return tuple(a.ctypes.data for a in arrays)
