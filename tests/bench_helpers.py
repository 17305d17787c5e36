"""Loading a script of `benchmarks/` or `examples/` (not packages) as a module, for its tests."""

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_benchmark(name: str):
    """`benchmarks/<name>.py` as the module `name`, registered in `sys.modules` (dataclasses
    resolve their annotations through it)."""
    return load_script(BENCHMARKS / f"{name}.py", name)


def load_example(name: str):
    """`examples/<name>.py` as the module `name` (as `load_benchmark`)."""
    return load_script(EXAMPLES / f"{name}.py", name)


def load_script(path: Path, name: str):
    """The script at `path` as the module `name`, registered in `sys.modules`."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
