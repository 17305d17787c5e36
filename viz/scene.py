"""The scene of a trajectory as Meshcat commands: robot, reference ghost, terrain, contact
forces, foot paths, camera, and one animation clip that plays it all.

`build_scene(traj) -> list[dict]` returns lowered Meshcat commands, the dicts that
meshcat-python's `SetObject(...).lower()`, `SetAnimation(...).lower()` produce and that travel
as msgpack to the browser. A live viewer sends them to a server (`viz.meshcat_viewer`), the
HTML export embeds them (`viz.html_export`): nothing here needs a server or a browser.

Layout (Meshcat paths, world frame z up, metres):

    /meshcat/diffloco               never given an object: the animation clip's root
        /robot                      one three.js object: the kinematic tree as nested groups
                                    `robot_<joint>` (local joint placements), meshes inside
        /ghost                      the same tree, translucent, at the reference motion
        /forces                     one arrow `force_<foot>` per foot (ground reaction force)
        /terrain, /terrain_grid     surface and a 0.25 m grid drawn on it
        /foot_paths/<foot>          foot-frame trajectories as lines

Every mesh exists once in the robot object (three.js shares geometries by uuid across the
four legs and the ghost), stored as float32 vertices and uint16/uint32 triangle indices
without normals (flat shading), and the animation stores float32 key times and values. The
tracks address nodes by name (`robot_FL_hip_joint.quaternion`), which three.js resolves in the
subtree of `/meshcat/diffloco` whenever the objects arrive, so the order in which a browser
receives the commands does not matter.
"""

from __future__ import annotations

import functools
import os
import uuid as _uuid

import numpy as np
import umsgpack

from . import meshes

ROOT = "/meshcat/diffloco"
FOOT_COLORS = (0xE6194B, 0x3CB44B, 0x4363D8, 0xF58231)  # FL, FR, HL, HR
GHOST_COLOR = 0x2A9DF4
TERRAIN_COLOR = 0xC8C2B4
GRID_COLOR = 0x8A8478
ARROW_THRESHOLD = 1.0  # [N]: smaller contact forces draw no arrow
DEFAULT_CELL = 0.0  # mesh simplification cell [m] (0: the meshes as shipped), see meshes.simplify


# ----------------------------------------------------------------------------- robot model
@functools.lru_cache(maxsize=8)
def robot_geometry(robot: str, cell: float = DEFAULT_CELL):
    """The visual model of a robot as meshes for the viewer (cached).

    Returns `(pin_model, parts, meshes)`: `parts` is a tuple of `(name, joint, placement (4, 4)
    in the joint frame, mesh key)`, one per colour of a visual geometry; `meshes` maps a mesh
    key to `(vertices, faces, rgb)` (simplified with `cell` [m]). Parts drawn from one mesh
    file share its keys, so the file is sent once.
    """
    from dynamics import load_pinocchio

    pin_robot = load_pinocchio(robot)
    parts, mesh_table = [], {}
    for g in pin_robot.visual_model.geometryObjects:
        if g.meshPath and os.path.isfile(g.meshPath):  # parts of one file share its meshes
            key = f"{g.meshPath}|{tuple(np.round(g.meshScale, 6))}"
        else:  # primitive shapes (Pinocchio writes "BOX", "SPHERE" as their path)
            key = f"{g.name}:{type(g.geometry).__name__}"
        if key not in mesh_table:
            pieces = meshes.part_meshes(g)
            if not pieces:
                continue
            for i, (v, f, rgb) in enumerate(pieces):
                mesh_table[f"{key}#{i}"] = (*meshes.simplify(v, f, cell), rgb)
            mesh_table[key] = [f"{key}#{i}" for i in range(len(pieces))]
        for sub in mesh_table[key]:
            parts.append((g.name, int(g.parentJoint), np.asarray(g.placement.homogeneous), sub))
    mesh_table = {k: v for k, v in mesh_table.items() if isinstance(v, tuple)}
    return pin_robot.model, tuple(parts), mesh_table


