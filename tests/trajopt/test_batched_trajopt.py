"""Batched FDDP (issue 17, `trajopt.batched`): 8 same-structure problems (a grid of trot
velocities) solved in one jitted call per iteration, split over 4 fake CPU devices and on one
(vmapped), against 8 single `fddp.solve_fddp` solves from the same starts.

In a subprocess with `XLA_FLAGS=--xla_force_host_platform_device_count=4` (the device count is
fixed when JAX starts). Solo12 trot, 3 knots: three compiles (the single solver's structure and
the two batched ones), a few min of CPU together, so the comparison is a slow test; the
structure check is fast (no compile)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trajopt import batched
from trajopt.gaits import make_problem

ROOT = Path(__file__).resolve().parents[2]
MAX_ITERATIONS = 8

SCRIPT = f"""
import json, sys
import numpy as np
import dynamics
from trajopt import batched
from trajopt.engine import fddp
from trajopt.gaits import make_problem
from trajopt.solver import initial_guess

problems = [make_problem("solo12", "trot", float(v), duration=0.06, dt=0.02, substeps=2)
            for v in np.linspace(0.0, 0.35, 8)]
us0 = np.stack([np.asarray(initial_guess(p)[1]) for p in problems])
single = [fddp.solve_fddp(p, None, u, max_iterations={MAX_ITERATIONS}, verbose=False)
          for p, u in zip(problems, us0)]
many = batched.solve_batched(problems, us0, max_iterations={MAX_ITERATIONS}, devices=4)
one_device = batched.solve_batched(problems, us0, max_iterations={MAX_ITERATIONS})
def pack(r):
    return {{"q": np.asarray(r.xs.q).tolist(), "v": np.asarray(r.xs.v).tolist(),
            "us": np.asarray(r.us).tolist(), "status": r.status,
            "iterations": r.iterations, "cost": r.cost, "defects": r.defects,
            "history": [h["cost"] for h in r.history],
            "steps": [h["step"] for h in r.history],
            "devices": r.devices}}
# the distillation dataset from a grid of 7 commands: one by one, and batched on 4 devices
# (padded to 8: the batched structure above is reused)
from learning.distill import dataset as distill
grid = [(0.0, 0.0, 0.0), (0.1, 0.0, 0.0), (0.2, 0.0, 0.0), (0.3, 0.0, 0.0), (0.1, 0.1, 0.0),
        (0.2, -0.1, 0.0), (0.0, 0.15, 0.0)]
options = dict(duration=0.06, max_iterations={MAX_ITERATIONS}, verbose=False)
one = distill.build_dataset("solo12", grid, **options)
both = distill.build_dataset("solo12", grid, batched=True, devices=4, **options)
print(json.dumps({{"single": [pack(s) for s in single], "batched": [pack(b) for b in many],
                  "one_device": [pack(b) for b in one_device],
                  "dataset": [np.asarray(one.obs).tolist(), np.asarray(one.actions).tolist()],
                  "dataset_batched": [np.asarray(both.obs).tolist(),
                                      np.asarray(both.actions).tolist()]}}))
"""


@pytest.fixture(scope="module")
def solves():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu", DIFFLOCO_CACHE_DIR="off")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=3000)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize(("run", "devices"), [("batched", 4), ("one_device", 1)])
def test_batched_solve_of_8_problems_matches_8_single_solves(solves, run, devices):
    """Per problem: the same status and iteration count, the same accepted steps, costs along
    the way to 1e-8 relative, and the final controls and states to 1e-6 (float64; the batch
    differs from the single solver only by batched floating-point code). On 4 devices (each
    works through its 2 problems one by one) and on one (the 8 vmapped)."""
    single, many = solves["single"], solves[run]
    assert len(single) == len(many) == 8
    for s, b in zip(single, many):
        assert b["devices"] == devices
        assert (s["status"], s["iterations"]) == (b["status"], b["iterations"])
        assert s["steps"] == b["steps"]
        np.testing.assert_allclose(b["history"], s["history"], rtol=1e-8)
        np.testing.assert_allclose(b["cost"], s["cost"], rtol=1e-8)
        np.testing.assert_allclose(b["defects"], s["defects"], rtol=1e-6, atol=1e-9)
        for key in ("us", "q", "v"):
            np.testing.assert_allclose(b[key], s[key], rtol=0, atol=1e-6)
    # the grid is a grid: different commands, different optima; and the solver did work
    costs = [s["cost"] for s in single]
    assert len({round(c, 6) for c in costs}) == 8
    assert all(s["iterations"] >= 2 for s in single)


def test_a_batch_must_share_one_structure():
    short = make_problem("solo12", "trot", 0.2, duration=0.06, dt=0.02, substeps=2)
    longer = make_problem("solo12", "trot", 0.2, duration=0.08, dt=0.02, substeps=2)
    with pytest.raises(ValueError, match="another structure"):
        batched.stack_data([short, longer])
    with pytest.raises(ValueError, match="no problems"):
        batched.stack_data([])
    faster = make_problem("solo12", "trot", 0.3, duration=0.06, dt=0.02, substeps=2)
    stacked = batched.stack_data([short, faster])
    assert np.shape(stacked.x0.q) == (2, short.model.nq)
    velocity = np.asarray(stacked.reference.base_velocity)[:, 0, 0]
    np.testing.assert_allclose(velocity, [0.2, 0.3])


@pytest.mark.slow
def test_a_batched_distillation_dataset_matches_the_one_by_one_dataset(solves):
    """`distill.build_dataset(batched=True, devices=4)` on a grid of 7 commands (padded to 8 on
    4 devices) gives the dataset of 7 single solves: the same samples, to 1e-6."""
    obs, actions = (np.asarray(a) for a in solves["dataset"])
    obs_b, actions_b = (np.asarray(a) for a in solves["dataset_batched"])
    assert obs.shape == obs_b.shape and obs.shape[0] >= 7
    np.testing.assert_allclose(obs_b, obs, rtol=0, atol=1e-6)
    np.testing.assert_allclose(actions_b, actions, rtol=0, atol=1e-6)
