"""Terrains: distances against analytic formulas and brute-force sampling, normals, gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from contact import terrain

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(0)


def _points(n, lo=(-1.0, -1.0, -0.3), hi=(1.0, 1.0, 0.6)):
    return jnp.asarray(RNG.uniform(lo, hi, size=(n, 3)))


# jitted once per terrain kind (the class is static, parameters are traced)
_signed_distance = jax.jit(terrain.signed_distance)
_height = jax.jit(terrain.height)
_batched = jax.jit(jax.vmap(terrain.signed_distance, in_axes=(None, 0)))
_batched_gradient = jax.jit(
    jax.vmap(jax.grad(lambda t, p: terrain.signed_distance(t, p)[0], argnums=1), in_axes=(None, 0))
)
_jacobians = jax.jit(jax.jacrev(lambda p, t: terrain.signed_distance(t, p)[0], argnums=(0, 1)))


def _distances(t, points):
    return _batched(t, points)


# ----------------------------------------------------------------------------- planes
def test_flat_distance_and_normal():
    t = terrain.flat(height=0.2, friction=0.6)
    pts = _points(50)
    gap, n = _distances(t, pts)
    np.testing.assert_allclose(gap, pts[:, 2] - 0.2, atol=1e-15)
    np.testing.assert_allclose(n, np.tile([0.0, 0.0, 1.0], (50, 1)), atol=0)
    assert float(terrain.friction(t, pts[0])) == 0.6


@pytest.mark.parametrize("axis", ["x", "y"])
def test_incline_distance_and_normal(axis):
    angle, h = 0.3, 0.1
    t = terrain.incline(angle, friction=0.7, axis=axis, height=h)
    pts = _points(50)
    gap, n = _distances(t, pts)
    s = pts[:, 0] if axis == "x" else pts[:, 1]
    # perpendicular distance to z = h + tan(a) s: vertical gap times cos(a)
    np.testing.assert_allclose(gap, (pts[:, 2] - h - np.tan(angle) * s) * np.cos(angle), atol=1e-14)
    expected = (
        [-np.sin(angle), 0.0, np.cos(angle)] if axis == "x" else [0, -np.sin(angle), np.cos(angle)]
    )
    np.testing.assert_allclose(n, np.tile(expected, (50, 1)), atol=1e-15)
    # the foot of the perpendicular lies on the surface and the surface rises along +axis
    foot = pts - gap[:, None] * n
    np.testing.assert_allclose(_height(t, foot[:, 0], foot[:, 1]), foot[:, 2], atol=1e-14)
    assert float(_height(t, 1.0, 1.0)) > h


def test_plane_normalises_normal():
    t = terrain.plane([0.0, 1.0, 2.0], height=0.0)
    np.testing.assert_allclose(jnp.linalg.norm(t.normal), 1.0)
    gap, _ = _signed_distance(t, jnp.array([0.0, 0.0, 1.0]))
    np.testing.assert_allclose(gap, 2.0 / np.sqrt(5.0))


# ----------------------------------------------------------------------------- heightfield
def _random_heightfield():
    heights = RNG.uniform(-0.1, 0.1, size=(6, 5))
    return terrain.heightfield(heights, x0=-1.0, y0=-0.5, cell_size=0.25), heights


def test_heightfield_exact_at_nodes_and_linear_on_its_triangles():
    t, heights = _random_heightfield()
    i, j = np.meshgrid(np.arange(6), np.arange(5), indexing="ij")
    x, y = -1.0 + 0.25 * i, -0.5 + 0.25 * j
    np.testing.assert_allclose(_height(t, jnp.asarray(x), jnp.asarray(y)), heights, atol=1e-15)
    # along a grid line x = x_i the height is linear in y (and vice versa)
    ts = np.linspace(0.0, 1.0, 7)
    along_y = _height(t, jnp.full(7, x[2, 1]), jnp.asarray(y[2, 1] + 0.25 * ts))
    np.testing.assert_allclose(along_y, (1 - ts) * heights[2, 1] + ts * heights[2, 2], atol=1e-15)
    along_x = _height(t, jnp.asarray(x[3, 2] + 0.25 * ts), jnp.full(7, y[3, 2]))
    np.testing.assert_allclose(along_x, (1 - ts) * heights[3, 2] + ts * heights[4, 2], atol=1e-15)
    # cell centre: on the diagonal from node (i, j) to (i+1, j+1), the mean of its two ends
    centre = _height(t, x[1, 1] + 0.125, y[1, 1] + 0.125)
    np.testing.assert_allclose(centre, 0.5 * (heights[1, 1] + heights[2, 2]), atol=1e-15)
    # below the diagonal: the plane through (i, j), (i+1, j), (i+1, j+1)
    u, v = 0.6, 0.2
    below = _height(t, x[1, 1] + 0.25 * u, y[1, 1] + 0.25 * v)
    h = heights
    expected = h[1, 1] + u * (h[2, 1] - h[1, 1]) + v * (h[2, 2] - h[2, 1])
    np.testing.assert_allclose(below, expected, atol=1e-15)
    # outside the grid: clamped to the edge values
    np.testing.assert_allclose(_height(t, -5.0, -0.5), heights[0, 0], atol=1e-15)


def test_heightfield_of_a_plane_is_the_plane():
    a, b, c = 0.2, -0.1, 0.05
    i, j = np.meshgrid(np.arange(5), np.arange(4), indexing="ij")
    heights = a * (0.5 * i) + b * (0.5 * j) + c
    hf = terrain.heightfield(heights, x0=0.0, y0=0.0, cell_size=0.5)
    pl = terrain.plane([-a, -b, 1.0], height=c)
    pts = _points(40, lo=(0.1, 0.1, -0.3), hi=(1.9, 1.4, 0.6))
    gap_hf, n_hf = _distances(hf, pts)
    gap_pl, n_pl = _distances(pl, pts)
    np.testing.assert_allclose(gap_hf, gap_pl, atol=1e-14)
    np.testing.assert_allclose(n_hf, n_pl, atol=1e-14)


def test_heightfield_normal_is_unit_and_gap_sign():
    t, _ = _random_heightfield()
    pts = _points(100, lo=(-1.2, -0.7, -0.3), hi=(0.5, 0.7, 0.3))
    gap, n = _distances(t, pts)
    np.testing.assert_allclose(jnp.linalg.norm(n, axis=1), 1.0, atol=1e-14)
    above = pts[:, 2] > _height(t, pts[:, 0], pts[:, 1])
    np.testing.assert_array_equal(gap > 0, above)


def _surface_samples(hf, spacing):
    """Dense points of the height field's triangles (the reference for its distance): every
    triangle of `viz.meshes.grid_mesh` through the grid nodes, sampled barycentrically."""
    from viz.meshes import grid_mesh

    nx, ny = np.shape(hf.heights)
    h = float(hf.cell_size)
    xs, ys = float(hf.x0) + h * np.arange(nx), float(hf.y0) + h * np.arange(ny)
    vertices, faces = grid_mesh(xs, ys, np.asarray(hf.heights))
    n = int(np.ceil(h / spacing))
    b, c = np.meshgrid(np.linspace(0, 1, n + 1), np.linspace(0, 1, n + 1), indexing="ij")
    keep = b + c <= 1.0
    b, c = b[keep], c[keep]
    A, B, C = (vertices[faces[:, k]] for k in range(3))
    return (A[:, None] + b[None, :, None] * (B - A)[:, None] + c[None, :, None] * (C - A)[:, None]
            ).reshape(-1, 3)  # fmt: skip


def test_heightfield_distance_is_the_distance_to_its_triangles():
    """Against a dense sampling of the triangles (1 mm) near a random surface with 5 cm
    cells: within the window's reach the gap's magnitude is the nearest sample's distance (to
    the sampling's resolution) and its normal points from that sample to the point."""
    rng = np.random.default_rng(3)
    hf = terrain.heightfield(rng.uniform(-0.04, 0.04, (8, 7)), x0=0.0, y0=0.0, cell_size=0.05)
    samples = _surface_samples(hf, 0.001)
    pts = rng.uniform((0.05, 0.05, -0.05), (0.3, 0.25, 0.09), size=(60, 3))
    gap, normal = _distances(hf, jnp.asarray(pts))
    gap, normal = np.asarray(gap), np.asarray(normal)
    distance = np.linalg.norm(pts[:, None] - samples[None], axis=2)
    nearest = samples[np.argmin(distance, axis=1)]
    reach = distance.min(axis=1) < 0.9 * 3 * 0.05
    assert reach.sum() > 40
    np.testing.assert_allclose(np.abs(gap[reach]), distance.min(axis=1)[reach], atol=1e-3)
    direction = (pts - nearest) / np.linalg.norm(pts - nearest, axis=1, keepdims=True)
    far = reach & (np.abs(gap) > 0.01)
    cos = np.sum(direction[far] * normal[far] * np.sign(gap[far])[:, None], axis=1)
    assert np.all(cos > 0.99)


