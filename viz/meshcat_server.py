"""A Meshcat server bound to loopback, started as a subprocess, or found at a zmq URL.

meshcat-python's own server listens on every interface (0.0.0.0:7000); this one serves the same
viewer (`meshcat.servers.zmqserver.ZMQWebSocketBridge`) on `127.0.0.1` unless told otherwise.
Starting and attaching never hang: a busy port, a server that does not come up or a zmq URL
where nobody answers raise `MeshcatServerError` with what to do.

    >>> server = start_server()                    # web http://127.0.0.1:7000/static/
    >>> server.web_url, server.zmq_url
    >>> server.stop()                              # or leave it running: persist=True

Run as a module it is the server process itself:
`python -m viz.meshcat_server --host 127.0.0.1 --port 7000 --zmq-port 6000`.
"""

from __future__ import annotations

import argparse
import atexit
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass

DEFAULT_HOST = "127.0.0.1"
DEFAULT_WEB_PORT = 7000
DEFAULT_ZMQ_PORT = 6000


class MeshcatServerError(RuntimeError):
    """The Meshcat server could not be started or reached (the message says why and what to do)."""


@dataclass
class MeshcatServer:
    """A running server: its URLs and, if this process started it, the process."""

    zmq_url: str
    web_url: str
    process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the server process (if this process started it) and wait for it."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout)


def start_server(
    host: str = DEFAULT_HOST,
    port: int | None = None,
    zmq_port: int | None = None,
    *,
    persist: bool = False,
    timeout: float = 30.0,
) -> MeshcatServer:
    """Start a Meshcat server subprocess on `host`.

    Args:
        host: interface to bind (loopback by default; "0.0.0.0" to serve the network).
        port: web port; `None` takes the first free port from 7000, 0 any free port; an
            explicit port that is taken raises `MeshcatServerError`.
        zmq_port: command port, same rules (from 6000).
        persist: leave the server running when this Python process exits (stop it with
            `kill <pid>`); otherwise it is terminated at exit.
        timeout: seconds to wait for the server to report its URLs.
    """
    args = [sys.executable, "-u", "-m", "viz.meshcat_server", "--host", host]
    if port is not None:
        args += ["--port", str(int(port))]
    if zmq_port is not None:
        args += ["--zmq-port", str(int(zmq_port))]
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    process = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # Ctrl-C in a terminal or notebook does not kill it
    )
    urls, output, deadline = {}, b"", time.monotonic() + timeout
    fd = process.stdout.fileno()
    while len(urls) < 2:
        remaining = deadline - time.monotonic()
        if process.poll() is not None or remaining <= 0:
            break
        ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
        if ready:
            output += os.read(fd, 4096)  # unbuffered: select() must see what is left
            for line in output.decode(errors="replace").splitlines():
                key, _, value = line.strip().partition("=")
                if key in ("zmq_url", "web_url") and value:
                    urls[key] = value
    if len(urls) < 2:
        if process.poll() is None:
            process.kill()
        process.wait()
        error = process.stderr.read().decode(errors="replace").strip()
        reason = error.splitlines()[-1] if error else f"no URLs within {timeout:.0f} s"
        raise MeshcatServerError(f"the Meshcat server did not start: {reason}")
    process.stdout.close()  # its later output is not read: never let a full pipe block it
    process.stderr.close()
    server = MeshcatServer(urls["zmq_url"], urls["web_url"], process)
    if not persist:
        atexit.register(server.stop)
    return server


def ping(zmq_url: str, timeout: float = 2.0) -> str:
    """The web URL of the server answering at `zmq_url`; `MeshcatServerError` if none does
    within `timeout` seconds."""
    import zmq

    socket = zmq.Context.instance().socket(zmq.REQ)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
    try:
        socket.connect(zmq_url)
        socket.send(b"url")
        return socket.recv().decode()
    except zmq.error.Again:
        raise MeshcatServerError(
            f"no Meshcat server answers at {zmq_url} (waited {timeout:g} s). Start one "
            "(`python -m viz.meshcat_server`, or `meshcat-server`) or leave zmq_url unset to "
            "start a server here."
        ) from None
    except zmq.error.ZMQError as exc:
        raise MeshcatServerError(f"invalid Meshcat zmq URL {zmq_url!r}: {exc}") from None
    finally:
        socket.close()


# ----------------------------------------------------------------------------- server process
def _bridge_class(host: str):
    """`ZMQWebSocketBridge` whose web server listens on `host` only (meshcat's listens on all
    interfaces)."""
    import tornado.web
    from meshcat.servers.zmqserver import ZMQWebSocketBridge

    class LoopbackApplication(tornado.web.Application):
        def listen(self, port, address=host, **kwargs):
            server = super().listen(port, address=address, **kwargs)
            self.bound_port = next(iter(server._sockets.values())).getsockname()[1]
            return server

    class Bridge(ZMQWebSocketBridge):
        def make_app(self):
            app = super().make_app()
            return LoopbackApplication(app.wildcard_router.rules, **app.settings)

    return Bridge


def _busy(kind, host, port, option):
    return (
        f"the {kind} port {host}:{port} is already in use (another Meshcat server? "
        f"`ss -ltnp | grep {port}` shows who holds it). Pass {option} 0 for any free port, "
        f"or --zmq-url to attach to the running server."
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Meshcat server bound to one interface")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=None, help="web port (0: any free port)")
    parser.add_argument("--zmq-port", type=int, default=None, help="zmq port (0: any)")
    parser.add_argument("--log", default=os.devnull, help="server messages after start-up")
    args = parser.parse_args(argv)
    import zmq

    Bridge = _bridge_class(args.host)
    zmq_url = None
    if args.zmq_port is not None:
        zmq_url = f"tcp://{args.host}:{args.zmq_port}" if args.zmq_port else f"tcp://{args.host}:*"
    try:
        bridge = Bridge(zmq_url=zmq_url, host=args.host, port=args.port)
    except zmq.error.ZMQError as exc:
        print(_busy("zmq", args.host, args.zmq_port, "--zmq-port") + f" ({exc})", file=sys.stderr)
        return 2
    except OSError as exc:
        print(_busy("web", args.host, args.port, "--port") + f" ({exc})", file=sys.stderr)
        return 2
    if zmq_url is not None and zmq_url.endswith(":*"):
        bridge.zmq_url = bridge.zmq_socket.getsockopt(zmq.LAST_ENDPOINT).decode()
    if args.port == 0:
        port = bridge.app.bound_port
        bridge.fileserver_port = port
        bridge.web_url = f"http://{args.host}:{port}/static/"

    def announce():
        # From inside the running loop: a command sent before the loop polls the zmq socket
        # can be missed (edge-triggered), so clients must not learn the URL earlier.
        print(f"zmq_url={bridge.zmq_url}")
        print(f"web_url={bridge.web_url}", flush=True)
        # The parent stops reading our pipes now; meshcat prints on every browser connection,
        # which would then fail (broken pipe: the scene is never sent) or block (full pipe).
        log = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        sys.stderr.flush()
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)

    bridge.ioloop.add_callback(announce)
    try:
        bridge.run()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
