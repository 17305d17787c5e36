"""Learned locomotion policies: the network, its training, distillation, export and deployment.

- `policy`: the equinox MLP and the observation/action conventions shared by training,
  evaluation and deployment (`save_policy`, `load_policy`).
- `policy_adapter.PolicyController`: a policy as a `hardware` `Controller`.
- `policy_export`: weights + conventions + a standalone NumPy runner (`numpy_policy_runner`,
  NumPy alone, for a robot computer) + ONNX.
- `env`: the differentiable training environment (`LocomotionEnv`: `reset`, `step`,
  `observe`, pure and jit/vmap/grad-able), assembled from `env_core` (physics, reward,
  observation, termination) and the wrappers of `env_wrappers` (domain randomisation, pushes,
  observation noise, auto-reset) under the contract of `env_contract` (Brax's `reset`/`step`);
  its settings in `env_config`.
- `trainer`: one signature for every trainer, `train(env, config, progress_fn) -> (policy,
  metrics)`; `brax_adapter`: our environment as a `brax.envs.Env` and Brax's PPO as a trainer
  (the `brax` extra).
- `plant`: the plant of distillation and of its evaluation (`contact.step` under the MPC's
  joint PD at the policy's rate).
- `evaluation`: a policy alone, rolled out and scored (tracking errors, falls), in the
  environment or the plant: the one evaluation of every trainer.
- `deployment`: an exported policy on a robot: conventions check, controller, start-up,
  command schedule, the randomised MuJoCo tour with the state estimator and its verdict
  (`run_tour`, `tour_check`).
- `go2_deployment`: a controller (the stand, a policy, the real-time MPC) on a Go2 over DDS
  (`run_go2`, behind `examples/deploy_go2.py`), with its deployment log.
- `pipeline`: from a robot to a deployable, checked policy in resumable stages
  (`make_policy`, behind `examples/make_policy.py`).
- `shac/`: short-horizon actor-critic through the simulator (`networks`, `losses`, `train`,
  `recipe`: train, evaluate and export).
- `ppo/`: PPO, the zeroth-order baseline (`networks`, `losses`, `train`).
- `distill/`: data from trajectory optimisation (`dataset`), the MPC expert (`expert`),
  behaviour cloning, DART and DAgger (`cloning`), the whole distillation (`recipe`).
- `checkpoint`: atomic checkpoints of a training state; `metrics_log.MetricsLog`: a trainer's
  `progress_fn` that writes `metrics.json` / `metrics.csv` as training goes.

A top-level package, the last layer: it may import `dynamics`, `contact`, `hardware`,
`trajopt` and `controllers` (the MPC is distillation's expert), and nothing imports it but
`viz`. Nothing is imported here: the modules pull in JAX, equinox or ONNX only when used.
"""
