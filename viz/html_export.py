"""Self-contained HTML replay of a trajectory: one file, no server, opens in any browser.

The page holds the Meshcat viewer's JavaScript (shipped inside the `meshcat` package, MIT
licence) and the scene of `viz.scene.build_scene` as base64 msgpack commands
(the bytes a Meshcat server would send over its websocket), decoded and applied in order when
the page loads. The animation starts at once and loops; Meshcat's "Animations" panel pauses,
scrubs and changes the speed. Floats are stored in single precision.

    >>> export_html(traj, "results/trot_go2.html")   # -> path
"""

from __future__ import annotations

import base64
import html
import os

import umsgpack

from .scene import build_scene


def meshcat_javascript() -> str:
    """The Meshcat viewer bundle (`meshcat/viewer/dist/main.min.js`) of the installed package."""
    import meshcat

    path = os.path.join(os.path.dirname(meshcat.__file__), "viewer", "dist", "main.min.js")
    with open(path, encoding="utf-8") as f:
        return f.read()


def encode_command(command: dict) -> str:
    """A lowered Meshcat command as base64 msgpack (floats in single precision)."""
    return base64.b64encode(umsgpack.packb(command, force_float_precision="single")).decode()


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ margin: 0; }}
#meshcat-pane {{ width: 100vw; height: 100vh; overflow: hidden; }}
#caption {{ position: absolute; left: 10px; bottom: 10px; font: 13px sans-serif;
  color: #222; background: rgba(255, 255, 255, 0.7); padding: 4px 8px; border-radius: 4px; }}
</style>
</head>
<body>
<div id="meshcat-pane"></div>
<div id="caption">{caption}</div>
<script>
{javascript}
</script>
<script>
var viewer = new MeshCat.Viewer(document.getElementById("meshcat-pane"));
function decodeCommand(text) {{
  var bytes = atob(text), out = new Uint8Array(bytes.length);
  for (var i = 0; i < bytes.length; i++) out[i] = bytes.charCodeAt(i);
  return out;
}}
var commands = [
{commands}
];
commands.forEach(function (c) {{ viewer.handle_command_bytearray(decodeCommand(c)); }});
document.body.setAttribute("data-commands-applied", String(commands.length));
</script>
</body>
</html>
"""


def scene_html(commands, title: str = "diffloco replay", caption: str = "") -> str:
    """An HTML page that applies Meshcat `commands` (lowered dicts) in order when it loads."""
    javascript = meshcat_javascript().replace("</script", "<\\/script")
    encoded = ",\n".join(f'"{encode_command(c)}"' for c in commands)
    return _PAGE.format(
        title=html.escape(title),
        caption=html.escape(caption),
        javascript=javascript,
        commands=encoded,
    )


def describe(traj) -> str:
    """One line about a trajectory for the page caption."""
    meta = traj.meta if isinstance(traj.meta, dict) else {}
    parts = [meta.get("robot", "?"), meta.get("problem", "")]
    duration = traj.horizon * traj.dt
    text = " ".join(p for p in parts if p) + f", {duration:.2f} s, {traj.horizon} knots"
    if traj.status != "initial":
        text += f", {traj.status} after {traj.iterations} iterations, cost {traj.cost:.4g}"
    return text


def export_html(traj, path: str, **scene_options) -> str:
    """Write a self-contained HTML replay of `traj` to `path`; returns the path.

    `scene_options` go to `viz.scene.build_scene` (ghost, speed, loop, cell, force_scale, ...).
    """
    commands = build_scene(traj, **scene_options)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    page = scene_html(commands, title=f"diffloco: {describe(traj)}", caption=describe(traj))
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, path)
    return path
