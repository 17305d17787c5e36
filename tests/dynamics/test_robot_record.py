"""The robot record: every quadruped of example-robot-data by name, any URDF by path, each
field given with its source or derived by a stated rule (`dynamics.robot_rules`), and clear
errors naming the robot and the field.

Independent checks: Pinocchio's own kinematics (feet under the hips, on the ground),
example-robot-data's SRDF poses (the computed pose's knee direction; its height where the rule
reproduces the SRDF), MuJoCo (the computed pose stands), and the explicit PD's stability bound
`Kd dt / I < 2`.
"""

import os
import textwrap

import numpy as np
import pinocchio as pin
import pytest

import dynamics
from dynamics import robot_rules as rules
from dynamics.robot_record import RobotRecord, check_record

QUADRUPEDS = ("a1", "anymal", "anymal_c", "b1", "go1", "go2", "hyq", "laikago", "solo12", "solo8")
NEW_ROBOTS = ("go1", "hyq", "anymal")  # no line of this project written for them


def erd_urdf(name):
    return dynamics.load_pinocchio(name).urdf_path


def test_every_four_footed_floating_base_robot_is_available_and_nothing_else():
    names = dynamics.available_robots()
    assert set(QUADRUPEDS) <= set(names)
    # fixed-base arms, humanoids (two feet and two hands) and the toy `quadruped` whose knees
    # are locked at 0 are not quadrupeds this toolkit can stand up
    for other in ("ur5", "panda", "talos", "g1", "bolt", "quadruped", "anymal_kinova"):
        assert other not in names


@pytest.mark.parametrize("name", QUADRUPEDS)
def test_record_resolves_with_a_source_for_every_field(name):
    record = dynamics.robot_record(name)
    check_record(record, resolved=True)
    for field in ("foot_names", "foot_radius", "q_standing", "kp", "kd", "leg_armature",
                  "effort_limit", "velocity_limit", "gait_period", "swing_height"):  # fmt: skip
        assert record.source_of(field), (name, field)
    model = dynamics.load_robot(name)
    assert dynamics.record_of(model) == record
    # feet are ordered FL, FR, HL, HR by where they are, whatever their names
    _, feet = dynamics.frame_placements(model, model.q_standing, model.foot_names)
    base = np.asarray(model.q_standing[:3])
    rel = np.asarray(feet) - base
    assert rel[0, 0] > 0 and rel[1, 0] > 0 and rel[2, 0] < 0 and rel[3, 0] < 0
    assert rel[0, 1] > 0 and rel[2, 1] > 0 and rel[1, 1] < 0 and rel[3, 1] < 0
    # the lowest foot sphere on the ground, the others within 1 cm
    heights = np.asarray(feet[:, 2]) - np.asarray(model.foot_radius)
    assert np.isclose(heights.min(), 0.0, atol=1e-9) and np.all(heights < 0.01)


@pytest.mark.parametrize("name", QUADRUPEDS)
def test_gains_rule_keeps_the_explicit_pd_stable_and_holds_the_weight(name):
    """The derived gains (rule, whatever the record gives): `Kd dt / I_min` at the stated
    margin (stable below 2), and the static sag `tau_g / Kp` below `THETA_SAG`."""
    record = dynamics.robot_record(name)
    model = dynamics.load_robot(name)
    pm = pin.buildModelFromUrdf(erd_urdf(name), pin.JointModelFreeFlyer())
    pm.armature = np.asarray(model.armature, dtype=float)
    q = np.asarray(record.q_standing)
    i_max, i_min, tau_g = rules.leg_load(pm, q, record.foot_names)
    kp, kd = rules.standing_gains(i_max, i_min, tau_g, float(q[2]))
    assert kd * rules.PD_DT / i_min <= rules.EXPLICIT_PD_MARGIN + 1e-12
    assert tau_g / kp <= rules.THETA_SAG + 1e-12
    # tau_g by virtual work: the torque at joint j that holds the feet's loads is
    # sum_feet f . dp_foot/dq_j, the derivative by central differences of the feet's heights
    data, h = pm.createData(), 1e-6
    load = sum(i.mass for i in pm.inertias) * rules.GRAVITY / 4

    def feet_height(qq):
        pin.framesForwardKinematics(pm, data, qq)
        return sum(data.oMf[pm.getFrameId(f)].translation[2] for f in record.foot_names)

    tau = []
    for j in range(7, pm.nq):
        dq = np.zeros(pm.nq)
        dq[j] = h
        tau.append(load * (feet_height(q + dq) - feet_height(q - dq)) / (2 * h))
    assert tau_g == pytest.approx(np.max(np.abs(tau)), rel=1e-6)


