"""The locomotion policy and its conventions: one place for training, evaluation and deployment.

    policy = Policy.create(jax.random.key(0), nu=12)
    obs = observation_from_state(q, v, command, last_action, q_default)    # (12 + 3 nu,)
    action = policy(obs)                                                    # (nu,)
    q_target = q_default + ACTION_SCALE * action

Observation `(12 + 3 nu,)`, everything in the base frame where it is a vector:

    [ base_linear_velocity (3)   v[0:3] [m/s]   (simulation; on hardware a state estimator)
      base_angular_velocity (3)  v[3:6] [rad/s] (the gyro)
      projected_gravity (3)      R^T (0, 0, -1): (0, 0, -1) when level
      velocity_command (3)       vx [m/s], vy [m/s], yaw_rate [rad/s] (heading frame)
      joint_q - q_default (nu)   [rad], model joint order (`JointMap`)
      joint_qd (nu)              [rad/s]
      last_action (nu) ]         the previous call's action (zeros after a reset)

A policy for a robot that measures no base velocity (a Go2 with its sport service released,
whose estimate of it is a filter's) leaves the first entry out (`Policy.base_velocity` False,
`EnvConfig.observe_base_velocity` False): the observation starts at the gyro, `(9 + 3 nu,)`.

And, where a task calls for a gait clock (`EnvConfig.gait_period`, `Policy.create(clock=True)`),
three more at the end, so the layout without it is a prefix (`observation_size(nu, clock=True)`
= `15 + 3 nu`):

      gait_clock (3)             sin(2 pi phi), cos(2 pi phi), 1 / period [1/s]

`trajopt.gait_clock.gait_clock`, the one definition: `phi = (t / period) mod 1`, `t` [s] since the
reset (environment: `t * CONTROL_DT` from its step counter; deployment: the measurement's
timestamp minus the reset's, `policy_adapter.PolicyController`; distillation: the knot time),
the phase of `trajopt.gaits.stance_pattern` at the same time and period before the gait's
offsets, lead-in and start.

Action `(nu,)`: joint position offsets, `q* = q_default + action_scale * action` (clipped to
`[-ACTION_CLIP, ACTION_CLIP]` before scaling), `qd* = 0`, `tau_ff = 0`, the robot's standing
gains `dynamics.actuator.default_gains` in the drivers' PD; the policy runs at `CONTROL_DT`
(50 Hz), the PD at every physics step (200 Hz in the training environment
`learning.env`, the drivers' rate on MuJoCo or a robot).

The same function builds the observation from a simulated `State` (training, JAX, vmap-able)
and from a `Measurement` (`learning.policy_adapter.observation`, deployment, NumPy);
a test checks that they agree.

The network: `observation -> clip((obs - mean) / std, +-5) -> MLP (ELU) -> action`, with the
normalisation statistics stored in the policy (`Normalizer`, updated from the training data,
not by gradients).
`average_policies` turns K such policies sharing a normaliser into one K times as wide whose
action is the mean of theirs (averaged students in distillation).
"""

from __future__ import annotations

import json

import equinox as eqx
import jax
import jax.numpy as jnp

from trajopt.gait_clock import CLOCK_SIZE

from .checkpoint import write_tree

CONTROL_DT = 0.02  # [s] policy period (50 Hz)
ACTION_SCALE = 0.25  # [rad] per unit action
ACTION_CLIP = 4.0  # |action| bound before scaling: offsets of at most 1 rad
OBS_CLIP = 5.0  # normalised observations are clipped to +-5 standard deviations
NORMALIZER_EPS = 1e-8  # std = sqrt(var + NORMALIZER_EPS): constant features do not divide by 0
HIDDEN = (128, 128)


def observation_size(nu: int, clock: bool = False, base_velocity: bool = True) -> int:
    """Length of the observation vector for `nu` actuated joints: `12 + 3 nu`, plus
    `CLOCK_SIZE` (3) with the gait clock, less 3 without the base linear velocity."""
    return 9 + 3 * nu + (3 if base_velocity else 0) + (CLOCK_SIZE if clock else 0)


