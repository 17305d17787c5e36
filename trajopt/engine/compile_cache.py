"""JAX's persistent compilation cache, on by default where diffloco solves things.

A problem structure compiles for tens of seconds (the knot linearisation differentiates
through the contact solve); the executables are saved on disk so that the next process with
the same structure loads them instead.

    DIFFLOCO_CACHE_DIR    the folder (default `~/.cache/diffloco/jax`); "off", "0", "none" or
                          an empty value turn the cache off.

Importing `trajopt.solver` (every solver, the MPC, the examples that solve) calls
`enable_persistent_cache()` once. A folder the user already gave JAX
(`jax_compilation_cache_dir`, e.g. `JAX_COMPILATION_CACHE_DIR`) is kept as it is. Executables
that compiled in under `MIN_COMPILE_TIME_S` are not saved (the cheap ones would cost more disk
reads than they save). The cache is trusted code: do not point it at a folder others can
write. Loading an executable gives the same program as compiling it, so results do not depend
on whether the cache was warm; the test suite turns it off (`DIFFLOCO_CACHE_DIR=off`).

The same folder's `programs/` holds the FDDP functions' traced programs
(`trajopt.engine.program_cache`): this cache skips compiling, that one tracing.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import jax

from native.cache_folder import ENV_VAR, cache_dir  # noqa: F401 (ENV_VAR: for callers)

MIN_COMPILE_TIME_S = 0.5
_STATE: dict = {"enabled": False, "dir": None}


def enable_persistent_cache() -> Path | None:
    """Turn JAX's persistent compilation cache on (once per process); returns its folder, or
    None if it is off or the folder cannot be created (a warning, never an error)."""
    if _STATE["enabled"]:
        return _STATE["dir"]
    _STATE["enabled"] = True
    own = jax.config.jax_compilation_cache_dir
    if own:  # the user configured JAX directly: leave it
        _STATE["dir"] = Path(own)
        return _STATE["dir"]
    path = cache_dir()
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        warnings.warn(f"no persistent compilation cache ({path}: {error})", stacklevel=2)
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_TIME_S)
    _STATE["dir"] = path
    return path
