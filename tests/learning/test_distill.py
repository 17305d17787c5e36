"""Distillation pieces that need no solver: trajectory -> (observation, action) pairs, the
dataset file, behaviour cloning against a known teacher, DART with a scripted expert, and a
policy cloned from one saved run of the real MPC expert (tests/data) that walks alone. The
end-to-end build (FDDP solves, cloning, DAgger with the MPC, closed-loop evaluation) runs in
tests/examples/test_examples.py::test_distill_policy_example."""

import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynamics
from learning.distill import cloning, dataset
from learning.distill.expert import rollout_name
from learning.evaluation import evaluate_policy
from learning.plant import Plant
from learning.policy import (
    ACTION_SCALE,
    Policy,
    observation_from_state,
    observation_size,
)
from trajopt.trajectory import Trajectory


@pytest.fixture(scope="module")
def go2():
    return dynamics.load_robot("go2")


def _trajectory(model, horizon=6, dt=0.02, seed=0):
    rng = np.random.default_rng(seed)
    q = np.tile(np.asarray(model.q_standing, dtype=float), (horizon + 1, 1))
    quat = rng.normal(size=(horizon + 1, 4))
    q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    q[:, 7:] += 0.1 * rng.normal(size=(horizon + 1, model.nu))
    v = rng.normal(size=(horizon + 1, model.nv))
    u = q[0, 7:] + 0.2 * rng.normal(size=(horizon, model.nu))
    u_prev0 = q[0, 7:] + 0.05 * rng.normal(size=model.nu)
    return Trajectory(q=q, v=v, u=u, dt=dt, u_prev0=u_prev0, meta={"control": "pd"})


def test_pairs_from_a_trajectory(go2):
    traj = _trajectory(go2)
    q_default = np.asarray(go2.q_standing)[7:]
    command = (0.4, -0.1, 0.3)
    obs, actions = dataset.pairs_from_trajectory(traj, command, q_default)
    assert obs.shape == (6, observation_size(12)) and actions.shape == (6, 12)
    # the action maps back to the optimiser's PD targets
    np.testing.assert_allclose(q_default + ACTION_SCALE * actions, traj.u, atol=1e-12)
    # knot k sees its own state, the command and the action of knot k - 1 (u_prev0 for k = 0)
    for k in (0, 3, 5):
        last = (traj.u_prev0 - q_default) / ACTION_SCALE if k == 0 else actions[k - 1]
        expected = observation_from_state(traj.q[k], traj.v[k], jnp.asarray(command), last,
                                          q_default)  # fmt: skip
        np.testing.assert_allclose(obs[k], expected, atol=1e-12)
    with pytest.raises(ValueError, match="PD-target"):
        traj.meta["control"] = "torque"
        dataset.pairs_from_trajectory(traj, command, q_default)
    with pytest.raises(ValueError, match="policy period"):
        dataset.pairs_from_trajectory(_trajectory(go2, dt=0.01), command, q_default)


def test_dataset_file_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    a = dataset.Dataset(rng.normal(size=(5, 48)), rng.normal(size=(5, 12)),
                        rng.normal(size=(5, 3)), np.zeros(5, int))  # fmt: skip
    both = a + a
    assert len(both) == 10
    both.save(str(tmp_path / "d.npz"))
    back = dataset.Dataset.load(str(tmp_path / "d.npz"))
    np.testing.assert_array_equal(back.obs, both.obs)
    np.testing.assert_array_equal(back.actions, both.actions)
    assert not list(tmp_path.glob("*.tmp*"))  # written atomically, no leftovers
    with pytest.raises(ValueError, match="at least one"):
        dataset.build_dataset("go2", [])