def test_derived_gains_are_near_the_measured_ones_of_go2_and_anymal_c():
    """The rule's constants come from Go2 and ANYmal C: applied to them it lands within a
    factor of two of the gains measured to hold them on a 10 degree slope."""
    for name in ("go2", "anymal_c"):
        record = dynamics.robot_record(name)
        model = dynamics.load_robot(name)
        pm = dynamics.load_pinocchio(name).model.copy()
        pm.armature = np.asarray(model.armature, dtype=float)
        q = np.asarray(record.q_standing)
        kp, kd = rules.standing_gains(*rules.leg_load(pm, q, record.foot_names), float(q[2]))
        assert 0.5 < kp / record.kp < 2.0, (name, kp, record.kp)
        assert 0.25 < kd / record.kd < 2.0, (name, kd, record.kd)


def test_gait_sizes_follow_dynamic_similarity():
    """Period ~ sqrt(h / g) and swing height ~ h: Go2's own sizes are the rule's constants,
    and a robot four times as tall has twice the period and four times the swing height."""
    go2 = dynamics.robot_record("go2")
    period, swing = rules.gait_sizes(float(go2.q_standing[2]))
    assert period == pytest.approx(go2.gait_period, rel=0.03)
    assert swing == pytest.approx(go2.swing_height, rel=0.06)
    p4, s4 = rules.gait_sizes(4 * float(go2.q_standing[2]))
    assert p4 == pytest.approx(2 * period) and s4 == pytest.approx(4 * swing)
    for name in NEW_ROBOTS:
        record = dynamics.robot_record(name)
        assert record.source_of("gait_period").startswith("rule")
        assert (record.gait_period, record.swing_height) == rules.gait_sizes(record.q_standing[2])


# ------------------------------------------------------------------ the standing pose rule
@pytest.mark.parametrize("name", QUADRUPEDS)
def test_computed_pose_puts_the_feet_under_the_hips_within_limits(name):
    """The rule's pose, checked with Pinocchio: each foot at its straight leg's x and y, every
    joint within its limits, and each knee bent the way the SRDF bends it (where one exists)."""
    robot = dynamics.load_pinocchio(name)
    pm, record = robot.model, dynamics.robot_record(name)
    q = rules.computed_standing_pose(pm, record.foot_names, name)
    data = pm.createData()
    pin.framesForwardKinematics(pm, data, pin.neutral(pm))
    straight = {f: data.oMf[pm.getFrameId(f)].translation.copy() for f in record.foot_names}
    pin.framesForwardKinematics(pm, data, q)
    for f in record.foot_names:
        foot = data.oMf[pm.getFrameId(f)].translation
        np.testing.assert_allclose(foot[:2], straight[f][:2], atol=1e-5)
        # bent (above the straight leg's foot), yet standing (more than half of it below)
        assert straight[f][2] + 0.01 < foot[2] < 0.5 * straight[f][2]
    assert np.all(q[7:] >= pm.lowerPositionLimit[7:] - 1e-9)
    assert np.all(q[7:] <= pm.upperPositionLimit[7:] + 1e-9)
    if robot.srdf_standing is not None:
        for f in record.foot_names:
            knee = int(pm.idx_qs[rules.leg_chain(pm, pm.getFrameId(f))[-1]])
            assert np.sign(q[knee]) == np.sign(robot.srdf_standing[knee]), (f, q[knee])


# SRDF robots whose SRDF pose the rule reproduces within 2 cm of standing height (MuJoCo,
# 2 s). Unitree's A1, Go1 and B1 SRDFs put the knee at the middle of its range, as the rule
# does; ANYmal (B, C), Go2 and HyQ's SRDFs stand 4-11 cm apart from it (BENCHMARKS.md).
POSE_MATCHES_SRDF = ("a1", "b1", "go1", "solo12", "solo8")


@pytest.mark.parametrize("name", POSE_MATCHES_SRDF)
def test_computed_pose_stands_where_the_srdf_pose_stands(name):
    pytest.importorskip("mujoco")
    from hardware.backends.mujoco_sim import MuJoCoRobot
    from hardware.interface import JointCommand

    model, record = dynamics.load_robot(name), dynamics.robot_record(name)
    pm = dynamics.load_pinocchio(name).model
    q_rule = rules.computed_standing_pose(pm, record.foot_names, name)
    q_rule[2] = rules.standing_base_height(pm, q_rule, record.foot_names, record.foot_radius)

    def settled_height(q0):
        robot = MuJoCoRobot(model.replace(q_standing=q0), q0=q0, command_timeout=100.0)
        command = JointCommand.create(
            np.asarray(q0)[7:], record.kp, record.kd, timestamp=robot.now(), sequence=1, arm=True
        )
        robot.write(command)
        robot.advance(2.0)
        m = robot.read()
        assert np.all(m.foot_force > 0.05 * model.total_mass * 9.81 / 4)  # on four feet
        return float(m.base_position[2])

    srdf_height = settled_height(np.asarray(model.q_standing))
    assert settled_height(q_rule) == pytest.approx(srdf_height, abs=0.02)


