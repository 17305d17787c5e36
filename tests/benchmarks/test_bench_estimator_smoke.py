"""The estimator benchmark runs end to end at its smallest settings (a 4 s tour at 0.3 s per
command): every number it reports is finite, the estimator never faulted and the safety layer
stayed in NORMAL. Nothing about speed is asserted."""

import math

import pytest

pytest.importorskip("mujoco")

from bench_helpers import load_benchmark  # noqa: E402


@pytest.mark.slow
def test_bench_estimator_quick():
    bench = load_benchmark("bench_estimator")
    out = bench.main(["--quick", "--no-write"])
    assert out["fault"] is None and out["safety_mode"] == "normal"
    for key in ("update_median_us", "update_p99_us", "numpy_update_median_us", "velocity_rms",
                "height_max_error"):
        assert math.isfinite(out[key]) and out[key] > 0, key
    assert all(math.isfinite(v) and v > 0 for v in out["kinematics_us"].values())
