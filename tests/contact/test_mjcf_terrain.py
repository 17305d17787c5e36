"""MuJoCo terrain equals our terrain (`contact.mjcf_terrain`), and bad terrains are refused.

Two checks of the same surfaces:

- Heights: a vertical ray cast in MuJoCo (`mj_ray`) onto each preset and a descending flight
  lands where `contact.terrain.height` says. The surfaces are the same piecewise-linear ones
  (planes, box tops, the height field's triangles, split along the same diagonal), so the only
  difference is MuJoCo's float32 height-field storage, about `2^-24` of the field's height
  range (< 1 nm here): bound 1 micrometre.
- Resting bodies: a small probe (sphere r = 2 cm or cube of half-edge 3 cm, 0.2 kg, damped so
  that a rolling sphere stops) dropped from a few millimetres on a stair tread, across a stair
  nose, on a descending tread of the `stairs` preset (up, landing, down), across and just
  behind a descending nose of it, on a 15 degree incline (mu = 1 > tan 15 deg, so it sticks)
  and on the 15 degree ramp of the `slope` height field, and into a pit of a height field
  (where it touches several triangles) comes to rest where our `signed_distance` puts it on
  the surface: the sphere's centre `r` from the ground, the cube's bottom on it. What may
  differ is MuJoCo's soft-contact penetration at rest (solref 4 ms, solimp 0.95-0.99 over 1
  mm: a fraction of a millimetre under this load; a box on a height field settles a little
  deeper, as MuJoCo collides it with one triangle prism at a time, one contact each) and the
  float32 heights; the bound is 3 mm.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import dynamics
from contact import terrain as T
from contact.mjcf_terrain import ground_elements, heightfield_elements, hfield_elevation
from contact.terraces import flight
from contact.terrain_presets import PRESETS, slope, stairs
from dynamics.mjcf import to_mjcf

RAY_TOLERANCE = 1e-6  # [m] float32 height-field storage
REST_TOLERANCE = 3e-3  # [m] soft-contact penetration at rest
PROBE_MASS = 0.2  # [kg]
RADIUS = 0.02  # [m] probe sphere
HALF = 0.03  # [m] probe cube's half edge
DAMPING = 0.5  # [N s/m, N m s/rad] on the probe's free joint: a rolling sphere stops


@pytest.fixture(scope="module")
def go2():
    return dynamics.load_robot("go2")


def _world(model, terrain, kind, pos, quat=(1.0, 0.0, 0.0, 0.0)):
    """The MJCF `to_mjcf` writes on `terrain` (its options, solref, solimp), the robot taken
    out and a free probe (sphere of `RADIUS` or cube of half edge `HALF`) put at `pos`."""
    spec = mujoco.MjSpec.from_string(to_mjcf(model, ground=ground_elements(terrain)))
    spec.delete(spec.key("standing"))
    spec.delete(spec.body(model.joint_names[0]))
    for actuator in list(spec.actuators):
        spec.delete(actuator)
    body = spec.worldbody.add_body(name="probe", pos=list(pos), quat=list(quat))
    body.add_freejoint().damping = [DAMPING] * 3
    body.mass, body.ipos, body.explicitinertial = PROBE_MASS, [0.0, 0.0, 0.0], True
    if kind == "sphere":
        body.inertia = [0.4 * PROBE_MASS * RADIUS**2] * 3
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[RADIUS, 0, 0], contype=1,
                      conaffinity=0)  # fmt: skip
    else:
        body.inertia = [PROBE_MASS * (2 * HALF) ** 2 / 6] * 3
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[HALF] * 3, contype=1, conaffinity=0)
    return spec.compile()


def _rest(mj, seconds=0.6):
    """The probe's `(qpos (7,), largest |qvel|)` after `seconds` of MuJoCo."""
    data = mujoco.MjData(mj)
    for _ in range(round(seconds / mj.opt.timestep)):
        mujoco.mj_step(mj, data)
    return data.qpos.copy(), float(np.abs(data.qvel[:3]).max())


def _gap(terrain, point) -> float:
    return float(T.signed_distance(terrain, jnp.asarray(point))[0])


def _tilted_cube(angle, x, y, z_surface):
    """Pose of a cube lying on a surface rising at `angle` along +x through `(x, y,
    z_surface)`, 2 mm above it: `(centre (3,), quat (4,))`."""
    normal = np.array([-math.sin(angle), 0.0, math.cos(angle)])
    centre = np.array([x, y, z_surface]) + (HALF + 0.002) * normal
    return centre, (math.cos(angle / 2), 0.0, -math.sin(angle / 2), 0.0)


STAIRS = T.steps(0.1, 0.3, 0.5, friction=1.0, num_steps=3)
SLOPE = math.radians(15.0)


def case_tread():
    """Sphere on the second tread (x in [0.8, 1.1], z = 0.2), gap = r."""
    return STAIRS, "sphere", (0.95, 0.3, 0.2 + RADIUS + 0.005), None


