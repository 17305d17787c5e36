"""The robot-record benchmark runs end to end on two robots (one with an SRDF, one without)
and renders its table: both heights finite and positive, the robot without an SRDF marked so.
Nothing about speed is asserted."""

import math

import pytest

pytest.importorskip("mujoco")

from bench_helpers import load_benchmark  # noqa: E402


def test_bench_robots_quick():
    bench = load_benchmark("bench_robots")
    rows = bench.main(["--robots", "solo8", "laikago", "--no-write"])
    by_name = {r["robot"]: r for r in rows}
    assert by_name["laikago"]["srdf_height"] is None and by_name["laikago"]["pose"] == "rule"
    assert by_name["solo8"]["pose"] == "SRDF"
    for r in rows:
        assert math.isfinite(r["rule_height"]) and r["rule_height"] > 0.1
    table = bench.render(rows, "test")
    assert "| laikago |" in table and "no SRDF" in table
