"""PPO, the zeroth-order baseline: the same environment, policy network and observation as the
analytic-gradient training (`learning.shac`), gradients only of the surrogate objective, never
through the simulator. Split as Brax splits its agents.

- `networks`: `ActorCritic` (the deployable policy as the action mean, a state-independent
  log standard deviation, a value MLP) and the Gaussian log-density.
- `losses`: GAE(lambda) advantages and the clipped surrogate loss.
- `train`: `PPOConfig`, the compiled iteration (`make_iteration`) and the loop `train_ppo`.

    from learning.ppo import train as ppo
    policy, history = ppo.train_ppo(env, ppo.PPOConfig(num_envs=64), iterations=200)

Nothing is imported here.
"""
