"""A real browser: headless Chromium (Debian's `chromium`, software WebGL) renders the exported
HTML replay, and the screenshot's pixels show the robot.

Skipped, saying why, where no Chromium is installed (`.ci/run` installs it when it can).
Known gap: on the live page (scene sent over the websocket) the camera placement of the scene
does not take effect in headless Chromium, so its screenshot shows the sky; the test checks the
scene graph there and the pixels on the exported page."""

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


def _devtools(port_file_dir, url, script, done, wait_s, screenshot_path):
    """Open `url` in headless Chromium driven through its DevTools protocol (tornado's
    websocket client), evaluate the JavaScript expression `script` until `done(value)` or
    `wait_s` seconds, save a screenshot and return the last value."""
    import asyncio
    import base64
    import json
    import time
    import urllib.request

    from tornado.websocket import websocket_connect

    process = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--no-first-run",
            "--use-angle=swiftshader",
            "--enable-unsafe-swiftshader",
            "--remote-debugging-port=0",
            f"--user-data-dir={port_file_dir}",
            f"--window-size={SIZE[0]},{SIZE[1]}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = os.path.join(port_file_dir, "DevToolsActivePort")
        deadline = time.monotonic() + 60
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            assert time.monotonic() < deadline, "Chromium's DevTools port never appeared"
            time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=10))
        page = next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"]

        async def drive():
            ws = await websocket_connect(page, max_message_size=2**28)
            counter = iter(range(1, 1000))

            async def call(method, **params):
                i = next(counter)
                await ws.write_message(json.dumps({"id": i, "method": method, "params": params}))
                while True:
                    message = json.loads(await ws.read_message())
                    if message.get("id") == i:
                        return message.get("result", {})

            await call("Page.navigate", url=url)
            stop = time.monotonic() + wait_s  # poll: the scene arrives over the websocket
            while True:
                await asyncio.sleep(0.5)
                value = await call("Runtime.evaluate", expression=script, returnByValue=True)
                if done(value["result"].get("value")) or time.monotonic() > stop:
                    break
            shot = await call("Page.captureScreenshot", format="png")
            with open(screenshot_path, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
            ws.close()
            return value["result"].get("value")

        return asyncio.run(drive())
    finally:
        process.terminate()
        process.wait(30)


@pytest.mark.slow  # passes alone in ~10 s; next to JAX compilations on both cores the page
# received no scene within 60 s once (cause not found), so it stays out of the CI run
def test_chromium_receives_the_live_scene_from_the_server(tmp_path):
    import viz

    traj = walking_trajectory("solo12", horizon=10)
    viewer = viz.view(traj, port=0, zmq_port=0)  # shown before the browser connects
    try:
        script = """(function () {
            var robot = viewer.scene_tree.find(["meshcat", "diffloco", "robot"]).object;
            var meshes = 0;
            robot.traverse(function (o) { if (o.isMesh) meshes += 1; });
            return [meshes, viewer.animator.actions.length, viewer.animator.duration];
        })()"""
        png = str(tmp_path / "live.png")
        parts = scene.robot_geometry("solo12")[1]
        meshes, actions, duration = _devtools(
            str(tmp_path / "profile"),
            viewer.url,
            script,
            lambda v: v and v[0] == len(parts),
            60,
            png,
        )
    finally:
        viewer.close()
    assert meshes == len(parts)  # every visual geometry arrived over the websocket
    assert actions == 1 and abs(duration - traj.horizon * traj.dt) < 1e-6
    # (pixels are checked on the exported page above; the live page's camera placement is
    # not, see the module docstring)
