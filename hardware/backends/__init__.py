"""Robots behind `hardware.interface.RobotInterface`.

`jax_sim.SimRobot`: this project's contact simulator. `mujoco_sim.MuJoCoRobot`: MuJoCo on the
model generated from the same robot (`mujoco_disturbances.DisturbedMuJoCoRobot`: with a payload,
friction, command latency and pushes). `udp.UdpRobot`: a remote robot over UDP (`wire` is the
message layout; `hardware.robot_server` serves a simulated robot). The Go2 over its DDS topics
is `hardware.go2`. Imported lazily: each module pulls in only its own dependencies (JAX,
MuJoCo, sockets).
"""
