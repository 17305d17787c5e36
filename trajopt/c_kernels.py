"""The hand-written C kernels of `trajopt/` (`riccati.c`, `substep_elimination.c`): built once per
machine by `generated_code.build_library` (the system's C compiler, `-O3`, cached by a hash of
the code, the compiler and the CPU) and loaded with `ctypes`, to be called on NumPy buffers.

`load(name, signatures)` returns the loaded library with each function's `(restype,
argtypes)` set; `DOUBLES` and `INTS` are the argument types of contiguous float64 and int32
arrays.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from . import generated_code

# -O3: gcc vectorises the kernels' row updates only from -O3 (about three times faster)
FLAGS = ("-O3",) + tuple(f for f in generated_code.COMPILER_FLAGS if f != "-O2")
DOUBLES = np.ctypeslib.ndpointer(dtype=np.float64, flags="C_CONTIGUOUS")
INTS = np.ctypeslib.ndpointer(dtype=np.int32, flags="C_CONTIGUOUS")


@functools.cache
def _library(name: str) -> ctypes.CDLL:
    source = Path(__file__).with_name(f"{name}.c")
    return ctypes.CDLL(str(generated_code.build_library(source, name, FLAGS)))


def load(name: str, signatures: dict) -> ctypes.CDLL:
    """The kernel `trajopt/<name>.c`, built on first use, with `signatures = {function:
    (restype, argtypes)}` applied."""
    library = _library(name)
    for function, (restype, argtypes) in signatures.items():
        getattr(library, function).restype = restype
        getattr(library, function).argtypes = argtypes
    return library


def buffer(a) -> np.ndarray:
    """`a` as a contiguous float64 array (a copy only where needed)."""
    return np.ascontiguousarray(a, dtype=np.float64)