def test_a_stone_side_is_a_wall_not_a_slope():
    """A 10 cm deep gap beside a flat stone top (1 cm cells): a point 3.4 cm above the top,
    half a cell past its edge over the side's steep cell, is 3.4 cm (to the edge) from the
    ground, not the vertical gap times the side's cosine (about 1 cm)."""
    heights = np.zeros((20, 6))
    heights[10:] = -0.1  # the top ends at node 9 (x = 0.09), the side falls over one cell
    hf = terrain.heightfield(heights, x0=0.0, y0=0.0, cell_size=0.01)
    p = jnp.array([0.095, 0.025, 0.034])
    gap, normal = _signed_distance(hf, p)
    np.testing.assert_allclose(gap, np.hypot(0.005, 0.034), rtol=1e-12)
    np.testing.assert_allclose(normal, np.array([0.005, 0.0, 0.034]) / np.hypot(0.005, 0.034),
                               atol=1e-12)  # fmt: skip
    # above the top: the vertical gap; in the gap below the top, beside the side: horizontal
    np.testing.assert_allclose(_signed_distance(hf, jnp.array([0.05, 0.025, 0.02]))[0], 0.02)
    side = _signed_distance(hf, jnp.array([0.107, 0.025, -0.05]))[0]
    slope = 0.1 / 0.01
    np.testing.assert_allclose(side, (0.107 - 0.1 + 0.05 / slope) / np.hypot(1, 1 / slope))


