"""Loading a script of `benchmarks/` (not a package) as a module, for its smoke test."""

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str):
    """`benchmarks/<name>.py` as the module `name`, registered in `sys.modules` (dataclasses
    resolve their annotations through it)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
