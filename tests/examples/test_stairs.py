"""examples/stairs.py: Go2 trots up three steps onto the top landing, and the plan holds when
re-simulated open loop at a 2 ms step with hard contact solved to 1e-4 m/s (bar: all four feet on
the top landing at the end in the plan and the re-simulation, the base at least 0.15 m above
the tread under it throughout, no fall)."""

import importlib.util
import os
import sys

import numpy as np
import pytest
from plan_checks import assert_contact_converged

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def _stairs():
    spec = importlib.util.spec_from_file_location("stairs", os.path.join(EXAMPLES, "stairs.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["stairs"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # 40-46 s; the slow test below runs the example headless at its defaults
def test_a_short_climb_solves_headless_and_writes_its_results(tmp_path):
    """Small settings (15 iterations, the planner at 10 ms steps): the plan already climbs onto
    the landing, stays well above the treads and upright (its re-simulation does not hold yet,
    so it is not asserted); every output is written."""
    traj, summary = _stairs().main(["--iterations", "15", "--substeps", "2",
                                    "--out", str(tmp_path), "--no-view", "--quiet"])  # fmt: skip
    assert_contact_converged(traj)
    assert traj.q[-1, 2] - traj.q[0, 2] > 0.1  # the base rose by more than one riser
    assert summary["plan_min_base_clearance_m"] > 0.15
    assert summary["plan_max_tilt_rad"] < 0.5
    assert summary["resimulation"] == "2 ms step, hard contact solved to 0.0001 m/s"
    names = {p.name for p in tmp_path.iterdir()}
    assert {"stairs_go2.npz", "stairs_go2.json", "stairs_go2.html", "stairs_go2_base.png",
            "stairs_go2_gait.png"} <= names  # fmt: skip


def test_bad_stairs_settings_are_refused_by_name(capsys):
    stairs = _stairs()
    with pytest.raises(SystemExit):
        stairs.main(["--step-length", "-0.2", "--no-view"])
    assert "step_length must be positive" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        stairs.main(["--substeps", "0", "--no-view"])
    assert "substeps must be at least 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="margin"):
        stairs.stairs_problem(step_length=0.2, margin=0.12)


def test_the_base_height_reference_follows_the_mean_slope():
    """Away from the stairs the reference is the standing height above the ground; on the
    staircase the absolute target `h_ref + H(x)` is a continuous ramp, one riser per tread."""
    from contact.terrain import steps

    stairs = _stairs()
    terrain = steps(0.06, 0.2, 0.5, num_steps=3)
    x = np.linspace(-0.5, 2.0, 501)
    ramp = stairs.slope_height(terrain, x)
    assert ramp[0] == pytest.approx(0.0) and ramp[-1] == pytest.approx(0.18)
    assert np.max(np.abs(np.diff(ramp))) < 0.06 / 0.2 * (x[1] - x[0]) + 1e-9
    assert stairs.slope_height(terrain, [0.9])[0] == pytest.approx(0.15)  # at the 3rd riser


@pytest.mark.slow
def test_go2_ends_on_the_top_landing_in_the_plan_and_when_resimulated(tmp_path):
    traj, summary = _stairs().main(["--out", str(tmp_path), "--no-view", "--quiet"])
    assert_contact_converged(traj)
    print(summary)
    for run in ("plan", "resimulated"):
        assert summary[f"{run}_feet_on_top_landing"] == 4, run
        assert summary[f"{run}_min_base_clearance_m"] > 0.15, run
        assert summary[f"{run}_max_tilt_rad"] < 0.5, run  # no fall
        assert summary[f"{run}_final_base_xyz"][0] > summary["top_landing_x_m"], run
