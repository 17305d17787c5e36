"""Domain randomisation on MuJoCo (`hardware.backends.mujoco_disturbances`).

Each disturbance is checked against MuJoCo's own quantities: the model's total mass and the base
inertia, the geoms' friction, the step at which the drivers accept a written command, and the
centre-of-mass velocity change of a free-flying robot kicked (the kick is on the base's
generalised velocity, as in the training environment: with the joint velocities unchanged every
body gets `dv`, so the centre of mass does, while gravity acts the same on both runs).
"""

import functools

import numpy as np
import pytest

import dynamics
from hardware.interface import JointCommand

mujoco = pytest.importorskip("mujoco")
from hardware.backends.mujoco_disturbances import (  # noqa: E402
    DisturbanceRanges,
    Disturbances,
    DisturbedMuJoCoRobot,
)
from hardware.backends.mujoco_sim import MuJoCoRobot  # noqa: E402


@functools.cache
def go2():
    return dynamics.load_robot("go2")


def base_id(robot):
    return robot.mj.body(robot.model.joint_names[0]).id


def test_payload_adds_mass_to_the_base_and_scales_its_inertia():
    nominal = MuJoCoRobot(go2())
    robot = DisturbedMuJoCoRobot(go2(), Disturbances(payload=1.5))
    b = base_id(robot)
    assert mujoco.mj_getTotalmass(robot.mj) == pytest.approx(
        mujoco.mj_getTotalmass(nominal.mj) + 1.5, abs=1e-9
    )
    factor = (nominal.mj.body_mass[b] + 1.5) / nominal.mj.body_mass[b]
    np.testing.assert_allclose(robot.mj.body_inertia[b], factor * nominal.mj.body_inertia[b])
    assert mujoco.mj_getTotalmass(nominal.mj) == pytest.approx(go2().total_mass, rel=1e-9)
    # and the robot starts where MuJoCoRobot starts (standing), measured the same
    np.testing.assert_array_equal(robot.data.qpos, nominal.data.qpos)
    np.testing.assert_allclose(robot.read().joint_q, nominal.read().joint_q, atol=1e-12)


def test_friction_is_the_draws_on_every_geom():
    robot = DisturbedMuJoCoRobot(go2(), Disturbances(friction=0.55))
    collide = (robot.mj.geom_contype != 0) | (robot.mj.geom_conaffinity != 0)
    assert collide.sum() >= 5  # four feet and the floor
    np.testing.assert_allclose(robot.mj.geom_friction[collide, 0], 0.55)


def _command(robot, sequence):
    jm = robot.joint_map
    return JointCommand.create(jm.q_default, 20.0, 0.5, nu=jm.nu, timestamp=robot.now(),
                               sequence=sequence, arm=True)  # fmt: skip


@pytest.mark.parametrize("latency, steps", [(0.0, 0), (0.006, 3), (0.007, 4)])
def test_a_written_command_reaches_the_drivers_after_the_latency(latency, steps):
    robot = DisturbedMuJoCoRobot(go2(), Disturbances(latency=latency), timestep=0.002)
    assert robot.latency_steps == steps
    robot.write(_command(robot, 1))
    accepted = [robot.driver.counters["accepted"]]
    for _ in range(6):
        robot.advance(0.002)
        accepted.append(robot.driver.counters["accepted"])
    # accepted at the start of the step `steps` after the write (before MuJoCo steps it)
    first = 0 if steps == 0 else steps + 1
    assert accepted == [0] * first + [1] * (7 - first), accepted


def test_a_push_changes_the_free_robots_centre_of_mass_velocity_by_the_kick():
    q0 = np.array(go2().q_standing, dtype=float)
    q0[2] = 2.0  # in the air: no contact
    runs = {}
    for name, pushes in (("kicked", ((0.01, 0.3, -0.2),)), ("not", ())):
        robot = DisturbedMuJoCoRobot(go2(), Disturbances(pushes=pushes), q0=q0, timestep=0.002)
        robot.advance(0.02)
        mujoco.mj_forward(robot.mj, robot.data)
        mujoco.mj_subtreeVel(robot.mj, robot.data)
        runs[name] = (robot, robot.data.subtree_linvel[base_id(robot)].copy())
    robot, kicked = runs["kicked"]
    assert robot.applied_pushes == [(pytest.approx(0.01), 0.3, -0.2)]
    np.testing.assert_allclose(kicked - runs["not"][1], [0.3, -0.2, 0.0], atol=1e-9)


def test_sampling_is_seeded_and_within_the_ranges():
    ranges = DisturbanceRanges(payload=(-0.1, 0.2), friction=(0.4, 1.0), latency_s=0.03,
                               push_velocity=0.6, push_interval=1.0)  # fmt: skip
    draws = [ranges.sample(seed, 20.0, 15.0, start=0.5) for seed in range(40)]
    assert draws[3] == ranges.sample(3, 20.0, 15.0, start=0.5)
    assert len({d.friction for d in draws}) == 40
    for d in draws:
        assert -1.5 <= d.payload <= 3.0 and 0.4 <= d.friction <= 1.0 and 0 <= d.latency <= 0.03
        times = [p[0] for p in d.pushes]
        assert times == sorted(times) and all(0.5 < t < 20.0 for t in times)
        assert all(np.hypot(p[1], p[2]) <= 0.6 for p in d.pushes)
    counts = [len(d.pushes) for d in draws]
    assert 15 < np.mean(counts) < 24  # Poisson, mean 19.5 over 19.5 s at 1 per s
    none = DisturbanceRanges(push_interval=0.0).sample(0, 20.0, 15.0)
    assert none.pushes == ()


def test_bad_disturbances_are_refused_by_name():
    with pytest.raises(ValueError, match="friction"):
        Disturbances(friction=-0.1)
    with pytest.raises(ValueError, match="latency"):
        Disturbances(latency=float("nan"))
    with pytest.raises(ValueError, match="push"):
        Disturbances(pushes=((1.0, 0.2),))
    with pytest.raises(ValueError, match="payload"):
        DisturbedMuJoCoRobot(go2(), Disturbances(payload=-100.0))
    with pytest.raises(TypeError, match="friction"):
        DisturbedMuJoCoRobot(go2(), Disturbances(), friction=0.3)
