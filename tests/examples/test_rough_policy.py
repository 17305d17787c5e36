"""The shipped blind rough-ground policy (`examples/policies/go2_rough_proprio`) on the stairs
preset in MuJoCo, as `examples/deploy_policy.py --terrain stairs --estimator --randomize 0`
runs it: Go2-like sensor noise, the state estimator in place of the true base state, the
start-up sequence, the safety layer and one draw of `DisturbanceRanges`. Walking 0.5 m/s
forward for 16 s (about 7 m of command), it climbs the five 10 cm risers, crosses the landing
and descends the five risers (past the last riser, `Terraces.edges[-1]`) without falling or
being damped; `go2_omni_proprio`, trained on flat ground only, stops at the first riser."""

import os

import numpy as np
import pytest

from contact.terrain_presets import preset
from learning import deployment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Recorder(deployment.BaseVelocityRecorder):
    """The loop's recorder, also keeping MuJoCo's true base x [m]."""

    last = None

    def __init__(self, robot):
        super().__init__(robot)
        self.x = []
        _Recorder.last = self

    def __call__(self, t, safety, robot):
        super().__call__(t, safety, robot)
        self.x.append(float(self.robot.data.qpos[self.qpos]))


def _stairs_walk(name, monkeypatch):
    """`(true base x at the end [m], summary)` of one 16 s walk up and down the stairs."""
    monkeypatch.setattr(deployment, "BaseVelocityRecorder", _Recorder)
    folder = os.path.join(ROOT, "examples", "policies", name)
    summary, _ = deployment.run_mujoco(folder, "numpy", 16.0, 0.5, randomize=0, estimator=True,
                                       terrain=preset("stairs"))  # fmt: skip
    return _Recorder.last.x[-1], summary


def test_the_rough_policy_walks_up_and_down_the_stairs(monkeypatch):
    last = float(preset("stairs").edges[-1])
    x_end, summary = _stairs_walk("go2_rough_proprio", monkeypatch)
    assert x_end > last, f"stopped at x = {x_end:.2f} m, before the last riser at {last} m"
    assert not summary["fell"] and summary["safety_mode"] == "normal"
    assert np.isfinite(summary["mean_linear_error_m_per_s"])


@pytest.mark.slow
def test_the_flat_policy_stops_at_the_first_riser(monkeypatch):
    """The same walk with the flat-ground policy: what the check above tells apart."""
    first = float(preset("stairs").edges[0])
    x_end, summary = _stairs_walk("go2_omni_proprio", monkeypatch)
    assert x_end < first and not summary["fell"]
