"""SHAC training in the differentiable environment: the environment's conventions, its
gradients against central finite differences, a short training run that improves the return,
and a checkpointed run that resumes bit for bit.

Solo12, 8 environments, horizon 8, float64, compiled with XLA's fast-compile level: every test
shares the configuration below, so the expensive compile (the reverse pass through the
simulator) happens once for the file.
"""

import dataclasses
import json
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learning import checkpoint
from learning.env import EnvConfig, LocomotionEnv, Randomization, make_env
from learning.evaluation import evaluate
from learning.metrics_log import MetricsLog
from learning.policy import CONTROL_DT, Policy, observation_size
from learning.shac.losses import td_lambda_targets
from learning.shac.train import (
    SHACConfig,
    compiled_actor_gradient,
    compiled_actor_loss,
    init_state,
    train,
)

ENV = EnvConfig(robot="solo12")
CONFIG = SHACConfig(env=ENV, num_envs=8, horizon=8, critic_iterations=4, fast_compile=True)
FAST = {"xla_backend_optimization_level": 0}
EVAL_STEPS = 50  # 1 s


def _policy(final_scale=0.01, seed=0):
    return Policy.create(jax.random.PRNGKey(seed), 12, dtype=jnp.float64, final_scale=final_scale)


@pytest.fixture(scope="module")
def env():
    return make_env(ENV)


@pytest.fixture(scope="module")
def batch_step(env):
    return jax.jit(jax.vmap(env.step), compiler_options=FAST)


@pytest.fixture(scope="module")
def eval_keys():
    return jax.random.split(jax.random.PRNGKey(7), 8)


def _reset(env, n, seed=0):
    return jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(seed), n))


# --------------------------------------------------------------------------- environment


def test_reset_step_shapes_and_vmap(env):
    state = _reset(env, 3)
    assert state.sim.q.shape == (3, env.model.nq) and state.command.shape == (3, 3)
    assert env.decimation == int(round(CONTROL_DT / ENV.sim_dt)) == 4
    out = jax.eval_shape(jax.vmap(env.step), state, jnp.zeros((3, 12)))
    new, obs, reward, done, info = out
    assert obs.shape == (3, observation_size(12)) and reward.shape == (3,) and done.shape == (3,)
    assert info["tracking_error"].shape == (3,) and info["terminal_obs"].shape == obs.shape
    assert set(info["reward_terms"]) >= {"tracking_xy", "tracking_yaw", "torque", "action_rate"}
    assert jax.tree.map(lambda a: a.shape, new) == jax.tree.map(lambda a: a.shape, state)
    # commands within the configured ranges
    cmd = np.asarray(_reset(env, 64, seed=3).command)
    assert np.all(np.abs(cmd[:, 0]) <= 1) and np.all(np.abs(cmd[:, 1]) <= 0.5)
    assert np.all(np.abs(cmd[:, 2]) <= 1)


def test_a_float32_environment_stays_float32():
    """Traced only (no compile): the state, observation and reward keep the environment's
    dtype through the physics (the contact parameters are cast too)."""
    env32 = make_env(ENV.replace(dtype="float32"))
    state = _reset(env32, 2)
    new, obs, reward, _, _ = jax.eval_shape(jax.vmap(env32.step), state, jnp.zeros((2, 12)))
    assert new.sim.q.dtype == new.sim.v.dtype == obs.dtype == reward.dtype == jnp.float32


