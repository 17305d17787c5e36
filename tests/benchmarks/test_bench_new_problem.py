"""The new-problem benchmark runs end to end at small settings without writing (the README job
twice, the ANYmal trot's first and warm solves, Crocoddyl's, a short MPC run): the second run
of the README job finds every library built, the ANYmal trot converges with every knot's
contact solved to the tolerance, and the table names every measure. Nothing about speed is
asserted (targets live in BENCHMARKS.md)."""

import pytest
from bench_helpers import load_benchmark


@pytest.mark.slow  # two library builds from an empty cache, and Crocoddyl's solves
def test_bench_new_problem_quick(capsys):
    bench = load_benchmark("bench_new_problem")
    if bench.bench_trajopt.crocoddyl_python(create=False) is None:
        pytest.skip("no Crocoddyl environment (benchmarks/.venv-crocoddyl; nothing downloads)")
    results = bench.main(["--repeats", "1", "--mpc-seconds", "1.5", "--skip-stones",
                          "--no-write"])  # fmt: skip
    assert results["readme"]["second_solve_s"] < results["readme"]["first_solve_s"]
    assert results["anymal"]["status"] == "converged"
    assert results["anymal"]["unconverged_knots"] == []
    assert results["mpc"]["cycles"] >= 70
    printed = capsys.readouterr().out
    assert bench.HEADING in printed and "Crocoddyl's 56-knot iteration" in printed
