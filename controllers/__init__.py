"""Controllers: the receding-horizon MPC and the ways it runs.

- `mpc`: the MPC (`mpc.MPC`: receding-horizon FDDP on a `trajopt` problem).
- `realtime_mpc`: its real-time runner (`RealTimeMPC`, `realtime_mpc_controller`): a solver
  replans from the newest measurement while every controller call applies the newest plan.
- `mpc_process`: its solver process (`SolverProcess`), the solves away from the command loop.
- `closed_loop`: its closed loop against our simulator in simulated time (`run_mpc`).
- `state_feedback`: its adapter to the hardware interface (`StateFeedbackController`,
  `mpc_controller`).

Layers: `dynamics -> contact -> {hardware, trajopt} -> controllers -> learning`; `viz` draws any
of them. This package may import `dynamics`, `contact`, `hardware` and `trajopt`, never
`learning` or `viz`. The robot control interface lives in the top-level `hardware` package, the
neural policies in `learning`; the joint PD actuator model is part of the plant, not a
controller: `dynamics.actuator`. Nothing is imported here, so `import controllers.closed_loop`
loads only what it needs.
"""