def joint_transforms(pin_model, q) -> np.ndarray:
    """Local joint placements `(K, njoints, 4, 4)` (joint i in its parent joint's frame,
    Pinocchio `data.liMi`) for configurations `q (K, nq)`."""
    import pinocchio as pin

    data = pin_model.createData()
    out = np.empty((len(q), pin_model.njoints, 4, 4))
    for k, qk in enumerate(np.asarray(q, dtype=float)):
        pin.forwardKinematics(pin_model, data, qk)
        for j in range(pin_model.njoints):
            out[k, j] = data.liMi[j].homogeneous
    return out


def frame_positions(pin_model, q, frame_names) -> np.ndarray:
    """World positions `(K, len(frame_names), 3)` of Pinocchio frames for `q (K, nq)`."""
    import pinocchio as pin

    data = pin_model.createData()
    ids = [pin_model.getFrameId(name) for name in frame_names]
    out = np.empty((len(q), len(ids), 3))
    for k, qk in enumerate(np.asarray(q, dtype=float)):
        pin.framesForwardKinematics(pin_model, data, qk)
        out[k] = [data.oMf[i].translation for i in ids]
    return out


# ----------------------------------------------------------------------------- reference
def reference_configurations(traj, q_standing, terrain=None) -> np.ndarray | None:
    """The commanded motion as configurations `(T+1, nq)`, or `None` without a reference.

    From `traj.meta["reference"]`: the base velocity `[v_x, v_y, yaw_rate]` (base frame) is
    integrated from the first knot's planar pose, `x_{k+1} = x_k + dt R(psi_k) [v_x, v_y]`,
    `psi_{k+1} = psi_k + dt yaw_rate`; the base sits `base_height` above the terrain with zero
    roll and pitch; the joints stay at `q_standing`.
    """
    ref = traj.meta.get("reference") if isinstance(traj.meta, dict) else None
    if not ref or "base_velocity" not in ref:
        return None
    velocity = np.asarray(ref["base_velocity"], dtype=float)
    n = len(traj.q)
    if velocity.shape != (n, 3):
        return None
    base_height = np.asarray(ref.get("base_height", np.full(n, q_standing[2])), dtype=float)
    x, y = traj.q[0, 0], traj.q[0, 1]
    qx, qy, qz, qw = traj.q[0, 3:7]
    psi = np.arctan2(2 * (qw * qz + qx * qy), 1 - 2 * (qy * qy + qz * qz))
    out = np.tile(np.asarray(q_standing, dtype=float), (n, 1))
    for k in range(n):
        out[k, :2] = (x, y)
        out[k, 3:7] = (0.0, 0.0, np.sin(psi / 2), np.cos(psi / 2))
        c, s = np.cos(psi), np.sin(psi)
        x += traj.dt * (c * velocity[k, 0] - s * velocity[k, 1])
        y += traj.dt * (s * velocity[k, 0] + c * velocity[k, 1])
        psi += traj.dt * velocity[k, 2]
    # the terrain under every knot in one call, not one eager JAX dispatch per knot
    ground = 0.0 if terrain is None else _height(terrain, out[:, 0], out[:, 1])
    out[:, 2] = ground + base_height
    return out


def _height(terrain, x, y):
    from contact.terrain import height

    return np.asarray(height(terrain, x, y))


def trajectory_terrain(traj):
    """The terrain pytree stored with a trajectory (`meta["terrain"]`), else flat ground."""
    from contact import flat, terrain_from_dict

    description = traj.meta.get("terrain") if isinstance(traj.meta, dict) else None
    return terrain_from_dict(description) if description else flat()


# ----------------------------------------------------------------------------- wire format
def _uid() -> str:
    return str(_uuid.uuid4())


def pack_array(array, dtype=None) -> dict:
    """A NumPy array as a three.js typed-array attribute (msgpack extension types of the
    Meshcat viewer: 0x14 Uint16Array, 0x16 Uint32Array, 0x17 Float32Array)."""
    a = np.ascontiguousarray(array, dtype=dtype)
    codes = {np.dtype(np.uint16): ("Uint16Array", 0x14), np.dtype(np.uint32): ("Uint32Array", 0x16)}
    name, code = codes.get(a.dtype, ("Float32Array", 0x17))
    if code == 0x17:
        a = a.astype(np.float32)
    item = a.shape[1] if a.ndim == 2 else 1
    return {
        "itemSize": item,
        "type": name,
        "array": umsgpack.Ext(code, a.tobytes()),
        "normalized": False,
    }


