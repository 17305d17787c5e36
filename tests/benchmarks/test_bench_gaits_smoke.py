"""The gait-library benchmark runs end to end (worker process, JSON, table) with the tiniest
settings and writes nothing (`--no-write`); it asserts the plumbing, not the gaits (those are
in test_gait_library.py)."""

import pytest
from bench_helpers import load_benchmark


@pytest.mark.slow
def test_bench_gaits_tiny(capsys):
    bench = load_benchmark("bench_gaits")
    results = bench.main(["--robots", "solo12", "--gaits", "stand", "pronk", "--iterations", "1",
                          "--duration", "0.06", "--jobs", "1", "--no-write"])  # fmt: skip
    assert set(results) == {"solo12"} and set(results["solo12"]) == {"stand", "pronk"}
    row = results["solo12"]["pronk"]
    assert {"speed", "drift", "height", "pattern agreement", "flight"} <= set(row["checks"])
    assert "| solo12 | pronk |" in capsys.readouterr().out
