"""The implicit-vs-unrolled derivative benchmark runs end to end and writes nothing
(`--no-write`); at 500 sweeps the two derivatives agree (the reference of its gap table is
meaningful), and the rollout gradients are finite in both modes."""

import pytest
from bench_helpers import load_benchmark


@pytest.mark.slow
def test_bench_derivatives_runs_and_modes_agree_at_convergence(capsys):
    bench = load_benchmark("bench_derivatives")
    knot, gap, grad = bench.main(["--repeats", "1", "--gradient-steps", "20", "--no-write"])
    assert set(knot) == {"implicit", "unrolled"}
    assert all(k["forward_s"] > 0 and k["linearize_s"] > 0 for k in knot.values())
    converged = [r for r in gap if r["sweeps"] == 500]
    assert converged and converged[0]["gap"] < 1e-9 and converged[0]["residual"] < 1e-9
    assert all(g["finite"] for g in grad.values())
    assert "| implicit |" in capsys.readouterr().out
