"""Distillation: trajectory optimisation and an MPC expert into a policy (the warm start of
training).

- `dataset`: `Dataset` (observation/action pairs) and `build_dataset`, the pairs of solved
  trajectory problems over a grid of commands and gaits.
- `expert`: the MPC expert's runs of the plant (`expert_run`), every state labelled with its
  action, and the names they are saved under.
- `cloning`: behaviour cloning, DART (`expert_rollouts`) and DAgger (`dagger`,
  `failure_runs`) with that expert.

    from learning.distill import cloning, dataset
    data = dataset.build_dataset("go2", dataset.commands_grid(vx=(0, 0.5)), folder="data/go2")
    policy, report = cloning.behaviour_cloning(Policy.create(key, nu), data)

The plant they run in is `learning.plant.Plant`; the policy alone is scored by
`learning.evaluation.evaluate_policy`. Nothing is imported here.
"""
