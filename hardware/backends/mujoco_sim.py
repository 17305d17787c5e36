"""MuJoCo, an independent engine, as a robot: the MJCF generated from the same `dynamics.Model`.

    robot = MuJoCoRobot(dynamics.load_robot("go2"), timestep=0.002)
    robot.write(command); robot.advance(0.02); measurement = robot.read()

The model is `dynamics.mjcf.to_mjcf` (same inertias, foot spheres, friction; gear-1 motors in
the model's actuated joint order, `ctrlrange` = the effort limits; the trunk and leg shapes
touching the floor, `body_collisions=True`, unless `mjcf_options` turns them off) plus an IMU:
a site at the base origin with the base's axes, carrying MuJoCo's `framequat`, `gyro`,
`accelerometer`, `velocimeter` and `framepos` sensors, and `jointpos`/`jointvel`/`actuatorfrc`
sensors on every actuated joint. Measurements are read from those sensors (after
`mj_forward`, so they belong to the current state), not from `qpos`/`qvel`: a test compares
them with the model's own state mapping, which checks the conventions of `hardware.interface`
against MuJoCo's.

`foot_force (4,)` [N] is each foot's normal contact force: `mujoco.mj_contactForce` (the
contact-frame force whose first component is the normal one) summed over the contacts of that
foot's sphere geom, feet in the model's foot order; zero for a foot in the air.
`base_state_source` is "ground_truth" (the velocimeter and position sensors are exact).

The ground is a `contact.terrain` terrain (`terrain`; default: the flat floor through the
origin, `to_mjcf`'s), converted by `contact.mjcf_terrain.ground_elements`: a plane, stair boxes
or a height field with the terrain's friction, which MuJoCo then uses for every ground contact.

The drivers' PD (`hardware.motor.MotorDriver`) runs at every MuJoCo step (`timestep`) on
the joint positions and velocities, its torque written to `ctrl`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from contact.mjcf_terrain import ground_elements
from contact.terrain import Terrain
from dynamics.mjcf import qpos_from_q, qvel_from_v, to_mjcf
from dynamics.model import Model

from ..interface import JointMap, Measurement
from ..motor import MotorDriver
from .driven import DrivenRobot

IMU_SITE = "imu"
_BASE_SENSORS = (  # name, MuJoCo sensor type, dimension
    ("imu_quat", "mjSENS_FRAMEQUAT", 4),
    ("imu_gyro", "mjSENS_GYRO", 3),
    ("imu_accelerometer", "mjSENS_ACCELEROMETER", 3),
    ("imu_velocimeter", "mjSENS_VELOCIMETER", 3),
    ("imu_position", "mjSENS_FRAMEPOS", 3),
)


def mujoco_robot_model(model: Model, terrain: Terrain | None = None, **mjcf_options):
    """`mujoco.MjModel` of `to_mjcf(model, **mjcf_options)` with the IMU and joint sensors, on
    `terrain` (None: `to_mjcf`'s floor; else its `ground_elements`)."""
    import mujoco

    if terrain is not None:
        mjcf_options = {**mjcf_options, "ground": ground_elements(terrain)}
    spec = mujoco.MjSpec.from_string(to_mjcf(model, actuators="motor", **mjcf_options))
    base = spec.body(model.joint_names[0])
    base.add_site(name=IMU_SITE, pos=[0.0, 0.0, 0.0], quat=[1.0, 0.0, 0.0, 0.0])
    for name, kind, _ in _BASE_SENSORS:
        spec.add_sensor(
            name=name,
            type=getattr(mujoco.mjtSensor, kind),
            objtype=mujoco.mjtObj.mjOBJ_SITE,
            objname=IMU_SITE,
        )
    for joint in model.actuated_joint_names:
        for suffix, kind in (("pos", "mjSENS_JOINTPOS"), ("vel", "mjSENS_JOINTVEL")):
            spec.add_sensor(
                name=f"{joint}_{suffix}",
                type=getattr(mujoco.mjtSensor, kind),
                objtype=mujoco.mjtObj.mjOBJ_JOINT,
                objname=joint,
            )
        spec.add_sensor(
            name=f"{joint}_torque",
            type=mujoco.mjtSensor.mjSENS_ACTUATORFRC,
            objtype=mujoco.mjtObj.mjOBJ_ACTUATOR,
            objname=joint,
        )
    return spec.compile()


class MuJoCoRobot(DrivenRobot):
    """A `SimulatedRobot` on MuJoCo (see module docstring).

    Args:
        model: the robot.
        timestep: MuJoCo time step [s] = the drivers' PD period.
        friction: Coulomb coefficient of feet and ground; None: the terrain's (0.8 on the
            default floor); a number with a `terrain` replaces the terrain's friction.
        terrain: the ground, a `contact.terrain` Plane, Steps (finite `num_steps`), Terraces
            or Heightfield; None: the flat floor (or `mjcf_options`' `floor_incline`).
        q0, v0: initial state in the model's convention (default: standing pose at rest).
        joint_map: default `JointMap.from_model(model)`.
        mjcf_options: further `to_mjcf` options (e.g. `floor_incline`; `body_collisions`
            defaults to True here: a robot that falls lies on its trunk).
        driver: keyword arguments of `MotorDriver` (command_timeout, max_command_age, damping_kd).
    """

    def __init__(
        self,
        model: Model,
        *,
        timestep: float = 0.002,
        friction: float | None = None,
        terrain: Terrain | None = None,
        q0=None,
        v0=None,
        joint_map: JointMap | None = None,
        mjcf_options: dict | None = None,
        **driver,
    ):
        import mujoco

        self._mujoco = mujoco
        self.model = model
        self.joint_map = jm = joint_map or JointMap.from_model(model)
        options = {"body_collisions": True, **(mjcf_options or {})}
        if terrain is not None and friction is not None:
            terrain = dataclasses.replace(terrain, friction=np.asarray(friction, dtype=float))
        if friction is None:
            friction = 0.8 if terrain is None else float(terrain.friction)
        self.terrain = terrain
        self.mj = mujoco_robot_model(model, terrain, timestep=timestep, friction=friction,
                                     **options)  # fmt: skip
        self.data = mujoco.MjData(self.mj)
        self.dt = float(self.mj.opt.timestep)
        self.driver = MotorDriver(jm, **driver)
        joints = [self.mj.joint(n) for n in jm.names]
        self._qpos_adr = np.array([j.qposadr[0] for j in joints])
        self._dof_adr = np.array([j.dofadr[0] for j in joints])
        self._actuators = np.array([self.mj.actuator(n).id for n in jm.names])

        def span(name):
            sensor = self.mj.sensor(name)
            return slice(sensor.adr[0], sensor.adr[0] + sensor.dim[0])

        self._base = {name: span(name) for name, _, _ in _BASE_SENSORS}
        self._joint = {
            s: np.array([self.mj.sensor(f"{n}_{s}").adr[0] for n in jm.names])
            for s in ("pos", "vel", "torque")
        }
        self._foot_geoms = {self.mj.geom(n).id: k for k, n in enumerate(model.foot_names)}
        q = np.asarray(model.q_standing if q0 is None else q0, dtype=float)
        v = np.zeros(model.nv) if v0 is None else np.asarray(v0, dtype=float)
        self.set_state(q, v)
        self.steps = 0
        self.sequence = 0

    def base_joint_addresses(self) -> tuple[int, int] | None:
        """`(qpos address, dof address)` of the base's free joint (MuJoCo's layout: position,
        quaternion `(w, x, y, z)`; world-frame linear velocity, body-frame angular velocity);
        None for a base without one."""
        joint = self.mj.body_jntadr[self.mj.body(self.model.joint_names[0]).id]
        if joint < 0 or self.mj.jnt_type[joint] != self._mujoco.mjtJoint.mjJNT_FREE:
            return None
        return int(self.mj.jnt_qposadr[joint]), int(self.mj.jnt_dofadr[joint])

    def set_state(self, q, v) -> None:
        """Set MuJoCo's state from the model's `q (nq,)`, `v (nv,)` (no time change)."""
        self.data.qpos[:] = qpos_from_q(self.model, q)
        self.data.qvel[:] = qvel_from_v(self.model, v, q)
        self.data.ctrl[:] = 0.0
        self._mujoco.mj_forward(self.mj, self.data)

    def foot_forces(self) -> np.ndarray:
        """`(num_feet,)` [N]: the normal force of each foot's contacts (model foot order), from
        the current contacts (call after `mj_forward` or `mj_step`)."""
        forces = np.zeros(len(self._foot_geoms))
        wrench = np.zeros(6)
        for i in range(self.data.ncon):
            contact = self.data.contact[i]
            for geom in (contact.geom1, contact.geom2):
                foot = self._foot_geoms.get(int(geom))
                if foot is not None:
                    self._mujoco.mj_contactForce(self.mj, self.data, i, wrench)
                    forces[foot] += wrench[0]  # contact frame: normal first
        return forces

    # ------------------------------------------------------------- RobotInterface
    def read(self) -> Measurement:
        self._mujoco.mj_forward(self.mj, self.data)
        s = self.data.sensordata
        quat_wxyz = s[self._base["imu_quat"]]
        self.sequence += 1
        return Measurement(
            timestamp=self.now(),
            sequence=self.sequence,
            joint_q=s[self._joint["pos"]].copy(),
            joint_qd=s[self._joint["vel"]].copy(),
            base_quat=quat_wxyz[[1, 2, 3, 0]].copy(),
            base_angular_velocity=s[self._base["imu_gyro"]].copy(),
            base_linear_acceleration=s[self._base["imu_accelerometer"]].copy(),
            joint_tau=s[self._joint["torque"]].copy(),
            base_linear_velocity=s[self._base["imu_velocimeter"]].copy(),
            base_position=s[self._base["imu_position"]].copy(),
            robot_mode=self.driver.mode,
            foot_force=self.foot_forces(),
            base_state_source="ground_truth",
        )

    # ------------------------------------------------------------- SimulatedRobot
    def _before_step(self) -> None:
        """Called before each MuJoCo step of `advance` (a subclass's disturbances)."""

    def advance(self, duration: float) -> None:
        """Simulate `duration` [s] (a multiple of `timestep`), the PD at every step."""
        n = self.steps_in(duration)
        d, mj, step = self.data, self.mj, self._mujoco.mj_step
        for _ in range(n):
            self._before_step()
            q, qd = d.qpos[self._qpos_adr], d.qvel[self._dof_adr]
            d.ctrl[self._actuators] = self.driver.torque(q, qd, self.now())
            step(mj, d)
            self.steps += 1
