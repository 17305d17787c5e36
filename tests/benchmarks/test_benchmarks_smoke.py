"""The dynamics benchmark script runs end to end (smallest settings); timings are not asserted."""

import math

import pytest
from bench_helpers import load_benchmark


@pytest.mark.slow  # 31 s of compilation (every dynamics variant); the variants have fast tests
def test_bench_dynamics_quick(tmp_path):
    bench = load_benchmark("bench_dynamics")
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# Benchmarks\n\n## Other section\n\nkept\n")
    rows = bench.main(["--quick", "--robot", "solo12", "--repeats", "1", "--output", str(out)])
    groups = {r.group for r in rows}
    assert {"pinocchio", "jax fd", "jax jac", "casadi"} <= groups
    for r in rows:
        assert math.isfinite(r.per_call_us) and r.per_call_us > 0
        # every variant computes the same quantity as Pinocchio (loose: float64, any layout)
        assert r.max_err < 1e-6, (r.variant, r.max_err)
    text = out.read_text()
    assert bench.SECTION in text and "## Other section" in text and "kept" in text
    # rewriting replaces the section in place instead of appending a second copy
    bench.write_section(out, bench.render(rows, bench.parse_args(["--quick"])))
    assert out.read_text().count(bench.SECTION) == 1