def case_nose():
    """Cube over the nose of the second tread (its front edge at x = 0.8, 10 cm above the
    first tread), overhanging it by 2 cm: its bottom on the tread, its overhanging bottom
    edge 0 from the nose."""
    return STAIRS, "box", (0.8 + HALF - 0.02, 0.3, 0.2 + HALF + 0.005), None


def case_incline():
    centre, quat = _tilted_cube(SLOPE, 1.0, 0.5, math.tan(SLOPE) * 1.0)
    return T.incline(SLOPE, friction=1.0), "box", centre, quat


def case_ramp():
    """Cube on the `slope` preset's 15 degree ramp (from x = 1.0, 10 cm triangles, all
    coplanar): a height field, not a plane."""
    terrain = slope()
    x = 1.55
    centre, quat = _tilted_cube(SLOPE, x, 0.23, math.tan(SLOPE) * (x - 1.0))
    return dataclasses.replace(terrain, friction=jnp.asarray(1.0)), "box", centre, quat


def case_pit():
    """Sphere dropped just off the centre of a 3 cm deep pit at node (0.8, -0.2): it rests
    against the pit's triangles, its centre r from the nearest one."""
    heights = np.zeros((5, 5))
    heights[2, 2] = -0.03
    terrain = T.heightfield(heights, 0.6, -0.4, 0.1, friction=1.0)
    return terrain, "sphere", (0.803, -0.198, 0.02), None


FLIGHT = dataclasses.replace(stairs(), friction=jnp.asarray(1.0))  # down: risers 3.2 .. 4.4


def case_down_tread():
    """Sphere on the second tread down (x in [3.5, 3.8], z = 0.3), gap = r."""
    return FLIGHT, "sphere", (3.66, -0.2, 0.3 + RADIUS + 0.005), None


def case_down_nose():
    """Cube over the descending nose at x = 3.5 (the tread at 0.4 ends there, 0.3 after it),
    overhanging by 2 cm: its bottom on the tread, its overhanging edge 2 cm off the nose."""
    return FLIGHT, "box", (3.5 - HALF + 0.02, 0.1, 0.4 + HALF + 0.005), None


def case_behind_down_nose():
    """Sphere 5 mm behind the descending nose at x = 3.5: on the tread, r from it."""
    return FLIGHT, "sphere", (3.495, 0.0, 0.4 + RADIUS + 0.005), None


CASES = {
    f.__name__[5:]: f
    for f in (case_tread, case_nose, case_incline, case_ramp, case_pit, case_down_tread,
              case_down_nose, case_behind_down_nose)
}  # fmt: skip


@pytest.mark.parametrize("name", CASES)
def test_a_dropped_probe_rests_where_our_terrain_says(go2, name):
    terrain, kind, pos, quat = CASES[name]()
    mj = _world(go2, terrain, kind, pos, quat or (1.0, 0.0, 0.0, 0.0))
    qpos, speed = _rest(mj)
    assert speed < 1e-3, f"{name}: the probe did not settle ({speed} m/s)"
    centre = qpos[:3]
    if kind == "sphere":
        difference = _gap(terrain, centre) - RADIUS
    else:  # the cube's bottom corners touch (or, over the nose, overhang) the ground
        rotation = np.zeros(9)
        mujoco.mju_quat2Mat(rotation, qpos[3:7])
        corners = [centre + rotation.reshape(3, 3) @ np.array([sx, sy, -1.0]) * HALF
                   for sx in (-1, 1) for sy in (-1, 1)]  # fmt: skip
        difference = min(_gap(terrain, c) for c in corners)
        if name.endswith("nose"):  # resting on the tread (the higher ground under its ends)
            tread = max(float(T.height(terrain, centre[0] + side * HALF, centre[1]))
                        for side in (-1, 1))  # fmt: skip
            assert abs(centre[2] - HALF - tread) < REST_TOLERANCE
    assert abs(difference) < REST_TOLERANCE, f"{name}: {difference * 1e3:.3f} mm"


def _ray_heights(mj, x, y, start=3.0) -> np.ndarray:
    """MuJoCo's ground height under each `(x, y)`: a ray cast down from `z = start`."""
    data = mujoco.MjData(mj)
    mujoco.mj_forward(mj, data)
    geom = np.zeros(1, np.int32)
    down = np.array([0.0, 0.0, -1.0])
    out = [start - mujoco.mj_ray(mj, data, np.array([a, b, start]), down, None, 1, -1, geom)
           for a, b in zip(x, y)]  # fmt: skip
    return np.array(out)


RAY_TERRAINS = {
    **{name: make for name, make in PRESETS.items()},
    "descending": lambda: T.steps(-0.12, 0.25, 1.0, num_steps=4),
    "pit": lambda: flight(-0.12, 0.25, 1.0, 3, 0.6),
    "incline": lambda: T.incline(SLOPE, axis="y", height=0.1),
}


@pytest.mark.parametrize("name", RAY_TERRAINS)
def test_mujoco_heights_equal_ours(go2, name):
    """Rays onto the ground (the robot out of the way: x from 0.6 m) at 200 random points,
    over the terrain's feature and beyond the height fields' edges."""
    terrain = RAY_TERRAINS[name]()
    mj = mujoco.MjModel.from_xml_string(to_mjcf(go2, ground=ground_elements(terrain)))
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0.6, 6.5, 200), rng.uniform(-1.8, 1.8, 200)
    ours = np.asarray(T.height(terrain, jnp.asarray(x), jnp.asarray(y)))
    np.testing.assert_allclose(_ray_heights(mj, x, y), ours, atol=RAY_TOLERANCE, rtol=0)