def _geometry(vertices, faces=None) -> dict:
    data = {"attributes": {"position": pack_array(vertices, np.float32)}}
    if faces is not None:
        index_type = np.uint16 if len(vertices) < 65536 else np.uint32
        data["index"] = pack_array(np.asarray(faces).reshape(-1), index_type)
    return {"uuid": _uid(), "type": "BufferGeometry", "data": data}


def _material(color: int, kind="MeshPhongMaterial", opacity=1.0, **extra) -> dict:
    material = {
        "uuid": _uid(),
        "type": kind,
        "color": int(color),
        "side": 2,
        "transparent": opacity < 1.0,
        "opacity": float(opacity),
    }
    if kind != "LineBasicMaterial":
        material.update(flatShading=True, shininess=30)
    if opacity < 1.0:
        material["depthWrite"] = False
    material.update(extra)
    return material


def _node(kind, name, matrix=None, children=(), **fields) -> dict:
    node = {"uuid": _uid(), "type": kind, "name": name, **fields}
    node["matrix"] = list(np.asarray(np.eye(4) if matrix is None else matrix).T.reshape(-1))
    if children:
        node["children"] = list(children)
    return node


def _object_document(root, geometries, materials) -> dict:
    return {
        "metadata": {"version": 4.5, "type": "Object"},
        "geometries": list(geometries),
        "materials": list(materials),
        "object": root,
    }


def set_object(path, document) -> dict:
    return {"type": "set_object", "path": path, "object": document}


def set_property(path, key, value) -> dict:
    return {"type": "set_property", "path": path, "property": key, "value": value}


def set_transform(path, matrix) -> dict:
    return {"type": "set_transform", "path": path, "matrix": list(np.asarray(matrix).T.reshape(-1))}


def _rgb_int(rgb) -> int:
    r, g, b = (int(round(255 * min(max(float(c), 0.0), 1.0))) for c in rgb[:3])
    return (r << 16) | (g << 8) | b


# ----------------------------------------------------------------------------- objects
def robot_object(prefix, pin_model, parts, mesh_table, local0, geometry_ids, ghost=False):
    """One three.js object for a robot: group `<prefix>_<joint>` per joint, nested as the
    kinematic tree with the local placements `local0 (njoints, 4, 4)`, holding its parts.

    `geometry_ids` maps mesh keys to geometry uuids (shared with other objects of the same
    document). Returns `(root node, materials)`.
    """
    materials, by_color = [], {}

    def material_for(rgb):
        color = GHOST_COLOR if ghost else _rgb_int(rgb)
        if color not in by_color:
            by_color[color] = _material(color, opacity=0.3 if ghost else 1.0)
            materials.append(by_color[color])
        return by_color[color]["uuid"]

    children = {j: [] for j in range(pin_model.njoints)}
    for i, (name, joint, placement, key) in enumerate(parts):
        rgb = mesh_table[key][2]
        children[joint].append(
            _node(
                "Mesh",
                f"{prefix}_{name}_{i}",
                placement,
                geometry=geometry_ids[key],
                material=material_for(rgb),
            )
        )

    def group(j):
        kids = children[j] + [
            group(i) for i in range(1, pin_model.njoints) if pin_model.parents[i] == j
        ]
        return _node("Group", joint_node_name(prefix, pin_model, j), local0[j], kids)

    return group(0), materials


def joint_node_name(prefix, pin_model, joint) -> str:
    """three.js node name of a joint group; dots, slashes, colons and brackets are reserved
    in animation track names, so they become underscores."""
    name = pin_model.names[joint]
    for c in "./:[] ":
        name = name.replace(c, "_")
    return f"{prefix}_{name}"


