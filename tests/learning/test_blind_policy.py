"""Policies that do not observe the base linear velocity, and the observation noise.

A Go2 with its sport service released measures no base velocity; these policies see the gyro,
gravity, the command, the joints, the last action and the gait clock. The checks: the layout is
the full one less its first three entries everywhere it is built (training, deployment,
export), a trained network converted by `without_base_velocity` acts as before on observations
at the normaliser's mean velocity, and the noise is bounded, fresh each step and leaves the
command, the last action and the clock exact.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynamics
from hardware.interface import JointMap, VelocityCommand, measurement_from_state
from learning.env import EnvConfig, ObservationNoise, make_env
from learning.policy import (
    Policy,
    load_policy,
    observation_from_state,
    observation_size,
    save_policy,
    without_base_velocity,
)
from learning.policy_adapter import PolicyController, observation, observes_base_velocity
from learning.policy_export import export_policy, load_exported_policy, load_numpy_policy

NU = 12


def _state(seed=0):
    model = dynamics.load_robot("go2")
    rng = np.random.default_rng(seed)
    q = np.array(model.q_standing)
    q[7:] += 0.1 * rng.normal(size=NU)
    q[3:7] = [0.05, -0.03, 0.2, 1.0]
    q[3:7] /= np.linalg.norm(q[3:7])
    v = rng.normal(size=model.nv)
    return model, q, v


def test_the_blind_layout_is_the_full_one_without_its_first_three_entries():
    model, q, v = _state()
    q_default = np.asarray(model.q_standing)[7:]
    command, last, clock = np.array([0.3, -0.1, 0.5]), np.linspace(-1, 1, NU), np.ones(3)
    full = observation_from_state(q, v, command, last, q_default, clock)
    blind = observation_from_state(q, v, command, last, q_default, clock, base_velocity=False)
    assert full.shape == (observation_size(NU, True),) == (51,)
    assert blind.shape == (observation_size(NU, True, False),) == (48,)
    np.testing.assert_array_equal(blind, full[3:])
    # the deployment side builds the same vector from a measurement that has no velocity
    m = measurement_from_state(q, v, timestamp=0.0, sequence=1)
    m = m.replace(base_linear_velocity=None, base_position=None, base_state_source=None)
    jm = JointMap.from_model(model)
    from_measurement = observation(m, VelocityCommand(*command), last, jm, clock=clock,
                                   base_velocity=False)  # fmt: skip
    np.testing.assert_allclose(from_measurement, np.asarray(blind), atol=1e-12)
    with pytest.raises(ValueError, match="base linear velocity"):
        observation(m, VelocityCommand(*command), last, jm, clock=clock)


def test_a_converted_policy_acts_as_the_original_at_the_mean_velocity():
    policy = Policy.create(jax.random.key(3), NU, (32, 32), clock=True)
    policy = policy.with_normalizer(
        policy.normalizer.update(jax.random.normal(jax.random.key(4), (64, 51)))
    )
    blind = without_base_velocity(policy)
    assert not blind.base_velocity and blind.clock and blind.mlp.in_size == 48
    obs = jax.random.normal(jax.random.key(5), (51,))
    at_mean = obs.at[:3].set(policy.normalizer.mean[:3])
    np.testing.assert_allclose(blind(obs[3:]), policy(at_mean), atol=1e-6)
    # and differs from it where the velocity is not the mean: the inputs really are gone
    assert float(jnp.max(jnp.abs(blind(obs[3:]) - policy(obs.at[:3].add(3.0))))) > 1e-4


def test_save_load_and_export_keep_a_blind_policy_blind(tmp_path):
    blind = without_base_velocity(Policy.create(jax.random.key(6), NU, (16, 16), clock=True))
    path = str(tmp_path / "p.eqx")
    save_policy(blind, path)
    assert not load_policy(path).base_velocity
    folder = str(tmp_path / "export")
    export_policy(blind, folder, robot="go2", onnx=False, gait_period=0.4)
    runner = load_numpy_policy(folder)
    assert runner.obs_size == 48
    assert not any(e.startswith("base_linear") for e in runner.config["observation_layout"])
    assert runner.config["gait_clock"]["index"] == 45
    assert not observes_base_velocity(runner)
    obs = np.random.default_rng(0).normal(size=48)
    np.testing.assert_allclose(runner(obs), np.asarray(blind(jnp.asarray(obs, jnp.float32))),
                               atol=1e-5)  # fmt: skip
    assert not load_exported_policy(folder).base_velocity
    # the controller observes without the velocity, so a measurement without one is enough
    model, q, v = _state(1)
    m = measurement_from_state(q, v, timestamp=0.0, sequence=1)
    m = m.replace(base_linear_velocity=None, base_position=None, base_state_source=None)
    controller = PolicyController(runner, JointMap.from_model(model))
    controller.reset(m)
    assert controller(m, 0.0, VelocityCommand(0.5)).q_target.shape == (NU,)


def test_observation_noise_is_bounded_fresh_and_spares_command_action_and_clock():
    noise = ObservationNoise()
    config = EnvConfig(robot="go2", gait_period=0.4, observe_base_velocity=False,
                       observation_noise=noise, dtype="float32")  # fmt: skip
    exact = make_env(config.replace(observation_noise=None))
    noisy = make_env(config)
    state = noisy.reset(jax.random.key(0))
    clean = exact.observe(state)
    first = noisy.observe(state)
    assert first.shape == clean.shape == (48,)
    scale = noise.scales(NU, clock=True, base_velocity=False)
    delta = np.asarray(first - clean)
    assert np.all(np.abs(delta) <= scale + 1e-6)
    exact_entries = scale == 0  # command, last action, clock
    assert exact_entries.sum() == 3 + NU + 3
    np.testing.assert_array_equal(delta[exact_entries], 0.0)
    assert np.all(np.abs(delta[~exact_entries]) > 0)
    # the same state gives the same draw; the next step's key a new one
    np.testing.assert_array_equal(np.asarray(noisy.observe(state)), np.asarray(first))
    moved = dataclasses.replace(state, key=jax.random.PRNGKey(1))
    assert float(jnp.max(jnp.abs(noisy.observe(moved) - first))) > 0