def test_randomization_is_per_environment(env):
    state = _reset(env, 6)
    p = jax.tree.map(np.asarray, state.params)
    r = ENV.randomization
    for name in ("payload", "friction", "kp_scale", "kd_scale", "latency"):
        values = getattr(p, name)
        lo, hi = getattr(r, name)
        assert np.all((values >= lo) & (values <= hi)), name
        assert len(np.unique(values)) == 6, f"{name} is not drawn per environment"
    # what each value acts on: the base mass, the step's friction and the PD damping
    one = jax.tree.map(lambda a: a[1], state.params)
    model = env.randomized_model(one)
    m0 = float(env.model.body_mass[0])
    np.testing.assert_allclose(model.body_mass[0], m0 + p.payload[1] * env.total_mass)
    np.testing.assert_allclose(model.body_mass[1:], env.model.body_mass[1:])
    params = env.step_params(one)
    np.testing.assert_allclose(params.terrain.friction, p.friction[1])
    np.testing.assert_allclose(params.joint_damping, env.kd * p.kd_scale[1])
    # no randomisation: nominal values
    nominal = LocomotionEnv(ENV.replace(randomization=Randomization.none())).reset(
        jax.random.PRNGKey(0)
    )
    assert float(nominal.params.payload) == 0 and float(nominal.params.friction) == 0.8
    # a push (probability 1 per step here) kicks the base velocity by at most push_velocity
    pushy = LocomotionEnv(ENV.replace(randomization=Randomization(push_interval=CONTROL_DT)))
    s = pushy.reset(jax.random.PRNGKey(1))
    kicked = pushy.kick(s.sim, s.params.push_velocity, jax.random.PRNGKey(2))  # env_wrappers.Pushes
    dv = np.asarray(kicked.v - s.sim.v)
    assert 0 < np.linalg.norm(dv[:3]) <= float(s.params.push_velocity) + 1e-12
    np.testing.assert_array_equal(dv[3:], 0.0)


def test_standing_policy_stands_for_one_second(env, eval_keys):
    ev = evaluate(_policy(final_scale=0.0), ENV, eval_keys, EVAL_STEPS, fast_compile=True)
    assert not ev["fell"].any()
    standing = env.standing_height
    assert np.all(np.abs(ev["height"][-10:] - standing) < 0.15 * standing), ev["height"][-1]
    assert np.all(np.isfinite(ev["return"]))
    # fixed commands replace the sampled ones: standing still misses 1 m/s forward by ~1 m/s
    # and a zero command by ~0 (after a settle time that is not counted)
    n = len(eval_keys)
    forward = np.tile([1.0, 0.0, 0.0], (n, 1))
    still = evaluate(_policy(final_scale=0.0), ENV, eval_keys, EVAL_STEPS, fast_compile=True,
                     commands=np.zeros((n, 3)), settle=10)  # fmt: skip
    missed = evaluate(_policy(final_scale=0.0), ENV, eval_keys, EVAL_STEPS, fast_compile=True,
                      commands=forward, settle=10)  # fmt: skip
    assert still["mean_tracking_error"] < 0.05 < 0.9 < missed["mean_tracking_error"] < 1.1
    # and a yaw-rate command of 0.8 rad/s by ~0.8 rad/s, with no linear error
    turn = evaluate(_policy(final_scale=0.0), ENV, eval_keys, EVAL_STEPS, fast_compile=True,
                    commands=np.tile([0.0, 0.0, 0.8], (n, 1)), settle=10)  # fmt: skip
    assert still["mean_yaw_rate_error"] < 0.05 < 0.7 < turn["mean_yaw_rate_error"] < 0.9
    assert turn["mean_tracking_error"] < 0.05
    with pytest.raises(ValueError, match="commands must have shape"):
        evaluate(_policy(), ENV, eval_keys, EVAL_STEPS, commands=np.zeros((n, 2)))


def test_termination_and_auto_reset(env, batch_step):
    state = _reset(env, 3)
    low = state.sim.q.at[0, 2].set(0.3 * env.standing_height)  # env 0 starts far too low
    t = state.t.at[1].set(ENV.episode_length - 1)  # env 1 is at its last step
    state = dataclasses.replace(state, sim=dataclasses.replace(state.sim, q=low), t=t)
    new, obs, reward, done, info = batch_step(state, jnp.zeros((3, 12)))
    np.testing.assert_array_equal(np.asarray(done), [True, True, False])
    np.testing.assert_array_equal(np.asarray(info["fell"]), [True, False, False])
    np.testing.assert_array_equal(np.asarray(info["truncated"]), [False, True, False])
    np.testing.assert_array_equal(np.asarray(new.t), [0, 0, state.t[2] + 1])
    # the reset environments stand at the default pose with a new command; the observation
    # is the fresh one, the terminal observation the one before the reset
    assert np.all(np.abs(np.asarray(new.sim.q[:2, 2]) - env.standing_height) < 1e-9)
    assert not np.allclose(new.command[0], state.command[0])
    np.testing.assert_allclose(obs, jax.vmap(env.observe)(new))
    assert not np.allclose(info["terminal_obs"][0], obs[0])
    np.testing.assert_allclose(info["terminal_obs"][2], obs[2])


