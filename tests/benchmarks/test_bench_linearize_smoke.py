"""The linearisation-layout benchmark runs end to end and writes nothing (`--no-write`); the
batched layout must compute the loop's Jacobians (to rounding), or its timing means nothing."""

import pytest
from bench_helpers import load_benchmark


@pytest.mark.slow
def test_bench_linearize_layouts_agree(capsys):
    bench = load_benchmark("bench_linearize")
    rows = bench.main(["--layouts", "loop", "map", "--repeats", "1", "--no-write"])
    assert [r["layout"] for r in rows] == ["loop", "map"]
    assert all(r["knots"] == 56 and r["median_ms"] > 0 for r in rows)
    assert rows[1]["max_diff"] < 1e-9
    assert "| map | 56 |" in capsys.readouterr().out
