"""SHAC's losses: the actor loss of a rollout through the simulator, its gradient, the critic's
TD(lambda) targets and squared error.

Actor. From the current batch of N environments, the policy is rolled out for H policy steps
(`vmap` over environments, `lax.scan` over time, auto-reset inside `step`) and

    L(theta) = -1/(N H) sum_i [ sum_t gamma^(t - t0_i) r_t  +  gamma^(T_i - t0_i) V'(s_T_i) ]

summed over each environment's segments (a segment ends at a reset or at H); `V'` is the target
critic at the segment's last state, zero after a fall (a truncated episode keeps it), and only
with `critic_bootstrap` (else `L` is the short-horizon return alone). `dL/dtheta` by
reverse-mode AD through the whole rollout (contact model included), with respect to the
policy's MLP only: the observation normaliser is data.

Critic. TD(lambda) targets from the rollout's rewards and the target critic's values (SHAC's
recursion, `td_lambda_targets`), and the mean squared error `critic_loss`.

`config` is a `learning.shac.train.SHACConfig` (its `env`, `horizon`, `gamma`,
`critic_bootstrap` are read here).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from trajopt import sharding

from ..env import EnvState, make_env
from ..policy import Policy, batched_actions
from .networks import Critic, batched_values


def stop_gradient(tree):
    """`lax.stop_gradient` on every array leaf of a pytree (modules hold functions too)."""
    return jax.tree.map(lambda x: jax.lax.stop_gradient(x) if eqx.is_array(x) else x, tree)


def rollout_loss(policy: Policy, target_critic, envs: EnvState, config, mesh=None):
    """The actor loss `L` (module docstring) of `policy` over H steps from `envs`.

    Returns `(L, (envs, traj))`: the final environments and per step `(H, N, ...)`
    observations, rewards, segment ends, next values, tracking errors, falls.
    mesh: a `sharding.make_mesh` mesh: the environments (and every per-environment value of
    each step) stay split over its devices (`sharding` module); None: no constraint."""
    batch = None if mesh is None else sharding.batch_sharding(mesh)
    env = make_env(config.env)
    gamma = config.gamma
    h = config.horizon
    envs = stop_gradient(envs)  # the rollout starts from data
    critic = stop_gradient(target_critic)
    frozen = stop_gradient(policy)  # the critic reads the normaliser only

    def body(carry, t):
        envs, discount, ret, loss = carry
        envs, discount, ret = sharding.constrain((envs, discount, ret), batch)
        obs = jax.vmap(env.observe)(envs)
        action = batched_actions(policy, obs, env.dtype)
        envs, next_obs, reward, done, info = jax.vmap(env.step)(envs, action)
        ret = ret + discount * reward
        last = t == h - 1
        # value of where each segment stops: the terminal state after a truncation, nothing
        # after a fall, the next state at the end of the horizon
        bootstrap_obs = jnp.where(done[:, None], info["terminal_obs"], next_obs)
        value = batched_values(critic, frozen, bootstrap_obs).astype(ret.dtype)
        value = jnp.where(info["fell"], 0.0, value)
        if not config.critic_bootstrap:  # the critic's target still needs the value
            value_in_loss = jnp.zeros_like(value)
        else:
            value_in_loss = value
        ends = done | last
        loss = loss - jnp.sum(jnp.where(ends, ret + gamma * discount * value_in_loss, 0.0))
        discount = jnp.where(done, 1.0, discount * gamma)
        ret = jnp.where(done, 0.0, ret)
        out = {
            "obs": obs,
            "reward": reward,
            "done": ends.astype(reward.dtype),
            "next_value": jax.lax.stop_gradient(value),
            "episode_done": done,
            "fell": info["fell"],
            "tracking_error": info["tracking_error"],
        }
        return (envs, discount, ret, loss), sharding.constrain(out, batch)

    n = envs.t.shape[0]
    dtype = env.dtype
    init = (envs, jnp.ones(n, dtype), jnp.zeros(n, dtype), jnp.zeros((), dtype))
    (envs, _, _, loss), traj = jax.lax.scan(body, init, jnp.arange(h))
    return loss / (n * h), (envs, traj)


def actor_loss_and_grad(policy: Policy, target_critic: Critic, envs: EnvState, config,
                        mesh=None):  # fmt: skip
    """`((L, (envs, traj)), dL/d mlp)`: the actor loss and its gradient with respect to the
    policy's MLP leaves (the normaliser is data, not differentiated).

    With a `mesh`, the environments are split over its devices and the gradient (of the mean
    over all environments: the average of the devices' gradients) is replicated."""
    mlp, mlp_static = eqx.partition(policy.mlp, eqx.is_inexact_array)

    def loss_fn(m):
        candidate = eqx.tree_at(lambda p: p.mlp, policy, eqx.combine(m, mlp_static))
        return rollout_loss(candidate, target_critic, envs, config, mesh)

    (loss, (envs, traj)), grads = jax.value_and_grad(loss_fn, has_aux=True)(mlp)
    if mesh is not None:
        envs = sharding.constrain(envs, sharding.batch_sharding(mesh))
        traj = sharding.constrain(traj, sharding.time_major_batch_sharding(mesh))
        loss, grads = sharding.constrain((loss, grads), sharding.replicated(mesh))
    return (loss, (envs, traj)), grads


def td_lambda_targets(reward, next_value, done, gamma: float, lam: float):
    """TD(lambda) value targets `(H, N)` (SHAC's recursion, backwards over t):

        lam_t = lam lam_{t+1} (1 - d_t) + d_t
        A_t   = (1 - d_t) (lam gamma A_{t+1} + gamma V_{t+1} + (1 - lam_t) / (1 - lam) r_t)
        B_t   = gamma (V_{t+1} d_t + B_{t+1} (1 - d_t)) + r_t
        y_t   = (1 - lam) A_t + lam_t B_t

    reward, next_value (`V(s_{t+1})`, 0 after a fall), done `(H, N)` (1 where a segment ends,
    including the last step)."""

    def body(carry, x):
        a, b, weight = carry
        r, v, d = x
        weight = weight * lam * (1.0 - d) + d
        a = (1.0 - d) * (lam * gamma * a + gamma * v + (1.0 - weight) / (1.0 - lam) * r)
        b = gamma * (v * d + b * (1.0 - d)) + r
        return (a, b, weight), (1.0 - lam) * a + weight * b

    zeros = jnp.zeros_like(reward[0])
    _, targets = jax.lax.scan(body, (zeros, zeros, jnp.ones_like(zeros)),
                              (reward, next_value, done), reverse=True)  # fmt: skip
    return targets


def critic_loss(critic: Critic, normalized_obs, targets):
    """`mean (V(obs) - target)^2` over a batch of normalised observations `(B, n_obs)` and
    their targets `(B,)`."""
    return jnp.mean((jax.vmap(critic)(normalized_obs) - targets) ** 2)
