"""`MuJoCoRobot`, the simulated Go2 and `deploy_policy` on a terrain (`contact.mjcf_terrain`,
`contact.terrain_presets`); without one, today's flat floor, unchanged."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import contact
import dynamics
from contact import terrain_presets
from contact.terrain import height, terrain_to_dict
from dynamics.mjcf import to_mjcf
from hardware.backends.mujoco_sim import MuJoCoRobot

pytest.importorskip("mujoco")
ROOT = Path(__file__).resolve().parents[2]
FLOOR = {  # the floor `to_mjcf` has always written
    "name": "floor", "type": "plane", "size": "0 0 0.05", "quat": "1.0 0.0 -0.0 0.0",
    "contype": "0", "conaffinity": "1", "rgba": "0.8 0.8 0.8 1",
}  # fmt: skip


@pytest.fixture(scope="module")
def go2():
    return dynamics.load_robot("go2")


def test_without_a_terrain_the_floor_is_todays(go2):
    """The default XML holds the same floor geom and nothing else on the ground; a robot on
    `contact.flat()` (its friction 0.8, the default's) moves bit for bit like the default one."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(to_mjcf(go2))
    assert root.find("asset") is None
    assert [g.attrib for g in root.find("worldbody").findall("geom")] == [FLOOR]
    default, flat = MuJoCoRobot(go2), MuJoCoRobot(go2, terrain=contact.flat())
    for robot in (default, flat):
        robot.advance(0.2)
    np.testing.assert_array_equal(default.data.qpos, flat.data.qpos)
    np.testing.assert_array_equal(default.data.qvel, flat.data.qvel)


def test_friction_is_the_terrains_unless_one_is_given(go2):
    robot = MuJoCoRobot(go2, terrain=terrain_presets.stairs())
    floor, foot = robot.mj.geom("floor"), robot.mj.geom(go2.foot_names[0])
    assert floor.friction[0] == 0.8 and floor.priority[0] == 1 and foot.friction[0] == 0.8
    robot = MuJoCoRobot(go2, terrain=contact.flat(friction=0.4))
    assert robot.mj.geom("floor").friction[0] == 0.4
    robot = MuJoCoRobot(go2, terrain=contact.flat(friction=0.4), friction=1.1)
    assert robot.mj.geom("floor").friction[0] == 1.1 and float(robot.terrain.friction) == 1.1


@pytest.mark.parametrize("name", terrain_presets.PRESETS)
def test_presets_start_level_with_the_feature_a_metre_ahead(go2, name):
    """Level (z = 0) under the robot's start and up to the feature at x = 1 m, something there
    within a metre after it; the robot, standing at the origin in MuJoCo, is on its four feet."""
    terrain = terrain_presets.preset(name)
    x, y = jnp.meshgrid(jnp.linspace(-0.6, 0.999, 41), jnp.linspace(-0.5, 0.5, 11))
    assert float(jnp.abs(height(terrain, x, y)).max()) == 0.0
    ahead = height(terrain, jnp.linspace(1.0, 2.0, 41), jnp.zeros(41))
    assert float(jnp.abs(ahead).max()) > 0.02
    robot = MuJoCoRobot(go2, terrain=terrain)
    assert np.all(robot.foot_forces() > 0.0)


def test_terrain_from_argument_reads_presets_and_json(tmp_path):
    assert terrain_presets.terrain_from_argument("slope").kind == "heightfield"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(terrain_to_dict(contact.steps(0.05, 0.25, 2.0, num_steps=3))))
    terrain = terrain_presets.terrain_from_argument(str(path))
    assert terrain.kind == "steps" and float(terrain.num_steps) == 3.0
    with pytest.raises(ValueError, match="--terrain: expected a preset .*got 'lava'"):
        terrain_presets.terrain_from_argument("lava")
    with pytest.raises(ValueError, match="terrain: unknown preset 'lava'"):
        terrain_presets.preset("lava")


def test_the_simulated_go2_takes_a_terrain():
    from hardware.go2 import sim

    robot = sim.make_robot("mujoco", 0.002, None, 0.1, None, terrain=terrain_presets.stairs())
    assert robot.mj.geom("step_5").size[2] == pytest.approx(0.25)  # half of the 0.5 m landing
    with pytest.raises(SystemExit):  # refused before any DDS is opened
        sim.main(["--terrain", "lava"])


def _deploy_policy():
    spec = importlib.util.spec_from_file_location("deploy_policy", ROOT / "examples" /
                                                  "deploy_policy.py")  # fmt: skip
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_deploy_policy_runs_on_a_terrain(tmp_path):
    """A random small policy for 0.3 s on the stairs preset (the robot still standing at its
    start): the run goes through and names its terrain."""
    import jax

    from learning.policy import Policy
    from learning.policy_export import export_policy

    export_policy(Policy.create(jax.random.key(0), nu=12, hidden=(8,)), tmp_path / "policy",
                  robot="go2", onnx=False)  # fmt: skip
    summary = _deploy_policy().main(["--policy", str(tmp_path / "policy"), "--seconds", "0.3",
                                     "--terrain", "stairs", "--out", str(tmp_path)])  # fmt: skip
    assert summary["terrain"] == "stairs" and summary["controller_errors"] == 0
    assert summary["min_base_height_m"] > 0.2
