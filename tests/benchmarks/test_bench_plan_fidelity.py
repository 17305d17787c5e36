"""The plan-fidelity benchmark runs end to end at its smallest settings (a stand and a short,
partly solved trot, the planner's default contact) without writing: MuJoCo's open-loop replay
of the standing plan stays within a few mm of it (wrong state conventions, gains, damping or
actuator order would drop or tip the robot), the trot's kept fractions are finite and in
(0, 1.5), and the planner's own plant reproduces each plan. Nothing about speed is asserted."""

import math

import pytest

pytest.importorskip("mujoco")

from bench_helpers import load_benchmark  # noqa: E402


def test_bench_plan_fidelity_quick(tmp_path, capsys):
    bench = load_benchmark("bench_plan_fidelity")
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# Benchmarks\n\n## Other\n\nkept\n")
    rows = bench.main(["--cases", "stand", "trot", "--variants", "converged",
                       "--trot-iterations", "10", "--duration", "0.4", "--output", str(out),
                       "--no-write"])  # fmt: skip
    assert out.read_text() == "# Benchmarks\n\n## Other\n\nkept\n"
    stand, trot = rows
    assert (stand.case, trot.case) == ("stand", "trot")
    assert stand.mujoco_gap_mm < 3.0 and stand.own_hard_gap_mm < 3.0
    assert math.isnan(stand.kept_mujoco)  # nothing to keep
    assert math.hypot(*trot.plan_xy) > 0.05
    for kept in (trot.kept_mujoco, trot.kept_own_hard, trot.kept_own_plan):
        assert math.isfinite(kept) and 0.0 < kept < 1.5
    assert trot.mujoco_gap_mm < 50.0
    for row in rows:
        assert row.reproduce_err < 1e-6
        assert row.residual_max <= 1.5e-4  # the default contact solve converged (1e-4 m/s)
        assert 0.0 <= row.excess_share <= row.near_share + 1.0
    printed = capsys.readouterr().out
    assert bench.HEADING in printed and "| trot | smooth, to 0.0001 m/s |" in printed
