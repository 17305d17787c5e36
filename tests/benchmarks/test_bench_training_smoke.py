"""`benchmarks/bench_training.py --init`: the warm-started method trains from the saved policy
(the same benchmark for a distilled and a fresh start)."""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from bench_helpers import load_benchmark

from learning.policy import Policy, save_policy


@pytest.mark.slow  # about 2 min: SHAC's iteration and the evaluation compile for Go2
def test_shac_init_trains_from_the_saved_policy(tmp_path):
    """With a zero learning rate, shac-init's evaluation after its one iteration is the saved
    policy's (evaluated here with the benchmark's own evaluator; not to the last bit: the
    observation normaliser still takes in the iteration's 16 samples), and not a fresh
    network's; bad combinations of --init and the method raise before any training."""
    bench = load_benchmark("bench_training")
    # a policy no fresh network resembles: every joint target 4 action units off the stance
    fresh = Policy.create(jax.random.key(5), 12, clock=True)
    saved = eqx.tree_at(lambda p: p.mlp.layers[-1].bias, fresh, jnp.full(12, 4.0, jnp.float32))
    path = tmp_path / "policy.eqx"
    save_policy(saved, str(path))
    common = ["--minutes", "0.01", "--envs", "4", "--horizon", "4", "--lr", "0",
              "--gait-period", "0.4", "--no-write", "--results", str(tmp_path)]  # fmt: skip
    bench.main(["--methods", "shac-init", "--init", str(path), *common])
    curve = json.loads((tmp_path / "training_curves.json").read_text())["shac-init"]["curve"]
    evaluate = bench._evaluator(bench.task_config(bench.parse_args(common)))
    error, fell = evaluate(saved)
    assert abs(curve[0]["tracking_error"] - error) < 0.005
    assert curve[0]["fell_fraction"] == fell
    fresh_error, fresh_fell = evaluate(fresh)  # the comparison can tell the two apart
    assert abs(fresh_error - error) > 0.05 or abs(fresh_fell - fell) > 0.5
    with pytest.raises(SystemExit, match="shac-init method and --init POLICY go together"):
        bench.main(["--methods", "shac-smooth", "--init", str(path), *common])
    with pytest.raises(SystemExit, match="no policy file"):
        bench.main(["--methods", "shac-init", "--init", str(tmp_path / "none.eqx"), *common])


@pytest.mark.slow  # about 1 min: PPO's iteration compiles for Go2
def test_ppo_observes_the_gait_clock_of_the_environment(tmp_path):
    """With --gait-period the environments observe the clock; PPO's fresh policy must too (it
    was built without it and stopped on the observation's size, 51 against 48)."""
    bench = load_benchmark("bench_training")
    bench.main(["--methods", "ppo", "--minutes", "0.01", "--ppo-envs", "4", "--ppo-steps", "4",
                "--gait-period", "0.4", "--no-write", "--results", str(tmp_path)])  # fmt: skip
    run = json.loads((tmp_path / "training_curves.json").read_text())["ppo"]
    assert run["curve"] and run["settings"]["gait_period"] == 0.4
