"""The bounded cache of compiled problem structures (`trajopt.engine.knot_backends.for_problem`).

Fast: the structure key is the model's content, not its identity; the LRU drops the least
recently used structure and its jitted functions are freed. Slow (soak): one process solves
more distinct structures than the kernel's memory-map limit allowed before (each structure
compiles about 8,000 mappings; `vm.max_map_count` is 65,530 by default, so about 8 kept
structures abort the interpreter), and the mapping count and RSS stay bounded.
"""

import dataclasses
import gc
import itertools
import os
import weakref

import numpy as np
import pytest

import trajopt
from trajopt.engine import knot_backends, shooting
from trajopt.gaits import make_problem
from trajopt.solver import solve


def _tiny(robot="solo12", gait="trot", knots=2, contact="smooth"):
    return make_problem(
        robot, gait, 0.3, duration=0.02 * knots, dt=0.02, substeps=1, contact=contact,
        num_sweeps=2,
    )  # fmt: skip


@pytest.fixture
def restore_cache_size():
    size = knot_backends.cache_size()
    yield
    knot_backends.set_cache_size(size)
    trajopt.clear_compiled(jax_caches=False)


def test_structure_key_is_the_content_not_the_identity():
    problem = _tiny()
    copy = problem.replace(model=dataclasses.replace(problem.model))
    assert copy.model is not problem.model
    assert shooting.structure_key(copy) == shooting.structure_key(problem)
    heavier = dataclasses.replace(problem.model, body_mass=np.asarray(problem.model.body_mass) * 2)
    assert shooting.structure_key(problem.replace(model=heavier)) != shooting.structure_key(problem)
    # the knot duration is a constant of the control-rate residual: it must split structures
    slower = make_problem("solo12", "trot", 0.3, duration=0.06, dt=0.03, substeps=1,
                          num_sweeps=2)  # fmt: skip
    assert slower.horizon == problem.horizon
    assert shooting.structure_key(slower) != shooting.structure_key(problem)
    # a gait change is data (weights and references are traced): same structure
    assert shooting.structure_key(_tiny(gait="pace")) == shooting.structure_key(problem)


def test_lru_drops_the_least_recently_used_structure(restore_cache_size):
    trajopt.clear_compiled(jax_caches=False)
    knot_backends.set_cache_size(2)
    a, b, c = (_tiny(knots=k) for k in (2, 3, 4))
    fa = knot_backends.for_problem(a)
    fb = knot_backends.for_problem(b)
    assert knot_backends.for_problem(a) is fa  # a hit refreshes a
    dead_b = weakref.ref(fb)
    del fb
    fc = knot_backends.for_problem(c)  # b is the least recently used: out
    gc.collect()
    assert dead_b() is None, "an evicted structure's jitted functions are freed"
    assert knot_backends.for_problem(a) is fa and knot_backends.for_problem(c) is fc
    assert len(knot_backends.CACHED) == 2
    with pytest.raises(ValueError):
        knot_backends.set_cache_size(0)
    trajopt.clear_compiled(jax_caches=False)
    assert len(knot_backends.CACHED) == 0


def _mappings():
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


ROBOTS = ("solo12", "go2", "anymal_c")
CONTACTS = ("penalty", "smooth", "hard")
KNOTS = (2, 3)
GAITS = ("trot", "walk", "pace", "bound", "pronk", "stand")


def test_clear_compiled_drops_single_and_batched_structures():
    """`trajopt.clear_compiled()` empties both caches (sentinels stand in for compiled
    structures: nothing compiles here)."""
    from trajopt import batched

    knot_backends.CACHED["sentinel"] = object()
    batched.COMPILED_STRUCTURES["sentinel"] = object()
    trajopt.clear_compiled(jax_caches=False)
    assert "sentinel" not in knot_backends.CACHED
    assert "sentinel" not in batched.COMPILED_STRUCTURES


@pytest.mark.slow
def test_many_structures_in_one_process_keep_mappings_and_memory_bounded():
    """18 distinct structures (3 robots x 3 contact models x 2 horizons, the gaits cycling
    through the library), one FDDP iteration each: about 2x the number of structures that
    reached `vm.max_map_count` when every structure stayed compiled. Every solve succeeds;
    the mapping count stays far below the limit and flat after the cache is full; RSS too."""
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("no /proc/self/maps on this system: mapping count cannot be read")
    limit = 65530
    if os.path.exists("/proc/sys/vm/max_map_count"):
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
    trajopt.clear_compiled()
    gaits = itertools.cycle(GAITS)
    maps, rss = [], []
    structures = list(itertools.product(ROBOTS, CONTACTS, KNOTS))
    for robot, contact, knots in structures:
        problem = _tiny(robot, next(gaits), knots, contact)
        traj = solve(problem, max_iterations=1, verbose=False, guess="standing")
        assert np.isfinite(traj.cost), (robot, contact, knots)
        assert traj.status != "diverged", (robot, contact, knots)
        assert traj.iterations == 1 or traj.status == "converged", (traj.status, traj.iterations)
        maps.append(_mappings())
        rss.append(_rss_mb())
    keys = {shooting.structure_key(_tiny(r, "trot", k, c)) for r, c, k in structures}
    assert len(keys) == len(structures)
    print("mappings", maps, "rss MB", [round(x) for x in rss], "limit", limit)
    assert max(maps) < 0.75 * limit, maps
    # What one structure adds while the cache fills (structures 2 to cache_size + 1; the
    # first also pays JAX's start-up): kept structures alone would add 18 of these.
    warm = knot_backends.cache_size() + 1
    kept = knot_backends.cache_size() + 2  # the cache, the structure being built, one of slack
    map_step = max(max(np.diff(maps[:warm])), 1000)  # floors: noise, not growth
    rss_step = max(max(np.diff(rss[:warm])), 100.0)
    assert max(maps) < maps[0] + kept * map_step, (maps, map_step)
    assert max(rss) < rss[0] + kept * rss_step, (rss, rss_step)
