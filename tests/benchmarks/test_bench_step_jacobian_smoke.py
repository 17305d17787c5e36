"""The step-Jacobian breakdown benchmark runs end to end and prints one row per piece and mode."""

import pytest
from bench_helpers import load_benchmark


@pytest.mark.slow
def test_bench_step_jacobian_runs(capsys):
    table = load_benchmark("bench_step_jacobian").main(["--rounds", "1"])
    rows = [line for line in table.splitlines() if line.startswith("| ") and "us" not in line]
    assert len(rows) == 12  # 3 pieces x 2 impulse-solve modes x 2 rigid-body modes
    for row in rows:
        forward, jac = (float(c) for c in row.split("|")[3:5])
        assert 0 < forward < jac  # a Jacobian in 49 directions costs more than one evaluation
    out = capsys.readouterr().out
    assert "the whole step (autodiff) | implicit" in out
    assert "the whole step (jacobian) | implicit" in out