def arrows_object(foot_names, contact0, rotation0, length0):
    """Group of one arrow per foot: group `force_<foot>` (at the contact point, +z along the
    force) holding a unit shaft `force_<foot>_shaft` (scaled along z to the arrow length) and
    a head `force_<foot>_head` (moved to the tip)."""
    shaft_v, shaft_f = meshes.cylinder_mesh(0.008, 1.0)
    head_v, head_f = meshes.cone_mesh(0.02, 0.045)
    shaft, head = _geometry(shaft_v, shaft_f), _geometry(head_v, head_f)
    materials, nodes = [], []
    for i, foot in enumerate(foot_names):
        m = _material(FOOT_COLORS[i % len(FOOT_COLORS)], shininess=60)
        materials.append(m)
        placement = np.eye(4)
        placement[:3, :3], placement[:3, 3] = rotation0[i], contact0[i]
        length = max(float(length0[i]), 1e-4)
        head_scale = 1.0 if length > 1e-4 else 1e-4
        tip = np.diag([head_scale] * 3 + [1.0])
        tip[2, 3] = length
        kids = [
            _node(
                "Mesh",
                f"force_{foot}_shaft",
                np.diag([1.0, 1.0, length, 1.0]),
                geometry=shaft["uuid"],
                material=m["uuid"],
            ),
            _node("Mesh", f"force_{foot}_head", tip, geometry=head["uuid"], material=m["uuid"]),
        ]
        nodes.append(_node("Group", f"force_{foot}", placement, kids))
    return _object_document(_node("Group", "forces", None, nodes), [shaft, head], materials)


def terrain_objects(terrain, x_range, y_range):
    """`(surface document, grid document)` of the terrain over the given ranges."""
    xs, ys, z = meshes.terrain_grid(terrain, x_range, y_range)
    vertices, faces = meshes.grid_mesh(xs, ys, z)
    g, m = _geometry(vertices, faces), _material(TERRAIN_COLOR, shininess=5)
    surface = _object_document(
        _node("Mesh", "terrain", None, geometry=g["uuid"], material=m["uuid"]), [g], [m]
    )
    lines = meshes.terrain_lines(xs, ys, z)
    lg, lm = _geometry(lines), _material(GRID_COLOR, "LineBasicMaterial")
    grid = _object_document(
        _node("LineSegments", "terrain_grid", None, geometry=lg["uuid"], material=lm["uuid"]),
        [lg],
        [lm],
    )
    return surface, grid


def line_object(points, color, name) -> dict:
    g, m = _geometry(points), _material(color, "LineBasicMaterial", linewidth=2)
    return _object_document(
        _node("Line", name, None, geometry=g["uuid"], material=m["uuid"]), [g], [m]
    )


# ----------------------------------------------------------------------------- animation
def _track(name, kind, times, values) -> dict:
    return {
        "name": name,
        "type": kind,
        "times": pack_array(times, np.float32)["array"],
        "values": pack_array(np.asarray(values).reshape(-1), np.float32)["array"],
    }


def transform_tracks(name, transforms, times, tol=1e-6) -> list:
    """Position and quaternion tracks `[x, y, z]`, `[x, y, z, w]` of a node from its local
    transforms `(K, 4, 4)`; a track whose value never changes (by more than `tol`) is left out
    (its value is in the node's matrix)."""
    from scipy.spatial.transform import Rotation

    tracks = []
    p = transforms[:, :3, 3]
    if np.ptp(p, axis=0).max() > tol:
        tracks.append(_track(f"{name}.position", "vector3", times, p))
    quat = Rotation.from_matrix(transforms[:, :3, :3]).as_quat()  # x, y, z, w
    for k in range(1, len(quat)):  # keep the sign continuous so interpolation takes the short arc
        if quat[k] @ quat[k - 1] < 0:
            quat[k] = -quat[k]
    if np.ptp(quat, axis=0).max() > tol:
        tracks.append(_track(f"{name}.quaternion", "quaternion", times, quat))
    return tracks


def arrow_tracks(foot_names, times, contact, force, force_scale, threshold=1.0) -> list:
    """Tracks of the force arrows: contact point `contact (K, nfeet, 3)`, direction and length
    `|f| force_scale` [m] of `force (K, nfeet, 3)` [N]; arrows below `threshold` N shrink to
    nothing."""
    tracks = []
    for i, foot in enumerate(foot_names):
        f = force[:, i]
        magnitude = np.linalg.norm(f, axis=1)
        on = magnitude > threshold
        length = np.where(on, magnitude * force_scale, 1e-4)
        rotations = np.stack([meshes.rotation_z_to(fk) for fk in f])
        placement = np.tile(np.eye(4), (len(times), 1, 1))
        placement[:, :3, :3], placement[:, :3, 3] = rotations, contact[:, i]
        tracks += transform_tracks(f"force_{foot}", placement, times)
        scale = np.stack([np.ones_like(length), np.ones_like(length), length], axis=1)
        tracks.append(_track(f"force_{foot}_shaft.scale", "vector3", times, scale))
        tip = np.stack([np.zeros_like(length), np.zeros_like(length), length], axis=1)
        tracks.append(_track(f"force_{foot}_head.position", "vector3", times, tip))
        head = np.where(on, 1.0, 1e-4)[:, None] * np.ones(3)
        tracks.append(_track(f"force_{foot}_head.scale", "vector3", times, head))
    return tracks


