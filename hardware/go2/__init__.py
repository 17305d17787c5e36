"""A Unitree Go2 over its own low-level protocol (Unitree SDK 2's DDS topics), and a simulated
Go2 on the same topics. Needs the `go2` extra (Cyclone DDS 0.10.2; README, "Go2"). Nothing is
imported here: import the module you need.

- `messages`: the IDL message types (`LowCmd_`, `LowState_`, `SportModeState_`, the RPC's
  `Request_` / `Response_`, our `Step_`) and the header constants.
- `codec`: the types' byte layouts: zero samples, the C struct the CRC covers, the one-call
  XCDR1 encoder and decoder (`fast_cdr`).
- `crc`: the LowCmd_ / LowState_ CRC.
- `dds`: Cyclone DDS set-up: domain and participant on a network interface, topic names,
  readers and writers (the client's and the simulator's).
- `conversions`: messages <-> `Measurement` / `JointCommand`: SDK slot order, quaternion
  order, remote buttons.
- `motion_switcher`: the motion-switcher client that releases sport mode.
- `robot`: `Go2Robot`, the `RobotInterface` of a Go2 (real time), and `LockstepGo2Robot`
  (robot time, against our simulated Go2 only).
- `sim`: the simulated Go2 process, `python -m hardware.go2.sim` (MuJoCo or our simulator).
"""
