"""Robots behind `controllers.hardware.interface.RobotInterface`.

`jax_sim.SimRobot`: this project's contact simulator. `mujoco_sim.MuJoCoRobot`: MuJoCo on the
model generated from the same robot. `udp.UdpRobot`: a remote robot over UDP (`wire` is the
message layout; `controllers.hardware.robot_server` serves a simulated robot). Imported lazily: each
module pulls in only its own dependencies (JAX, MuJoCo, sockets).
"""
