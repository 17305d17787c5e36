"""Shared fixtures: robots are loaded once per session, random states are reproducible.

Equinox-style strictness: rank promotion raises, so silent broadcasting bugs fail loudly.
"""

import gc
import os

# The suite compiles at XLA's backend optimisation level 0: the same programs (XLA's own passes
# still run, only LLVM's code optimisation is skipped), compiled in about 60 % of the time and
# run slower, which the suite, dominated by compilation, gains by. Set before JAX starts its
# backend; examples and robot processes that tests start inherit it. A level given in XLA_FLAGS
# is kept.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
    ).strip()

import jax
import numpy as np
import pytest

# The suite never uses JAX's persistent compilation cache (trajopt.engine.compile_cache): a test
# process reading an executable from a folder that other processes (xdist workers, earlier runs)
# were writing crashed with a segmentation fault inside jax's compilation_cache (seen once in a
# fresh-clone run, test_ipopt_backend). Examples run as subprocesses inherit this setting.
os.environ["DIFFLOCO_CACHE_DIR"] = "off"

import dynamics

jax.config.update("jax_numpy_rank_promotion", "raise")

ROBOT_NAMES = ("solo12", "go2", "anymal_c")

# A test process is a long-lived process (issue 20): an xdist worker runs many files, and
# every jitted function keeps its executables, each a few thousand memory mappings; at the
# kernel's vm.max_map_count (65,530 by default) LLVM's mmap fails and the process aborts inside
# an XLA compile (seen in a fresh-clone run: "Fatal Python error: Aborted" in
# test_trajopt.py late in a worker's life). After each test file, above this many mappings the
# compiled problem structures and JAX's caches are dropped (the next file recompiles what it
# needs).
MAPPINGS_BEFORE_CLEARING = 20_000


def _mapping_count() -> int | None:
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None  # not Linux: nothing to bound


@pytest.fixture(autouse=True, scope="module")
def _bounded_compiled_code():
    yield
    count = _mapping_count()
    if count is not None and count > MAPPINGS_BEFORE_CLEARING:
        import trajopt

        trajopt.clear_compiled(jax_caches=True)
        gc.collect()
N_RANDOM_STATES = 100


@pytest.fixture(scope="session", params=ROBOT_NAMES)
def robot_name(request):
    return request.param


@pytest.fixture(scope="session")
def model(robot_name):
    return dynamics.load_robot(robot_name)


@pytest.fixture(scope="session")
def pin_model(robot_name):
    return dynamics.load_pinocchio(robot_name).model


@pytest.fixture(scope="session")
def random_states(model):
    """`N_RANDOM_STATES` random `(q, v, a_or_tau)` as NumPy float64 arrays."""
    keys = jax.random.split(jax.random.PRNGKey(42), N_RANDOM_STATES)
    q = np.asarray(jax.vmap(lambda k: dynamics.random_configuration(model, k))(keys))
    rng = np.random.default_rng(0)
    v = rng.normal(size=(N_RANDOM_STATES, model.nv))
    tau = rng.normal(size=(N_RANDOM_STATES, model.nv)) * 5.0
    return q, v, tau
