"""The safety layer's command shaping in C (`safety_shape.c`), called on NumPy buffers: the
clips, the soft start's blend, the target rate limit and the torque limit of
`hardware.safety.SafetyLayer`, the same arithmetic in the same order (no fused multiply-adds:
NumPy's results to the bit).

    kernel = ShapeKernel(limits)           # limits (6, nu): built once per machine, then found
    kernel.command[...] = ...; kernel.last_q[...] = ...; ...   # copy the inputs in
    bits = kernel(blend)                   # -> kernel.out (5, nu), kernel.masks (NMASKS, nu)

The library is built by `native.c_library.build_library` (the system's C compiler, cached by a
hash of the code, the compiler and the CPU). Without a compiler the safety layer shapes with
NumPy (`SafetyConfig.arithmetic`). The buffers' addresses are taken once (a ctypes call
converting a dozen arrays per call costs more than the arithmetic).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from native import c_library

SOURCE = Path(__file__).with_name("safety_shape.c")
FLAGS = ("-O2", "-ffp-contract=off", *c_library.MACHINE_FLAGS)
# the masks' rows, in `safety_shape.c`'s order: (event kind, detail)
MASKS = (("position_clipped", ""), ("velocity_clipped", ""), ("gain_clipped", ""),
         ("feedforward_clipped", ""), ("rate_limited", ""), ("torque_limited", ""),
         ("position_clipped", "after blending"))  # fmt: skip
BEFORE_BLEND = 4  # the first four masks come before the soft start's blend
_P = ctypes.c_void_p



@functools.cache
def _library() -> ctypes.CDLL:
    library = ctypes.CDLL(str(c_library.build_library(SOURCE, "safety_shape", FLAGS)))
    library.safety_shape.restype = ctypes.c_int
    library.safety_shape.argtypes = [ctypes.c_int] + [_P] * 7 + [ctypes.c_double, _P, _P]
    return library


class ShapeKernel:
    """The C shaping for `nu` joints with `limits (6, nu)`: lower, upper (with the position
    margin), velocity limit, max Kp, max Kd, torque limit. Inputs are copied into `command
    (5, nu)` (q*, qd*, Kp, Kd, tau_ff), `last_q`, `max_step`, `q`, `qd`, `q_start (nu,)`;
    `__call__(blend)` writes `out (5, nu)` and `masks (len(MASKS), nu)` and returns a bit per
    mask with a joint set."""

    def __init__(self, limits):
        self.limits = np.ascontiguousarray(limits, dtype=np.float64)
        if self.limits.ndim != 2 or self.limits.shape[0] != 6:
            raise ValueError(f"limits must have shape (6, nu), got {self.limits.shape}")
        nu = self.nu = self.limits.shape[1]
        self.command, self.out = np.zeros((5, nu)), np.zeros((5, nu))
        self.last_q, self.max_step = np.zeros(nu), np.zeros(nu)
        self.q, self.qd, self.q_start = np.zeros(nu), np.zeros(nu), np.zeros(nu)
        self.masks = np.zeros((len(MASKS), nu), dtype=np.uint8)
        self._shape = _library().safety_shape
        inputs = (self.command, self.limits, self.last_q, self.max_step, self.q, self.qd,
                  self.q_start)  # fmt: skip
        self._inputs = tuple(a.ctypes.data for a in inputs)
        self._outputs = (self.out.ctypes.data, self.masks.ctypes.data)

    def __reduce__(self):
        """Pickled as its limits (the buffers are scratch; the library is loaded again)."""
        return (ShapeKernel, (self.limits,))

    def __call__(self, blend: float) -> int:
        """Shape the command in the buffers; `blend` the soft start's progress, < 0 outside
        it. Returns the bits of the masks with a joint set."""
        return self._shape(self.nu, *self._inputs, float(blend), *self._outputs)