def test_behaviour_cloning_learns_a_known_teacher():
    """The teacher is another (random, non-trivial) policy; the student starts from scratch.
    Cloning must cut the loss on the training data by 20x and on held-out data by 10x, which
    a wrong gradient, normaliser or batching would not do."""
    nu, n_obs = 12, observation_size(12)
    teacher = Policy.create(jax.random.key(7), nu, hidden=(32, 32), final_scale=1.0)
    rng = np.random.default_rng(0)
    scale = np.concatenate([np.full(12, 0.5), np.full(n_obs - 12, 2.0)])  # unnormalised inputs
    train_obs = rng.normal(size=(1500, n_obs)) * scale + 0.3
    test_obs = rng.normal(size=(300, n_obs)) * scale + 0.3
    teach = jax.jit(jax.vmap(teacher))
    data = dataset.Dataset(train_obs, np.asarray(teach(jnp.asarray(train_obs, jnp.float32))),
                           np.zeros((1500, 3)), np.zeros(1500, int))  # fmt: skip
    student = Policy.create(jax.random.key(0), nu, hidden=(64, 64))
    student, report = cloning.behaviour_cloning(student, data, epochs=60, batch_size=128,
                                                learning_rate=3e-3)  # fmt: skip
    assert report["final_loss"] < report["initial_loss"] / 20, report["final_loss"]
    test_x = jnp.asarray(test_obs, jnp.float32)
    held_out = float(cloning.imitation_loss(student, test_x, teach(test_x)))
    assert held_out < report["initial_loss"] / 10, (held_out, report["initial_loss"])
    # the normaliser was fitted to the data, not trained
    np.testing.assert_allclose(student.normalizer.mean, train_obs.mean(axis=0), atol=1e-4)


class _ScriptedExpert:
    """Stands in for `controllers.mpc.MPC` in `cloning.expert_rollouts`: known targets
    `q_default + 0.05 sin(10 t + j)` at time t, its gait clock with a 0.4 s period."""

    gait_period = 0.4

    def __init__(self, robot, gait, command, **options):
        self.q_default = np.asarray(dynamics.load_robot(robot).q_standing)[7:]

    def set_command(self, vx, vy, yaw_rate):
        self.command = (vx, vy, yaw_rate)

    def reset(self, state, t):
        return self.update(state, t)

    def update(self, state, t):
        return self.q_default + 0.05 * np.sin(10.0 * t + np.arange(self.q_default.size))

    def gait_clock(self, t):
        from trajopt.gait_clock import gait_clock

        return gait_clock(t, self.gait_period)


def test_a_dart_run_is_named_by_its_expert_options_beyond_the_defaults():
    """Saved DART runs are reused by name: another expert (here two FDDP iterations per cycle)
    must not find the default expert's runs, and spelling out a default changes nothing (the
    runs saved before options were named stay valid)."""
    args = ("go2", "trot", (0.5, 0.0, 0.0), 10.0, 0.1, 0)
    plain = rollout_name(*args)
    assert rollout_name(*args, {"horizon": 0.5, "iterations": 1}) == plain
    assert rollout_name(*args, {"iterations": 2, "horizon": 0.6}) == (
        plain + "_horizon=0.6_iterations=2"
    )


def test_a_dart_run_is_named_by_its_length_to_every_digit():
    """Runs of 10 s keep the name they were saved under; runs shorter than a tenth of a second
    (or not on a tenth) are named to every digit, so two lengths never share a saved run."""
    name = rollout_name("go2", "trot", (0.5, 0.0, 0.0), 10.0, 0.1, 0)
    assert name == "dart_go2_trot_vx+0.50_vy+0.00_wz+0.00_T10.0_noise0.100_seed0"
    short = {rollout_name("go2", "trot", (0.5, 0, 0), t, 0.1, 0) for t in (0.03, 0.04)}
    assert len(short) == 2 and any("_T0.04_" in n for n in short)
    assert "_T2.0_" in rollout_name("go2", "trot", (0.5, 0, 0), 2.0, 0.1, 2)


