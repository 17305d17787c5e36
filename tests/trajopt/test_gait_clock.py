"""The gait clock (issue 16, item 1): one definition, `trajopt.gait_clock.gait_clock`, observed the
same way by the training environment, the deployment adapter, the exported NumPy runner and
the ONNX graph; the phase the gait library's patterns, the MPC's references and the
distillation data are built at; opt-in, with the default observation unchanged.

The reference everywhere is the textbook formula `[sin(2 pi t / T), cos(2 pi t / T), 1 / T]`
(no `mod`), written here, not imported. Small Go2 policies (hidden 8), no physics compile.
"""

import dataclasses
import json
import subprocess
import sys
from types import SimpleNamespace

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from import_blocker import blocking_script

import dynamics
from hardware.interface import JointMap, VelocityCommand, measurement_from_state
from learning import numpy_policy_runner
from learning.distill import dataset as distill
from learning.env import EnvConfig, LocomotionEnv, Randomization
from learning.evaluation import rollout_policy
from learning.plant import Plant
from learning.policy import (
    CONTROL_DT,
    Policy,
    joint_targets,
    load_policy,
    observation_size,
    save_policy,
)
from learning.policy_adapter import PolicyController, observation
from learning.policy_export import (
    OBSERVATION_LAYOUT,
    export_policy,
    load_exported_policy,
    load_numpy_policy,
    load_onnx_policy,
)
from trajopt.gait_clock import gait_clock, gait_phase
from trajopt.gaits import GAITS, gait_period, gait_spec, stance_pattern
from trajopt.trajectory import Trajectory

NU = 12  # go2
STEPS = (0, 1, 7, 13, 20, 31, 57, 250)  # policy steps since the reset
T0 = 1234.567  # [s] the robot clock at the reset


def textbook_clock(t, period):
    """`(..., 3)` without the `mod`: sin and cos are 1-periodic in the phase anyway."""
    angle = 2.0 * np.pi * np.asarray(t, dtype=float) / period
    return np.stack([np.sin(angle), np.cos(angle), np.full_like(angle, 1.0 / period)], -1)


@pytest.fixture(scope="module")
def go2():
    return dynamics.load_robot("go2")


@pytest.fixture(scope="module")
def clock_policy():
    """A float64 policy that observes the clock, with weights large enough that the clock
    entries move the action."""
    policy = Policy.create(jax.random.key(5), NU, hidden=(8, 8), dtype=jnp.float64,
                           final_scale=1.0, clock=True)  # fmt: skip
    rng = np.random.default_rng(2)
    data = rng.normal(size=(200, observation_size(NU, clock=True)))
    return policy.with_normalizer(policy.normalizer.update(data))


# --------------------------------------------------------------------------- the definition


def test_the_clock_is_the_textbook_formula_and_the_runner_copy_equals_it():
    rng = np.random.default_rng(0)
    t = np.concatenate([rng.uniform(0.0, 600.0, 200), [0.0, 0.4, 0.8, 1e4 + 0.1]])
    for period in (0.3, 0.4, 0.56, 1.7):
        clock = gait_clock(t, period)
        assert clock.shape == (t.size, 3)
        np.testing.assert_allclose(clock, textbook_clock(t, period), rtol=0, atol=1e-9)
        np.testing.assert_allclose(numpy_policy_runner.gait_clock(t, period), clock,
                                   rtol=0, atol=1e-12)  # fmt: skip
        # one time: (3,); the JAX version (the environment's) gives the same numbers
        assert gait_clock(0.123, period).shape == (3,)
        jax_clock = np.asarray(gait_clock(jnp.asarray(t), period, xp=jnp))
        np.testing.assert_allclose(jax_clock, clock, rtol=0, atol=1e-9)
        phase = gait_phase(t, period)
        assert np.all((phase >= 0) & (phase < 1))
        np.testing.assert_allclose(np.cos(2 * np.pi * phase), clock[:, 1], atol=1e-12)
    np.testing.assert_allclose(gait_clock(0.0, 0.4), [0.0, 1.0, 2.5], atol=1e-15)
    np.testing.assert_allclose(gait_clock(0.1, 0.4), [1.0, 0.0, 2.5], atol=1e-15)


