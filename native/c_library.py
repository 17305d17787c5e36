"""C compiled into shared libraries: the compiler, its flags, the cache folder and the build.

    library = build_library("kernel.c", "kernel", ("-O3", *MACHINE_FLAGS))   # built, then found
    ctypes.CDLL(str(library))

`build_library` compiles translation units in parallel with the system's C compiler (`CC`,
default `gcc`) into one shared library in `library_dir()` (`<DIFFLOCO_CACHE_DIR>/casadi/`, or
a private temporary folder when that cache is off), named by a hash of the code, the compiler,
its flags and the CPU. Every build is recorded with its seconds and whether it was found built
(`builds()`). The generated knot functions (`trajopt.engine.generated_code`), the solver's
hand-written kernels (`trajopt.engine.c_kernels`), the estimator's filter
(`hardware.estimator_core`) and the safety layer's shaping (`hardware.safety_kernel`) are all
built here.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .cache_folder import cache_dir

# -march=native: the derivative code runs much faster with it (`benchmarks/bench_derivatives.py`);
# the library's key includes the CPU, so a shared cache folder never hands it to another processor.
MACHINE_FLAGS = ("-march=native", "-shared", "-fPIC")
DEFAULT_FLAGS = ("-O2", *MACHINE_FLAGS)
_LOCK = threading.Lock()


def library_dir() -> Path:
    """Where the compiled libraries live: `<DIFFLOCO_CACHE_DIR>/casadi`, or, with the cache off,
    a folder of this user's in the temporary directory (mode 0700: a library is code that gets
    loaded, so the folder must not be writable by others). A library's name is a hash of its
    code, compiler, flags and CPU, so a stale one is never loaded."""
    root = cache_dir()
    if root is not None:
        return root / "casadi"
    folder = Path(tempfile.gettempdir()) / f"diffloco-casadi-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise RuntimeError(f"{folder} is not a private folder of this user: no code loaded from it")
    return folder


def compiler() -> str:
    """The C compiler the libraries are built with: `CC`, default `gcc`."""
    return os.environ.get("CC", "gcc")


ARITHMETIC = ("auto", "c", "numpy")  # a part with a C and a NumPy implementation of its sums


def check_arithmetic(arithmetic: str) -> str:
    """`arithmetic` if it is one of `ARITHMETIC`, else a ValueError naming it."""
    if arithmetic not in ARITHMETIC:
        raise ValueError(f"arithmetic must be one of {ARITHMETIC}, got {arithmetic!r}")
    return arithmetic


def compiled_arithmetic(arithmetic: str) -> bool:
    """Whether `arithmetic` (`ARITHMETIC`) runs the C: "c", or "auto" where a compiler is found
    (`compiler_available`); "numpy" never."""
    return check_arithmetic(arithmetic) == "c" or (arithmetic == "auto" and compiler_available())


def compiler_available() -> bool:
    """Whether `compiler()` is on the PATH (derivatives="compiled" needs it at the first use)."""
    return shutil.which(compiler()) is not None


@functools.cache
def cpu_identity() -> str:
    """The processor the code is compiled for (`-march=native`): model name and flags."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    lines = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))]
    return platform.machine() + "".join(sorted(set(lines)))


@dataclass(frozen=True)
class Build:
    """One `build_library` call: the library, the wall seconds it took, whether it was found
    already built (`cached`), and the translation units compiled (in parallel)."""

    library: Path
    seconds: float
    cached: bool
    units: int


_BUILDS: list[Build] = []  # this process's builds, oldest first


def builds() -> tuple[Build, ...]:
    """Every `build_library` call of this process so far, oldest first (a caller reports the
    ones its own work made by counting before and after)."""
    return tuple(_BUILDS)


def build_rows(since: int) -> list[dict]:
    """The builds after the first `since` of `builds()`, as `{"library": file name, "seconds",
    "cached", "units"}` rows (a report's form)."""
    return [{"library": b.library.name, "seconds": b.seconds, "cached": b.cached,
             "units": b.units} for b in _BUILDS[since:]]  # fmt: skip


def record_build(build: Build) -> None:
    """Add `build` to `builds()` (a library found by another route than `build_library`)."""
    _BUILDS.append(build)


def build_library(sources, stem: str, flags: tuple[str, ...] = DEFAULT_FLAGS) -> Path:
    """The C file(s) `sources` (a path or a list of paths, each a translation unit) compiled
    with `flags` into one shared library `<stem>-<hash>.so` in `library_dir()`, where the hash
    is of the code, the compiler, its flags and the CPU: built once, then found. The units
    compile in parallel, one compiler process per core, the largest first, then link; each call
    is recorded (`builds()`).
    Processes building the same library at once each write a whole file (a unique name in the
    folder, then an atomic rename)."""
    started = time.perf_counter()
    single = isinstance(sources, str | os.PathLike)
    units = [Path(sources)] if single else [Path(unit) for unit in sources]
    folder = library_dir()
    folder.mkdir(parents=True, exist_ok=True)
    cc = compiler()
    machine = repr((cc, tuple(flags), cpu_identity())).encode()
    code = b"".join(u.name.encode() + b"\0" + u.read_bytes() for u in sorted(units))
    key = hashlib.sha256(code + machine).hexdigest()[:24]
    library = folder / f"{stem}-{key}.so"
    with _LOCK:
        cached = library.exists()
        if not cached:
            _compile_and_link(units, library, cc, flags)
    _BUILDS.append(Build(library, time.perf_counter() - started, cached, len(units)))
    return library


def _compile_and_link(units: list[Path], library: Path, cc: str, flags: tuple) -> None:
    if not compiler_available():
        raise RuntimeError(
            f"derivatives='compiled' needs a C compiler: {cc!r} was not found "
            "(install gcc or set CC, or use derivatives='implicit')"
        )
    compile_flags = tuple(f for f in flags if f != "-shared")
    with tempfile.TemporaryDirectory(prefix="diffloco-cc-") as scratch:
        objects = [Path(scratch, f"{k}-{u.stem}.o") for k, u in enumerate(units)]
        largest_first = sorted(range(len(units)), key=lambda k: -units[k].stat().st_size)
        with ThreadPoolExecutor(max_workers=max(1, min(len(units), os.cpu_count() or 1))) as pool:
            jobs = [pool.submit(subprocess.run, [cc, *compile_flags, "-c", "-o", str(objects[k]),
                                                 str(units[k])], check=True, capture_output=True)
                    for k in largest_first]  # fmt: skip
            for job in jobs:
                job.result()
        partial = Path(scratch, library.name)
        subprocess.run([cc, *flags, "-o", str(partial), *map(str, objects), "-lm"],
                       check=True, capture_output=True)  # fmt: skip
        handle, staged = tempfile.mkstemp(suffix=".so.part", dir=library.parent)
        os.close(handle)
        shutil.copyfile(partial, staged)
        os.replace(staged, library)


DENSE_CHOLESKY = Path(__file__).with_name("dense_cholesky.c")


def build_joined(sources, stem: str, flags: tuple[str, ...] = DEFAULT_FLAGS) -> Path:
    """The C files `sources` (paths, in order: a file may call the static functions of those
    before it) joined into one translation unit and built by `build_library` (the joined text
    is what its hash sees)."""
    with tempfile.TemporaryDirectory(prefix="diffloco-joined-") as scratch:
        joined = Path(scratch, f"{stem}.c")
        joined.write_text("\n".join(Path(source).read_text() for source in sources))
        return build_library(joined, stem, flags)

