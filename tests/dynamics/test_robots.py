"""Robot loading, the Model's contents, and clear errors for bad input."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import dynamics


def test_model_contents(model, pin_model):
    assert (model.nq, model.nv, model.nu) == (19, 18, 12)
    assert model.has_free_flyer and model.joint_types[0] == "free_flyer"
    assert model.nfeet == 4
    assert np.isclose(model.total_mass, sum(i.mass for i in pin_model.inertias))
    assert model.q_standing.shape == (19,)
    np.testing.assert_allclose(np.linalg.norm(model.q_standing[3:7]), 1.0)
    assert np.all(np.asarray(model.foot_radius) > 0.005)
    assert np.all(np.asarray(model.effort_limit)[6:] < 500), "torque limits must be physical"
    # every joint's axis is unit length and the parent precedes the child
    for i, (t, a) in enumerate(zip(model.joint_types, model.joint_axes)):
        assert model.parents[i] < i
        if t != "free_flyer":
            assert np.isclose(np.linalg.norm(a), 1.0)


def test_standing_pose_puts_feet_on_the_ground(model):
    _, feet = dynamics.frame_placements(model, model.q_standing, model.foot_names)
    heights = np.asarray(feet[:, 2]) - np.asarray(model.foot_radius)
    # the lowest foot sphere touches z = 0 and the others are within 1 cm of the ground
    assert np.isclose(np.min(heights), 0.0, atol=1e-9), heights
    assert np.all(heights < 0.01), heights


def test_model_is_a_pytree_with_static_structure(model):
    leaves, treedef = jax.tree_util.tree_flatten(model)
    assert all(isinstance(x, np.ndarray | jax.Array) for x in leaves)
    heavier = model.replace(body_mass=np.asarray(model.body_mass) * 2.0)
    f = jax.jit(dynamics.gravity_forces)
    g1, g2 = f(model, model.q_standing), f(heavier, model.q_standing)
    np.testing.assert_allclose(g2, 2.0 * g1, rtol=1e-12)  # traced masses, no retrace needed
    m32 = model.astype(jnp.float32)
    assert m32.body_mass.dtype == jnp.float32 and m32.frame_names == model.frame_names


def test_unknown_robot_lists_available():
    with pytest.raises(ValueError, match="Available robots: a1, anymal, anymal_c, b1, go1, go2"):
        dynamics.load_robot("spot")


def test_missing_and_broken_urdf(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.urdf"):
        dynamics.load_robot(str(tmp_path / "nope.urdf"))
    broken = tmp_path / "broken.urdf"
    broken.write_text("<robot name='x'><link name='a'></robot")
    with pytest.raises(ValueError, match="could not parse URDF"):
        dynamics.load_robot(str(broken))


def test_load_from_urdf_path_matches_named_robot():
    urdf = dynamics.load_pinocchio("go2").urdf_path
    if not os.path.isfile(urdf):
        pytest.skip("example-robot-data did not report its URDF path")
    named = dynamics.load_robot("go2")
    by_path = dynamics.load_robot(urdf, foot_names=named.foot_names, foot_radius=0.023)
    q = named.q_standing
    # the named robot adds its motors' rotor inertia (dynamics.robots), the URDF has none
    np.testing.assert_allclose(
        dynamics.mass_matrix(by_path, q) + np.diag(named.armature),
        dynamics.mass_matrix(named, q), atol=1e-12,
    )
    # without SRDF the standing height is computed so the lowest foot sphere touches z = 0
    _, feet = dynamics.frame_placements(by_path, by_path.q_standing, named.foot_names)
    assert np.isclose(np.min(np.asarray(feet[:, 2])) - 0.023, 0.0, atol=1e-9)


def test_bad_foot_frame_and_bad_shapes():
    with pytest.raises(ValueError, match="must name four feet"):
        dynamics.load_robot(dynamics.load_pinocchio("go2").urdf_path, foot_names=("not_a_foot",))
    model = dynamics.load_robot("solo12")
    with pytest.raises(ValueError, match=r"q must have shape \(19,\)"):
        dynamics.mass_matrix(model, np.zeros(18))
    with pytest.raises(ValueError, match=r"tau must have shape \(18,\)"):
        dynamics.forward_dynamics(model, model.q_standing, np.zeros(18), np.zeros(12))
    with pytest.raises(KeyError, match="unknown frame 'toe'"):
        dynamics.frame_placement(model, model.q_standing, "toe")


def test_free_fall_of_the_whole_robot(model):
    """With zero torque and no contact, every joint's acceleration in the world is -g."""
    q, v = model.q_standing, np.zeros(model.nv)
    qdd = dynamics.forward_dynamics(model, q, v, np.zeros(model.nv))
    r = np.asarray(dynamics.frame_placement(model, q, model.frame_names[2])[0])  # base frame
    base_lin_world = pin.Quaternion(np.asarray(q[3:7])).matrix() @ np.asarray(qdd[:3])
    np.testing.assert_allclose(base_lin_world, [0, 0, -9.81], atol=1e-9)
    np.testing.assert_allclose(qdd[3:], 0.0, atol=1e-9)
    assert r.shape == (3, 3)