def projected_gravity(quat_xyzw):
    """`R^T (0, 0, -1) (3,)` for a base orientation quaternion `[x, y, z, w]` (base to world)."""
    x, y, z, w = quat_xyzw[0], quat_xyzw[1], quat_xyzw[2], quat_xyzw[3]
    # minus the third row of R (R^T e_z is the third row of R)
    return -jnp.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)])


def observation_from_state(q, v, command, last_action, q_default, clock=None,
                           base_velocity: bool = True):  # fmt: skip
    """The observation `(12 + 3 nu,)` of a floating-base state `q (7 + nu,)`, `v (6 + nu,)`.

    `command (3,)` = (vx, vy, yaw_rate); `last_action (nu,)`; `q_default (nu,)`; `clock`:
    None, or the gait clock `(3,)` (`trajopt.gait_clock.gait_clock`), appended: `(15 + 3 nu,)`.
    `base_velocity` False leaves out `v[0:3]` (3 entries fewer). Pure JAX."""
    quat = q[3:7] / jnp.linalg.norm(q[3:7])
    parts = [v[0:3]] if base_velocity else []
    parts += [v[3:6], projected_gravity(quat), command, q[7:] - q_default, v[6:], last_action]
    if clock is not None:
        parts.append(jnp.asarray(clock, dtype=q.dtype))
    return jnp.concatenate(parts)


def joint_targets(action, q_default, action_scale: float = ACTION_SCALE):
    """PD targets `q* (nu,) = q_default + action_scale * clip(action, +-ACTION_CLIP)`."""
    return q_default + action_scale * jnp.clip(action, -ACTION_CLIP, ACTION_CLIP)


class Normalizer(eqx.Module):
    """Running mean and variance of observations (Chan et al.'s parallel update).

    mean, var: `(n,)`; count: `()` samples seen. `normalize(obs)` is
    `clip((obs - mean) / sqrt(var + NORMALIZER_EPS), +-OBS_CLIP)`."""

    mean: jax.Array
    var: jax.Array
    count: jax.Array

    @staticmethod
    def create(size: int, dtype=jnp.float32) -> Normalizer:
        return Normalizer(jnp.zeros(size, dtype), jnp.ones(size, dtype), jnp.zeros((), dtype))

    def update(self, batch) -> Normalizer:
        """Statistics including `batch (..., n)` (all leading axes are samples)."""
        batch = jnp.reshape(batch, (-1, self.mean.shape[0])).astype(self.mean.dtype)
        n = batch.shape[0]
        mean_b = jnp.mean(batch, axis=0)
        var_b = jnp.var(batch, axis=0)
        total = self.count + n
        delta = mean_b - self.mean
        mean = self.mean + delta * (n / total)
        m2 = self.var * self.count + var_b * n + delta**2 * (self.count * n / total)
        var = jnp.where(self.count > 0, m2 / total, var_b)
        return Normalizer(mean, var, total)

    def normalize(self, obs):
        z = (obs - self.mean) / jnp.sqrt(self.var + NORMALIZER_EPS)
        return jnp.clip(z, -OBS_CLIP, OBS_CLIP)