@pytest.mark.parametrize("bad", [0.0, -0.4, float("nan"), float("inf"), "fast", None])
def test_a_bad_period_raises_naming_the_argument(bad, clock_policy, go2, tmp_path):
    with pytest.raises(ValueError, match="period"):
        gait_clock(0.1, bad)
    with pytest.raises(ValueError, match="period"):
        numpy_policy_runner.gait_clock(0.1, bad)
    if bad is None:  # None means "no clock" for the configurations below
        return
    with pytest.raises(ValueError, match="gait_period"):
        LocomotionEnv(EnvConfig(robot="go2", gait_period=bad))
    with pytest.raises(ValueError, match="gait_period"):
        PolicyController(lambda obs: np.zeros(NU), JointMap.from_model(go2), gait_period=bad)
    with pytest.raises(ValueError, match="gait_period"):
        export_policy(clock_policy, tmp_path, robot="go2", onnx=False, gait_period=bad)
    traj = _trajectory(go2)
    with pytest.raises(ValueError, match="gait_period"):
        distill.pairs_from_trajectory(traj, (0.0, 0.0, 0.0), go2.q_standing[7:], gait_period=bad)


def test_a_clock_policy_and_its_period_go_together(clock_policy, tmp_path):
    with pytest.raises(ValueError, match="gait clock"):  # the clock policy needs its period
        export_policy(clock_policy, tmp_path, robot="go2", onnx=False)
    plain = Policy.create(jax.random.key(0), NU, hidden=(8, 8))
    with pytest.raises(ValueError, match="gait clock"):  # and a plain policy has none
        export_policy(plain, tmp_path, robot="go2", onnx=False, gait_period=0.4)
    with pytest.raises(ValueError, match="gait_period"):
        rollout_policy(clock_policy, Plant(), [(0.0, 0.0, 0.0)], 0.1)


# --------------------------------------------------------------------------- one clock everywhere


@pytest.mark.parametrize("period", [0.4, 0.56])
def test_env_adapter_numpy_export_and_onnx_observe_the_same_clock(
    period, clock_policy, go2, tmp_path
):
    """The must-hold test of the issue: the same phase (1e-6) in the environment (from its step
    counter), the adapter (from the measurement timestamps), the exported NumPy runner (its own
    copy of the function, from the folder) and the ONNX graph's metadata; and the same actions
    from the observations each builds."""
    onnx = True
    try:
        import onnx as _onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        onnx = False
    paths = export_policy(clock_policy, tmp_path, robot="go2", onnx=onnx, gait_period=period)
    config = json.loads(open(paths["config"]).read())
    assert config["obs_size"] == observation_size(NU) + 3 == 51
    assert config["gait_clock"]["period"] == period and config["gait_clock"]["index"] == 48
    assert config["observation_layout"][:-1] == list(OBSERVATION_LAYOUT)
    assert config["observation_layout"][-1].startswith("gait_clock (3)")
    numpy_policy = load_numpy_policy(tmp_path)
    assert numpy_policy.gait_period == period

    env = LocomotionEnv(EnvConfig(robot="go2", gait_period=period,
                                  randomization=Randomization.none()))  # fmt: skip
    assert env.observation_size == 51
    start = env.reset(jax.random.PRNGKey(0))
    assert int(start.t) == 0
    seen = []

    def recording_observation(*args, **kwargs):
        seen.append(observation(*args, **kwargs))
        return seen[-1]

    # the period comes from the exported policy; the time from the measurement timestamps
    controller = PolicyController(numpy_policy, JointMap.from_model(go2),
                                  observation_fn=recording_observation)  # fmt: skip
    assert controller.gait_period == period
    q, v = np.asarray(start.sim.q), np.asarray(start.sim.v)
    controller.reset(measurement_from_state(q, v, timestamp=T0, sequence=0))
    command = VelocityCommand(*np.asarray(start.command))
    phases = []
    for k in STEPS:
        t = k * CONTROL_DT
        state = dataclasses.replace(start, t=jnp.asarray(k, jnp.int32),
                                    last_action=jnp.asarray(controller.last_action))  # fmt: skip
        env_obs = np.asarray(env.observe(state))
        m = measurement_from_state(q, v, timestamp=T0 + t, sequence=k + 1)
        # the loop's own time argument is host time: not the clock's
        joint_command = controller(m, 1e3 + 0.37 * k, command)
        adapter_obs = seen[-1]
        truth = textbook_clock(t, period)
        np.testing.assert_allclose(env_obs[-3:], truth, rtol=0, atol=1e-6)
        np.testing.assert_allclose(adapter_obs[-3:], truth, rtol=0, atol=1e-6)
        np.testing.assert_allclose(numpy_policy.clock(t), truth, rtol=0, atol=1e-6)
        np.testing.assert_allclose(adapter_obs, env_obs, rtol=0, atol=1e-9)
        np.testing.assert_allclose(numpy_policy.with_clock(env_obs[:-3], t), env_obs,
                                   rtol=0, atol=1e-6)  # fmt: skip
        # the same action from every runtime, and the adapter's PD targets from it
        jax_action = np.asarray(clock_policy(jnp.asarray(env_obs)))
        np.testing.assert_allclose(numpy_policy(adapter_obs), jax_action, rtol=0, atol=1e-9)
        np.testing.assert_allclose(joint_command.q_target,
                                   joint_targets(jax_action, go2.q_standing[7:]),
                                   rtol=0, atol=1e-9)  # fmt: skip
        # the clock moves the action: half a cycle later, another action
        shifted = np.concatenate([env_obs[:-3], textbook_clock(t + period / 2, period)])
        assert np.max(np.abs(np.asarray(clock_policy(jnp.asarray(shifted))) - jax_action)) > 1e-3
        if onnx:
            onnx_policy = load_onnx_policy(tmp_path)
            assert onnx_policy.gait_period == period
            onnx_obs = np.concatenate([adapter_obs[:-3], onnx_policy.clock(t)]).astype(np.float32)
            np.testing.assert_allclose(onnx_obs[-3:], truth, rtol=0, atol=1e-6)
            np.testing.assert_allclose(onnx_policy(onnx_obs), jax_action, rtol=0, atol=1e-5)
        phases.append((t / period) % 1.0)
    assert np.ptp(np.array(phases)) > 0.5  # the times cover the cycle
    # the equinox policy comes back from the export with its clock
    assert load_exported_policy(tmp_path, dtype=jnp.float64).clock


