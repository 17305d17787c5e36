"""Policy training: distillation from trajectories and the MPC, and SHAC in a differentiable
environment.

- `env`: `EnvConfig`, `LocomotionEnv` (`reset`, `step`, `observe`: pure, jit/vmap/grad-able,
  domain randomisation as traced per-environment parameters, auto-reset).
- `shac`: `SHACConfig`, `train` (short-horizon actor-critic, progress bar, metrics,
  checkpoints, resume), `evaluate`.
- `checkpoint`: atomic checkpoints of a training state; `load_latest` for resuming.
- `distill`: dataset from trajectory optimisation, behaviour cloning, DAgger with the MPC.
"""

from .env import EnvConfig, EnvState, LocomotionEnv, Randomization, RewardWeights
from .shac import SHACConfig, TrainResult, TrainState, evaluate, init_state, train

__all__ = [
    "EnvConfig",
    "EnvState",
    "LocomotionEnv",
    "Randomization",
    "RewardWeights",
    "SHACConfig",
    "TrainResult",
    "TrainState",
    "evaluate",
    "init_state",
    "train",
]
