"""The Meshcat scene and the HTML replay, checked against Pinocchio and by decoding them.

No server, no browser, no JAX compilation: trajectories are built from arrays.
"""

import base64
import html.parser
import os
import re

import numpy as np
import pinocchio as pin
import pytest
import umsgpack
from viz_helpers import walking_trajectory

import contact
from dynamics import load_pinocchio, load_robot
from viz import export_html, meshes, scene


@pytest.fixture(scope="module")
def traj():
    return walking_trajectory("solo12")


@pytest.fixture(scope="module")
def commands(traj):
    return scene.build_scene(traj)


def _by_path(commands, path):
    found = [c for c in commands if c.get("path") == path]
    assert found, f"no command for {path}"
    return found[-1]


def _nodes(node, parent=None, out=None):
    """`{name: (world matrix, node)}` of a three.js object tree (column-major matrices)."""
    out = {} if out is None else out
    parent = np.eye(4) if parent is None else parent
    world = parent @ np.asarray(node["matrix"], dtype=float).reshape(4, 4).T
    out[node["name"]] = (world, node)
    for child in node.get("children", []):
        _nodes(child, world, out)
    return out


def _array(packed, dtype):
    return np.frombuffer(packed.data if hasattr(packed, "data") else packed, dtype=dtype)


def test_collada_reader_keeps_every_submesh_of_go2():
    # Coal's copy of Go2's two-material thigh indexes only its first sub-mesh; ours must cover
    # the same vertex cloud (same bounding box as Coal's vertex list) with every vertex used.
    robot = load_pinocchio("go2")
    thigh = next(g for g in robot.visual_model.geometryObjects if g.name == "FL_thigh_0")
    pieces = meshes.read_collada(thigh.meshPath)
    assert len(pieces) == 2  # two materials: grey and white
    vertices = np.concatenate([v for v, _, _ in pieces])
    for v, f, _ in pieces:
        assert len(np.unique(f)) == len(v)
    coal_vertices = np.asarray(thigh.geometry.vertices())
    np.testing.assert_allclose(vertices.min(0), coal_vertices.min(0), atol=1e-6)
    np.testing.assert_allclose(vertices.max(0), coal_vertices.max(0), atol=1e-6)
    n_triangles = sum(len(f) for _, f, _ in pieces)
    assert n_triangles == 1884 + 4142  # the file's two <triangles count="...">


def test_robot_object_places_every_part_where_pinocchio_does(traj, commands):
    model, parts, _ = scene.robot_geometry("solo12")
    robot = load_pinocchio("solo12")
    document = _by_path(commands, f"{scene.ROOT}/robot")["object"]
    nodes = _nodes(document["object"])
    data, gdata = model.createData(), pin.GeometryData(robot.visual_model)
    pin.forwardKinematics(model, data, traj.q[0])
    pin.updateGeometryPlacements(model, data, robot.visual_model, gdata)
    meshes_drawn = [n for n in nodes if n.startswith("robot_") and nodes[n][1]["type"] == "Mesh"]
    assert len(meshes_drawn) == len(parts) == robot.visual_model.ngeoms
    for i, g in enumerate(robot.visual_model.geometryObjects):
        world, _ = nodes[f"robot_{g.name}_{i}"]
        np.testing.assert_allclose(world, gdata.oMg[i].homogeneous, atol=1e-6)
    # every geometry is stored once and shared by the four legs
    assert len(document["geometries"]) == len({p[3] for p in parts}) < len(parts)


def test_animation_tracks_reproduce_the_trajectory(traj, commands):
    animation = commands[-1]
    assert animation["type"] == "set_animation" and animation["options"]["play"]
    (clip,) = animation["animations"]
    assert clip["path"] == scene.ROOT
    tracks = {t["name"]: t for t in clip["clip"]["tracks"]}
    times = _array(tracks["robot_root_joint.position"]["times"], np.float32)
    np.testing.assert_allclose(times, traj.time, atol=1e-6)
    base = _array(tracks["robot_root_joint.position"]["values"], np.float32).reshape(-1, 3)
    np.testing.assert_allclose(base, traj.q[:, :3], atol=1e-6)
    quat = _array(tracks["robot_root_joint.quaternion"]["values"], np.float32).reshape(-1, 4)
    np.testing.assert_allclose(np.abs(np.sum(quat * traj.q[:, 3:7], 1)), 1.0, atol=1e-6)
    # the swinging joint is animated, a joint that never moves has no track
    model = scene.robot_geometry("solo12")[0]
    swinging = scene.joint_node_name("robot", model, model.idx_qs.tolist().index(8))
    assert f"{swinging}.quaternion" in tracks
    still = scene.joint_node_name("robot", model, model.idx_qs.tolist().index(10))
    assert f"{still}.quaternion" not in tracks


def test_force_arrows_point_along_the_force_with_proportional_length(traj, commands):
    tracks = {t["name"]: t for t in commands[-1]["animations"][0]["clip"]["tracks"]}
    mass = sum(i.mass for i in load_pinocchio("solo12").model.inertias)
    scale = 0.4 / (mass * 9.81)
    foot = traj.meta["foot_names"][0]
    lengths = _array(tracks[f"force_{foot}_shaft.scale"]["values"], np.float32).reshape(-1, 3)[:, 2]
    force = np.concatenate([traj.force[:, 0], traj.force[-1:, 0]])
    magnitude = np.linalg.norm(force, axis=1)
    expected = np.where(magnitude > 1.0, magnitude * scale, 1e-4)
    np.testing.assert_allclose(lengths, expected, rtol=1e-5)
    quat = _array(tracks[f"force_{foot}.quaternion"]["values"], np.float32).reshape(-1, 4)
    on = magnitude > 1.0
    axis = np.array(
        [pin.Quaternion(np.r_[x, y, z, w].astype(float)).matrix()[:, 2] for x, y, z, w in quat[on]]
    )
    np.testing.assert_allclose(axis, force[on] / magnitude[on, None], atol=1e-5)


