"""The hand-written C kernels of `trajopt/` (`riccati.c`, `substep_elimination.c`,
`fddp_iteration.c`): built once per machine by `native.c_library` (the system's C
compiler, `-O3`, cached by a hash of the code, the compiler and the CPU) and loaded with
`ctypes`, to be called on NumPy buffers.

`load(name, signatures, after)` returns the loaded library with each function's `(restype,
argtypes)` set; a kernel that calls others is built as one file, the kernels `after` first
(their text is in the hash). `DOUBLES` and `INTS` are the argument types of contiguous float64
and int32 arrays.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from native import c_library

# -O3: gcc vectorises the kernels' row updates only from -O3 (about three times faster)
FLAGS = ("-O3", *c_library.MACHINE_FLAGS)
DOUBLES = np.ctypeslib.ndpointer(dtype=np.float64, flags="C_CONTIGUOUS")
INTS = np.ctypeslib.ndpointer(dtype=np.int32, flags="C_CONTIGUOUS")


@functools.cache
def _library(name: str, after: tuple = ()) -> ctypes.CDLL:
    sources = [s if isinstance(s, Path) else Path(__file__).with_name(f"{s}.c") for s in after]
    sources.append(Path(__file__).with_name(f"{name}.c"))
    if not after:
        return ctypes.CDLL(str(c_library.build_library(sources[0], name, FLAGS)))
    return ctypes.CDLL(str(c_library.build_joined(sources, name, FLAGS)))


def load(name: str, signatures: dict, after: tuple = ()) -> ctypes.CDLL:
    """The kernel `trajopt/<name>.c`, built on first use (after the kernels `after`, in one
    file: it calls their functions; an entry is a kernel's stem or a C file's `Path`, e.g.
    `native.c_library.DENSE_CHOLESKY`), with `signatures = {function: (restype, argtypes)}`
    applied."""
    library = _library(name, tuple(after))
    for function, (restype, argtypes) in signatures.items():
        getattr(library, function).restype = restype
        getattr(library, function).argtypes = argtypes
    return library


def buffer(a) -> np.ndarray:
    """`a` as a contiguous float64 array (a copy only where needed)."""
    return np.ascontiguousarray(a, dtype=np.float64)
