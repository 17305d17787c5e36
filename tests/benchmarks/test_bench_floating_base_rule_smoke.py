"""The floating-base rule benchmark runs end to end and prints one row per layout and part."""

import pytest
from bench_helpers import load_benchmark


@pytest.mark.slow
def test_bench_floating_base_rule_runs(capsys):
    table = load_benchmark("bench_floating_base_rule").main(["--rounds", "1"])
    rows = [line for line in table.splitlines() if line.startswith("| ") and "us" not in line]
    assert len(rows) == 8  # 2 layouts x 4 parts
    for row in rows:
        assert float(row.split("|")[3]) > 0
    assert "| legs | all |" in capsys.readouterr().out
