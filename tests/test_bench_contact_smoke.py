"""The contact benchmark script runs end to end (smallest settings); timings are not asserted."""

import importlib.util
import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("mujoco")

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_contact.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_contact", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


def test_bench_contact_quick(tmp_path):
    bench = _load()
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# Benchmarks\n\n## Rigid-body dynamics (issue 2)\n\nkept\n")
    rows = bench.main(["--quick", "--output", str(out)])
    groups = {r.group for r in rows}
    assert {"mujoco", "step"} <= groups
    assert {r.batch for r in rows if r.group == "step"} == {0, 2}
    for r in rows:
        assert math.isfinite(r.steps_per_s) and r.steps_per_s > 0
    text = out.read_text()
    assert bench.SECTION in text and "## Rigid-body dynamics (issue 2)" in text and "kept" in text
    assert "### Targets" in text and "MuJoCo" in text
    # rewriting replaces the section in place instead of appending a second copy
    bench.write_section(out, bench.render(rows, bench.parse_args(["--quick"])))
    assert out.read_text().count(bench.SECTION) == 1
    assert out.read_text().index("## Rigid-body") < out.read_text().index(bench.SECTION)