def test_a_float32_environment_observes_the_clock_to_1e_6():
    """Over a 10 s episode (500 steps), not only near the reset."""
    env = LocomotionEnv(EnvConfig(robot="go2", gait_period=0.3, dtype="float32"))
    steps = jnp.arange(501, dtype=jnp.int32)
    clock = env.gait_clock(SimpleNamespace(t=steps))  # it reads the step counter alone
    assert clock.dtype == jnp.float32 and clock.shape == (501, 3)
    truth = textbook_clock(np.arange(501) * CONTROL_DT, 0.3)
    np.testing.assert_allclose(np.asarray(clock, dtype=float), truth, rtol=0, atol=1e-6)


# Loads the exported runner by path with JAX, equinox, ONNX and this project unimportable and
# prints its clock at the given times.
_CLOCK_ALONE = blocking_script(
    {"jax", "jaxlib", "equinox", "onnx", "onnxruntime", "controllers", "dynamics", "trajopt"},
    """
    import importlib.util, json, sys
    folder, times = sys.argv[1], json.loads(sys.argv[2])
    spec = importlib.util.spec_from_file_location("numpy_policy", folder + "/numpy_policy.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    print(json.dumps(runner.NumpyPolicy.load(folder).clock(times).tolist()))
    """
)


def test_the_exported_runner_computes_the_clock_without_the_project(clock_policy, tmp_path):
    period = 0.56
    export_policy(clock_policy, tmp_path, robot="go2", onnx=False, gait_period=period)
    times = [k * CONTROL_DT for k in STEPS]
    done = subprocess.run([sys.executable, "-c", _CLOCK_ALONE, str(tmp_path), json.dumps(times)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    clock = np.array(json.loads(done.stdout))
    np.testing.assert_allclose(clock, gait_clock(np.array(times), period), rtol=0, atol=1e-12)
    np.testing.assert_allclose(clock, textbook_clock(times, period), rtol=0, atol=1e-6)


def test_a_clock_policy_saves_and_loads(clock_policy, tmp_path):
    save_policy(clock_policy, str(tmp_path / "p.eqx"))
    back = load_policy(str(tmp_path / "p.eqx"))
    assert back.clock and back.mlp.in_size == 51
    np.testing.assert_array_equal(back.normalizer.mean, clock_policy.normalizer.mean)


# --------------------------------------------------------------------------- the gait's phase


def _phase_from_clock(clock):
    """The phase in [0, 1) back from `(sin, cos)`."""
    return np.mod(np.arctan2(clock[..., 0], clock[..., 1]) / (2 * np.pi), 1.0)


@pytest.mark.parametrize("gait", ["trot", "walk", "pace", "bound", "pronk"])
def test_the_clock_phase_is_the_phase_of_the_gait_patterns(gait):
    """`stance_pattern` at the same times and period: foot i swings while
    `(phi - lead_in - offset_i + s0) mod 1 < 1 - duty` (from `lead_in * period` on), phi read
    back from the clock's sin and cos."""
    spec = gait_spec("go2", gait)
    period = gait_period("go2", gait)
    times = np.arange(0.0, 3.0 * period, 0.00731)
    stance, _ = stance_pattern(spec, period, times)
    phi = _phase_from_clock(gait_clock(times, period))
    s0 = 1.0 - spec.duty if spec.starts_in_stance else 0.0
    foot = np.mod(phi[:, None] - spec.lead_in - np.asarray(spec.offsets)[None] + s0, 1.0)
    near_edge = (np.minimum(foot, 1 - foot) < 1e-6) | (np.abs(foot - (1 - spec.duty)) < 1e-6)
    swing = (foot < 1.0 - spec.duty) & (times[:, None] >= spec.lead_in * period)
    keep = ~near_edge
    np.testing.assert_array_equal((stance == 0)[keep], swing[keep])
    assert keep.mean() > 0.95 and 0.1 < swing.mean() < 0.9


def test_a_trot_foot_with_offset_zero_swings_while_the_clock_sine_is_positive():
    spec = GAITS["trot"]  # offsets (0, .5, .5, 0), duty 0.5, no lead-in, starts in swing
    period = gait_period("go2", "trot")
    assert period == 0.4
    times = np.arange(0.0, 2.0, 0.0093)
    stance, _ = stance_pattern(spec, period, times)
    sine = gait_clock(times, period)[:, 0]
    keep = np.abs(sine) > 1e-9
    np.testing.assert_array_equal(stance[keep, 0] == 0, sine[keep] > 0)  # FL
    np.testing.assert_array_equal(stance[keep, 1] == 0, sine[keep] < 0)  # FR, half a cycle on


def test_the_mpc_references_are_built_at_the_clock_phase(go2):
    """Each cycle's references at time t follow the clock at the knot times t + k dt, with the
    MPC's period, also an explicit one (which the cycles used to drop for the default)."""
    from controllers.mpc import MPC
    from dynamics.configuration import State

    state = State(jnp.asarray(go2.q_standing), jnp.zeros(go2.nv))
    for period in (None, 0.5):
        options = {} if period is None else {"period": period}
        mpc = MPC("go2", "trot", (0.3, 0.0, 0.0), horizon=0.2, **options)
        assert mpc.gait_period == (0.4 if period is None else 0.5)
        for t in (0.0, 0.26, 1.14):
            stance = np.asarray(mpc._problem_at(state, t).data.reference.stance)
            knots = t + mpc.dt * np.arange(stance.shape[0])
            sine = gait_clock(knots, mpc.gait_period)[:, 0]
            keep = np.abs(sine) > 1e-9
            np.testing.assert_array_equal(stance[keep, 0] == 0, sine[keep] > 0)
            np.testing.assert_allclose(mpc.gait_clock(t), textbook_clock(t, mpc.gait_period),
                                       atol=1e-12)  # fmt: skip
            assert mpc.gait_phase(t) == pytest.approx((t / mpc.gait_period) % 1.0, abs=1e-12)
    with pytest.raises(ValueError, match="period"):
        MPC("go2", "trot", horizon=0.2, period=0.0)


def _trajectory(model, horizon=6, dt=0.02, seed=0):
    rng = np.random.default_rng(seed)
    q = np.tile(np.asarray(model.q_standing, dtype=float), (horizon + 1, 1))
    quat = rng.normal(size=(horizon + 1, 4))
    q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    v = rng.normal(size=(horizon + 1, model.nv))
    u = q[0, 7:] + 0.2 * rng.normal(size=(horizon, model.nu))
    return Trajectory(q=q, v=v, u=u, dt=dt, u_prev0=q[0, 7:], meta={"control": "pd"})


def test_distillation_pairs_carry_the_clock_at_the_knot_times(go2):
    traj = _trajectory(go2)
    q_default = np.asarray(go2.q_standing)[7:]
    command = (0.4, 0.0, 0.1)
    plain, actions = distill.pairs_from_trajectory(traj, command, q_default)
    period = gait_period("go2", "trot")
    for start_time in (0.0, 0.9):
        obs, same_actions = distill.pairs_from_trajectory(
            traj, command, q_default, gait_period=period, start_time=start_time
        )
        assert obs.shape == (6, observation_size(NU, clock=True))
        np.testing.assert_array_equal(obs[:, :-3], plain)
        np.testing.assert_array_equal(same_actions, actions)
        knots = start_time + traj.dt * np.arange(6)
        np.testing.assert_allclose(obs[:, -3:], textbook_clock(knots, period), atol=1e-12)


# --------------------------------------------------------------------------- the default


def test_the_default_observation_is_unchanged(go2, tmp_path):
    """Without a period: 48 entries, the formula of before the clock, a plain policy, an
    export without a clock, and a checkpoint from before the clock loads."""
    assert observation_size(NU) == 12 + 3 * NU == 48
    env = LocomotionEnv(EnvConfig(robot="go2"))
    assert EnvConfig().gait_period is None and env.observation_size == 48 and not env.clock
    state = env.reset(jax.random.PRNGKey(3))
    state = dataclasses.replace(state, t=jnp.asarray(17, jnp.int32),
                                last_action=jnp.linspace(-1.0, 1.0, NU))  # fmt: skip
    obs = np.asarray(env.observe(state))
    q, v = np.asarray(state.sim.q), np.asarray(state.sim.v)
    m = measurement_from_state(q, v, timestamp=0.0, sequence=0)
    old = np.concatenate([v[0:3], v[3:6], m.projected_gravity, np.asarray(state.command),
                          q[7:] - np.asarray(go2.q_standing)[7:], v[6:],
                          np.asarray(state.last_action)])  # fmt: skip
    assert obs.shape == (48,)
    np.testing.assert_allclose(obs, old, rtol=0, atol=1e-12)
    command = VelocityCommand(*np.asarray(state.command))
    adapter_obs = observation(m, command, state.last_action, JointMap.from_model(go2))
    np.testing.assert_allclose(adapter_obs, old, rtol=0, atol=1e-12)

    plain = Policy.create(jax.random.key(0), NU, hidden=(8, 8))
    assert plain.mlp.in_size == 48 and not plain.clock
    controller = PolicyController(plain, JointMap.from_model(go2))
    assert controller.gait_period is None and controller.clock(m) is None
    paths = export_policy(plain, tmp_path / "plain", robot="go2", onnx=False)
    config = json.loads(open(paths["config"]).read())
    assert config["gait_clock"] is None and config["obs_size"] == 48
    assert config["observation_layout"] == list(OBSERVATION_LAYOUT)
    assert load_numpy_policy(tmp_path / "plain").gait_period is None

    # a checkpoint written before the clock: its header has no "clock"
    path = str(tmp_path / "old.eqx")
    save_policy(plain, path)
    with open(path, "rb") as f:
        header, rest = json.loads(f.readline()), f.read()
    del header["clock"]
    with open(path, "wb") as f:
        f.write((json.dumps(header) + "\n").encode() + rest)
    assert load_policy(path).mlp.in_size == 48


def test_the_trainers_build_clock_policies_for_a_clock_environment():
    """SHAC and PPO give a clock environment a policy (and critic) of its observation size, and
    SHAC refuses a policy without the clock; a step's observation carries it (shapes only:
    no physics compile)."""
    from learning.ppo.networks import ActorCritic
    from learning.ppo.train import PPOConfig
    from learning.shac.train import SHACConfig, init_state

    env_config = EnvConfig(robot="solo12", gait_period=0.3, randomization=Randomization.none())
    env = LocomotionEnv(env_config)
    state = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    out = jax.eval_shape(env.step, state, jnp.zeros(12))
    assert out[1].shape == (51,) and out[4]["terminal_obs"].shape == (51,)
    config = SHACConfig(env=env_config, num_envs=2, policy_hidden=(8, 8), critic_hidden=(8, 8))
    train_state = eqx.filter_eval_shape(init_state, config)
    assert train_state.policy.clock and train_state.critic.mlp.in_size == 51
    with pytest.raises(ValueError, match="gait clock"):
        eqx.filter_eval_shape(init_state, config,
                              Policy.create(jax.random.key(0), 12, hidden=(8, 8)))  # fmt: skip
    model = ActorCritic.create(jax.random.key(0), 12, PPOConfig(hidden=(8, 8)), clock=True)
    assert model.policy.clock and model.value.in_size == 51


def test_a_configuration_without_the_clock_keeps_its_recorded_form():
    """SHAC's `--resume` compares the configuration with the one in the checkpoint header:
    a run from before the clock must still resume, so the dict has no "gait_period" key
    unless the clock is on (nor the later "command_interval", "command_extremes",
    "observe_base_velocity", "observation_noise", "terrain" keys at their defaults)."""
    from learning.shac.train import SHACConfig

    before = dataclasses.asdict(SHACConfig())
    for added in ("gait_period", "command_interval", "command_extremes",
                  "observe_base_velocity", "observation_noise", "terrain"):  # fields added since
        del before["env"][added]
    assert SHACConfig().to_dict() == before
    assert "gait_period" not in EnvConfig().to_dict()
    with_clock = SHACConfig(env=EnvConfig(gait_period=0.4)).to_dict()
    assert with_clock["env"]["gait_period"] == 0.4
