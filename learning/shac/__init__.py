"""Short-Horizon Actor-Critic (SHAC): policy gradients by backpropagation through the
differentiable environment (`learning.env`), split as Brax splits its agents.

- `networks`: the critic `V(obs)` beside the policy (`learning.policy.Policy`).
- `losses`: the actor loss of a rollout (the short-horizon return, optionally bootstrapped by
  the target critic), its gradient, TD(lambda) targets and the critic's loss.
- `train`: `SHACConfig`, `TrainState`, the compiled iteration and the training loop `train`
  (progress bar, `progress_fn`, checkpoints, resume, devices).

    from learning.shac import train as shac
    result = shac.train(shac.SHACConfig(...), iterations=500, progress_fn=MetricsLog(folder))

Nothing is imported here.
"""
