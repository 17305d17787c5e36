"""The command-path benchmark runs end to end at its smallest settings (300 ticks a case): its
JSON has every part of every case as finite numbers, the loop ran, the safety layer stayed in
NORMAL, and the table renders. Nothing about speed is asserted."""

import json
import math

import pytest

pytest.importorskip("cyclonedds", reason="the go2 extra is not installed (README, Go2)")
pytest.importorskip("mujoco")

from bench_helpers import load_benchmark  # noqa: E402


def test_bench_command_path_quick(tmp_path):
    bench = load_benchmark("bench_command_path")
    out = tmp_path / "command_path.json"
    returned = bench.main(["--quick", "--out", str(out)])
    results = json.loads(out.read_text())
    assert results["cases"].keys() == bench.CASES.keys()
    assert results["ticks"] == 300 and len(results["load_average_start"]) == 3
    for key, case in results["cases"].items():
        assert case["parts"].keys() == bench.PARTS.keys(), key
        for part, stats in case["parts"].items():
            values = [stats["median_us"], stats["p99_us"], stats["max_us"]]
            assert all(math.isfinite(v) and v >= 0 for v in values), (key, part, stats)
            assert stats["n"] > 0, (key, part)
        assert case["ticks"] > 100 and case["safety_mode"] == "normal", key
    text = bench.markdown_section(returned)
    assert all(label in text for label, _ in bench.PARTS.values())
