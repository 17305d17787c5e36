"""PPO's losses: generalised advantage estimation and the clipped surrogate objective

    L = -E[min(r A, clip(r, 1 - eps, 1 + eps) A)] + c_v E[(V - R)^2] - c_e H(pi),
    r = pi(a | o) / pi_old(a | o),

`A` by GAE(lambda) with the learned value function (bootstrapped at the rollout's end and cut at
terminations), `R = A + V`, `H(pi)` the Gaussian's entropy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .networks import ActorCritic, gaussian_log_prob


def gae(rewards, values, next_values, dones, gamma: float, lam: float):
    """Generalised advantage estimates `(T, N)` and returns `A + V`.

    `rewards, values, dones (T, N)`, `next_values (T, N)` the value of the next observation
    (after auto-reset, the next episode's first: masked by `dones`)."""
    deltas = rewards + gamma * next_values * (1.0 - dones) - values

    def back(carry, x):
        delta, done = x
        carry = delta + gamma * lam * (1.0 - done) * carry
        return carry, carry

    _, adv = jax.lax.scan(back, jnp.zeros_like(deltas[0]), (deltas, dones), reverse=True)
    return adv, adv + values


def ppo_loss(model: ActorCritic, batch, config):
    """`L` (module docstring) of a minibatch `(obs, action, old_logp, advantage, return)`;
    config: a `learning.ppo.train.PPOConfig` (its `clip`, `value_coef`, `entropy_coef`)."""
    obs, action, old_logp, advantage, ret = batch
    mean = jax.vmap(model.policy)(obs)
    logp = gaussian_log_prob(action, mean, model.log_std)
    ratio = jnp.exp(logp - old_logp)
    clipped = jnp.clip(ratio, 1.0 - config.clip, 1.0 + config.clip)
    policy_loss = -jnp.mean(jnp.minimum(ratio * advantage, clipped * advantage))
    value_loss = jnp.mean((jax.vmap(model.value_of)(obs) - ret) ** 2)
    entropy = jnp.sum(model.log_std + 0.5 * jnp.log(2 * jnp.pi * jnp.e))
    return policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