class Policy(eqx.Module):
    """`obs (12 + 3 nu,) -> action (nu,)` (`(15 + 3 nu,)` with the gait clock): normalisation,
    then an ELU MLP. `__call__` works on one observation; `jax.vmap(policy)` on a batch."""

    normalizer: Normalizer
    mlp: eqx.nn.MLP
    base_velocity: bool = eqx.field(static=True, default=True)

    @staticmethod
    def create(key, nu: int, hidden=HIDDEN, dtype=jnp.float32, final_scale: float = 0.01,
               clock: bool = False, base_velocity: bool = True):  # fmt: skip
        """A fresh policy; the last layer is scaled by `final_scale` so the first actions are
        near zero (the standing pose), a common choice for PD policies.
        clock: it observes the gait clock (`observation_size(nu, clock=True)` inputs).
        base_velocity: it observes the base linear velocity (the first 3 inputs)."""
        if len(hidden) == 0 or len(set(hidden)) != 1:
            raise ValueError(f"hidden layers must share one width (eqx.nn.MLP), got {hidden}")
        n_obs = observation_size(nu, clock, base_velocity)
        mlp = eqx.nn.MLP(n_obs, nu, width_size=hidden[0], depth=len(hidden),
                         activation=jax.nn.elu, key=key, dtype=dtype)  # fmt: skip
        last = mlp.layers[-1]
        mlp = eqx.tree_at(
            lambda m: (m.layers[-1].weight, m.layers[-1].bias),
            mlp,
            (last.weight * final_scale, last.bias * 0.0),
        )
        return Policy(Normalizer.create(n_obs, dtype), mlp, base_velocity)

    @property
    def nu(self) -> int:
        return self.mlp.out_size

    @property
    def clock(self) -> bool:
        """Whether it observes the gait clock (from its input size)."""
        return self.mlp.in_size == observation_size(self.nu, True, self.base_velocity)

    def __call__(self, obs):
        return self.mlp(self.normalizer.normalize(obs))

    def with_normalizer(self, normalizer: Normalizer) -> Policy:
        return eqx.tree_at(lambda p: p.normalizer, self, normalizer)


def without_base_velocity(policy: Policy) -> Policy:
    """The same network with its base-linear-velocity inputs removed: the first layer's first
    three columns and the normaliser's first three entries dropped. It acts as `policy` does
    on observations whose velocity is the normaliser's mean (the dropped inputs' normalised
    value 0): a start for training a policy that does not observe the velocity."""
    if not policy.base_velocity:
        return policy
    n, mlp = policy.normalizer, policy.mlp
    template = Policy.create(jax.random.key(0), policy.nu, (mlp.width_size,) * mlp.depth,
                             dtype=n.mean.dtype, clock=policy.clock, base_velocity=False)
    leaves = [leaf for layer in mlp.layers for leaf in (layer.weight, layer.bias)]
    leaves[0] = leaves[0][:, 3:]
    blind = eqx.tree_at(
        lambda m: [leaf for layer in m.layers for leaf in (layer.weight, layer.bias)],
        template.mlp, leaves,
    )  # fmt: skip
    return Policy(Normalizer(n.mean[3:], n.var[3:], n.count), blind, base_velocity=False)


def batched_actions(policy: Policy, obs, dtype):
    """The actions `(N, nu)` of observations `(N, n_obs)` of a simulation in `dtype`: the
    observations cast to the policy's dtype, the actions cast back to `dtype`."""
    pdtype = policy.normalizer.mean.dtype
    return jax.vmap(policy)(obs.astype(pdtype)).astype(dtype)


def save_policy(policy: Policy, path: str) -> None:
    """Write `policy` to `path` (equinox leaves, preceded by a one-line JSON header with the
    architecture), atomically (`learning.checkpoint.write_tree`)."""
    if not isinstance(policy, Policy):
        raise TypeError(
            f"policy must be a learning.policy.Policy, got {type(policy).__name__}"
        )
    header = {"nu": policy.nu, "hidden": [policy.mlp.width_size] * policy.mlp.depth,
              "dtype": str(policy.normalizer.mean.dtype), "clock": policy.clock,
              "base_velocity": policy.base_velocity}  # fmt: skip
    write_tree(path, policy, header)