def test_failure_runs_rerun_each_student_where_it_falls_with_expert_labels(monkeypatch):
    """`failure_runs`: only the (student, command) pairs whose evaluation fell are run again;
    there the student's own action is executed (read back from the next observation's last
    action) and every label is the expert's; sources name the student; no falls, no samples."""
    import controllers.mpc
    from learning.policy import CONTROL_DT

    monkeypatch.setattr(controllers.mpc, "MPC", _ScriptedExpert)
    commands = np.array([[0.3, 0.0, 0.0], [0.0, 0.1, 0.5], [0.2, 0.0, 0.2]])
    falls = {0: [False, True, False], 1: [True, False, True]}
    students = [Policy.create(jax.random.key(k), 12, clock=True, final_scale=1.0)
                for k in range(2)]  # fmt: skip
    evaluated = []

    def fake_evaluation(policy, plant, cmds, seconds, settle=1.0, gait_period=None):
        k = next(i for i, s in enumerate(students) if s is policy)
        evaluated.append((k, seconds, gait_period))
        np.testing.assert_array_equal(cmds, commands)
        return {"fell": np.array(falls[k])}

    monkeypatch.setattr(cloning, "evaluate_policy", fake_evaluation)
    plant = Plant("solo12", num_sweeps=2)
    data, report = cloning.failure_runs(students, plant=plant, commands=commands, seconds=0.1,
                                        eval_seconds=3.0, verbose=False)  # fmt: skip
    assert evaluated == [(0, 3.0, 0.4), (1, 3.0, 0.4)]
    steps, nu = 5, 12
    assert report["falls"] == [[commands[1].tolist()], [commands[0].tolist(), commands[2].tolist()]]
    assert len(data) == report["samples"] == 3 * steps
    times = CONTROL_DT * np.arange(steps)
    expert = 0.05 * np.sin(10.0 * times[:, None] + np.arange(nu)) / ACTION_SCALE
    for run, (k, command) in enumerate([(0, commands[1]), (1, commands[0]), (1, commands[2])]):
        rows = slice(run * steps, (run + 1) * steps)
        np.testing.assert_allclose(data.actions[rows], expert, rtol=0, atol=1e-12)
        own = np.asarray(jax.vmap(students[k])(jnp.asarray(data.obs[rows], jnp.float32)))
        executed = data.obs[rows][1:, 12 + 2 * nu : 12 + 3 * nu]
        np.testing.assert_allclose(executed, own[:-1], rtol=0, atol=1e-5)
        assert np.abs(own - expert).max() > 0.1  # the student's actions, not the expert's
        np.testing.assert_array_equal(data.commands[rows], np.tile(command, (steps, 1)))
        assert np.all(data.source[rows] == cloning.FAILURE_SOURCE + k)
    falls[0], falls[1] = [False] * 3, [False] * 3
    none, report = cloning.failure_runs(students, plant=plant, commands=commands, seconds=0.1,
                                        verbose=False)  # fmt: skip
    assert len(none) == 0 and none.obs.shape[1] == 15 + 3 * nu and report["falls"] == [[], []]
    with pytest.raises(ValueError, match="students is empty"):
        cloning.failure_runs([], plant=plant, commands=commands)


