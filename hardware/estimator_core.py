"""The state estimator's per-sample arithmetic in C (`estimator_filter.c`), called on NumPy
buffers: the leg measurements, then the prediction, the touchdown heights and the Joseph-form
correction of `hardware.estimator` (whose module docstring has the equations).

    core = CompiledFilter(config_row(config, False), nu, foot_radius)   # built once, then found
    core.bind_state(x, P, ground)              # (18,), (18, 18), (4,): changed in place
    core.rotation[...] = R; ...                # copy the inputs into its buffers
    core.legs()                                # -> core.rel, core.v_leg (4, 3)
    info = core.filter(dt)                     # -> x, P, ground, core.innovation, nis, foot_nis

The library is built by `native.c_library.build_joined` (after `native/dense_cholesky.c`; the
system's C compiler, `-O2`, cached by a hash of the code, the compiler and the CPU).
Without a compiler the estimator uses the NumPy arithmetic (`EstimatorConfig.arithmetic`).

Inputs, in the buffers of `CompiledFilter`: `rotation (3, 3)` base to world, `gyro (3,)`
[rad/s] base frame, `positions (4, 3)` and `jacobians (4, 6, nu)` (base frame,
`hardware.leg_kinematics`), `joint_qd (nu,)`, `acceleration (3,)` [m/s^2] world frame (gravity
included), `weights (4,)` contact weights, `down`, `was_down (4,)` uint8 stance flags now and
at the last update. The C takes the buffers' addresses, taken once (a ctypes call with a
dozen arrays converted per call costs more than the arithmetic).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from native import c_library

NFEET = 4  # the filter's sizes (`hardware.estimator`; `estimator_filter.c` defines the same)
NX = 6 + 3 * NFEET  # state size
NY = 7 * NFEET  # measurement size: relative position (3), velocity (3), height (1) per foot
SOURCE = Path(__file__).with_name("estimator_filter.c")
FLAGS = ("-O2", *c_library.MACHINE_FLAGS)
CONFIG_FIELDS = ("position_process", "velocity_process", "foot_process", "foot_position_var",
                 "foot_velocity_var", "foot_height_var", "swing_inflation")  # fmt: skip
_P = ctypes.c_void_p



@functools.cache
def _library() -> ctypes.CDLL:
    sources = (c_library.DENSE_CHOLESKY, SOURCE)  # the shared Cholesky first
    library = ctypes.CDLL(str(c_library.build_joined(sources, "estimator_filter", FLAGS)))
    library.estimator_legs.restype = None
    library.estimator_legs.argtypes = [_P, _P, _P, _P, _P, ctypes.c_int, _P, _P, _P]
    library.estimator_filter.restype = ctypes.c_int
    library.estimator_filter.argtypes = [ctypes.c_double] + [_P] * 13
    library.estimator_contact.restype = None
    library.estimator_contact.argtypes = [_P, ctypes.c_double] + [_P] * 5
    return library


CONTACT_FIELDS = ("contact_on", "contact_off", "full_contact_force", "contact_ramp",
                  "contact_rearm")  # fmt: skip


def contact_row(config) -> np.ndarray:
    """`(5,)` the C contact weights' configuration: `CONTACT_FIELDS` of `config`."""
    return np.array([float(getattr(config, n)) for n in CONTACT_FIELDS])


def config_row(config, touchdown_ground: bool) -> np.ndarray:
    """`(8,)` the C filter's configuration: `CONFIG_FIELDS` of `config` (an `EstimatorConfig`),
    then 1.0 for `ground="touchdown"`, else 0.0."""
    return np.array([float(getattr(config, n)) for n in CONFIG_FIELDS] + [float(touchdown_ground)])


class CompiledFilter:
    """The C arithmetic of one `StateEstimator`, with its configuration `config (8,)`
    (`config_row`), for `nu` joints. It owns the buffers the C reads and writes, their addresses
    taken once: a caller copies its inputs in (`rotation`, `gyro`, `positions`, `jacobians`,
    `joint_qd`, `acceleration`, `weights`, `down`, `was_down`), calls, and reads the outputs
    (`rel`, `v_leg`, `innovation`, `nis`, `foot_nis`); the filter's state (`x`, `P`,
    `ground`) lives in `StateEstimator`'s arrays, bound by `bind_state` and changed in place."""

    def __init__(self, config: np.ndarray, nu: int, foot_radius):
        config = np.ascontiguousarray(config, dtype=np.float64)
        if config.shape != (len(CONFIG_FIELDS) + 1,):
            raise ValueError(f"config must have shape ({len(CONFIG_FIELDS) + 1},), got "
                             f"{config.shape}")  # fmt: skip
        self.config = config
        self.nu = int(nu)
        self.rotation, self.gyro = np.zeros((3, 3)), np.zeros(3)
        self.positions, self.jacobians = np.zeros((NFEET, 3)), np.zeros((NFEET, 6, self.nu))
        self.joint_qd, self.foot_radius = np.zeros(self.nu), np.array(foot_radius, dtype=float)
        self.rel, self.v_leg = np.zeros((NFEET, 3)), np.zeros((NFEET, 3))
        self.acceleration, self.weights = np.zeros(3), np.zeros(NFEET)
        self.down, self.was_down = np.zeros(NFEET, np.uint8), np.zeros(NFEET, np.uint8)
        self.innovation, self.nis, self.foot_nis = np.zeros(NY), np.zeros(1), np.zeros(NFEET)
        if self.foot_radius.shape != (NFEET,):
            raise ValueError(f"foot_radius must have shape ({NFEET},), got "
                             f"{self.foot_radius.shape}")  # fmt: skip
        library = _library()
        self._legs, self._filter = library.estimator_legs, library.estimator_filter
        self._legs_args = (*_addresses(self.rotation, self.gyro, self.positions, self.jacobians,
                                       self.joint_qd), self.nu,
                           *_addresses(self.foot_radius, self.rel, self.v_leg))  # fmt: skip
        self._inputs = _addresses(self.acceleration, self.rel, self.v_leg, self.weights,
                                  self.down, self.was_down, self.config)  # fmt: skip
        self._outputs = _addresses(self.innovation, self.nis, self.foot_nis)
        self._state: tuple = ()
        self._contact = library.estimator_contact
        self.force, self.contact_weights = np.zeros(NFEET), np.zeros(NFEET)
        self._contact_args: tuple = ()

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
        changed in place by `contact`: `in_contact (4,)` bool, `touchdown_time`,
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
        self._contact_args = _addresses(self._contact_config, in_contact, touchdown_time,
                                        liftoff_time, self.contact_weights)  # fmt: skip

    def contact(self, t: float) -> None:
        """`contact_weights (4,)` from `force (4,)` [N] at `t` [s] (`ForceContact`)."""
        if not self._contact_args:
            raise RuntimeError("bind_contact first: the contact weights have no state")
        self._contact(self.force.ctypes.data, float(t), *self._contact_args)

    def legs(self) -> None:
        """`rel`, `v_leg` from `rotation`, `gyro`, `positions`, `jacobians`, `joint_qd`."""
        self._legs(*self._legs_args)

    def filter(self, dt: float) -> int:
        """One prediction and correction over `dt` [s] (module docstring) on the bound state;
        0, or 1 when `S` was not positive definite (then `x` is NaN)."""
        if not self._state:
            raise RuntimeError("bind_state first: the filter has no state to update")
        return self._filter(float(dt), *self._inputs, *self._state, *self._outputs)


def _addresses(*arrays: np.ndarray) -> tuple[int, ...]:
    return tuple(a.ctypes.data for a in arrays)
