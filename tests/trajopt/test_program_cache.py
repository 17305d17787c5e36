"""Traced programs saved on disk (`trajopt.engine.program_cache`: the README's main command the
second time).

What would be false if the cache were wrong: a second function object with the same name and
context runs the saved program without executing the Python function at all (a trace counter
stays put) and returns the same bits; anything the key covers (context, argument shapes, the
sources) makes a new program; a corrupt file or an export failure warns and still gives the
right answer; tracers and the "off" setting bypass it (fast, on a toy function). Slow (the
compilation of an FDDP structure, three times): a structure loaded in a "new process" (a fresh
`JaxKnots`) reproduces the rollout, the cost and a 3-iteration solve bit for bit.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trajopt.engine import fddp, jax_knots, knot_backends, program_cache, riccati, shooting
from trajopt.engine.program_cache import DiskCachedFunction


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("DIFFLOCO_CACHE_DIR", str(tmp_path))
    return tmp_path / "programs"


def _counted(runs):
    """A new pytree function object (dict in, tuple out) that appends to `runs` each time its
    Python body runs (a new object each call: JAX's trace cache is per function object)."""

    def f(tree, scale):
        runs.append(1)
        x, y = tree["x"], tree["y"]
        return jnp.sin(x) * scale + jnp.sum(y), {"norm": jnp.linalg.norm(y), "n": x.shape[0] * 1.0}

    return f


def _args(n=3):
    rng = np.random.default_rng(0)
    return {"x": rng.normal(size=n), "y": rng.normal(size=(2, 2))}, 0.5


def _same(a, b):
    leaves_a, tree_a = jax.tree_util.tree_flatten(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten(b)
    return tree_a == tree_b and all(
        np.array_equal(np.asarray(u), np.asarray(v)) for u, v in zip(leaves_a, leaves_b)
    )


def test_a_second_function_object_loads_the_program_without_tracing(folder):
    runs = []
    expected = jax.jit(_counted([]))(*_args())
    first = DiskCachedFunction("toy", jax.jit(_counted(runs)), context="ctx")
    out = first(*_args())
    assert _same(out, expected)
    assert (first.exported, first.loaded, len(runs)) == (1, 0, 1)
    assert len(list(folder.glob("*" + program_cache.SUFFIX))) == 1
    first(*_args())  # same signature in the same object: no new export, no trace
    assert (first.exported, len(runs)) == (1, 1)

    second = DiskCachedFunction("toy", jax.jit(_counted(runs)), context="ctx")  # a "new process"
    out = second(*_args())
    assert _same(out, expected)
    assert (second.exported, second.loaded, len(runs)) == (0, 1, 1), "the body ran again"


def test_the_key_covers_context_shapes_and_sources(folder, monkeypatch):
    f = _counted([])
    DiskCachedFunction("toy", jax.jit(f), context="a")(*_args())
    other_context = DiskCachedFunction("toy", jax.jit(f), context="b")
    other_context(*_args())
    assert other_context.exported == 1
    other_shape = DiskCachedFunction("toy", jax.jit(f), context="a")
    out = other_shape(*_args(n=4))
    assert other_shape.exported == 1 and np.shape(out[0]) == (4,)
    monkeypatch.setattr(program_cache, "_SOURCE_HASH", ["an edited source tree"])
    edited = DiskCachedFunction("toy", jax.jit(f), context="a")
    edited(*_args())
    assert (edited.exported, edited.loaded) == (1, 0)
    assert len(list(folder.glob("*" + program_cache.SUFFIX))) == 4


def test_a_corrupt_file_warns_and_is_replaced(folder):
    f = _counted([])
    expected = jax.jit(f)(*_args())
    DiskCachedFunction("toy", jax.jit(f), context="ctx")(*_args())
    (path,) = folder.glob("*" + program_cache.SUFFIX)
    path.write_bytes(path.read_bytes()[:100])  # truncated
    again = DiskCachedFunction("toy", jax.jit(f), context="ctx")
    with pytest.warns(RuntimeWarning, match="could not load the saved program of toy"):
        out = again(*_args())
    assert _same(out, expected) and again.exported == 1
    third = DiskCachedFunction("toy", jax.jit(f), context="ctx")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _same(third(*_args()), expected) and third.loaded == 1


def test_a_function_that_cannot_be_exported_warns_and_still_runs(folder):
    def f(x):
        jax.debug.callback(lambda v: None, x)  # host callbacks cannot be serialised
        return x * 2.0

    cached = DiskCachedFunction("callback", jax.jit(f), context="ctx")
    with pytest.warns(RuntimeWarning, match="callback cannot be exported"):
        out = cached(np.arange(3.0))
    np.testing.assert_array_equal(out, np.arange(3.0) * 2.0)
    assert not list(folder.glob("*" + program_cache.SUFFIX))


def test_tracers_and_the_off_setting_bypass_the_cache(folder, monkeypatch):
    f = _counted([])
    cached = DiskCachedFunction("toy", jax.jit(f), context="ctx")
    tree, scale = _args()
    grad = jax.grad(lambda s: cached(tree, s)[0].sum())(scale)
    np.testing.assert_allclose(grad, np.sin(tree["x"]).sum(), rtol=1e-12)
    assert not folder.exists()
    monkeypatch.setenv("DIFFLOCO_CACHE_DIR", "off")
    off = DiskCachedFunction("toy", jax.jit(f), context="ctx")
    assert _same(off(*_args()), jax.jit(f)(*_args()))
    assert (off.exported, off.loaded) == (0, 0) and not folder.exists()


def _tiny_problem():
    from trajopt.gaits import make_problem

    return make_problem("solo12", "trot", 0.3, duration=0.04, dt=0.02, substeps=1,
                        num_sweeps=2)  # fmt: skip


@pytest.mark.slow  # 17 s of compilation (three times the same small structure)
def test_an_fddp_rollout_loaded_from_disk_gives_the_same_bits(folder):
    problem = _tiny_problem()
    us = jnp.full((problem.horizon, problem.nu), 0.01)
    results = []
    for _ in range(2):  # the second Compiled stands for a new process: it reads the files
        fn = jax_knots.JaxKnots(problem)
        xs, forces, taus = fn.rollout(problem.data, us)
        results.append((xs, forces, taus, fn.evaluate(problem.data, xs, us)))
    assert [(g.exported, g.loaded) for g in (fn.rollout, fn.evaluate)] == [(0, 1)] * 2
    assert _same(results[0], results[1])
    plain = jax.jit(lambda d, u: shooting.rollout(problem, d, u))(problem.data, us)
    for a, b in zip(jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(results[1])):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-12, atol=1e-12)


@pytest.mark.slow  # 100 s of compilation
def test_an_fddp_solve_loaded_from_disk_is_the_same_bit_for_bit(folder):
    """Every function of the iteration (the knot Jacobians through the contact solve's custom
    derivative rules, the Riccati pass, the line search) exported, loaded and solved again."""
    problem = _tiny_problem()
    us = jnp.full((problem.horizon, problem.nu), 0.01)
    solves = []
    for _ in range(2):
        knot_backends.clear(jax_caches=False)
        riccati.RICCATI.forget()  # with the backends: what a new process holds
        riccati_loaded = riccati.RICCATI.loaded
        solves.append(fddp.solve_fddp(problem, None, us, max_iterations=3, verbose=False))
        fn = knot_backends.for_problem(problem)
    names = ("rollout_and_evaluate", "linearize_all", "line_search")
    assert all(getattr(fn, n).loaded >= 1 and getattr(fn, n).exported == 0 for n in names)
    assert riccati.RICCATI.loaded > riccati_loaded  # the second solve read the Riccati pass
    info_a, info_b = solves
    assert _same((info_a.xs, info_a.us), (info_b.xs, info_b.us))
    assert info_a.iterations == info_b.iterations >= 1
    untimed = [[{k: v for k, v in r.items() if k != "time"} for r in i.history]
               for i in (info_a, info_b)]  # fmt: skip
    assert info_a.cost == info_b.cost and untimed[0] == untimed[1]


def test_the_fddp_iteration_functions_are_keyed_by_the_structure():
    problem = _tiny_problem()
    fn = jax_knots.JaxKnots(problem)
    for name in ("rollout", "evaluate", "linearize_all", "line_search"):
        f = getattr(fn, name)
        assert isinstance(f, DiskCachedFunction) and f.name == f"fddp.{name}"
        assert f.context == repr(shooting.structure_key(problem))
    # the Riccati pass reads shapes only: one function for every structure
    assert isinstance(riccati.RICCATI, DiskCachedFunction)
    assert riccati.RICCATI.name == "riccati.backward"
