"""Learned locomotion policies: the network, its training, export and deployment.

- `policy`: the equinox MLP and the observation/action conventions shared by training,
  evaluation and deployment (`save_policy`, `load_policy`).
- `policy_adapter.PolicyController`: a policy as a `hardware` `Controller`.
- `policy_export`: weights + conventions + a standalone NumPy runner (`numpy_policy_runner`,
  NumPy alone, for a robot computer) + ONNX.
- `training/`: the differentiable environment (`env`), SHAC (`shac`), PPO (`ppo`),
  checkpoints, and distillation from trajectory optimisation and the MPC (`distill`).

May import `dynamics`, `contact`, `trajopt`, `hardware` (the interface) and the MPC
(`controllers.mpc`, `controllers.closed_loop`: distillation's expert). Nothing is imported
here: the modules pull in JAX, equinox or ONNX only when used.
"""