def test_dart_labels_the_expert_and_executes_it_with_noise(tmp_path, monkeypatch):
    """`expert_rollouts` (DART): every label is the expert's own action, the plant executes
    label + noise (read back from the next observation's last action, the noise redrawn from the
    documented generator), the clock is the expert's, and a second call reads the saved runs
    without an expert."""
    import controllers.mpc
    from learning.policy import CONTROL_DT
    from trajopt.gait_clock import gait_clock

    monkeypatch.setattr(controllers.mpc, "MPC", _ScriptedExpert)
    commands = [(0.3, 0.0, 0.0), (0.0, 0.1, 0.5)]
    plant = Plant("solo12", num_sweeps=2)
    options = dict(seconds=0.1, noise=0.2, seed=3, runs=2, plant=plant, folder=str(tmp_path),
                   verbose=False)  # fmt: skip
    data = cloning.expert_rollouts("solo12", commands, **options)
    nu, steps = 12, 5
    assert len(data) == 2 * 2 * steps and data.obs.shape[1] == 15 + 3 * nu
    runs = [(seed, i, c) for seed in (3, 4) for i, c in enumerate(commands)]  # run-major order
    for k, (seed, i, command) in enumerate(runs):
        rows = slice(k * steps, (k + 1) * steps)
        times = CONTROL_DT * np.arange(steps)
        expert = 0.05 * np.sin(10.0 * times[:, None] + np.arange(nu)) / ACTION_SCALE
        np.testing.assert_allclose(data.actions[rows], expert, rtol=0, atol=1e-12)
        name = rollout_name("solo12", "trot", command, 0.1, 0.2, seed)
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        noise = 0.2 * rng.standard_normal((steps, nu))
        executed = data.obs[rows][1:, 12 + 2 * nu : 12 + 3 * nu]  # the last action observed
        np.testing.assert_allclose(executed, (expert + noise)[:-1], rtol=0, atol=1e-12)
        np.testing.assert_allclose(data.obs[rows][:, -3:], gait_clock(times, 0.4), atol=1e-12)
        np.testing.assert_array_equal(data.commands[rows], np.tile(command, (steps, 1)))
        assert np.all(data.source[rows] == cloning.DART_SOURCE + i)
    assert len(list(tmp_path.glob("dart_solo12_trot_*.npz"))) == 4

    def no_expert(*args, **kwargs):
        raise AssertionError("the saved runs must be reused")

    monkeypatch.setattr(controllers.mpc, "MPC", no_expert)
    again = cloning.expert_rollouts("solo12", commands, **options)
    np.testing.assert_array_equal(again.obs, data.obs)
    np.testing.assert_array_equal(again.actions, data.actions)
    with pytest.raises(ValueError, match="noise"):
        cloning.expert_rollouts("solo12", commands, **{**options, "noise": -0.1})
    with pytest.raises(ValueError, match="commands is empty"):
        cloning.expert_rollouts("solo12", [], **options)
    with pytest.raises(ValueError, match="runs"):
        cloning.expert_rollouts("solo12", commands, **{**options, "runs": 0})


DART_SAMPLE = "tests/data/dart_go2_trot_vx0.5_seed0_iterations2.npz"


def test_a_policy_cloned_from_mpc_runs_walks_where_the_standing_policy_does_not():
    """The small distillation problem: one saved DART run of the MPC expert (Go2 trot at
    0.5 m/s, 10 s, noise 0.1, two FDDP iterations per cycle, with the gait clock; 500 samples,
    written by `cloning.expert_rollouts("go2", [(0.5, 0, 0)], seconds=10, noise=0.1, seed=0,
    mpc_options={"horizon": 0.5, "iterations": 2}, folder=...)`) is cloned and the policy runs
    alone for 4 s in this project's simulator (smooth contact). It must not fall and must track
    the command far better than the standing policy (zero actions), whose error is the command
    itself."""
    from trajopt.gaits import gait_period

    data = dataset.Dataset.load(DART_SAMPLE)
    assert len(data) == 500 and np.all(data.commands == [0.5, 0.0, 0.0])
    key = jax.random.key(0)
    policy, report = cloning.behaviour_cloning(
        Policy.create(key, 12, clock=True), data, epochs=300, seed=0
    )
    assert report["final_loss"] < report["initial_loss"] / 10
    standing = Policy.create(key, 12, clock=True, final_scale=0.0)
    plant, command = Plant("go2"), np.array([[0.5, 0.0, 0.0]])
    period = gait_period("go2", "trot")
    cloned = evaluate_policy(policy, plant, command, 4.0, gait_period=period)
    still = evaluate_policy(standing, plant, command, 4.0, gait_period=period)
    print(cloned["mean_velocity_error"], still["mean_velocity_error"])
    assert not cloned["fell"][0] and not still["fell"][0]
    assert still["mean_velocity_error"] > 0.4  # standing: about the command's 0.5 m/s
    assert cloned["mean_velocity_error"] < 0.15