# ----------------------------------------------------------------------------- steps
def _staircase_profile(t, x_min, x_max, spacing=2e-4):
    """Dense samples of the (x, z) staircase profile, risers included (the reference)."""
    h, length, x0 = float(t.step_height), float(t.step_length), float(t.start_x)
    xs = np.arange(x_min, x_max, spacing)
    k = np.clip(np.floor((xs - x0) / length) + 1, 0, float(t.num_steps))
    pts = [np.stack([xs, k * h], axis=1)]
    for m in range(1, 40):
        xr = x0 + (m - 1) * length
        lo, hi = (m - 1) * h, m * h
        if m > float(t.num_steps) or not x_min < xr < x_max:
            continue
        zs = np.arange(min(lo, hi), max(lo, hi), spacing)
        pts.append(np.stack([np.full_like(zs, xr), zs], axis=1))
    return np.concatenate(pts)


@pytest.mark.parametrize("step_height", [0.15, -0.12])
def test_steps_height_on_each_tread(step_height):
    t = terrain.steps(step_height, step_length=0.3, start_x=0.5, num_steps=4)
    for k in range(0, 7):
        x_mid = 0.5 + (k - 0.5) * 0.3 if k > 0 else 0.0
        tread = min(k, 4) * step_height
        np.testing.assert_allclose(_height(t, x_mid, 0.0), tread, atol=1e-15)
        for clearance in (0.0, 0.02, -0.01):
            gap, n = _signed_distance(t, jnp.array([x_mid, 0.3, tread + clearance]))
            np.testing.assert_allclose(gap, clearance, atol=1e-15)
            np.testing.assert_allclose(n, [0.0, 0.0, 1.0], atol=0)


