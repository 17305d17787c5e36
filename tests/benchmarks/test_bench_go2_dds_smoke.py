"""The Go2 DDS benchmark runs end to end at its smallest settings (a 2.5 s loopback run): every
row it renders is a finite number and the stand held. Nothing about speed is asserted."""

import math

import pytest

pytest.importorskip("cyclonedds", reason="the go2 extra is not installed (README, Go2)")
pytest.importorskip("mujoco")

from bench_helpers import load_benchmark  # noqa: E402


@pytest.mark.slow
def test_bench_go2_dds_quick():
    bench = load_benchmark("bench_go2_dds")
    out = bench.main(["--quick", "--no-write"])
    for row in out["messages"]:
        assert all(math.isfinite(v) and v > 0 for k, v in row.items() if k != "message"), row
    run = out["loopback"]
    assert run["robot_bad_crc"] == 0 and run["safety_mode"] == "normal"
    assert run["min_base_height_after_2s_m"] > 0.3 and run["lowcmd_sent_per_s"] > 0