def load_policy(path: str) -> Policy:
    """A policy written by `save_policy`; raises ValueError naming the file if it is not one."""
    with open(path, "rb") as f:
        try:
            header = json.loads(f.readline().decode())
            template = Policy.create(jax.random.key(0), header["nu"], tuple(header["hidden"]),
                                     dtype=jnp.dtype(header["dtype"]),
                                     clock=bool(header.get("clock", False)),
                                     base_velocity=bool(header.get("base_velocity", True)))
            return eqx.tree_deserialise_leaves(f, template)
        except (ValueError, KeyError, UnicodeDecodeError, RuntimeError) as err:
            raise ValueError(f"{path} is not a policy written by save_policy: {err}") from err


def average_policies(policies) -> Policy:
    """One `Policy` whose action is the mean of `policies`' actions, exactly (to rounding).

    The members must share the normaliser (students cloned on the same data with
    `fit_normalizer=True` do), the layer count and the width `h`. With `K` members the result
    is one ELU MLP of width `K h`: the first layer stacks the members' `W_0 (h, n)` into
    `(K h, n)`, every hidden layer is block diagonal `diag(W_l^1, ..., W_l^K)`, and the last is
    `[W_L^1, ..., W_L^K] / K` `(nu, K h)` with bias `mean_k b_L^k`. ELU acts elementwise, so
    block `k` of every hidden activation is member `k`'s, and the last layer averages them:

        average(obs) = (1/K) sum_k policy_k(obs).

    The averaged students are an ensemble (bagging over initialisations and minibatch orders);
    as one MLP it exports and deploys like any policy. Raises TypeError for a member that is
    not a Policy and ValueError naming the member and the mismatch otherwise."""
    policies = list(policies)
    if not policies:
        raise ValueError("policies is empty: give at least one Policy")
    for k, p in enumerate(policies):
        if not isinstance(p, Policy):
            raise TypeError(f"policies[{k}] is a {type(p).__name__}, not a Policy")
    first = policies[0]
    for k, p in enumerate(policies[1:], start=1):
        if (p.mlp.in_size, p.nu, p.mlp.width_size, p.mlp.depth) != (
            first.mlp.in_size, first.nu, first.mlp.width_size, first.mlp.depth,
        ):  # fmt: skip
            raise ValueError(
                f"policies[{k}] has (inputs, outputs, width, depth) "
                f"{(p.mlp.in_size, p.nu, p.mlp.width_size, p.mlp.depth)}, policies[0] "
                f"{(first.mlp.in_size, first.nu, first.mlp.width_size, first.mlp.depth)}"
            )
        for name in ("mean", "var"):
            a, b = getattr(p.normalizer, name), getattr(first.normalizer, name)
            if not bool(jnp.array_equal(a, b)):
                raise ValueError(
                    f"policies[{k}]'s normaliser {name} differs from policies[0]'s: average "
                    "students fitted on the same data (behaviour_cloning fit_normalizer=True)"
                )
    if len(policies) == 1:
        return first
    k_count = len(policies)
    layers = [p.mlp.layers for p in policies]
    weights, biases = [], []
    for i in range(len(first.mlp.layers)):
        w = [ls[i].weight for ls in layers]
        b = [ls[i].bias for ls in layers]
        if i == 0:
            weights.append(jnp.concatenate(w, axis=0))
            biases.append(jnp.concatenate(b))
        elif i == len(first.mlp.layers) - 1:
            weights.append(jnp.concatenate(w, axis=1) / k_count)
            biases.append(sum(b) / k_count)
        else:
            weights.append(jax.scipy.linalg.block_diag(*w))
            biases.append(jnp.concatenate(b))
    dtype = first.normalizer.mean.dtype
    wide = Policy.create(jax.random.key(0), first.nu, (k_count * first.mlp.width_size,)
                         * first.mlp.depth, dtype=dtype, clock=first.clock,
                         base_velocity=first.base_velocity)  # fmt: skip
    mlp = eqx.tree_at(
        lambda m: [leaf for layer in m.layers for leaf in (layer.weight, layer.bias)],
        wide.mlp,
        [leaf.astype(dtype) for pair in zip(weights, biases) for leaf in pair],
    )
    return Policy(first.normalizer, mlp, first.base_velocity)
