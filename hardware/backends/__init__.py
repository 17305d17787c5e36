"""Robots behind `hardware.interface.RobotInterface`.

`jax_sim.SimRobot`: this project's contact simulator. `mujoco_sim.MuJoCoRobot`: MuJoCo on the
model generated from the same robot (`mujoco_disturbances.DisturbedMuJoCoRobot`: with a payload,
friction, command latency and pushes). `udp.UdpRobot`: a remote robot over UDP (`wire` is the
message layout; `hardware.robot_server` serves a simulated robot).
`unitree_go2.Go2Robot`: a Unitree Go2 over Unitree SDK 2's DDS topics (`unitree_msgs` are the
message types and the CRC; `hardware.go2_sim` is a simulated Go2 on the same
topics; needs the `go2` extra). Imported lazily: each module pulls in only its own
dependencies (JAX, MuJoCo, sockets, Cyclone DDS).
"""