def test_robot_without_srdf_gets_the_computed_pose():
    record = dynamics.robot_record("laikago")
    assert record.source_of("q_standing") == "rule: computed_standing_pose"
    assert dynamics.load_pinocchio("laikago").srdf_standing is None


def test_legs_that_cannot_bend_are_a_clear_error():
    """example-robot-data's toy `quadruped` locks its knees at 0 (limits [0, 0]): no standing
    pose with bent knees exists, and the error names the robot, the field and the leg."""
    import example_robot_data.robots_loader as rl

    loader = rl.ROBOTS["quadruped"]
    urdf = os.path.normpath(os.path.join(
        loader.model_path or rl.getModelPath(os.path.join(loader.path, loader.urdf_subpath,
                                                          loader.urdf_filename)),
        loader.path, loader.urdf_subpath, loader.urdf_filename))  # fmt: skip
    with pytest.raises(ValueError, match=r"robot 'quadruped': field 'q_standing': the leg of"):
        dynamics.load_robot(urdf)


# ------------------------------------------------------------------ by path, as a new user
def test_urdf_path_finds_its_srdf_meshes_feet_and_the_same_record():
    """Go1's URDF path alone gives what its name gives: the SRDF pose (from ../srdf/), the
    feet, the meshes under package://example-robot-data/ resolved."""
    urdf = erd_urdf("go1")
    by_path = dynamics.load_robot(urdf)
    by_name = dynamics.load_robot("go1")
    np.testing.assert_allclose(by_path.q_standing, by_name.q_standing)
    assert by_path.foot_names == by_name.foot_names
    record = dynamics.record_of(by_path)
    assert record.source_of("q_standing") == "the SRDF's 'standing' configuration"
    assert (record.kp, record.kd) == (
        dynamics.robot_record("go1").kp,
        dynamics.robot_record("go1").kd,
    )
    visual = dynamics.load_pinocchio(urdf).visual_model
    meshes = [g.meshPath for g in visual.geometryObjects if os.sep in g.meshPath]
    assert meshes and all(os.path.isfile(p) for p in meshes)


def test_a_known_robots_urdf_by_path_does_not_take_its_built_in_record():
    """Go2's URDF by path is a robot the toolkit knows nothing about beyond the URDF: no
    rotor inertia, derived gains; its name is its path, so Go2's record stays Go2's."""
    model = dynamics.load_robot(erd_urdf("go2"))
    record = dynamics.record_of(model)
    assert model.name == os.path.abspath(erd_urdf("go2"))
    assert record.leg_armature == () and record.source_of("kp") == "rule: standing_gains"
    assert dynamics.record_of(dynamics.load_robot("go2")).kp == 80.0


def test_record_file_beside_the_urdf_is_read(tmp_path):
    urdf = tmp_path / "mydog.urdf"
    urdf.write_text(open(erd_urdf("go1")).read())
    (tmp_path / "mydog.robot.toml").write_text(
        textwrap.dedent("""
        kp = 55.0
        kd = 1.25
        leg_armature = [0.005, 0.005, 0.012]
        [sources]
        leg_armature = "motor datasheet"
    """)
    )
    model = dynamics.load_robot(str(urdf))
    record = dynamics.record_of(model)
    assert (record.kp, record.kd) == (55.0, 1.25)
    assert record.source_of("leg_armature") == "motor datasheet"
    assert record.source_of("kp") == "given in mydog.robot.toml"
    np.testing.assert_allclose(np.asarray(model.armature)[6:9], [0.005, 0.005, 0.012])
    # no SRDF beside it: the computed pose, Go1's joints at mid-range (as Go1's SRDF)
    assert record.source_of("q_standing") == "rule: computed_standing_pose"