def set_animation(tracks, duration, speed=1.0, loop=True, play=True) -> dict:
    """The Meshcat `set_animation` command of one clip on `ROOT`. Key times are in seconds of
    the trajectory; the clip's `fps` is the playback speed (three.js divides times by it), so
    `speed=0.5` plays at half real time. `loop`: repeat for ever, else once."""
    clip = {"fps": float(speed), "name": "default", "duration": float(duration), "tracks": tracks}
    return {
        "type": "set_animation",
        "path": "",
        "animations": [{"path": ROOT, "clip": clip}],
        "options": {"play": bool(play), "repetitions": float("inf") if loop else 1},
    }


# ----------------------------------------------------------------------------- scene
def camera_commands(target, offset) -> list:
    """Orbit camera looking at `target` (world) from `target + offset`. Meshcat's camera node
    `/Cameras/default/rotated` turns three.js' y-up into z-up, so its position is written
    `[dx, dz, -dy]`."""
    placement = np.eye(4)
    placement[:3, 3] = target
    dx, dy, dz = (float(v) for v in offset)
    return [
        set_transform("/Cameras/default", placement),
        set_property("/Cameras/default/rotated/<object>", "position", [dx, dz, -dy]),
    ]


def max_frames_per_second(dt, fps=60.0) -> int:
    """Keep one knot in `ceil(1 / (dt fps))` so the animation has at most `fps` keys a second."""
    return max(1, int(np.ceil(1.0 / (dt * fps) - 1e-9)))


