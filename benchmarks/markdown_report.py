"""Shared by the benchmark scripts: the machine's CPU name, package versions, and in-place
section rewriting of BENCHMARKS.md (each script owns one `## ` section; the others are kept)."""

from __future__ import annotations

import importlib
import platform
import re
from pathlib import Path


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (or the platform's processor string)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def replace_section(path: Path, heading: str, text: str) -> None:
    """Replace (or append) the section starting with the line `heading` in `path` by `text`,
    keeping every other `## ` section and a blank line before the next. The file is read right
    before writing, so sections written meanwhile by other scripts survive."""
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(old):
        new = pattern.sub(lambda _: text.rstrip("\n") + "\n\n", old, count=1)
    else:
        new = old.rstrip("\n") + "\n\n" + text
    path.write_text(new.rstrip("\n") + "\n")


def versions(*modules: str) -> str:
    """`"Python 3.11.7, jax 0.10.2, ..."` for the importable ones of `modules`."""
    parts = [f"Python {platform.python_version()}"]
    for name in modules:
        try:
            parts.append(f"{name} {importlib.import_module(name).__version__}")
        except ImportError:  # pragma: no cover
            pass
    return ", ".join(parts)


def publish(path: Path | None, heading: str, text: str) -> None:
    """Print the rendered section and, unless `path` is None, write it into `path`."""
    print()
    print(text)
    if path is not None:
        replace_section(path, heading, text)
        print(f"wrote {path}")
