"""The policy demonstration benchmark runs end to end on an untrained Solo12 policy (smallest
settings): both simulator rows, the MuJoCo deployment row with its intervention counts, and
the error for a missing policy file. Nothing about the policy's quality is asserted."""

import math

import jax
import jax.numpy as jnp
import pytest

pytest.importorskip("mujoco")

from bench_helpers import load_benchmark  # noqa: E402

from controllers.learning.policy import Policy, save_policy  # noqa: E402


@pytest.mark.slow
def test_bench_policy_quick(tmp_path):
    bench = load_benchmark("bench_policy")
    path = tmp_path / "policy.eqx"
    save_policy(Policy.create(jax.random.PRNGKey(0), 12, dtype=jnp.float64, final_scale=0.01), path)
    args = ["--policy", str(path), "--robot", "solo12", "--vx", "0.3", "--runs", "2",
            "--seconds", "0.4", "--settle", "0.1", "--mujoco-vx", "0.3",
            "--mujoco-seconds", "0.6", "--no-write"]  # fmt: skip
    out = bench.main(args)
    assert [(r["contact"], r["vx"]) for r in out["simulator"]] == [("smooth", 0.3), ("hard", 0.3)]
    for r in out["simulator"]:
        assert math.isfinite(r["tracking_error"]) and 0.0 <= r["fell_fraction"] <= 1.0
    (row,) = out["mujoco"]
    assert row["seconds"] == 0.6 and math.isfinite(row["min_base_height"])
    assert row["interventions"].get("soft_start") == 1  # the safety layer ran
    with pytest.raises(SystemExit):
        bench.main(["--policy", str(tmp_path / "missing.eqx")])
