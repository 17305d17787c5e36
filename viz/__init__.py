"""Seeing trajectories: Meshcat in the browser, self-contained HTML replays, matplotlib plots.

    >>> import viz
    >>> viewer = viz.view(traj)                           # server on 127.0.0.1, prints the URL
    >>> viz.export_html(traj, "results/trot_go2.html")     # replay that needs no server
    >>> viz.plot_trajectory(traj, "results")               # PNGs -> list of paths

`viz.scene.build_scene` turns a `trajopt.Trajectory` into Meshcat commands (robot meshes from
Pinocchio's visual model, terrain, contact-force arrows, foot paths, reference ghost, one
animation clip); the viewer sends them to a server, the export embeds them in one page.
"""

from .html_export import export_html
from .meshcat_server import MeshcatServer, MeshcatServerError, start_server
from .meshcat_viewer import Viewer, open_viewer, view
from .plots import plot_trajectory, trajectory_figures
from .results import publish_result, save_and_publish
from .scene import build_scene

__all__ = [
    "MeshcatServer",
    "MeshcatServerError",
    "Viewer",
    "build_scene",
    "export_html",
    "open_viewer",
    "plot_trajectory",
    "publish_result",
    "save_and_publish",
    "start_server",
    "trajectory_figures",
    "view",
]
