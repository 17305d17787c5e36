"""examples/stepping_stones.py: Go2 trots across two rows of stones on a height field, every
loaded foot among the stones on a stone within 2 cm of its centre, in the plan and when
re-simulated open loop at a 2 ms step with hard contact solved to 1e-4 m/s; none over a gap."""

import importlib.util
import os
import sys

import numpy as np
import pytest
from plan_checks import assert_contact_converged

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def _stones():
    path = os.path.join(EXAMPLES, "stepping_stones.py")
    spec = importlib.util.spec_from_file_location("stepping_stones", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["stepping_stones"] = module
    spec.loader.exec_module(module)
    return module


def test_the_course_is_stones_at_the_ground_height_with_deep_gaps_between():
    from contact.terrain import height

    stones = _stones()
    course, field = stones.stone_course([-0.16, 0.16], first=0.4, count=2, size=0.08, gap=0.08,
                                        depth=0.1)  # fmt: skip
    np.testing.assert_allclose(course.centres, [[0.4, -0.16], [0.4, 0.16], [0.56, -0.16],
                                                [0.56, 0.16]])  # fmt: skip
    z = lambda x, y: float(height(field, x, y))  # noqa: E731
    for cx, cy in course.centres:  # the whole top is flat, to its edges
        for dx, dy in [(0, 0), (0.04, 0.04), (-0.04, -0.04), (0.04, -0.04)]:
            assert z(cx + dx, cy + dy) == pytest.approx(0.0, abs=1e-12)
    assert z(0.48, 0.16) == pytest.approx(-0.1)  # between two stones of a row
    assert z(0.4, 0.0) == pytest.approx(-0.1)  # between the rows
    assert z(0.2, 0.0) == 0.0 and z(0.8, 0.0) == 0.0  # the platforms
    assert course.platform_end == pytest.approx(0.28)
    assert course.landing_start == pytest.approx(0.68)
    with pytest.raises(ValueError, match="gap must be a multiple of the cell"):
        stones.stone_course([0.0], gap=0.085)
    with pytest.raises(ValueError, match="depth must be positive"):
        stones.stone_course([0.0], depth=0.0)


def test_footholds_among_the_stones_move_to_the_nearest_centre():
    stones = _stones()
    course, _ = stones.stone_course([-0.16, 0.16], first=0.4, count=2, gap=0.08)
    place = stones.stone_placement(course)
    np.testing.assert_allclose(place(0, np.array([0.43, 0.13, 0.0])), [0.4, 0.16, 0.0])
    np.testing.assert_allclose(place(0, np.array([0.5, -0.2, 0.0])), [0.56, -0.16, 0.0])
    np.testing.assert_allclose(place(0, np.array([0.1, 0.1, 0.0])), [0.1, 0.1, 0.0])  # platform
    # nearer the start platform's edge than the first stone: half a side onto the platform
    np.testing.assert_allclose(place(0, np.array([0.29, 0.15, 0.0])), [0.24, 0.15, 0.0])


def test_a_small_crossing_solves_headless_and_writes_its_results(tmp_path):
    """Small settings (20 ms planner steps, no FDDP iteration: the plan is the first guess over
    the stones, re-simulated): every output is written and the summary says where the feet
    stood; the solve over the stones and its bars are the slow test's."""
    traj, summary = _stones().main(["--stones", "1", "--duration", "0.4", "--substeps", "1",
                                    "--flat-iterations", "0", "--iterations", "0",
                                    "--out", str(tmp_path), "--no-view", "--quiet"])  # fmt: skip
    assert traj.q.shape[0] == 21
    assert summary["resimulation"] == "2 ms step, hard contact solved to 0.0001 m/s"
    for run in ("plan", "resimulated"):
        assert {f"{run}_contacts_on_stones", f"{run}_contacts_off_stones",
                f"{run}_max_centre_error_m"} <= set(summary)  # fmt: skip
    names = {p.name for p in tmp_path.iterdir()}
    assert {"stepping_stones_go2.npz", "stepping_stones_go2.json", "stepping_stones_go2.html",
            "stepping_stones_go2_gait.png"} <= names  # fmt: skip


def test_bad_settings_are_refused_by_name(capsys):
    stones = _stones()
    with pytest.raises(SystemExit):
        stones.main(["--stone-size", "-0.08", "--no-view"])
    assert "size must be positive" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        stones.main(["--flat-iterations", "-1", "--no-view"])
    assert "--flat-iterations must be non-negative" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        stones.main(["--stones", "0", "--no-view"])
    assert "--stones must be at least 1" in capsys.readouterr().err


@pytest.mark.slow
def test_go2_crosses_with_every_loaded_foot_on_a_stone_in_the_plan_and_resimulated(tmp_path):
    traj, summary = _stones().main(["--out", str(tmp_path), "--no-view", "--quiet"])
    print({k: v for k, v in summary.items() if k != "stone_centres"})
    assert_contact_converged(traj)
    for run in ("plan", "resimulated"):
        assert summary[f"{run}_contacts_on_stones"] >= 8 * 4, run  # every stone, several knots
        assert summary[f"{run}_contacts_off_stones"] == 0, run
        assert summary[f"{run}_max_centre_error_m"] <= 0.02, run
        assert summary[f"{run}_feet_on_landing"] == 4, run
