"""Triangle meshes for the viewer: robot parts, terrain surfaces, arrows (pure NumPy).

Everything here returns `(vertices (n, 3) float, faces (m, 3) int)` in the frame named in the
docstring. Meshcat draws them as `BufferGeometry` with flat shading, so no normals are stored:
a mesh costs 12 bytes a vertex and 12 bytes a triangle, which is what keeps the HTML replay
small (a robot's Collada files are megabytes of text; see `simplify`).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import numpy as np

# ----------------------------------------------------------------------------- robot parts


def geometry_mesh(geometry_object):
    """`(vertices, faces)` of a Pinocchio visual `GeometryObject` in its own frame (meshScale
    applied; the frame is `geometry_object.placement` in its parent joint), or `None` for a
    shape that is not a triangle mesh.

    Mesh files are read by Coal (assimp) when Pinocchio builds the GeometryModel, so DAE, STL
    and OBJ all arrive here as a `BVHModel` with vertices and triangles.
    """
    geometry = geometry_object.geometry
    primitive = _primitive_mesh(geometry)
    if primitive is not None:
        return primitive
    if not (hasattr(geometry, "vertices") and hasattr(geometry, "tri_indices")):
        return None
    try:
        vertices = np.asarray(geometry.vertices(), dtype=float)
        triangles = (geometry.tri_indices(i) for i in range(geometry.num_tris))
        faces = np.array([(t[0], t[1], t[2]) for t in triangles], dtype=np.int64)
    except (AttributeError, RuntimeError, TypeError):
        return None
    if vertices.ndim != 2 or len(faces) == 0:
        return None
    return vertices, faces.reshape(-1, 3)


def _primitive_mesh(geometry):
    """Box, cylinder (along z) and sphere shapes of Coal as triangle meshes, else `None`."""
    kind = type(geometry).__name__
    if kind == "Box":
        h = np.asarray(geometry.halfSide, dtype=float)
        corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * h
        faces = np.array(
            [[0, 2, 3], [0, 3, 1], [4, 5, 7], [4, 7, 6], [0, 1, 5], [0, 5, 4],
             [2, 6, 7], [2, 7, 3], [0, 4, 6], [0, 6, 2], [1, 3, 7], [1, 7, 5]]
        )  # fmt: skip
        return corners, faces
    if kind == "Cylinder":
        vertices, faces = cylinder_mesh(float(geometry.radius), 2.0 * float(geometry.halfLength))
        return vertices - [0.0, 0.0, float(geometry.halfLength)], faces
    if kind == "Sphere":
        return sphere_mesh(float(geometry.radius))
    return None


def simplify(vertices, faces, cell: float):
    """Vertex-clustering simplification: vertices in the same cube of side `cell` [m] merge
    into their mean; triangles that collapse or repeat are dropped.

    The shape moves by at most `cell * sqrt(3)`: for a cell of a few millimetres, far below
    what a screen shows of a robot, while the vertex count drops by an order of magnitude.
    `cell <= 0` returns the mesh unchanged.
    """
    vertices = np.asarray(vertices, dtype=float)
    faces = np.asarray(faces, dtype=np.int64)
    if cell <= 0 or len(vertices) == 0:
        return vertices, faces
    keys = np.floor(vertices / cell).astype(np.int64)
    _, cluster = np.unique(keys, axis=0, return_inverse=True)
    cluster = cluster.reshape(-1)
    count = np.bincount(cluster)
    merged = np.zeros((len(count), 3))
    np.add.at(merged, cluster, vertices)
    merged /= count[:, None]
    f = cluster[faces]
    f = f[(f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2])]
    if len(f):
        _, first = np.unique(np.sort(f, axis=1), axis=0, return_index=True)
        f = f[np.sort(first)]
    used, f = np.unique(f, return_inverse=True)
    return merged[used], f.reshape(-1, 3)


def part_meshes(geometry_object) -> list:
    """`[(vertices, faces, rgb)]` of a Pinocchio visual `GeometryObject` in its own frame
    (placement `geometry_object.placement` in its parent joint), one entry per colour; empty
    for a shape that cannot be drawn.

    Collada files are read here (`read_collada`, which keeps each material's colour); Coal's
    copy of a multi-material Collada mesh is unusable (its triangles index only the first
    sub-mesh's vertices). STL, OBJ and primitive shapes come from Coal, coloured with the URDF
    colour (`meshColor`).
    """
    path = getattr(geometry_object, "meshPath", "")
    scale = np.asarray(geometry_object.meshScale, dtype=float)
    if path.lower().endswith(".dae") and os.path.isfile(path):
        return [(v * scale, f, rgb) for v, f, rgb in read_collada(path)]
    mesh = geometry_mesh(geometry_object)
    if mesh is None:
        return []
    rgb = tuple(float(c) for c in np.asarray(geometry_object.meshColor)[:3])
    return [(mesh[0], mesh[1], rgb)]


_COLLADA = "{http://www.collada.org/2005/11/COLLADASchema}"


def read_collada(path: str) -> list:
    """Triangles of a Collada (.dae) file grouped by colour: `[(vertices (n, 3) [m], faces
    (m, 3), rgb)]`, in the file's frame with its `unit` scale and `up_axis` turned to z up.

    Reads what robot description files use: `<triangles>` and `<polylist>` (fan-triangulated)
    blocks, node `<matrix>`/`<translate>`/`<rotate>`/`<scale>` transforms, and each material's
    diffuse colour (grey where it has none or a texture).
    """
    c = _COLLADA
    root = ET.parse(path).getroot()
    unit = root.find(f"{c}asset/{c}unit")
    scale = float(unit.get("meter", 1.0)) if unit is not None else 1.0
    up = root.findtext(f"{c}asset/{c}up_axis", "Z_UP").strip()
    frame = np.eye(4)
    if up == "Y_UP":  # y up -> z up: +90 deg about x
        frame[:3, :3] = [[1, 0, 0], [0, 0, -1], [0, 1, 0]]
    elif up == "X_UP":
        frame[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    frame[:3, :3] *= scale

    effect_color = {}
    for effect in root.iter(f"{c}effect"):
        color = effect.find(f".//{c}diffuse/{c}color")
        if color is not None and color.text:
            effect_color[effect.get("id")] = tuple(float(x) for x in color.text.split()[:3])
    material_color = {}
    for material in root.iter(f"{c}material"):
        instance = material.find(f"{c}instance_effect")
        url = instance.get("url", "").lstrip("#") if instance is not None else ""
        material_color[material.get("id")] = effect_color.get(url, (0.7, 0.7, 0.7))
    geometries = {g.get("id"): g for g in root.iter(f"{c}geometry")}

    by_color = {}

    def visit(node, parent):
        transform = parent @ _node_transform(node)
        for instance in node.findall(f"{c}instance_geometry"):
            geometry = geometries.get(instance.get("url", "").lstrip("#"))
            if geometry is None:
                continue
            bound = {
                im.get("symbol"): im.get("target", "").lstrip("#")
                for im in instance.iter(f"{c}instance_material")
            }
            for positions, faces, symbol in _collada_triangles(geometry):
                rgb = material_color.get(bound.get(symbol, symbol), (0.7, 0.7, 0.7))
                world = positions @ transform[:3, :3].T + transform[:3, 3]
                by_color.setdefault(rgb, []).append((world, faces))
        for child in node.findall(f"{c}node"):
            visit(child, transform)

    for scene in root.iter(f"{c}visual_scene"):
        for node in scene.findall(f"{c}node"):
            visit(node, frame)
    out = []
    for rgb, pieces in by_color.items():
        offsets = np.cumsum([0] + [len(v) for v, _ in pieces[:-1]])
        vertices = np.concatenate([v for v, _ in pieces])
        faces = np.concatenate([f + o for (_, f), o in zip(pieces, offsets)])
        out.append((vertices, faces, rgb))
    return out


def _node_transform(node) -> np.ndarray:
    c = _COLLADA
    transform = np.eye(4)
    for element in node:
        tag = element.tag.replace(c, "")
        values = np.array(element.text.split(), dtype=float) if element.text else None
        step = np.eye(4)
        if tag == "matrix":
            step = values.reshape(4, 4)
        elif tag == "translate":
            step[:3, 3] = values
        elif tag == "scale":
            step[:3, :3] = np.diag(values)
        elif tag == "rotate":
            axis, angle = values[:3] / np.linalg.norm(values[:3]), np.radians(values[3])
            k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
            step[:3, :3] = np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k
        else:
            continue
        transform = transform @ step
    return transform


def _collada_triangles(geometry):
    """Yield `(positions (n, 3), faces (m, 3), material symbol)` per primitive block."""
    c = _COLLADA
    mesh = geometry.find(f"{c}mesh")
    if mesh is None:
        return
    sources = {}
    for source in mesh.findall(f"{c}source"):
        array = source.find(f"{c}float_array")
        accessor = source.find(f"{c}technique_common/{c}accessor")
        if array is None or not array.text:
            continue
        stride = int(accessor.get("stride", 3)) if accessor is not None else 3
        sources[source.get("id")] = np.array(array.text.split(), dtype=float).reshape(-1, stride)
    vertices = mesh.find(f"{c}vertices")
    position_id = None
    if vertices is not None:
        for inp in vertices.findall(f"{c}input"):
            if inp.get("semantic") == "POSITION":
                position_id = inp.get("source", "").lstrip("#")
    positions = sources.get(position_id)
    if positions is None:
        return
    positions = positions[:, :3]
    for block in list(mesh.findall(f"{c}triangles")) + list(mesh.findall(f"{c}polylist")):
        inputs = block.findall(f"{c}input")
        if not inputs or block.findtext(f"{c}p") is None:
            continue
        stride = max(int(i.get("offset", 0)) for i in inputs) + 1
        offset = next(int(i.get("offset", 0)) for i in inputs if i.get("semantic") == "VERTEX")
        index = np.array(block.findtext(f"{c}p").split(), dtype=np.int64).reshape(-1, stride)
        index = index[:, offset]
        if block.tag.endswith("polylist"):
            counts = np.array(block.findtext(f"{c}vcount", "").split(), dtype=np.int64)
            starts = np.r_[0, np.cumsum(counts)[:-1]]
            faces = [
                (index[s], index[s + k], index[s + k + 1])
                for s, n in zip(starts, counts)
                for k in range(1, n - 1)
            ]
            faces = np.array(faces, dtype=np.int64).reshape(-1, 3)
        else:
            faces = index.reshape(-1, 3)
        used, faces = np.unique(faces, return_inverse=True)
        yield positions[used], faces.reshape(-1, 3), block.get("material")


# ----------------------------------------------------------------------------- terrain


def terrain_grid(terrain, x_range, y_range):
    """Sample points of a terrain surface over `x_range x y_range` [m] (world frame):
    returns `(xs (nx,), ys (ny,), z (nx, ny))` with `z[i, j]` the height at `(xs[i], ys[j])`.

    Plane: the four corners (exact). Heightfield: its grid nodes inside the range plus the
    range ends (exact, triangulated in between as the contact model). Steps and Terraces: every
    riser appears twice in `xs`, with the heights before and after it, so the staircase keeps
    vertical risers. Heights come from `contact.terrain.height`.
    """
    from contact.terrain import Heightfield, Steps, Terraces, height

    x0, x1 = (float(v) for v in x_range)
    y0, y1 = (float(v) for v in y_range)
    xs, ys = np.array([x0, x1]), np.array([y0, y1])
    side = np.zeros(2)  # -1/+1: evaluate just before/after a riser
    if isinstance(terrain, Heightfield):
        nx, ny = np.shape(terrain.heights)
        h = float(terrain.cell_size)
        gx = float(terrain.x0) + h * np.arange(nx)
        gy = float(terrain.y0) + h * np.arange(ny)
        xs = np.unique(np.concatenate([xs, gx[(gx > x0) & (gx < x1)]]))
        ys = np.unique(np.concatenate([ys, gy[(gy > y0) & (gy < y1)]]))
        side = np.zeros(len(xs))
    elif isinstance(terrain, Steps):
        length, start = float(terrain.step_length), float(terrain.start_x)
        count = float(terrain.num_steps)
        k = np.arange(np.floor((x0 - start) / length), np.ceil((x1 - start) / length) + 1)
        risers = start + k * length
        risers = risers[(risers > x0) & (risers < x1) & (k >= 0) & (k < count)]
    elif isinstance(terrain, Terraces):
        risers = np.asarray(terrain.edges, dtype=float)
        risers = risers[(risers > x0) & (risers < x1)]
    if isinstance(terrain, Steps | Terraces):
        xs = np.concatenate([[x0], np.repeat(risers, 2), [x1]])
        side = np.concatenate([[0.0], np.tile([-1.0, 1.0], len(risers)), [0.0]])
    eps = 1e-9
    X, Y = np.meshgrid(xs + side * eps, ys, indexing="ij")
    z = np.asarray(height(terrain, X, Y), dtype=float)
    return xs, ys, z


def grid_mesh(xs, ys, z):
    """Surface mesh `(vertices (nx ny, 3), faces (2 (nx-1)(ny-1), 3))` through the points
    `(xs[i], ys[j], z[i, j])`, triangles wound counter-clockwise seen from +z."""
    nx, ny = len(xs), len(ys)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    vertices = np.stack([X, Y, z], axis=-1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(nx - 1), np.arange(ny - 1), indexing="ij")
    a = (i * ny + j).ravel()
    b, c, d = a + ny, a + ny + 1, a + 1
    faces = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    return vertices, faces


def terrain_lines(xs, ys, z, spacing: float = 0.25, lift: float = 0.002):
    """Line segments `(2 k, 3)` (pairs of end points) of a grid drawn on the surface from
    `terrain_grid`: lines along y at every multiple of `spacing` in x, and along x (following
    the profile, risers included) at every multiple of `spacing` in y; lifted by `lift` [m]
    so they are not hidden in the surface."""
    segments = []
    # along x at fixed y: piecewise linear in the profile points
    for y in _multiples(ys[0], ys[-1], spacing):
        zx = np.array([np.interp(y, ys, z[i]) for i in range(len(xs))])
        p = np.stack([xs, np.full_like(xs, y), zx + lift], axis=1)
        segments.append(np.stack([p[:-1], p[1:]], axis=1).reshape(-1, 3))
    # along y at fixed x (on the upper side of a riser)
    for x in _multiples(xs[0], xs[-1], spacing):
        i = min(np.searchsorted(xs, x, side="right") - 1, len(xs) - 2)
        t = 0.0 if xs[i + 1] == xs[i] else (x - xs[i]) / (xs[i + 1] - xs[i])
        zy = (1 - t) * z[i] + t * z[i + 1]
        p = np.stack([np.full_like(ys, x), ys, zy + lift], axis=1)
        segments.append(np.stack([p[:-1], p[1:]], axis=1).reshape(-1, 3))
    return np.concatenate(segments) if segments else np.zeros((0, 3))


def _multiples(lo, hi, step):
    return step * np.arange(np.ceil(lo / step), np.floor(hi / step) + 1)


# ----------------------------------------------------------------------------- arrows


def cylinder_mesh(radius: float, length: float = 1.0, segments: int = 12):
    """Open cylinder along +z from `z = 0` to `z = length`."""
    a = 2 * np.pi * np.arange(segments) / segments
    ring = np.stack([radius * np.cos(a), radius * np.sin(a)], axis=1)
    vertices = np.concatenate(
        [np.c_[ring, np.zeros(segments)], np.c_[ring, np.full(segments, length)]]
    )
    i = np.arange(segments)
    j = (i + 1) % segments
    faces = np.concatenate(
        [np.stack([i, j, j + segments], 1), np.stack([i, j + segments, i + segments], 1)]
    )
    return vertices, faces


def sphere_mesh(radius: float, segments: int = 12):
    """UV sphere of `radius` centred at the origin."""
    theta = np.pi * np.arange(1, segments // 2) / (segments // 2)
    phi = 2 * np.pi * np.arange(segments) / segments
    T, P = np.meshgrid(theta, phi, indexing="ij")
    ring = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), np.cos(T)], -1).reshape(-1, 3)
    vertices = radius * np.concatenate([[[0, 0, 1]], ring, [[0, 0, -1]]])
    n_rings, top, bottom = len(theta), 0, len(vertices) - 1
    faces = []
    for j in range(segments):
        k = (j + 1) % segments
        faces.append([top, 1 + j, 1 + k])
        last = 1 + (n_rings - 1) * segments
        faces.append([bottom, last + k, last + j])
        for i in range(n_rings - 1):
            a, b = 1 + i * segments + j, 1 + i * segments + k
            faces += [[a, a + segments, b + segments], [a, b + segments, b]]
    return vertices, np.array(faces)


def cone_mesh(radius: float, height: float, segments: int = 12):
    """Cone with its base disc at `z = 0` and its apex at `z = height`."""
    a = 2 * np.pi * np.arange(segments) / segments
    ring = np.c_[radius * np.cos(a), radius * np.sin(a), np.zeros(segments)]
    vertices = np.concatenate([ring, [[0.0, 0.0, height], [0.0, 0.0, 0.0]]])
    i = np.arange(segments)
    j = (i + 1) % segments
    apex, centre = segments, segments + 1
    faces = np.concatenate(
        [
            np.stack([i, j, np.full(segments, apex)], 1),
            np.stack([j, i, np.full(segments, centre)], 1),
        ]
    )
    return vertices, faces


def rotation_z_to(direction) -> np.ndarray:
    """Rotation `R (3, 3)` with `R e_z = direction / |direction|` (shortest arc; identity for
    a zero vector, a half turn about x for `-e_z`)."""
    d = np.asarray(direction, dtype=float)
    n = np.linalg.norm(d)
    if n < 1e-12:
        return np.eye(3)
    d = d / n
    c = d[2]
    if c < -1.0 + 1e-12:
        return np.diag([1.0, -1.0, -1.0])
    v = np.array([-d[1], d[0], 0.0])  # e_z x d
    vx = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    return np.eye(3) + vx + vx @ vx / (1.0 + c)
