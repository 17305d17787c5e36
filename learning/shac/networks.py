"""SHAC's networks: the deployable policy (`learning.policy.Policy`) and a critic beside it.

The critic reads the policy's normalised observation (the normaliser is the policy's, passed
in, not owned), so the two see the same inputs and the critic needs no statistics of its own.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ..policy import Policy


class Critic(eqx.Module):
    """`V(obs) -> ()`: the policy's normaliser (passed in, not owned), then an ELU MLP."""

    mlp: eqx.nn.MLP

    @staticmethod
    def create(key, obs_size: int, hidden=(128, 128), dtype=jnp.float32) -> Critic:
        return Critic(eqx.nn.MLP(obs_size, "scalar", width_size=hidden[0], depth=len(hidden),
                                 activation=jax.nn.elu, key=key, dtype=dtype))  # fmt: skip

    def __call__(self, normalized_obs):
        return self.mlp(normalized_obs)


def batched_values(critic: Critic, policy: Policy, obs):
    """Batched critic values `(N,)` of raw observations `(N, n_obs)` (the policy's normaliser
    first, in the policy's dtype)."""
    pdtype = policy.normalizer.mean.dtype
    return jax.vmap(lambda o: critic(policy.normalizer.normalize(o)))(obs.astype(pdtype))
