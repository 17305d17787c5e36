"""The locomotion environment against a recording of itself: a fixed-key rollout with every
extension on (domain randomisation, observation noise, pushes, command resampling, auto-reset
after falls and truncations) and the gradient of its return with respect to the actions.

The reference `data/env_regression.npz` was recorded by this file's `record` (run as a script)
from the single-class environment before it became a core plus wrappers; the shipped policies
were trained on that environment, so the wrapped one must reproduce it. Float64 on CPU: the
tolerances allow a different CPU's last-bit rounding, not a changed random stream or term.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np

from learning.env import EnvConfig, ObservationNoise, Randomization, make_env

REFERENCE = os.path.join(os.path.dirname(__file__), "data", "env_regression.npz")
NUM_ENVS, NUM_STEPS, GRAD_STEPS = 3, 16, 3
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


def _rollout(env, actions):
    def body(state, action):
        state, obs, reward, done, info = jax.vmap(env.step)(state, action)
        out = (obs, reward, done, info["terminal_obs"], info["tracking_error"], info["fell"],
               info["truncated"], state.sim.q)  # fmt: skip
        return state, out

    state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(5), NUM_ENVS))
    first_obs = jax.vmap(env.observe)(state)
    _, outs = jax.lax.scan(body, state, actions)
    return (first_obs, *outs)


def _return_gradient(env, actions):
    """d(sum of rewards over GRAD_STEPS)/d(actions) `(GRAD_STEPS, NUM_ENVS, nu)`."""

    def total(actions):
        state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(5), NUM_ENVS))

        def body(state, action):
            state, _, reward, _, _ = jax.vmap(env.step)(state, action)
            return state, reward

        return jnp.sum(jax.lax.scan(body, state, actions)[1])

    return jax.grad(total)(actions)


NAMES = ("first_obs", "obs", "reward", "done", "terminal_obs", "tracking_error", "fell",
         "truncated", "q")  # fmt: skip


def _compute():
    env = make_env(CONFIG)
    actions = _actions()
    outs = jax.jit(lambda a: _rollout(env, a), compiler_options=FAST)(actions)
    grad = jax.jit(lambda a: _return_gradient(env, a), compiler_options=FAST)(
        actions[:GRAD_STEPS] * 0.2
    )
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
    for name in (*NAMES[:3], *NAMES[4:6], "q", "return_gradient"):
        if name in ("done", "fell", "truncated"):
            continue
        np.testing.assert_allclose(got[name], reference[name], rtol=1e-9, atol=1e-9, err_msg=name)


if __name__ == "__main__":
    record()