@pytest.mark.parametrize("step_height", [0.17, -0.12])
def test_steps_distance_matches_brute_force(step_height):
    t = terrain.steps(step_height, step_length=0.25, start_x=0.2, num_steps=5)
    profile = _staircase_profile(t, -1.0, 2.5)
    xs = RNG.uniform(-0.2, 1.8, size=300)
    zs = RNG.uniform(-0.15, 0.15, size=300) + np.asarray(_height(t, jnp.asarray(xs), 0.0))
    pts = jnp.asarray(np.stack([xs, RNG.normal(size=300), zs], axis=1))
    gap, n = _distances(t, pts)
    brute = np.min(
        np.hypot(xs[:, None] - profile[None, :, 0], zs[:, None] - profile[None, :, 1]), 1
    )
    np.testing.assert_allclose(np.abs(gap), brute, atol=2e-4)
    below = zs < np.asarray(_height(t, jnp.asarray(xs), 0.0))
    np.testing.assert_array_equal(np.asarray(gap) < 0, below & (brute > 1e-12))
    np.testing.assert_allclose(jnp.linalg.norm(n, axis=1), 1.0, atol=1e-14)
    # the normal is the gradient of the distance
    grad = _batched_gradient(t, pts)
    np.testing.assert_allclose(grad, n, atol=1e-12)


def test_steps_riser_and_nose():
    t = terrain.steps(0.2, step_length=0.3, start_x=1.0)
    # in front of the first riser, between the ground and the first tread
    gap, n = _signed_distance(t, jnp.array([0.97, 0.0, 0.15]))
    np.testing.assert_allclose(gap, 0.03, atol=1e-15)
    np.testing.assert_allclose(n, [-1.0, 0.0, 0.0], atol=0)
    # diagonally off the nose (1.0, 0.2): distance to the edge, normal along the diagonal
    gap, n = _signed_distance(t, jnp.array([0.97, 0.0, 0.24]))
    np.testing.assert_allclose(gap, 0.05, atol=1e-15)
    np.testing.assert_allclose(n, [-0.6, 0.0, 0.8], atol=1e-15)
    # gap is 1-Lipschitz (continuous) along a horizontal sweep across the risers
    xs = jnp.linspace(0.5, 2.5, 4001)
    gaps, _ = _distances(t, jnp.stack([xs, jnp.zeros_like(xs), jnp.full_like(xs, 0.25)], axis=1))
    assert float(jnp.max(jnp.abs(jnp.diff(gaps)))) <= float(xs[1] - xs[0]) + 1e-12


def test_steps_far_away_is_clipped_and_continuous():
    t = terrain.steps(0.2, step_length=0.3, start_x=0.0)
    gap, n = _signed_distance(t, jnp.array([0.1, 0.0, 5.0]))
    np.testing.assert_allclose(gap, 2 * 0.3)
    assert np.all(np.isfinite(n))


# ----------------------------------------------------------------------------- gradients
def _terrains():
    hf, _ = _random_heightfield()
    return {
        "flat": terrain.flat(0.1),
        "incline": terrain.incline(0.2, axis="y"),
        "steps": terrain.steps(0.17, 0.3, 0.2, num_steps=3.0),
        "heightfield": hf,
    }


# inside the heightfield grid, off its cell edges, over different treads / off the risers
GENERIC_POINTS = jnp.array([[-0.33, 0.21, 0.07], [-0.41, -0.12, -0.03], [0.47, 0.05, 0.19]])


@pytest.mark.parametrize("name", ["flat", "incline", "steps", "heightfield"])
def test_signed_distance_check_grads(name):
    t = _terrains()[name]

    @jax.jit
    def f(t, p):
        return terrain.signed_distance(t, p)

    for p in GENERIC_POINTS:
        check_grads(f, (t, p), order=1, modes=["fwd", "rev"], eps=1e-6, atol=1e-7, rtol=1e-7)


