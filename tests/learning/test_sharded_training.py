"""Sharded training: the environment batch split over 1, 2 and 4 fake CPU devices
gives the one-device result, a checkpoint written on N devices resumes on M, and a
two-process `jax.distributed` run on loopback agrees with the single-process one.

The runs are subprocesses (`tests/sharded_runs.py`): the device count is fixed when JAX starts
(`XLA_FLAGS=--xla_force_host_platform_device_count`). Fake CPU devices share this machine's
cores, so nothing here measures speed; the results must agree to 1e-9 (float64; the only
difference is the order of the reductions over the batch).

PPO on the toy problem of `test_ppo.py` (no simulator: cheap to compile) is the fast test of
the code path; SHAC through the simulator compiles its reverse pass once per device count
(~80 s each on this machine), so its tests are slow.
"""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import trajopt.sharding as sharding

ROOT = Path(__file__).resolve().parents[2]
RUNS = str(ROOT / "tests" / "sharded_runs.py")
TOL = 1e-9
# how a JAX without cross-process CPU collectives refuses them (then the test skips, saying so)
UNSUPPORTED = re.compile(r"(UNIMPLEMENTED|not implemented|aren't implemented|not supported)"
                         r".{0,200}(ollective|ultiprocess|ulti-process|cross-process)", re.S)


def _env(devices_per_process: int) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices_per_process}"
    env["JAX_PLATFORMS"] = "cpu"
    env["DIFFLOCO_CACHE_DIR"] = "off"
    for name in (sharding.ENV_COORDINATOR, sharding.ENV_NUM_PROCESSES, sharding.ENV_PROCESS_ID):
        env.pop(name, None)
    return env


