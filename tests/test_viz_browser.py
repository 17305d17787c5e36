"""A real browser: headless Chromium (Debian's `chromium`, software WebGL) renders the exported
HTML replay, and the screenshot's pixels show the robot.

Skipped, saying why, where no Chromium is installed (`.ci/run` installs it when it can)."""

import os
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image
from viz_helpers import walking_trajectory

from viz import export_html, scene
from viz.html_export import describe, scene_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no headless Chromium: install Debian's `chromium` (apt-get install -y chromium; "
    ".ci/run does this as root) to run the browser test",
)
SIZE = (800, 600)


def screenshot(page, png, profile):
    """Render `page` in headless Chromium (software WebGL through SwiftShader) to `png`."""
    result = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--no-first-run",
            "--hide-scrollbars",
            "--use-angle=swiftshader",
            "--enable-unsafe-swiftshader",
            f"--user-data-dir={profile}",
            f"--window-size={SIZE[0]},{SIZE[1]}",
            "--virtual-time-budget=3000",
            f"--screenshot={png}",
            f"file://{os.path.abspath(page)}",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert os.path.isfile(png), f"Chromium wrote no screenshot: {result.stderr[-2000:]}"
    return np.asarray(Image.open(png).convert("RGB"), dtype=int)


def test_chromium_renders_the_exported_replay_with_the_robot(tmp_path):
    traj = walking_trajectory("solo12", horizon=10)
    page = export_html(traj, str(tmp_path / "replay.html"))
    shot = screenshot(page, str(tmp_path / "replay.png"), tmp_path / "profile")
    assert shot.shape == (SIZE[1], SIZE[0], 3)
    # rendered content, not a blank page: many colours (shading, terrain, lines, caption)
    colours = np.unique(shot.reshape(-1, 3) // 4, axis=0)
    assert len(colours) > 200, f"only {len(colours)} colours: the page looks blank"
    # the same page without the robot, its ghost and the arrows: what differs is the robot
    commands = [
        c
        for c in scene.build_scene(traj)
        if c.get("path") not in {f"{scene.ROOT}/{n}" for n in ("robot", "ghost", "forces")}
    ]
    bare = tmp_path / "bare.html"
    bare.write_text(scene_html(commands, caption=describe(traj)), encoding="utf-8")
    empty = screenshot(str(bare), str(tmp_path / "bare.png"), tmp_path / "profile")
    changed = np.abs(shot - empty).sum(axis=2) > 60
    assert changed.sum() > 3000, f"the robot covers only {changed.sum()} pixels"
    rows, cols = np.nonzero(changed)
    # the camera looks at the path the robot walks: its pixels lie in the middle of the view
    assert SIZE[1] * 0.15 < rows.mean() < SIZE[1] * 0.85
    assert SIZE[0] * 0.15 < cols.mean() < SIZE[0] * 0.85
