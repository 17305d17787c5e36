"""The live viewer against a real Meshcat server started on localhost (ports chosen by the OS,
so tests never collide with a user's server); every server is terminated."""

import base64
import re
import socket
import subprocess
import urllib.request

import pytest
import umsgpack
from viz_helpers import walking_trajectory

import viz
from viz import scene
from viz.meshcat_server import MeshcatServerError, ping, start_server


@pytest.fixture
def server():
    server = start_server(port=0, zmq_port=0)
    yield server
    server.stop()
    assert server.process.poll() is not None


def _listening(pid):
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    return [line.split()[3] for line in out.splitlines() if f"pid={pid}," in line]


def _scene_commands(html):
    """The commands a Meshcat server embeds in its static snapshot (`get_scene`)."""
    blobs = re.findall(r"data:application/octet-binary;base64,([A-Za-z0-9+/=]+)", html)
    return [umsgpack.unpackb(base64.b64decode(b)) for b in blobs]


def test_server_binds_loopback_only_and_serves_the_viewer_page(server):
    addresses = _listening(server.pid)
    assert len(addresses) == 2 and all(a.startswith("127.0.0.1:") for a in addresses)
    assert server.web_url.startswith("http://127.0.0.1:")
    page = urllib.request.urlopen(server.web_url, timeout=10).read().decode()
    assert "main.min.js" in page
    assert ping(server.zmq_url) == server.web_url


def test_viewer_shows_and_plays_a_trajectory_on_the_server(server, capsys):
    traj = walking_trajectory("solo12", horizon=10)
    viewer = viz.open_viewer(server.zmq_url)
    assert server.web_url in capsys.readouterr().out  # the URL is printed
    viewer.show(traj, speed=0.5, loop=False)
    commands = _scene_commands(viewer.scene_html())
    paths = {c["path"] for c in commands if c["type"] == "set_object"}
    assert {f"{scene.ROOT}/robot", f"{scene.ROOT}/ghost", f"{scene.ROOT}/forces"} <= paths
    (animation,) = [c for c in commands if c["type"] == "set_animation"]
    assert animation["animations"][0]["clip"]["fps"] == 0.5
    assert animation["options"]["repetitions"] == 1
    viewer.play(speed=2.0, loop=True)  # replaces the clip on the server
    (animation,) = [c for c in _scene_commands(viewer.scene_html()) if c["type"] == "set_animation"]
    assert animation["animations"][0]["clip"]["fps"] == 2.0
    assert animation["options"]["repetitions"] == float("inf")
    # showing another trajectory replaces the first (no stale ghost)
    viewer.show(traj, ghost=None)
    paths = {c["path"] for c in _scene_commands(viewer.scene_html()) if c["type"] == "set_object"}
    assert f"{scene.ROOT}/ghost" not in paths and f"{scene.ROOT}/robot" in paths
    viewer.close()
    assert server.process.poll() is None  # attached viewers leave the server running


def test_view_starts_its_own_server_and_close_stops_it():
    viewer = viz.view(walking_trajectory("solo12", horizon=4), port=0, zmq_port=0)
    process = viewer.server.process
    assert process.poll() is None and ping(viewer.zmq_url) == viewer.url
    viewer.close()
    assert process.wait(10) is not None


def test_busy_port_is_a_clear_error(server):
    port = int(server.web_url.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(MeshcatServerError, match=f"127.0.0.1:{port} is already in use"):
        start_server(port=port, zmq_port=0)
    zmq_port = int(server.zmq_url.rsplit(":", 1)[1])
    with pytest.raises(MeshcatServerError, match="zmq port .* already in use"):
        start_server(port=0, zmq_port=zmq_port)


def test_missing_server_is_a_clear_error_not_a_hang():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(MeshcatServerError, match="no Meshcat server answers"):
        viz.open_viewer(f"tcp://127.0.0.1:{port}", timeout=0.5)
