"""Everything a user looks at after a solve, in one call: plots, HTML replay, live viewer.

>>> info = publish_result(traj, "results/trot_go2")
# results/trot_go2_*.png, results/trot_go2.html, and a Meshcat viewer on localhost
"""

from __future__ import annotations

import os

from .html_export import export_html
from .meshcat_server import DEFAULT_HOST, DEFAULT_ZMQ_PORT, MeshcatServerError, ping
from .meshcat_viewer import view
from .plots import plot_trajectory


def publish_result(
    traj,
    stem: str,
    *,
    plots: bool = True,
    html: bool = True,
    serve: bool = True,
    zmq_url: str | None = None,
    open_browser: bool = False,
    speed: float = 1.0,
) -> dict:
    """Write `<stem>_<figure>.png` and `<stem>.html` next to a saved result and show it in a
    Meshcat viewer that outlives this process; never blocks.

    Viewer: `zmq_url` if given; else a server that answers on the default
    `tcp://127.0.0.1:6000` (left by an earlier run); else a new persistent server on
    127.0.0.1 (its pid is returned: `kill <pid>` stops it). A viewer that cannot be had is
    reported in `info["viewer_error"]`, not raised: the files are written regardless.

    Returns `{"plots": [...], "html": path, "url": ..., "server_pid": ..., "viewer_error": ...}`.
    """
    info = {"plots": [], "html": None, "url": None, "server_pid": None, "viewer_error": None}
    folder, prefix = os.path.split(os.path.abspath(stem))
    if plots:
        info["plots"] = plot_trajectory(traj, folder, prefix=prefix)
    if html:
        info["html"] = export_html(traj, os.path.join(folder, prefix + ".html"), speed=speed)
    if serve:
        try:
            if zmq_url is None:
                default = f"tcp://{DEFAULT_HOST}:{DEFAULT_ZMQ_PORT}"
                try:
                    ping(default, timeout=1.0)
                    zmq_url = default
                except MeshcatServerError:
                    zmq_url = None
            viewer = view(
                traj, zmq_url=zmq_url, persist=True, open_browser=open_browser, speed=speed
            )
            info["url"] = viewer.url
            info["server_pid"] = getattr(viewer, "persistent_pid", None)
            viewer.close()  # disconnects; a persistent server keeps serving the scene
        except MeshcatServerError as exc:
            info["viewer_error"] = str(exc)
    return info


def save_and_publish(traj, path: str, summary: dict, *, serve: bool = True,
                     zmq_url: str | None = None, hidden: tuple = ()) -> dict:  # fmt: skip
    """An example's last step: save `traj` with `summary` in its meta to `<path>.npz` /
    `.json`, print the summary (keys ending in one of `hidden` left out) and where the result
    went, then `publish_result` its plots, HTML replay and viewer, printed too. Adds the files
    and the viewer to `summary` and returns it."""
    traj.meta["summary"] = summary
    npz, js = traj.save(path)
    for key, value in summary.items():
        if not key.endswith(tuple(hidden)):
            print(f"  {key}: {value}")
    print(f"\nresults saved to {os.path.abspath(npz)} (+ {os.path.basename(js)})")
    # plots and a self-contained HTML replay next to the result, and a Meshcat viewer on
    # localhost that keeps serving after the script ends (never blocks)
    shown = publish_result(traj, npz[:-4], serve=serve, zmq_url=zmq_url)
    summary.update(plots=shown["plots"], html=shown["html"], meshcat_url=shown["url"],
                   meshcat_server_pid=shown["server_pid"])  # fmt: skip
    print(f"plots: {os.path.dirname(shown['plots'][0])}/{os.path.basename(npz[:-4])}_*.png")
    print(f"HTML replay (no server needed): {shown['html']}")
    if shown["url"]:
        stop = f"; stop it with `kill {shown['server_pid']}`" if shown["server_pid"] else ""
        print(f"Meshcat viewer: {shown['url']}{stop}")
    elif shown["viewer_error"]:
        print(f"no Meshcat viewer: {shown['viewer_error']}")
    return summary