def test_a_command_interval_draws_new_commands_within_the_episode():
    """`command_interval=3`: the step that ends at t = 3, 6, ... draws a new command in the
    ranges (the observation carries it); other steps keep it; None keeps it for the episode and
    is left out of `to_dict` (old checkpoints still resume); bad intervals are refused."""
    config = ENV.replace(command_interval=3)
    env = make_env(config)
    step = jax.jit(jax.vmap(env.step), compiler_options=FAST)
    state = _reset(env, 3)
    state = dataclasses.replace(state, t=jnp.array([2, 3, 5]))
    new, obs, _, done, _ = step(state, jnp.zeros((3, 12)))
    assert not np.any(np.asarray(done))
    changed = ~np.all(np.isclose(np.asarray(new.command), np.asarray(state.command)), axis=1)
    np.testing.assert_array_equal(changed, [True, False, True])
    for c in np.asarray(new.command):
        assert config.vx_range[0] <= c[0] <= config.vx_range[1]
        assert config.yaw_rate_range[0] <= c[2] <= config.yaw_rate_range[1]
    np.testing.assert_allclose(obs, jax.vmap(env.observe)(new))
    assert "command_interval" not in ENV.to_dict() and config.to_dict()["command_interval"] == 3
    for bad in (0, 2.5):
        with pytest.raises(ValueError, match="command_interval"):
            LocomotionEnv(ENV.replace(command_interval=bad))


def test_command_extremes_put_components_at_the_ends_of_their_ranges():
    """With probability 1 every command is a corner of the box (both ends of every range
    drawn); with 0.5 about half of the components are at an end (binomial, 3 x 400 draws);
    0 leaves the uniform draws as they were. Outside [0, 1] is refused."""
    keys = jax.random.split(jax.random.PRNGKey(3), 400)
    hi = np.array([ENV.vx_range[1], ENV.vy_range[1], ENV.yaw_rate_range[1]])
    draws = {}
    for p in (0.0, 0.5, 1.0):
        env = LocomotionEnv(ENV.replace(command_extremes=p))
        draws[p] = np.asarray(jax.jit(jax.vmap(env.sample_command))(keys))
    at_end = np.isclose(np.abs(draws[1.0]), hi)
    assert at_end.all()
    assert (draws[1.0] > 0).any(axis=0).all() and (draws[1.0] < 0).any(axis=0).all()
    assert 0.42 < np.isclose(np.abs(draws[0.5]), hi).mean() < 0.58
    uniform = np.asarray(jax.vmap(LocomotionEnv(ENV).sample_command)(keys))
    np.testing.assert_array_equal(draws[0.0], uniform)
    assert not np.isclose(np.abs(uniform), hi).any()
    with pytest.raises(ValueError, match="command_extremes"):
        LocomotionEnv(ENV.replace(command_extremes=1.5))


def test_a_bad_state_flagged_by_the_simulator_ends_the_episode(env, batch_step):
    """The environment terminates on the simulator's `StepInfo` flags: a base quaternion of
    norm 2 (finite, and the step renormalises it, so no isfinite test on the next state would
    see it) and a NaN velocity both end the episode as fallen, and the fresh state that
    replaces them is finite with a unit quaternion."""
    state = _reset(env, 3)
    q = state.sim.q.at[0, 3:7].multiply(2.0)  # env 0: not a rotation
    v = state.sim.v.at[1, 0].set(jnp.nan)  # env 1: NaN base velocity
    state = dataclasses.replace(state, sim=dataclasses.replace(state.sim, q=q, v=v))
    new, obs, reward, done, info = batch_step(state, jnp.zeros((3, 12)))
    np.testing.assert_array_equal(np.asarray(info["fell"]), [True, True, False])
    np.testing.assert_array_equal(np.asarray(done), [True, True, False])
    assert np.all(np.isfinite(np.asarray(new.sim.q))) and np.all(np.isfinite(np.asarray(obs)))
    np.testing.assert_allclose(np.linalg.norm(np.asarray(new.sim.q[:, 3:7]), axis=1), 1.0)


