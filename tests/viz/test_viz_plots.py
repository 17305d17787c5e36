"""Plots of a trajectory: the expected panels with their titles, saved as decodable PNGs."""

import os

import numpy as np
import pytest
from PIL import Image
from viz_helpers import walking_trajectory

from viz import plot_trajectory, trajectory_figures
from viz.plots import FIGURES


@pytest.fixture(scope="module")
def traj():
    return walking_trajectory("solo12", horizon=20)


@pytest.fixture(scope="module")
def figures(traj):
    figs = trajectory_figures(traj)
    yield figs
    import matplotlib.pyplot as plt

    for fig in figs.values():
        plt.close(fig)


def _titles(fig):
    return [ax.get_title() for ax in fig.axes if ax.get_visible()]


def test_panels_and_titles(figures):
    assert set(figures) == set(FIGURES)
    assert _titles(figures["convergence"]) == ["convergence: cost per term"]
    base = _titles(figures["base"])
    assert len(base) == 6 and "base position z" in base and "base velocity v_x (base frame)" in base
    joints = _titles(figures["joint_positions"])
    assert len(joints) == 12 and joints[0] == "position: FL_HAA"
    assert len(_titles(figures["joint_torques"])) == 12
    assert _titles(figures["contact_forces"]) == [
        f"contact force {f}" for f in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
    ]
    assert _titles(figures["gait"])[0].startswith("gait diagram")


def test_panels_show_the_data(traj, figures):
    # convergence: total and one line per cost term, from the solver history
    (ax,) = figures["convergence"].axes
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["total", "a", "b"]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [10.0, 5.0, 10.0 / 3])
    # base x against the integrated reference speed
    x_ax = figures["base"].axes[0]
    trajectory, reference = x_ax.get_lines()[:2]
    np.testing.assert_allclose(trajectory.get_ydata(), traj.q[:, 0])
    np.testing.assert_allclose(reference.get_ydata()[-1], traj.q[0, 0] + 0.3 * 20 * 0.02)
    # joint limits are drawn as horizontal lines at the model's limits
    hfe = figures["joint_positions"].axes[1]
    levels = sorted(line.get_ydata()[0] for line in hfe.get_lines()[1:])
    from dynamics import load_robot

    model = load_robot("solo12")
    lo, hi = np.asarray(model.lower_position_limit)[8], np.asarray(model.upper_position_limit)[8]
    np.testing.assert_allclose(levels, [lo, hi])
    # gait: one bar per contact phase (FL: knots 0-4, 10-14 in stance -> two bars)
    ax = figures["gait"].axes[0]
    contact_bars = [c for c in ax.collections if np.allclose(c.get_facecolor()[0][:3], 0)]
    assert len(contact_bars) == 4
    assert len(contact_bars[0].get_paths()) == 2


def test_plot_trajectory_writes_pngs_next_to_the_result(tmp_path, traj):
    paths = plot_trajectory(traj, str(tmp_path))
    assert [os.path.basename(p) for p in paths] == [f"trot_solo12_{n}.png" for n in FIGURES]
    for path in paths:
        with Image.open(path) as image:
            image.load()
            assert image.format == "PNG" and image.width >= 600 and image.height >= 150
            pixels = np.asarray(image.convert("L"))
            assert pixels.std() > 5  # drawn, not blank