def build_scene(
    traj,
    *,
    ghost="reference",
    speed: float = 1.0,
    loop: bool = True,
    cell: float = DEFAULT_CELL,
    force_scale: float | None = None,
    foot_paths: bool = True,
    terrain: bool = True,
) -> list:
    """Meshcat commands that draw and animate `traj` (see the module docstring).

    Args:
        traj: a `trajopt.Trajectory`; `meta["robot"]` names the robot, `meta["terrain"]` and
            `meta["reference"]` (if present) give the ground and the ghost.
        ghost: "reference" (the commanded motion, see `reference_configurations`), `None`, a
            `Trajectory` or configurations `(T+1, nq)` to show translucent alongside.
        speed: playback speed (1 real time, 0.5 half speed); loop: repeat for ever.
        cell: mesh simplification [m] (0 keeps every vertex).
        force_scale: arrow length per newton [m/N] (default: 0.4 m for the robot's weight).
    Returns:
        a list of command dicts (`type`, `path`, ...), last the `set_animation`.
    """
    robot = traj.meta.get("robot")
    if not robot:
        raise ValueError("the trajectory's meta has no 'robot': cannot choose a model to draw")
    if not speed > 0:
        raise ValueError(f"speed must be positive, got {speed}")
    pin_model, parts, mesh_table = robot_geometry(robot, cell)
    q = np.asarray(traj.q, dtype=float)
    if q.shape[1] != pin_model.nq:
        raise ValueError(f"q has {q.shape[1]} coordinates, robot {robot!r} has nq={pin_model.nq}")
    stride = max_frames_per_second(traj.dt)
    frames = np.unique(np.r_[np.arange(0, len(q), stride), len(q) - 1])
    times = frames * traj.dt
    terrain_tree = trajectory_terrain(traj)

    geometries = {key: _geometry(v, f) for key, (v, f, _) in mesh_table.items()}
    geometry_ids = {key: g["uuid"] for key, g in geometries.items()}
    local = joint_transforms(pin_model, q[frames])
    root, materials = robot_object("robot", pin_model, parts, mesh_table, local[0], geometry_ids)
    commands = [
        {"type": "delete", "path": ROOT},
        set_object(f"{ROOT}/robot", _object_document(root, geometries.values(), materials)),
    ]
    tracks = []
    for j in range(1, pin_model.njoints):
        tracks += transform_tracks(joint_node_name("robot", pin_model, j), local[:, j], times)

    q_ghost = _ghost_configurations(traj, ghost, pin_model, terrain_tree)
    if q_ghost is not None:
        local_ghost = joint_transforms(pin_model, q_ghost[frames])
        g_root, g_materials = robot_object(
            "ghost", pin_model, parts, mesh_table, local_ghost[0], geometry_ids, ghost=True
        )
        ghost_geometries = [geometries[k] for k in {p[3] for p in parts}]
        commands.append(
            set_object(f"{ROOT}/ghost", _object_document(g_root, ghost_geometries, g_materials))
        )
        for j in range(1, pin_model.njoints):
            tracks += transform_tracks(
                joint_node_name("ghost", pin_model, j), local_ghost[:, j], times
            )

    foot_names = list(traj.meta.get("foot_names") or _default_feet(robot))
    feet = frame_positions(pin_model, q, foot_names)
    if traj.force is not None and len(traj.force):
        radius = float(traj.meta.get("foot_radius", 0.0) or 0.0)
        force = np.asarray(traj.force, dtype=float)
        force = np.concatenate([force, force[-1:]])[frames]  # knot k shows the force of [k, k+1)
        contact = feet[frames] - [0.0, 0.0, radius]
        if force_scale is None:
            force_scale = 0.4 / (_robot_mass(robot) * 9.81)
        rotation0 = [meshes.rotation_z_to(f) for f in force[0]]
        magnitude0 = np.linalg.norm(force[0], axis=1)
        length0 = np.where(magnitude0 > ARROW_THRESHOLD, magnitude0 * force_scale, 0.0)
        arrows = arrows_object(foot_names, contact[0], rotation0, length0)
        commands.append(set_object(f"{ROOT}/forces", arrows))
        tracks += arrow_tracks(foot_names, times, contact, force, force_scale, ARROW_THRESHOLD)

    if foot_paths:
        for i, foot in enumerate(foot_names):
            commands.append(
                set_object(
                    f"{ROOT}/foot_paths/{foot}",
                    line_object(feet[:, i], FOOT_COLORS[i % len(FOOT_COLORS)], f"path_{foot}"),
                )
            )
    base = q[:, :3]
    lo, hi = base.min(axis=0), base.max(axis=0)
    if terrain:
        margin = 1.0
        x_range, y_range = (lo[0] - margin, hi[0] + margin), (lo[1] - margin, hi[1] + margin)
        surface, grid = terrain_objects(terrain_tree, x_range, y_range)
        commands += [
            set_object(f"{ROOT}/terrain", surface),
            set_object(f"{ROOT}/terrain_grid", grid),
            set_property("/Grid", "visible", False),
        ]
    commands.append(set_property("/Axes", "visible", False))
    target = 0.5 * (lo + hi)
    target[2] = float(np.mean(base[:, 2])) * 0.6
    extent = max(float(np.linalg.norm(hi[:2] - lo[:2])), 4.0 * float(np.mean(base[:, 2])))
    commands += camera_commands(target, np.array([0.45, -1.0, 0.45]) * max(0.8, 0.7 * extent))
    commands.append(set_animation(tracks, float(times[-1]), speed=speed, loop=loop))
    return commands


def _ghost_configurations(traj, ghost, pin_model, terrain_tree):
    if ghost is None or ghost is False:
        return None
    if isinstance(ghost, str):
        if ghost != "reference":
            raise ValueError(
                f"ghost must be 'reference', None, a Trajectory or an array, got {ghost!r}"
            )
        from dynamics import load_robot

        q_standing = np.asarray(load_robot(traj.meta["robot"]).q_standing)
        return reference_configurations(traj, q_standing, terrain_tree)
    q = np.asarray(getattr(ghost, "q", ghost), dtype=float)
    if q.shape != traj.q.shape:
        raise ValueError(f"ghost configurations have shape {q.shape}, expected {traj.q.shape}")
    del pin_model
    return q


def _default_feet(robot):
    from dynamics import load_robot

    return load_robot(robot).foot_names


def _robot_mass(robot) -> float:
    from dynamics import load_pinocchio

    return float(sum(i.mass for i in load_pinocchio(robot).model.inertias))
