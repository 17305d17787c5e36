"""The hand-written C kernels of `trajopt/` (`riccati.c`, `substep_elimination.c`,
`fddp_iteration.c`): built once per machine by `c_library.build_library` (the system's C
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
import tempfile
from pathlib import Path

import numpy as np

from native import c_library

# -O3: gcc vectorises the kernels' row updates only from -O3 (about three times faster)
FLAGS = ("-O3", *c_library.MACHINE_FLAGS)
DOUBLES = np.ctypeslib.ndpointer(dtype=np.float64, flags="C_CONTIGUOUS")
INTS = np.ctypeslib.ndpointer(dtype=np.int32, flags="C_CONTIGUOUS")


@functools.cache
def _library(name: str, after: tuple[str, ...] = ()) -> ctypes.CDLL:
    sources = [Path(__file__).with_name(f"{stem}.c") for stem in (*after, name)]
    if not after:
        return ctypes.CDLL(str(c_library.build_library(sources[0], name, FLAGS)))
    with tempfile.TemporaryDirectory(prefix="diffloco-kernel-") as scratch:
        joined = Path(scratch, f"{name}.c")
        joined.write_text("\n".join(source.read_text() for source in sources))
        return ctypes.CDLL(str(c_library.build_library(joined, name, FLAGS)))


def load(name: str, signatures: dict, after: tuple[str, ...] = ()) -> ctypes.CDLL:
    """The kernel `trajopt/<name>.c`, built on first use (after the kernels `after`, in one
    file: it calls their functions), with `signatures = {function: (restype, argtypes)}`
    applied."""
    library = _library(name, tuple(after))
    for function, (restype, argtypes) in signatures.items():
        getattr(library, function).restype = restype
        getattr(library, function).argtypes = argtypes
    return library


def buffer(a) -> np.ndarray:
    """`a` as a contiguous float64 array (a copy only where needed)."""
    return np.ascontiguousarray(a, dtype=np.float64)