def test_actuator_applies_the_safety_layers_target_limits(env, batch_step):
    """A target far outside the joint limits is clipped into them (as SafetyLayer does) and
    approached no faster than the joint velocity limits; joint speeds beyond the soft limit
    are penalised, and not at rest."""
    model = env.model
    lower = np.asarray(model.lower_position_limit)[-12:]
    upper = np.asarray(model.upper_position_limit)[-12:]
    qd_max = np.asarray(model.velocity_limit)[-12:]
    state = _reset(env, 2)
    actions = jnp.stack([jnp.full(12, 1e3), jnp.zeros(12)])  # targets +250 rad; default pose
    new, _, _, _, info = batch_step(state, actions)
    target = np.asarray(new.target)
    step = target - np.asarray(state.target)
    assert np.all(target[0] >= lower - 1e-12) and np.all(target[0] <= upper + 1e-12)
    reachable = np.minimum(qd_max * CONTROL_DT, upper - np.asarray(state.target[0]))
    np.testing.assert_allclose(np.abs(step[0]), reachable, rtol=1e-9)
    np.testing.assert_allclose(target[1], state.target[1])  # the default pose: no motion
    assert float(info["reward_terms"]["joint_velocity"][1]) == 0.0
    # joints spinning at twice their limits are penalised
    fast = state.sim.v.at[:, 6:].set(2.0 * qd_max)
    spinning = dataclasses.replace(state, sim=dataclasses.replace(state.sim, v=fast))
    _, _, _, _, info = batch_step(spinning, jnp.zeros((2, 12)))
    assert np.all(np.asarray(info["reward_terms"]["joint_velocity"]) < -1.0)


# --------------------------------------------------------------------------- gradients


def test_rollout_gradient_matches_finite_differences():
    """d(actor loss)/d(policy) along a random direction against a central difference
    (float64, 8 environments x 8 policy steps = 0.16 s of simulated time, smooth contact)."""
    state = init_state(CONFIG, _policy(final_scale=0.3))
    gradient = compiled_actor_gradient(CONFIG)
    loss_fn = compiled_actor_loss(CONFIG)
    (loss, _), grads = gradient(state.policy, state.target_critic, state.env)
    leaves = jax.tree.leaves(grads)
    assert all(np.all(np.isfinite(g)) for g in leaves)
    assert sum(float(jnp.sum(g**2)) for g in leaves) > 0
    keys = jax.random.split(jax.random.PRNGKey(3), len(leaves))
    direction = [jax.random.normal(k, g.shape, g.dtype) for k, g in zip(keys, leaves)]
    norm = np.sqrt(sum(float(jnp.sum(d**2)) for d in direction))
    direction = [d / norm for d in direction]
    analytic = sum(float(jnp.sum(g * d)) for g, d in zip(leaves, direction))
    mlp, static = eqx.partition(state.policy.mlp, eqx.is_inexact_array)
    treedef = jax.tree.structure(mlp)

    def loss_at(eps):
        moved = [p + eps * d for p, d in zip(jax.tree.leaves(mlp), direction)]
        mlp_eps = eqx.combine(jax.tree.unflatten(treedef, moved), static)
        policy = eqx.tree_at(lambda p: p.mlp, state.policy, mlp_eps)
        return float(loss_fn(policy, state.target_critic, state.env))

    np.testing.assert_allclose(loss_at(0.0), float(loss), rtol=1e-10)
    eps = 1e-5
    numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
    assert abs(analytic - numeric) <= 1e-3 * abs(numeric) + 1e-7, (analytic, numeric)