def test_height_field_conventions():
    """Columns along x, rows along y from -y (MuJoCo stores the elevation rows of the MJCF
    bottom-up), the geom centred on the grid, elevation normalised over [min, max]."""
    heights = np.array([[0.0, 0.1], [0.2, 0.3], [0.4, 0.6]])  # (nx=3, ny=2)
    terrain = T.heightfield(heights, 1.0, 2.0, 0.5)
    asset, geom, floor = heightfield_elements(terrain)
    assert (asset.get("nrow"), asset.get("ncol")) == ("2", "3")
    np.testing.assert_allclose([float(v) for v in asset.get("size").split()], [0.5, 0.25, 0.6, 0.1])
    np.testing.assert_allclose([float(v) for v in geom.get("pos").split()], [1.5, 2.25, 0.0])
    elevation, bottom, top = hfield_elevation(heights)
    np.testing.assert_allclose(bottom + top * elevation[::-1].T, heights)
    mj = mujoco.MjModel.from_xml_string(
        f"<mujoco><asset>{_text(asset)}</asset><worldbody>{_text(geom)}</worldbody></mujoco>"
    )
    stored = mj.hfield_data.reshape(2, 3)  # row r at y = y0 + r cell
    np.testing.assert_allclose(0.6 * stored, heights.T, atol=1e-7)
    assert floor.get("type") == "plane" and float(floor.get("pos").split()[2]) == 0.0


def _text(element) -> str:
    import xml.etree.ElementTree as ET

    return ET.tostring(element, encoding="unicode")


def test_stairs_are_boxes_per_tread_and_the_floor_at_the_lowest_level():
    up = ground_elements(T.steps(0.1, 0.3, 1.0, num_steps=5))
    assert [e.get("name") for e in up] == ["floor"] + [f"step_{k}" for k in range(1, 6)]
    down = ground_elements(T.steps(-0.1, 0.3, 1.0, num_steps=2.5))
    assert [e.get("name") for e in down] == ["floor", "approach", "step_1", "step_2"]
    assert float(down[0].get("pos").split()[2]) == pytest.approx(-0.25)
    assert all(e.get("priority") == "1" for e in up + down)


def test_terraces_are_boxes_per_level_above_the_floor():
    """The `stairs` preset: a box per tread up, the landing, a box per tread down, none for
    the level ground (the floor); a pit: the floor at its bottom, boxes for the rest."""
    names = [e.get("name") for e in ground_elements(stairs())]
    assert names == ["floor"] + [f"step_{k}" for k in range(1, 10)]
    pit = ground_elements(flight(-0.12, 0.25, 1.0, 3, 0.6))
    assert [e.get("name") for e in pit] == ["floor", "approach", "step_1", "step_2", "step_4",
                                            "step_5", "step_6"]  # fmt: skip
    assert float(pit[0].get("pos").split()[2]) == pytest.approx(-0.36)
    with pytest.raises(ValueError, match="terraces: tread must be > 0"):
        ground_elements(T.Terraces(jnp.array([1.0, 0.5]), jnp.zeros(3), jnp.asarray(0.8)))


@pytest.mark.parametrize(
    "terrain, match",
    [
        (dataclasses.replace(T.heightfield(np.zeros((2, 2)), 0, 0, 0.1),
                             heights=jnp.array([[0.0, jnp.nan], [0.0, 0.0]])),
         r"heightfield: heights must be finite, got nan at \(0, 1\)"),
        (T.steps(0.1, 0.3, 1.0), "steps: num_steps must be finite, got inf"),
        (T.steps(0.1, 0.3, 1.0, num_steps=-1.0), "steps: num_steps must be >= 0, got -1.0"),
        (T.Plane(jnp.array([0.0, 0.0, 1.0]), jnp.asarray(jnp.nan), jnp.asarray(0.8)),
         "plane: height must be finite, got nan"),
    ],
)  # fmt: skip
def test_bad_terrains_are_refused_naming_the_argument(terrain, match):
    with pytest.raises(ValueError, match=match):
        ground_elements(terrain)


def test_an_unknown_terrain_is_refused():
    with pytest.raises(TypeError, match="terrain must be a contact.terrain Plane, Steps, "
                                        "Terraces or Heightfield, got dict"):  # fmt: skip
        ground_elements({"kind": "plane"})


def test_to_mjcf_refuses_a_ground_it_cannot_place(go2):
    import xml.etree.ElementTree as ET

    with pytest.raises(ValueError, match="ground: expected <geom> or <hfield> elements"):
        to_mjcf(go2, ground=[ET.Element("body")])
    with pytest.raises(ValueError, match="give floor_incline or ground, not both"):
        to_mjcf(go2, floor_incline=0.1, ground=ground_elements(T.flat()))
