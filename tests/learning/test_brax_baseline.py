"""Brax's PPO, the field's baseline, on our environment through `learning.brax_adapter`, called
through the one training signature (`learning.trainer.train`); skipped without the `brax` extra.

Tiny on purpose (Solo12, 2 environments, a 4-wide network): the cost is Brax's compile."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brax")

from learning import brax_adapter, trainer  # noqa: E402
from learning.env import EnvConfig, Randomization, make_env  # noqa: E402
from learning.ppo.train import PPOConfig  # noqa: E402

ENV = EnvConfig(robot="solo12", dtype="float32", episode_length=8,
                randomization=Randomization.none())  # fmt: skip
CONFIG = brax_adapter.BraxPPOConfig(num_timesteps=16, num_envs=2, unroll_length=2, batch_size=2,
                                    num_minibatches=2, num_updates_per_batch=1, hidden=(4,),
                                    num_evals=2)  # fmt: skip


def test_brax_ppo_trains_on_our_environment_and_its_policy_runs():
    seen = []
    policy, metrics = trainer.train(ENV, CONFIG, progress_fn=lambda step, r: seen.append(step))
    assert metrics and seen == [r["env_steps"] for r in metrics]
    assert metrics[-1]["env_steps"] >= CONFIG.num_timesteps
    losses = [v for r in metrics for k, v in r.items() if k.endswith("loss")]
    assert losses and np.all(np.isfinite(losses))
    # the policy acts on our environment's observations, in Brax's [-1, 1] action box
    env = brax_adapter.BraxEnv(make_env(ENV).wrapped)
    assert (env.observation_size, env.action_size) == (make_env(ENV).observation_size, 12)
    state = env.reset(jax.random.PRNGKey(0))
    action = policy(state.obs)
    assert action.shape == (12,) and np.all(np.abs(np.asarray(action)) <= 1)
    after = jax.jit(env.step)(state, action)
    assert np.all(np.isfinite(np.asarray(after.obs))) and np.isfinite(float(after.reward))
    assert float(after.info["steps"]) == 1.0


def test_train_names_a_bad_environment_or_configuration():
    with pytest.raises(TypeError, match="env must be"):
        trainer.train(ENV.to_dict(), CONFIG)
    with pytest.raises(TypeError, match="config must be one of .*BraxPPOConfig"):
        trainer.train(ENV, {"num_envs": 2})
    assert trainer.TRAINERS[PPOConfig] is trainer.train_ppo
    assert jnp.dtype(make_env(ENV).dtype) == jnp.float32