def test_td_lambda_targets_limits():
    """lambda = 0 gives one-step targets r + gamma V'; lambda -> 1 the discounted return
    bootstrapped at each segment's end (textbook definitions)."""
    rng = np.random.default_rng(0)
    h, n, gamma = 6, 3, 0.9
    r, v = rng.normal(size=(h, n)), rng.normal(size=(h, n))
    done = np.zeros((h, n))
    done[2, 1] = 1.0
    done[-1] = 1.0
    one_step = td_lambda_targets(jnp.asarray(r), jnp.asarray(v), jnp.asarray(done), gamma, 0.0)
    np.testing.assert_allclose(one_step, r + gamma * v, rtol=1e-12)
    mc = td_lambda_targets(jnp.asarray(r), jnp.asarray(v), jnp.asarray(done), gamma, 1 - 1e-9)
    expected = np.zeros((h, n))
    for i in range(n):
        acc = 0.0
        for t in reversed(range(h)):
            acc = r[t, i] + gamma * (v[t, i] if done[t, i] else acc)
            expected[t, i] = acc
    np.testing.assert_allclose(mc, expected, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- training


def test_analytic_gradient_steps_improve_the_return():
    """Five normalised steps along the analytic actor gradient (zero critic: the H-step
    discounted return itself) raise the return on a fixed batch of reset states well beyond
    what a step of the same size in the opposite direction does (which must lower it)."""
    state = init_state(CONFIG.replace(seed=99), _policy())
    zero = jax.tree.map(lambda x: jnp.zeros_like(x) if eqx.is_inexact_array(x) else x,
                        state.critic)  # fmt: skip
    gradient = compiled_actor_gradient(CONFIG)
    loss_fn = compiled_actor_loss(CONFIG)

    def horizon_return(policy):  # mean discounted H-step return per environment
        return -float(loss_fn(policy, zero, state.env)) * CONFIG.horizon

    def step(policy, size):
        (_, _), grads = gradient(policy, zero, state.env)
        norm = np.sqrt(sum(float(jnp.sum(g**2)) for g in jax.tree.leaves(grads)))
        mlp, static = eqx.partition(policy.mlp, eqx.is_inexact_array)
        moved = jax.tree.map(lambda p, g: p - size * g / norm, mlp, grads)
        return eqx.tree_at(lambda p: p.mlp, policy, eqx.combine(moved, static))

    start = horizon_return(state.policy)
    policy = state.policy
    for _ in range(5):
        policy = step(policy, 0.1)
    improved = horizon_return(policy)
    worse = horizon_return(step(state.policy, -0.1))
    assert improved > start + 0.5, (start, improved)
    assert worse < start, (start, worse)


TRAIN_ITERATIONS = 80  # 5120 policy steps (102 s of simulated time over 8 environments)


def test_a_short_training_run_improves_the_return(eval_keys):
    """`train` (the production loop: actor, critic, normaliser, with the default
    configuration's learning rate and gradient clip) from a fresh policy raises the return of
    the policy alone over 1 s from 8 fixed resets (`evaluate`, not the training batch)
    by a quarter; the same run with a zero actor learning rate (normaliser and critic still
    update) does not move it beyond noise, so the gain is the analytic gradient's."""
    start = evaluate(_policy(), ENV, eval_keys, EVAL_STEPS, fast_compile=True)
    trained = train(CONFIG, _policy(), iterations=TRAIN_ITERATIONS, quiet=True)
    after = evaluate(trained.policy, ENV, eval_keys, EVAL_STEPS, fast_compile=True)
    assert not any(r["skipped"] for r in trained.metrics)
    assert after["mean_return"] > 1.25 * start["mean_return"] > 0, (
        start["mean_return"],
        after["mean_return"],
    )
    assert after["fell_fraction"] <= start["fell_fraction"]
    frozen = train(CONFIG.replace(actor_lr=0.0), _policy(), iterations=TRAIN_ITERATIONS // 2,
                   quiet=True)  # fmt: skip
    control = evaluate(frozen.policy, ENV, eval_keys, EVAL_STEPS, fast_compile=True)
    assert abs(control["mean_return"] - start["mean_return"]) < 0.1 * start["mean_return"]


def test_resume_from_checkpoint_is_bit_for_bit(tmp_path):
    policy = _policy(seed=1)
    whole = train(CONFIG, policy, iterations=6, quiet=True)
    m = whole.metrics
    assert [r["iteration"] for r in m] == list(range(1, 7)) and m[-1]["env_steps"] == 6 * 64
    assert not any(r["skipped"] for r in m) and all(np.isfinite(r["tracking_error"]) for r in m)
    folder = str(tmp_path / "run")
    first = train(
        CONFIG, policy, iterations=3, checkpoint_dir=folder, checkpoint_every=3, quiet=True,
        progress_fn=MetricsLog(folder),
    )  # fmt: skip  ("killed" after its checkpoint at iteration 3)
    assert first.checkpoint.endswith("ckpt_00000003.eqx")
    # a fresh call, as after a restart; it continues from iteration 3 to 6
    rest = train(CONFIG, policy, iterations=6, checkpoint_dir=folder, checkpoint_every=3,
                 resume=True, quiet=True, progress_fn=MetricsLog(folder))  # fmt: skip
    assert [r["iteration"] for r in rest.metrics] == list(range(1, 7))
    a, b = jax.tree.leaves(whole.state), jax.tree.leaves(rest.state)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    for k in ("mean_return", "tracking_error", "actor_loss"):
        assert [r[k] for r in whole.metrics] == [r[k] for r in rest.metrics]
    assert os.path.exists(os.path.join(folder, "metrics.csv"))
    assert os.path.exists(os.path.join(folder, "metrics.json"))
    # the resumed run replayed the checkpoint's records to its progress_fn: the whole history
    with open(os.path.join(folder, "metrics.json")) as f:
        assert [r["iteration"] for r in json.load(f)] == list(range(1, 7))


def test_the_metrics_log_writes_every_record_and_restarts_at_a_repeated_step(tmp_path):
    """`MetricsLog` rewrites metrics.json and metrics.csv after every record (nothing left
    behind but the two files); a step that is not beyond the last one starts the history again
    from there, as a resumed run's replay or a fresh run in the same folder does."""
    folder = str(tmp_path / "log")
    log = MetricsLog(folder)
    for i in (1, 2, 3):
        log(64 * i, {"iteration": i, "loss": 0.5 / i})
        with open(os.path.join(folder, "metrics.json")) as f:
            assert [r["iteration"] for r in json.load(f)] == list(range(1, i + 1))
    assert sorted(os.listdir(folder)) == ["metrics.csv", "metrics.json"]
    log(128, {"iteration": 2, "loss": 0.0})  # restarted from iteration 2
    assert [r["iteration"] for r in log.records] == [1, 2] and log.records[1]["loss"] == 0.0
    with open(os.path.join(folder, "metrics.csv")) as f:
        assert f.read().splitlines() == ["iteration,loss", "1,0.5", "2,0.0"]


def test_checkpoint_files_are_atomic_and_a_broken_newest_is_skipped(tmp_path):
    tree = {"a": jnp.arange(3.0), "b": jnp.ones((2, 2), jnp.int32)}
    folder = str(tmp_path)
    checkpoint.save(folder, 1, tree, {"note": "first"})
    path2 = checkpoint.save(folder, 2, jax.tree.map(lambda x: x + 1, tree))
    assert sorted(os.listdir(folder)) == ["ckpt_00000001.eqx", "ckpt_00000002.eqx"]  # no temps
    with open(path2, "r+b") as f:  # a truncated newest file (e.g. a crash mid-copy)
        f.truncate(os.path.getsize(path2) - 5)
    loaded, header = checkpoint.load_latest(folder, tree)
    assert header["iteration"] == 1 and header["note"] == "first"
    np.testing.assert_array_equal(loaded["a"], tree["a"])
    for i in range(3, 7):
        checkpoint.save(folder, i, tree, keep=3)
    assert [i for i, _ in checkpoint.list_checkpoints(folder)] == [6, 5, 4]
    assert checkpoint.load_latest(str(tmp_path / "missing"), tree) is None