# ------------------------------------------------------------------ bad input
def leg_urdf(legs: int) -> str:
    """A box body with `legs` two-joint legs around it, each ending in a foot link."""
    parts = [
        '<robot name="legs"><link name="base"><inertial><mass value="5"/>'
        '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>'
    ]
    for i in range(legs):
        angle = 2 * np.pi * (i + 0.5) / legs
        x, y = 0.2 * np.cos(angle), 0.1 * np.sin(angle)
        parts.append(
            textwrap.dedent(f"""
            <link name="thigh{i}"><inertial><mass value="0.5"/><origin xyz="0 0 -0.1"/>
              <inertia ixx="1e-3" iyy="1e-3" izz="1e-4" ixy="0" ixz="0" iyz="0"/></inertial></link>
            <link name="shank{i}"><inertial><mass value="0.2"/><origin xyz="0 0 -0.1"/>
              <inertia ixx="1e-3" iyy="1e-3" izz="1e-4" ixy="0" ixz="0" iyz="0"/></inertial></link>
            <link name="foot{i}"/>
            <joint name="hip{i}" type="revolute"><parent link="base"/><child link="thigh{i}"/>
              <origin xyz="{x} {y} 0"/><axis xyz="0 1 0"/>
              <limit lower="-3" upper="3" effort="20" velocity="20"/></joint>
            <joint name="knee{i}" type="revolute"><parent link="thigh{i}"/><child link="shank{i}"/>
              <origin xyz="0 0 -0.2"/><axis xyz="0 1 0"/>
              <limit lower="-3" upper="3" effort="20" velocity="20"/></joint>
            <joint name="ankle{i}" type="fixed"><parent link="shank{i}"/><child link="foot{i}"/>
              <origin xyz="0 0 -0.2"/></joint>""")
        )
    parts.append("</robot>")
    return "".join(parts)


def test_a_made_up_four_legged_urdf_loads_and_stands(tmp_path):
    path = tmp_path / "box4.urdf"
    path.write_text(leg_urdf(4))
    model = dynamics.load_robot(str(path))
    record = dynamics.record_of(model)
    assert model.nfeet == 4 and record.q_standing[2] > 0.2  # 0.7 of the 0.4 m reach + radius
    assert record.source_of("foot_radius") == "default: DEFAULT_FOOT_RADIUS"


@pytest.mark.parametrize("legs", [3, 5])
def test_three_or_five_feet_is_a_clear_error(tmp_path, legs):
    path = tmp_path / f"legs{legs}.urdf"
    path.write_text(leg_urdf(legs))
    with pytest.raises(
        ValueError,
        match=rf"robot 'legs{legs}': field 'foot_names': a "
        rf"quadruped needs four feet, found {legs}",
    ):
        dynamics.load_robot(str(path))


def test_foot_names_of_the_wrong_count_or_that_do_not_exist():
    with pytest.raises(ValueError, match="robot 'go1': field 'foot_names' must name four feet"):
        dynamics.load_robot("go1", foot_names=("FL_foot", "FR_foot", "RL_foot"))
    with pytest.raises(KeyError, match="robot 'go1': field 'foot_names': foot frame 'paw'"):
        dynamics.load_robot("go1", foot_names=("paw", "FR_foot", "RL_foot", "RR_foot"))


def test_no_floating_base_is_a_clear_error():
    with pytest.raises(ValueError, match="robot 'ur5' has no floating base"):
        dynamics.load_robot("ur5")


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("kp", 0.0, "field 'kp' must be positive"),
        ("kd", -1.0, "field 'kd' must be positive"),
        ("foot_radius", float("nan"), "field 'foot_radius' must be a finite number"),
        ("gait_period", -0.4, "field 'gait_period' must be positive"),
        ("leg_armature", (0.01, -0.01, 0.0), "field 'leg_armature' must be finite values >= 0"),
        ("effort_limit", -5.0, "field 'effort_limit' must be >= 0"),
    ],
)
def test_non_physical_record_fields_are_named(field, value, message):
    with pytest.raises(ValueError, match=f"robot 'dog': {message}"):
        check_record(RobotRecord("dog", **{field: value}), resolved=False)


def test_missing_field_in_a_resolved_record_is_named():
    with pytest.raises(ValueError, match="robot 'dog': field 'foot_names' is missing"):
        check_record(RobotRecord("dog"), resolved=True)


def test_record_file_with_a_bad_or_unknown_field(tmp_path):
    urdf = tmp_path / "pup.urdf"
    urdf.write_text(open(erd_urdf("go1")).read())
    toml = tmp_path / "pup.robot.toml"
    toml.write_text("kp = 0.0\n")
    with pytest.raises(ValueError, match="robot 'pup': field 'kp' must be positive"):
        dynamics.load_robot(str(urdf))
    toml.write_text("stiffness = 3.0\n")
    with pytest.raises(
        ValueError, match=r"robot 'pup': record file .* unknown fields \['stiffness'\]"
    ):
        dynamics.robot_record(str(urdf))


def test_negative_mass_in_the_urdf_is_named(tmp_path):
    path = tmp_path / "heavy.urdf"
    path.write_text(leg_urdf(4).replace('<mass value="5"/>', '<mass value="-5"/>'))
    with pytest.raises(ValueError, match="robot 'heavy': field 'body_mass'"):
        dynamics.load_robot(str(path))
