"""The locomotion environment against a recording of itself: a fixed-key rollout with every
extension on (domain randomisation, observation noise, pushes, command resampling, auto-reset
after falls and truncations) and the gradient of its return with respect to the actions, the
gradient SHAC trains with.

The reference `data/env_regression.npz` was recorded by this file's `record` from the
single-class environment before it became a core plus wrappers (that commit's `learning/`
first on `PYTHONPATH`, `python tests/learning/test_env_regression.py`); the shipped policies
were trained on that environment, so the wrapped one must reproduce it. Float64 on CPU: the
tolerances allow a different CPU's last-bit rounding, not a changed random stream or term.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np

from learning.env import EnvConfig, ObservationNoise, Randomization, make_env

REFERENCE = os.path.join(os.path.dirname(__file__), "data", "env_regression.npz")
NUM_ENVS, NUM_STEPS = 3, 16
CONFIG = EnvConfig(
    robot="solo12",
    episode_length=6,  # truncations inside the rollout
    randomization=Randomization(push_velocity=2.0, push_interval=0.04),  # pushes most steps
    observation_noise=ObservationNoise(),
    command_interval=4,
    max_tilt=0.3,  # falls inside the rollout
    min_height_fraction=0.97,
    gait_period=0.4,
)
FAST = {"xla_backend_optimization_level": 0}


def _actions():
    """`(NUM_STEPS, NUM_ENVS, nu)`: large enough that some environments fall."""
    return 2.0 * jax.random.normal(jax.random.PRNGKey(11), (NUM_STEPS, NUM_ENVS, 12), jnp.float64)


NAMES = ("first_obs", "obs", "reward", "done", "terminal_obs", "tracking_error", "fell",
         "truncated", "q")  # fmt: skip


def _return_and_rollout(env, actions):
    """The return (sum of rewards) of the rollout under `actions` from fixed resets, and the
    rollout's arrays (`NAMES`)."""

    def body(state, action):
        state, obs, reward, done, info = jax.vmap(env.step)(state, action)
        out = (obs, reward, done, info["terminal_obs"], info["tracking_error"], info["fell"],
               info["truncated"], state.sim.q)  # fmt: skip
        return state, out

    state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(5), NUM_ENVS))
    first_obs = jax.vmap(env.observe)(state)
    _, outs = jax.lax.scan(body, state, actions)
    return jnp.sum(outs[1]), (first_obs, *outs)


def _compute():
    """The rollout's arrays and d(return)/d(actions) `(NUM_STEPS, NUM_ENVS, nu)`, in one
    compiled function (one compile)."""
    env = make_env(CONFIG)
    run = jax.grad(lambda a: _return_and_rollout(env, a), has_aux=True)
    grad, outs = jax.jit(run, compiler_options=FAST)(_actions())
    arrays = {name: np.asarray(x) for name, x in zip(NAMES, outs)}
    arrays["return_gradient"] = np.asarray(grad)
    return arrays


def record():
    """Write the reference from the environment as it is now."""
    np.savez_compressed(REFERENCE, **_compute())


def test_rollout_and_gradient_match_the_recording():
    reference = np.load(REFERENCE)
    got = _compute()
    # the rollout exercises what it claims to
    assert reference["done"].any() and reference["fell"].any() and reference["truncated"].any()
    for name in ("done", "fell", "truncated"):
        np.testing.assert_array_equal(got[name], reference[name], err_msg=name)
    for name in ("first_obs", "obs", "reward", "terminal_obs", "tracking_error", "q",
                 "return_gradient"):  # fmt: skip
        np.testing.assert_allclose(got[name], reference[name], rtol=1e-9, atol=1e-9, err_msg=name)


if __name__ == "__main__":
    record()
