"""Live viewing of trajectories in the browser through a Meshcat server.

    >>> viewer = viz.view(traj)                  # starts a server on 127.0.0.1, prints the URL
    >>> viewer.play(speed=0.5, loop=True)        # replay at half speed, for ever
    >>> viewer.close()                           # stops the server it started

Nothing here blocks: the animation is a clip that the browser plays by itself (pause, scrub and
time scale in Meshcat's "Animations" panel), so a script that only wants to save results goes
on at once. A browser that connects later receives the whole scene from the server.
`viz.view(traj, zmq_url="tcp://127.0.0.1:6000")` draws into a server that is already running
(`python -m viz.meshcat_server`, or meshcat's own `meshcat-server`).
"""

from __future__ import annotations

import webbrowser

import umsgpack

from .meshcat_server import MeshcatServer, MeshcatServerError, ping, start_server
from .scene import build_scene


class _Connection:
    """A zmq REQ socket to a Meshcat server that never waits for ever (meshcat-python's waits
    without a timeout when the server is gone)."""

    def __init__(self, zmq_url: str, timeout: float):
        import zmq

        self.zmq_url, self._zmq = zmq_url, zmq
        self.socket = zmq.Context.instance().socket(zmq.REQ)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
        self.socket.setsockopt(zmq.SNDTIMEO, int(timeout * 1000))
        self.socket.connect(zmq_url)

    def request(self, *frames) -> bytes:
        try:
            self.socket.send_multipart(list(frames))
            return self.socket.recv()
        except self._zmq.error.Again:
            raise MeshcatServerError(
                f"the Meshcat server at {self.zmq_url} stopped answering"
            ) from None

    def send(self, command: dict) -> None:
        """Send one lowered Meshcat command (floats in single precision)."""
        packed = umsgpack.packb(command, force_float_precision="single")
        reply = self.request(command["type"].encode(), command.get("path", "").encode(), packed)
        if reply != b"ok":
            raise MeshcatServerError(f"the Meshcat server refused {command['type']}: {reply!r}")

    def close(self) -> None:
        self.socket.close()


class Viewer:
    """A browser view of trajectories: a Meshcat server (started here or found at a zmq URL)
    and the commands of the trajectory it shows."""

    def __init__(self, zmq_url: str, web_url: str, server: MeshcatServer | None, timeout=30.0):
        self.zmq_url, self.web_url, self.server = zmq_url, web_url, server
        self._connection = _Connection(zmq_url, timeout)
        self._animation = None

    @property
    def url(self) -> str:
        """The page to open in a browser."""
        return self.web_url

    def show(self, traj, **scene_options) -> Viewer:
        """Draw `traj` (replacing what was shown) and start its animation; `scene_options` go
        to `viz.scene.build_scene` (ghost, speed, loop, cell, force_scale, ...)."""
        commands = build_scene(traj, **scene_options)
        for command in commands:
            self._connection.send(command)
        self._animation = commands[-1]
        return self

    def play(self, speed: float = 1.0, loop: bool = True) -> Viewer:
        """Replay the shown trajectory from its start at `speed` x real time (0.5: half
        speed), once or for ever; returns at once (the browser plays it)."""
        if self._animation is None:
            raise RuntimeError("nothing to play: call show(traj) first")
        if not speed > 0:
            raise ValueError(f"speed must be positive, got {speed}")
        command = dict(self._animation)
        command["animations"] = [
            {**a, "clip": {**a["clip"], "fps": float(speed)}} for a in command["animations"]
        ]
        command["options"] = {"play": True, "repetitions": float("inf") if loop else 1}
        self._connection.send(command)
        self._animation = command
        return self

    def scene_html(self) -> str:
        """The server's static snapshot of the scene (meshcat's `get_scene`)."""
        return self._connection.request(b"get_scene").decode()

    def open_browser(self) -> bool:
        """Open the viewer page in the default browser; False when there is none."""
        try:
            return bool(webbrowser.open(self.web_url, new=2))
        except webbrowser.Error:
            return False

    def close(self) -> None:
        """Disconnect, and stop the server if this viewer started it (not a persistent one)."""
        self._connection.close()
        if self.server is not None:
            self.server.stop()


def open_viewer(
    zmq_url: str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    zmq_port: int | None = None,
    persist: bool = False,
    open_browser: bool = False,
    timeout: float = 30.0,
) -> Viewer:
    """Connect to the Meshcat server at `zmq_url`, or start one on `host` (see
    `viz.meshcat_server.start_server` for `port`, `zmq_port`, `persist`); prints the URL.
    Raises `MeshcatServerError` (clear message) for a busy port or a server that is not there.
    """
    server = None
    if zmq_url is None:
        server = start_server(host, port, zmq_port, persist=persist, timeout=timeout)
        zmq_url, web_url = server.zmq_url, server.web_url
    else:
        web_url = ping(zmq_url, timeout=min(timeout, 2.0))
    viewer = Viewer(zmq_url, web_url, None if persist else server, timeout)
    if persist and server is not None:
        viewer.persistent_pid = server.pid
    print(f"Meshcat viewer: {web_url}", flush=True)
    if open_browser:
        viewer.open_browser()
    return viewer


def view(traj, *, zmq_url: str | None = None, open_browser: bool = False, **options) -> Viewer:
    """One call: a viewer (server on localhost, or `zmq_url`) showing and playing `traj`.

    `options`: `port`, `zmq_port`, `persist`, `host`, `timeout` for the server, the rest
    (ghost, speed, loop, ...) for the scene.
    """
    server_keys = {"host", "port", "zmq_port", "persist", "timeout"}
    server_options = {k: v for k, v in options.items() if k in server_keys}
    scene_options = {k: v for k, v in options.items() if k not in server_keys}
    viewer = open_viewer(zmq_url, open_browser=False, **server_options)
    try:
        viewer.show(traj, **scene_options)
    except BaseException:
        viewer.close()
        raise
    if open_browser:
        viewer.open_browser()
    return viewer