@pytest.mark.parametrize("name", ["flat", "incline", "steps", "heightfield"])
def test_gradients_finite_on_surface_and_edges(name):
    t = _terrains()[name]
    special = [
        [0.2, 0.0, 0.17],  # steps: nose of the first step
        [0.2, 0.0, 0.0],  # steps: inner corner
        [0.2, 0.0, 0.1],  # steps: on the riser
        [-0.5, -0.25, 0.0],  # heightfield: a grid node (x, y)
        [0.0, 0.0, 0.0],
    ]
    for p in jnp.asarray(special):
        p = p.at[2].set(p[2] if name == "steps" else _height(t, p[0], p[1]))
        jac_p, jac_t = _jacobians(p, t)
        leaves = jax.tree_util.tree_leaves((jac_p, jac_t))
        assert all(bool(jnp.all(jnp.isfinite(x))) for x in leaves), (name, p)
        gap, _ = _signed_distance(t, p)
        np.testing.assert_allclose(gap, 0.0, atol=1e-15)


def test_vmap_and_jit_over_points_and_terrains():
    pts = _points(16)
    for t in _terrains().values():
        gap_v, n_v = _batched(t, pts)
        loop = [_signed_distance(t, p) for p in pts[:4]]
        np.testing.assert_allclose(gap_v[:4], [g for g, _ in loop], atol=1e-15)
        np.testing.assert_allclose(n_v[:4], [n for _, n in loop], atol=1e-15)
    # a batch of terrains (randomised friction and height) is a pytree with batched leaves
    batch = jax.vmap(lambda h, mu: terrain.flat(h, mu))(jnp.array([0.0, 0.1]), jnp.array([0.5, 1]))
    gaps, _ = jax.jit(jax.vmap(terrain.signed_distance, in_axes=(0, None)))(batch, pts[0])
    np.testing.assert_allclose(gaps, pts[0, 2] - jnp.array([0.0, 0.1]))
    mus = jax.vmap(terrain.friction, in_axes=(0, None))(batch, pts[0])
    np.testing.assert_allclose(mus, [0.5, 1.0])


# ----------------------------------------------------------------------------- contact frame
def test_contact_frame_is_a_rotation_with_normal_last():
    normals = RNG.normal(size=(50, 3))
    normals[:, 2] = np.abs(normals[:, 2])
    normals = np.concatenate([normals, [[0, 0, 1.0], [-1.0, 0, 0], [0, 1.0, 0]]])
    normals = jnp.asarray(normals / np.linalg.norm(normals, axis=1, keepdims=True))
    frames = jax.jit(jax.vmap(terrain.contact_frame))(normals)
    frames, normals = np.asarray(frames), np.asarray(normals)
    eye = np.broadcast_to(np.eye(3), frames.shape)
    np.testing.assert_allclose(np.einsum("nji,njk->nik", frames, frames), eye, atol=1e-14)
    np.testing.assert_allclose(np.linalg.det(frames), 1.0, atol=1e-14)
    np.testing.assert_allclose(frames[:, :, 2], normals, atol=0)
    np.testing.assert_allclose(terrain.contact_frame(jnp.array([0.0, 0.0, 1.0])), jnp.eye(3))


def test_contact_frame_smooth_near_vertical():
    n = jnp.array([0.01, -0.02, 1.0])
    frame = jax.jit(terrain.contact_frame)
    check_grads(frame, (n / jnp.linalg.norm(n),), order=1, modes=["fwd", "rev"], eps=1e-6)
    # continuous through e_z: no branch switch
    eps = 1e-7
    f_plus = frame(jnp.array([eps, 0.0, 1.0]))
    f_minus = frame(jnp.array([-eps, 0.0, 1.0]))
    np.testing.assert_allclose(f_plus, f_minus, atol=3 * eps)
