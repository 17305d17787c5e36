"""The contact benchmark script runs end to end (smallest settings); timings are not asserted."""

import math

import pytest
from bench_helpers import load_benchmark

pytest.importorskip("mujoco")


def test_bench_contact_quick(tmp_path):
    bench = load_benchmark("bench_contact")
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# Benchmarks\n\n## Rigid-body dynamics\n\nkept\n")
    rows = bench.main(["--quick", "--output", str(out)])
    groups = {r.group for r in rows}
    assert {"mujoco", "step"} <= groups
    assert {r.batch for r in rows if r.group == "step"} == {0, 2}
    for r in rows:
        assert math.isfinite(r.steps_per_s) and r.steps_per_s > 0
    text = out.read_text()
    assert bench.SECTION in text and "## Rigid-body dynamics" in text and "kept" in text
    assert "### Targets" in text and "MuJoCo" in text
    # rewriting replaces the section in place instead of appending a second copy
    bench.write_section(out, bench.render(rows, bench.parse_args(["--quick"])))
    assert out.read_text().count(bench.SECTION) == 1
    assert out.read_text().index("## Rigid-body") < out.read_text().index(bench.SECTION)
