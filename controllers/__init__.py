"""Controllers: joint PD, and the hardware control interface (MPC and policies plug into it).

- `pd`: joint PD with torque limits (pure JAX, the actuator model of the simulations).
- `interface`: `Measurement`, `JointCommand`, `VelocityCommand`, `JointMap` (conventions), the
  `RobotInterface` and `Controller` protocols.
- `pose.PoseController`, `policy_adapter.PolicyController`,
  `state_feedback.StateFeedbackController`: a fixed pose, a neural policy, a full-state planner
  (MPC) as controllers.
- `safety.SafetyLayer`: limits, NaN guard, rate limits, watchdogs to damping, soft start, e-stop.
- `control_loop.run`: controller rate, command rate, timing statistics; simulated or wall clock.
- `motor.MotorDriver`: the robot side (drivers' PD and watchdog) of the simulated robots.
- `backends`: `jax_sim.SimRobot`, `mujoco_sim.MuJoCoRobot`, `udp.UdpRobot` (+ `wire` layout);
  `robot_server`: a simulated robot process behind UDP. `faults`: fault injection.
"""

from .interface import (
    Controller,
    JointCommand,
    JointMap,
    Measurement,
    RobotInterface,
    RobotMode,
    VelocityCommand,
)
from .pd import DEFAULT_GAINS, default_gains, joint_state, pd_torque, standing_controller
from .pose import PoseController
from .safety import SafetyConfig, SafetyLayer

__all__ = [
    "DEFAULT_GAINS",
    "Controller",
    "JointCommand",
    "JointMap",
    "Measurement",
    "PoseController",
    "RobotInterface",
    "RobotMode",
    "SafetyConfig",
    "SafetyLayer",
    "VelocityCommand",
    "default_gains",
    "joint_state",
    "pd_torque",
    "standing_controller",
]
