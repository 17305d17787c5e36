"""The hardware control interface: what runs between a controller and a robot.

- `interface`: `Measurement`, `JointCommand`, `VelocityCommand`, `JointMap` (conventions), the
  `RobotInterface` and `Controller` protocols. `pose.PoseController`: a fixed pose;
  `pose.StandUpController`: stand up from the measured pose.
- `safety.SafetyLayer`: limits, NaN guard, rate limits, watchdogs to damping, soft start, e-stop;
  its command shaping compiled (`safety_kernel`, `safety_shape.c`) where a C compiler is found.
- `control_loop.run`: controller rate, command rate, timing statistics (`timing`); simulated or
  wall clock.
- `motor.MotorDriver`: the robot side (drivers' PD and watchdog) of the simulated robots.
- `backends`: `jax_sim.SimRobot`, `mujoco_sim.MuJoCoRobot`, `udp.UdpRobot` (+ `wire` layout);
  `robot_server`: a simulated robot process behind UDP (`python -m
  hardware.robot_server`). `faults`: fault injection.
- `go2`: a Unitree Go2 over its DDS topics (`go2.robot.Go2Robot`) and a simulated Go2 process
  on them (`python -m hardware.go2.sim`); needs the `go2` extra.
- `command_process`: the high-rate path in a process of its own, the controller behind shared
  memory (`shared_state`); `busy_load`: busy processes, a stand-in for a busier computer.
- `estimator`, `estimated_robot`: the base state from the IMU and leg kinematics; the filter's
  arithmetic compiled (`estimator_core`, `estimator_filter.c`) where a C compiler is found.
  The C is built as the project builds its generated C (`native.c_library`).
- `steering`: velocity commands from the remote's sticks or ROS 2's `cmd_vel` (`ros2_types`).

May import `native`, `dynamics` and `contact` (the simulated backends), never `trajopt`, the MPC or
`learning`: controllers plug in through the `Controller` protocol.
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
from .pose import PoseController, StandUpController
from .safety import SafetyConfig, SafetyLayer

__all__ = [
    "Controller",
    "JointCommand",
    "JointMap",
    "Measurement",
    "PoseController",
    "RobotInterface",
    "RobotMode",
    "SafetyConfig",
    "SafetyLayer",
    "StandUpController",
    "VelocityCommand",
]
