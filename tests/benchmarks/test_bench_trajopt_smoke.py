"""The trajectory optimisation benchmark (our side) runs end to end with the tiniest settings;
Crocoddyl is skipped (it lives in its own venv) and timings are not asserted. Most of the time
is the one-off JIT compilation of the solver's functions."""

import math

import jax
import pytest
from bench_helpers import load_benchmark

TINY = [
    "--horizons",
    "2",
    "--iterations",
    "1",
    "--split-iterations",
    "1",
    "--warm-iterations",
    "1",
    "--warm-repeats",
    "1",
    "--skip-crocoddyl",
    "--no-stability",
    "--no-pin",
]


@pytest.fixture
def allow_rank_promotion():
    """conftest makes implicit rank promotion raise; `trajopt.problem.running_residuals` still
    broadcasts `stance[:, None] * jnp.array([0, 0, 1])` ((4, 1) x (3,)), so allow it here."""
    old = jax.config.jax_numpy_rank_promotion
    jax.config.update("jax_numpy_rank_promotion", "allow")
    yield
    jax.config.update("jax_numpy_rank_promotion", old)


@pytest.mark.slow
def test_bench_trajopt_tiny(tmp_path, allow_rank_promotion):
    bench = load_benchmark("bench_trajopt")
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# Benchmarks\n\n## Contact step\n\nkept\n")
    results = bench.main([*TINY, "--output", str(out)])
    (r,) = results["ours"]
    assert r["horizon"] == 2
    for run in (r["second"], r["warm"]):
        assert run["iterations"] <= 1 and math.isfinite(run["cost"])
        assert run["status"] in ("converged", "max_iterations", "line_search_failed")
    split = r["split"]
    keys = ("linearisation", "backward", "line_search", "total", "per_knot_forward_s", "guess_s")
    for key in keys:
        assert math.isfinite(split[key]) and split[key] >= 0.0
    text = out.read_text()
    assert bench.SECTION in text and "## Contact step" in text and "kept" in text
    assert "### Where our iteration time goes" in text

    # with (fake) Crocoddyl numbers the ratio rows and targets render; rewriting replaces the
    # section in place
    results["crocoddyl"] = {
        "anymal_c": {
            "knots": 56,
            "iterations": 7,
            "converged": True,
            "solve_s_median": 0.06,
            "solve_cpu_s_median": 0.06,
            "per_iteration_s_median": 0.0085,
            "per_iteration_cpu_s": 0.0085,
            "linearisation_s_median": 0.005,
            "cost": 333.0,
            "versions": {"crocoddyl": "x", "pinocchio": "y", "numpy": "z", "python": "3"},
        }
    }
    s = bench.parse_args([*TINY, "--output", str(out)])
    s.pinned, s.load_before, s.load_after, s.date = False, 0.0, 0.0, "today"
    text = bench.render(results, s)
    assert "Crocoddyl FDDP | anymal_c" in text and "Time per iteration <=" in text
    bench.write_section(out, text)
    new = out.read_text()
    assert new.count(bench.SECTION) == 1 and "kept" in new
    assert new.index("## Contact step") < new.index(bench.SECTION)
