"""PPO's networks: the deployable `Policy` as the mean of a diagonal Gaussian, a
state-independent `log_std (nu,)`, and a value MLP on the policy's normalised observation.

    pi(a | o) = N(a; policy(o), diag(exp(log_std))^2)
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ..policy import Policy, observation_size


class ActorCritic(eqx.Module):
    """The deployable `Policy` (the action mean), a state-independent `log_std (nu,)` and a
    value MLP on the policy's normalised observation."""

    policy: Policy
    log_std: jax.Array
    value: eqx.nn.MLP

    @staticmethod
    def create(key, nu: int, config, policy: Policy | None = None,
               clock: bool = False) -> ActorCritic:  # fmt: skip
        """config: a `learning.ppo.train.PPOConfig` (its `hidden`, `init_log_std`).
        clock: a fresh policy observes the gait clock (`observation_size(nu, clock)`)."""
        k1, k2 = jax.random.split(key)
        policy = policy or Policy.create(k1, nu, config.hidden, clock=clock)
        value = eqx.nn.MLP(observation_size(nu, policy.clock), "scalar", config.hidden[0],
                           len(config.hidden), activation=jax.nn.elu, key=k2)  # fmt: skip
        return ActorCritic(policy, jnp.full(nu, config.init_log_std, jnp.float32), value)

    def value_of(self, obs):
        return self.value(self.policy.normalizer.normalize(obs))


def gaussian_log_prob(action, mean, log_std):
    """`log N(action; mean, diag(exp(log_std))^2)` summed over the last axis."""
    log_std = jnp.broadcast_to(log_std, mean.shape)
    z = (action - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z**2 - log_std - 0.5 * jnp.log(2 * jnp.pi), axis=-1)


def trainable(model: ActorCritic):
    """The filter spec of the trained leaves: everything but the normaliser (data statistics,
    not parameters)."""
    spec = jax.tree.map(eqx.is_inexact_array, model)
    no_norm = jax.tree.map(lambda _: False, model.policy.normalizer)
    return eqx.tree_at(lambda m: m.policy.normalizer, spec, no_norm)
