"""The exported policy computes what the JAX policy computes: the NumPy runner (float64, and in
a process where JAX cannot be imported) and the ONNX graph run by onnxruntime (float32)."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from import_blocker import blocking_script

from learning.policy import Policy, observation_size
from learning.policy_export import (
    PolicyFileError,
    export_policy,
    load_exported_policy,
    load_numpy_policy,
    load_onnx_policy,
)

NU = 12  # go2
N_OBS = observation_size(NU)


@pytest.fixture(scope="module")
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def policy(x64):
    """A float64 policy with a fitted (non-trivial) normaliser and a full-size last layer."""
    policy = Policy.create(jax.random.key(3), NU, hidden=(64, 64), dtype=jnp.float64,
                           final_scale=3.0)  # fmt: skip
    rng = np.random.default_rng(0)
    scale = rng.uniform(0.05, 5.0, size=N_OBS)
    data = rng.normal(size=(2, 400, N_OBS)) * scale + rng.normal(size=N_OBS)
    normalizer = policy.normalizer.update(data[0]).update(data[1])
    return policy.with_normalizer(normalizer)


@pytest.fixture(scope="module")
def observations(policy):
    """`(100, n_obs)`: typical observations, and a quarter far enough out to hit the clip."""
    rng = np.random.default_rng(1)
    norm = policy.normalizer
    mean, std = np.asarray(norm.mean), np.sqrt(np.asarray(norm.var))
    obs = mean + std * rng.normal(size=(100, N_OBS))
    obs[75:] = mean + std * rng.normal(size=(25, N_OBS)) * 10.0
    return obs


@pytest.fixture(scope="module")
def jax_actions(policy, observations):
    return np.asarray(jax.vmap(policy)(jnp.asarray(observations)))


@pytest.fixture(scope="module")
def exported(policy, tmp_path_factory):
    folder = tmp_path_factory.mktemp("policy_go2")
    return folder, export_policy(policy, folder, robot="go2")


def test_the_observations_reach_the_clip_and_the_actions_are_not_small(
    policy, observations, jax_actions
):
    z = np.asarray(jax.vmap(policy.normalizer.normalize)(jnp.asarray(observations)))
    assert np.sum(np.abs(z) == 5.0) > 100
    assert np.max(np.abs(jax_actions)) > 1.0


def test_the_folder_holds_weights_conventions_runner_and_graph(exported):
    folder, paths = exported
    assert set(paths) == {"params", "config", "runner", "onnx"}
    assert all(os.path.isfile(p) and os.path.dirname(p) == str(folder) for p in paths.values())
    assert not [f for f in os.listdir(folder) if f.startswith(".")]  # no temporary files left
    config = json.loads((folder / "policy.json").read_text())
    assert config["robot"] == "go2" and config["obs_size"] == N_OBS and config["nu"] == NU
    assert config["joint_names"][:3] == ["FL_hip_joint", "FL_thigh_joint", "FL_calf_joint"]
    assert len(config["q_default"]) == len(config["kp"]) == len(config["kd"]) == NU
    assert config["activation"] == "elu" and config["control_dt"] == 0.02
    with np.load(paths["params"]) as data:
        assert data["layer0_weight"].shape == (64, N_OBS) and data["layer2_bias"].shape == (NU,)
        assert data["layer0_weight"].dtype == np.float64


def test_numpy_runner_equals_jax(exported, observations, jax_actions):
    numpy_policy = load_numpy_policy(exported[0])
    np.testing.assert_allclose(numpy_policy(observations), jax_actions, rtol=0, atol=1e-6)
    np.testing.assert_allclose(numpy_policy(observations[80]), jax_actions[80], rtol=0, atol=1e-6)
    assert numpy_policy(observations[0]).shape == (NU,)


def test_onnx_equals_jax(exported, observations, jax_actions):
    pytest.importorskip("onnxruntime", reason="the ONNX check needs onnxruntime ('export' extra)")
    onnx_policy = load_onnx_policy(exported[0])
    actions = onnx_policy(observations)
    assert actions.dtype == np.float32 and actions.shape == (100, NU)
    np.testing.assert_allclose(actions, jax_actions, rtol=0, atol=1e-5)
    np.testing.assert_allclose(onnx_policy(observations[80]), jax_actions[80], rtol=0, atol=1e-5)


def test_load_exported_policy_gives_back_the_same_jax_policy(
    exported, observations, jax_actions, x64
):
    policy = load_exported_policy(exported[0], dtype=jnp.float64)
    actions = np.asarray(jax.vmap(policy)(jnp.asarray(observations)))
    np.testing.assert_array_equal(actions, jax_actions)


# Loads the exported runner by path with JAX, equinox, ONNX and this project unimportable, and
# lists the non-standard-library modules that loading and running it imported.
_NUMPY_ALONE = blocking_script(
    {"jax", "jaxlib", "equinox", "onnx", "onnxruntime", "controllers", "dynamics"},
    """
    import importlib.util, json, sys
    folder, obs_file, out_file = sys.argv[1:]
    before = set(sys.modules)
    spec = importlib.util.spec_from_file_location("numpy_policy", folder + "/numpy_policy.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    import numpy as np
    np.save(out_file, runner.NumpyPolicy.load(folder)(np.load(obs_file)))
    new = {m.split(".")[0] for m in set(sys.modules) - before} - set(sys.stdlib_module_names)
    print(json.dumps(sorted(new)))
    """
)


def test_the_runner_runs_with_numpy_alone(exported, observations, jax_actions, tmp_path):
    np.save(tmp_path / "obs.npy", observations)
    args = [str(exported[0]), str(tmp_path / "obs.npy"), str(tmp_path / "actions.npy")]
    done = subprocess.run([sys.executable, "-c", _NUMPY_ALONE, *args], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["numpy"]
    actions = np.load(tmp_path / "actions.npy")
    np.testing.assert_allclose(actions, jax_actions, rtol=0, atol=1e-6)


# --------------------------------------------------------------------------- bad inputs
def test_export_rejects_bad_inputs(policy, tmp_path):
    with pytest.raises(TypeError, match="takes a learning.policy.Policy"):
        export_policy(policy.mlp, tmp_path, robot="go2")
    (tmp_path / "a_file").write_text("")
    with pytest.raises(NotADirectoryError, match="a_file exists and is not a folder"):
        export_policy(policy, tmp_path / "a_file", robot="go2", onnx=False)
    with pytest.raises(ValueError, match="unknown robot"):
        export_policy(policy, tmp_path, robot="no_such_robot")
    small = Policy.create(jax.random.key(0), nu=8, hidden=(8, 8))
    with pytest.raises(ValueError, match="8 actions, go2 12 joints"):
        export_policy(small, tmp_path, robot="go2")
    import equinox as eqx

    relu = eqx.tree_at(lambda p: p.mlp.activation, policy, jax.nn.relu)
    with pytest.raises(ValueError, match="ELU"):
        export_policy(relu, tmp_path, robot="go2")
    nan = eqx.tree_at(lambda p: p.mlp.layers[1].bias, policy, policy.mlp.layers[1].bias * np.nan)
    with pytest.raises(ValueError, match=r"non-finite numbers in \['layer1_bias'\]"):
        export_policy(nan, tmp_path, robot="go2")
    assert sorted(os.listdir(tmp_path)) == ["a_file"]  # nothing was written


def test_runner_rejects_a_wrong_observation_shape(exported):
    numpy_policy = load_numpy_policy(exported[0])
    with pytest.raises(ValueError, match=r"shape \(48,\) or \(B, 48\), got \(45,\)"):
        numpy_policy(np.zeros(45))


@pytest.mark.parametrize("name", ["policy.json", "policy.npz", "numpy_policy.py", "policy.onnx"])
def test_a_missing_file_is_named(policy, tmp_path, name):
    export_policy(policy, tmp_path, robot="go2")
    os.remove(tmp_path / name)
    load = load_onnx_policy if name == "policy.onnx" else load_numpy_policy
    if name == "policy.onnx":
        pytest.importorskip("onnxruntime")
    with pytest.raises(FileNotFoundError, match=name):
        load(tmp_path)


@pytest.mark.parametrize("name", ["policy.json", "policy.npz", "policy.onnx"])
def test_a_corrupt_file_is_named(policy, tmp_path, name):
    export_policy(policy, tmp_path, robot="go2")
    data = (tmp_path / name).read_bytes()
    (tmp_path / name).write_bytes(data[: len(data) // 2])
    if name == "policy.onnx":
        pytest.importorskip("onnxruntime")
    load = load_onnx_policy if name == "policy.onnx" else load_numpy_policy
    with pytest.raises(PolicyFileError, match=name):
        load(tmp_path)


def test_an_interrupted_export_leaves_whole_files_and_a_clear_error(policy, tmp_path, monkeypatch):
    """Killed after the new weights replaced the old, before the new policy.json did: every
    file is whole, no temporary file is left, and loading names the mismatch."""
    export_policy(policy, tmp_path, robot="go2", onnx=False)
    replace, calls = os.replace, []

    def replace_then_die(src, dst):
        calls.append(dst)
        if len(calls) > 1:
            raise KeyboardInterrupt
        replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_then_die)
    retrained = policy.with_normalizer(policy.normalizer.update(np.ones((3, N_OBS))))
    with pytest.raises(KeyboardInterrupt):
        export_policy(retrained, tmp_path, robot="go2", onnx=False)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["numpy_policy.py", "policy.json", "policy.npz"]
    with pytest.raises(PolicyFileError, match="policy.npz does not match .*policy.json"):
        load_numpy_policy(tmp_path)
    export_policy(retrained, tmp_path, robot="go2", onnx=False)  # exporting again repairs it
    assert load_numpy_policy(tmp_path).count == float(retrained.normalizer.count)