def _run(args, devices_per_process=4, timeout=900):
    done = subprocess.run([sys.executable, RUNS, *args], cwd=ROOT, env=_env(devices_per_process),
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def _load(path):
    with np.load(path) as f:
        leaves = [f[f"leaf_{i}"] for i in range(sum(k.startswith("leaf_") for k in f.files))]
        return leaves, f["metrics"], list(f["shards"]), list(f["metric_names"])


def _assert_same(a, b, tol=TOL):
    leaves_a, metrics_a = a[:2]
    leaves_b, metrics_b = b[:2]
    assert len(leaves_a) == len(leaves_b) > 0
    for x, y in zip(leaves_a, leaves_b):
        assert x.shape == y.shape and x.dtype == y.dtype
        if np.issubdtype(x.dtype, np.floating):
            np.testing.assert_allclose(y, x, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(y, x)
    np.testing.assert_allclose(metrics_b, metrics_a, rtol=tol, atol=tol)


def _run_two_processes(common, timeout=600):
    """`sharded_runs.py *common --process-id i` for i = 0, 1 at once, 2 fake devices each;
    returns their (stdout, stderr). Skips, quoting the error, if the processes failed over
    JAX's cross-process collectives (not faked: the test then does not pass)."""
    procs = [subprocess.Popen([sys.executable, RUNS, *common, "--process-id", str(i)], cwd=ROOT,
                              env=_env(2), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)  # fmt: skip
             for i in (0, 1)]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    errors = "\n".join(err[-3000:] for _, err in outs)
    if any(p.returncode != 0 for p in procs) and UNSUPPORTED.search(errors):
        pytest.skip(f"JAX's CPU backend could not run cross-process collectives here: {errors}")
    assert all(p.returncode == 0 for p in procs), errors
    return outs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- helpers


def test_mesh_placement_and_gather_on_four_fake_devices():
    """`make_mesh`, `put` and `to_host` in a 4-device process: the batch is split into equal
    per-device blocks holding the right rows, scalars and replicated leaves are whole on every
    device, the round trip is exact, and bad device counts are refused with a clear error."""
    code = """
import numpy as np, jax
from trajopt import sharding
mesh = sharding.make_mesh(None)
assert mesh.devices.size == 4, mesh
x = np.arange(8 * 3, dtype=np.float64).reshape(8, 3)
tree = {"x": x, "s": np.float64(2.5), "k": jax.random.split(jax.random.key(0), 8)}
placed = sharding.put(tree, sharding.batch_sharding(mesh))
shards = placed["x"].addressable_shards
assert [s.data.shape for s in shards] == [(2, 3)] * 4
for s in shards:
    np.testing.assert_array_equal(np.asarray(s.data), x[s.index])
assert placed["s"].sharding.is_fully_replicated
back = sharding.to_host(placed)
np.testing.assert_array_equal(back["x"], x)
np.testing.assert_array_equal(jax.random.key_data(back["k"]), jax.random.key_data(tree["k"]))
assert sharding.per_device_batch(8, mesh) == 2
for bad, call in ((6, lambda: sharding.per_device_batch(6, mesh)),
                  (5, lambda: sharding.make_mesh(5)), (0, lambda: sharding.make_mesh(0))):
    try:
        call()
    except ValueError as err:
        print("refused", bad, err)
    else:
        raise SystemExit(f"{bad} was accepted")
assert sharding.make_mesh(2).devices.size == 2
assert sharding.default_mesh(None).devices.size == 4
assert not sharding.initialize_distributed()  # no coordinator given: single process
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(4),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith("ok") and done.stdout.count("refused") == 3


# --------------------------------------------------------------------------- PPO (fast)


@pytest.fixture(scope="module")
def ppo_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("ppo")
    _run(["ppo", "--devices", "1", "2", "4", "--out", str(out)])
    return {d: _load(out / f"ppo_d{d}.npz") for d in (1, 2, 4)}


def test_ppo_gives_the_same_result_on_1_2_and_4_devices(ppo_runs):
    """Same global batch (8 environments) and seed: the policy after 4 iterations and every
    iteration's metrics agree to 1e-9; the model lived on as many devices as asked."""
    for d in (2, 4):
        _assert_same(ppo_runs[1], ppo_runs[d])
        assert ppo_runs[d][2] == [d] * 4
    assert ppo_runs[1][2] == [1] * 4
    # the runs did train: the policy moved and the metrics are not constant
    assert np.ptp(ppo_runs[1][1][:, ppo_runs[1][3].index("reward")]) > 0


@pytest.mark.slow  # two processes end to end, ~16 s
def test_two_process_distributed_ppo_matches_the_single_process_run(ppo_runs, tmp_path):
    """Two processes on loopback (coordinator 127.0.0.1), 2 fake CPU devices each, one
    4-device mesh across them (cross-process collectives by JAX's CPU backend, gloo): both
    processes end with the single-process policy and metrics."""
    port = _free_port()
    common = ["ppo", "--devices", "4", "--out", str(tmp_path), "--coordinator",
              f"127.0.0.1:{port}", "--num-processes", "2"]  # fmt: skip
    outs = _run_two_processes(common)
    for i in (0, 1):
        assert f"done {i} 4" in outs[i][0]  # process i saw 4 devices in total
        run = _load(tmp_path / f"ppo_d4_p{i}.npz")
        _assert_same(ppo_runs[1], run)
        assert run[2] == [4] * 4


# --------------------------------------------------------------------------- SHAC (slow)


@pytest.fixture(scope="module")
def shac_runs(tmp_path_factory):
    """One 4-device process: SHAC (Solo12 through the simulator, 4 environments, horizon 2,
    float64) for 3 iterations on 1, 2 and 4 devices, and a run checkpointed after 2 iterations
    on 4 devices then resumed on 2."""
    tmp = tmp_path_factory.mktemp("shac")
    out = tmp / "out"
    out.mkdir()
    _run(["shac", "--devices", "1", "2", "4", "--iterations", "3", "--out", str(out),
          "--resume-from", "4", "--resume-to", "2", "--checkpoint-dir", str(tmp / "ckpt")],
         timeout=1800)  # fmt: skip
    runs = {d: _load(out / f"shac_d{d}.npz") for d in (1, 2, 4)}
    runs["resumed"] = _load(out / "shac_resume_d4_d2.npz")
    runs["checkpoints"] = sorted(os.listdir(tmp / "ckpt"))
    return runs


@pytest.mark.slow
def test_shac_same_result_on_1_2_4_devices_and_resume_across_device_counts(shac_runs):
    """The whole training state after 3 iterations agrees to 1e-9 on 1, 2 and 4 devices (the
    placed environment batch is 4/d per device); the run checkpointed on 4 devices and resumed
    on 2 ends where the uninterrupted runs end, its metrics continuing the checkpoint's."""
    for d in (1, 2, 4):
        assert shac_runs[d][2] == [4 // d] * d
    for d in (2, 4):
        _assert_same(shac_runs[1], shac_runs[d])
    _assert_same(shac_runs[1], shac_runs["resumed"])
    assert len(shac_runs["resumed"][1]) == 3
    # the 4-device checkpoint and the 2-device run's final one, each a complete file
    assert shac_runs["checkpoints"] == [
        "ckpt_00000002.eqx", "ckpt_00000003.eqx", "metrics.csv", "metrics.json"]  # fmt: skip


@pytest.mark.slow
def test_two_process_distributed_shac_matches_and_resumes(shac_runs, tmp_path):
    """Two loopback processes, 2 fake devices each, one 4-device mesh: SHAC's 3 iterations end
    in the single-process state in both processes, and so does a run checkpointed (by process
    0 alone) after 2 iterations and resumed by both."""
    port = _free_port()
    common = ["shac", "--devices", "4", "--iterations", "3", "--out", str(tmp_path),
              "--resume-from", "4", "--resume-to", "4", "--checkpoint-dir",
              str(tmp_path / "ckpt"), "--coordinator", f"127.0.0.1:{port}",
              "--num-processes", "2"]  # fmt: skip
    _run_two_processes(common, timeout=1800)
    for i in (0, 1):
        _assert_same(shac_runs[1], _load(tmp_path / f"shac_d4_p{i}.npz"))
        _assert_same(shac_runs[1], _load(tmp_path / f"shac_resume_d4_d4_p{i}.npz"))
    files = sorted(os.listdir(tmp_path / "ckpt"))
    assert files == ["ckpt_00000002.eqx", "ckpt_00000003.eqx", "metrics.csv", "metrics.json"]
