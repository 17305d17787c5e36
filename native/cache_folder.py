"""The project's cache folder, where compiled things are kept between processes.

    DIFFLOCO_CACHE_DIR    the folder (default `~/.cache/diffloco/jax`); "off", "0", "none" or
                          an empty value turn the cache off.

JAX's executables (`trajopt.engine.compile_cache`), the traced programs
(`trajopt.engine.program_cache`) and the compiled C libraries (`native.c_library`) live under it.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "DIFFLOCO_CACHE_DIR"
DEFAULT_DIR = Path("~/.cache/diffloco/jax")
_OFF = ("", "0", "off", "none", "false", "no")


def cache_dir() -> Path | None:
    """The folder `DIFFLOCO_CACHE_DIR` asks for (default `~/.cache/diffloco/jax`), None if off."""
    value = os.environ.get(ENV_VAR)
    if value is None:
        return DEFAULT_DIR.expanduser()
    if value.strip().lower() in _OFF:
        return None
    return Path(value).expanduser()