def test_reference_ghost_integrates_the_commanded_velocity(traj):
    model = scene.robot_geometry("solo12")[0]
    q_standing = load_robot("solo12").q_standing
    meta = dict(traj.meta)
    meta["reference"] = dict(meta["reference"])
    yaw_rate = 0.5
    velocity = np.tile([0.3, 0.0, yaw_rate], (len(traj.q), 1))
    meta["reference"]["base_velocity"] = velocity.tolist()
    ghost = scene.reference_configurations(
        type(traj)(**{**traj.__dict__, "meta": meta}), q_standing
    )
    T = traj.horizon * traj.dt
    yaw = 2 * np.arctan2(ghost[-1, 5], ghost[-1, 6])
    assert yaw == pytest.approx(yaw_rate * T, abs=1e-9)
    # a circle of radius v / yaw_rate, sampled by explicit Euler steps
    x = traj.q[0, 0] + np.sum(0.3 * np.cos(yaw_rate * traj.time[:-1])) * traj.dt
    assert ghost[-1, 0] == pytest.approx(x, abs=1e-9)
    assert model.nq == ghost.shape[1]


def test_steps_terrain_keeps_vertical_risers_and_matches_the_contact_heights():
    steps = contact.steps(0.1, 0.3, 0.5, num_steps=3)
    xs, ys, z = meshes.terrain_grid(steps, (-0.5, 2.0), (-1.0, 1.0))
    risers = np.flatnonzero(np.diff(xs) == 0)
    np.testing.assert_allclose(xs[risers], [0.5, 0.8, 1.1])
    np.testing.assert_allclose(z[risers + 1, 0] - z[risers, 0], 0.1, atol=1e-9)
    heights = contact.heightfield(np.random.default_rng(0).normal(0, 0.02, (6, 5)), -1, -1, 0.4)
    xs, ys, z = meshes.terrain_grid(heights, (-0.7, 0.9), (-0.9, 0.2))
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    np.testing.assert_allclose(z, np.asarray(contact.terrain.height(heights, X, Y)), atol=1e-12)
    assert {0.2, 0.6}.issubset(np.round(xs, 9)) and xs[0] == -0.7 and xs[-1] == 0.9


def test_a_flight_up_and_down_is_drawn_with_its_risers():
    flight = contact.flight(0.1, 0.3, 1.0, num_steps=2, landing_length=1.0)
    xs, ys, z = meshes.terrain_grid(flight, (0.0, 4.0), (-1.0, 1.0))
    risers = np.flatnonzero(np.diff(xs) == 0)
    np.testing.assert_allclose(xs[risers], np.asarray(flight.edges))
    expected = np.diff(np.asarray(flight.levels))  # up, up, down, down
    np.testing.assert_allclose(z[risers + 1, 0] - z[risers, 0], expected, atol=1e-9)


def test_slope_terrain_is_drawn_along_its_plane():
    traj = walking_trajectory("solo12", horizon=5, terrain=contact.incline(0.2))
    surface = _by_path(scene.build_scene(traj, ghost=None), f"{scene.ROOT}/terrain")["object"]
    vertices = _array(
        surface["geometries"][0]["data"]["attributes"]["position"]["array"], np.float32
    )
    vertices = vertices.reshape(-1, 3)
    np.testing.assert_allclose(vertices[:, 2], np.tan(0.2) * vertices[:, 0], atol=1e-5)


class _Structure(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.tags, self.scripts, self.errors = [], [], [], []
        self._script = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in ("meta", "br", "img", "link", "input"):
            self.stack.append(tag)
        if tag == "script":
            self._script = []

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> in {self.stack}")
        else:
            self.stack.pop()
        if tag == "script":
            self.scripts.append("".join(self._script))
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self._script.append(data)


def test_html_replay_is_valid_html_with_the_robot_meshes_and_animation(tmp_path, traj):
    path = export_html(traj, str(tmp_path / "replay.html"))
    text = open(path, encoding="utf-8").read()
    parser = _Structure()
    parser.feed(text)
    parser.close()
    assert not parser.errors and not parser.stack
    assert parser.tags[:3] == ["html", "head", "meta"] and "body" in parser.tags
    assert text.startswith("<!DOCTYPE html>")
    assert len(parser.scripts) == 2 and "MeshCat" in parser.scripts[0]  # viewer bundle inline
    assert "http://" not in parser.scripts[1] and "src=" not in text.split("<script>")[0]
    encoded = re.findall(r'"([A-Za-z0-9+/=]{8,})"', parser.scripts[1])
    decoded = [umsgpack.unpackb(base64.b64decode(e)) for e in encoded]
    by_path = {c["path"]: c for c in decoded if c["type"] == "set_object"}
    robot = by_path[f"{scene.ROOT}/robot"]["object"]
    _, parts, table = scene.robot_geometry("solo12")
    stored = sum(
        len(g["data"]["attributes"]["position"]["array"].data) // 12 for g in robot["geometries"]
    )
    assert stored == sum(len(v) for v, _, _ in table.values()) > 10_000
    animation = decoded[-1]
    assert animation["type"] == "set_animation"
    names = {t["name"] for t in animation["animations"][0]["clip"]["tracks"]}
    assert {"robot_root_joint.position", "ghost_root_joint.position"} <= names
    assert f"{scene.ROOT}/ghost" in by_path and f"{scene.ROOT}/forces" in by_path
    assert os.path.getsize(path) < 3e6
