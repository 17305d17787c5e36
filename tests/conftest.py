"""Shared fixtures: robots are loaded once per session, random states are reproducible.

Equinox-style strictness: rank promotion raises, so silent broadcasting bugs fail loudly.
"""

import os

import jax
import numpy as np
import pytest

# The suite never uses JAX's persistent compilation cache (trajopt.compile_cache): a test
# process reading an executable from a folder that other processes (xdist workers, earlier runs)
# were writing crashed with a segmentation fault inside jax's compilation_cache (seen once in a
# fresh-clone run, test_ipopt_backend). Examples run as subprocesses inherit this setting.
os.environ["DIFFLOCO_CACHE_DIR"] = "off"

import dynamics

jax.config.update("jax_numpy_rank_promotion", "raise")

ROBOT_NAMES = ("solo12", "go2", "anymal_c")
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
