"""Controllers, in three rooms:

- here, at the top: the MPC (`mpc.MPC`: receding-horizon FDDP), its closed loop against our
  simulator (`closed_loop.run_mpc`) and its adapter to the hardware interface
  (`state_feedback.StateFeedbackController`, `mpc_controller`). May import `dynamics`,
  `contact`, `trajopt` and `hardware`.
- `hardware/`: the robot control interface (`interface`), safety layer, control loop, robot
  process, fault injection, motor drivers, timing and the robot backends (our simulator,
  MuJoCo, UDP). May import `dynamics` and `contact` only: never the MPC or learning.
- `learning/`: neural policies (`policy`), their adapter to the hardware interface
  (`policy_adapter`), export and the NumPy runner, and `training/` (SHAC, PPO, distillation).
  May import `dynamics`, `contact`, `trajopt`, `hardware` and the MPC (distillation).

The joint PD actuator model is part of the plant, not a controller: `dynamics.actuator`.
Nothing is imported here, so `import hardware.interface` stays light.
"""
