"""Training runs for tests/learning/test_sharded_training.py, each in its own process (the
number of fake CPU devices is fixed when JAX starts:
`XLA_FLAGS=--xla_force_host_platform_device_count`).

    python tests/sharded_runs.py ppo  --devices 1 2 4 --out DIR
    python tests/sharded_runs.py shac --devices 1 2 4 --iterations 3 --out DIR
                                     [--resume-from 4 --resume-to 2 --checkpoint-dir D]
    python tests/sharded_runs.py ppo  --devices 4 --out DIR --coordinator 127.0.0.1:PORT
                                     --num-processes 2 --process-id I

Each run writes `DIR/{algo}_d{devices}[_p{process}].npz`: the trained policy's (PPO) or the
whole training state's (SHAC) array leaves (`leaf_0`, ...) and per-iteration metrics, plus
`shards`: PPO, the number of devices the model lived on after each iteration; SHAC, the
per-device batch of the placed environment state. With `--resume-from A --resume-to B`
(SHAC), also `shac_resume_dA_dB[_p{process}].npz`: `iterations - 1` iterations on A devices
with a checkpoint at the end, then a resumed run to `iterations` on B devices (in the same
process, so the compiled iterations of the runs above are reused).
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "learning"))  # test_ppo's toy problem

# tiny problems: the point is the code path and the equality of results, not learning
PPO = dict(num_envs=8, rollout_steps=5, epochs=2, minibatches=2, learning_rate=3e-3,
           hidden=(16, 16), init_log_std=-0.5)  # fmt: skip
SHAC = dict(num_envs=4, horizon=2, critic_iterations=1, critic_minibatches=2,
            critic_hidden=(16, 16), policy_hidden=(16, 16), fast_compile=True)  # fmt: skip


def _leaves(tree):
    import equinox as eqx
    import jax
    import numpy as np

    return [np.asarray(x) for x in jax.tree.leaves(eqx.filter(tree, eqx.is_array))]


def _save(path, policy, metrics, shards):
    import numpy as np

    arrays = {f"leaf_{i}": x for i, x in enumerate(_leaves(policy))}
    keys = sorted(k for k in metrics[0] if k not in ("wall_time", "env_steps_per_s"))
    arrays["metric_names"] = np.array(keys)
    arrays["metrics"] = np.array([[float(m[k]) for k in keys] for m in metrics])
    arrays["shards"] = np.array(shards)
    np.savez(path, **arrays)


def run_ppo(devices: int, out: str, suffix: str) -> None:
    import jax
    import jax.numpy as jnp
    from test_ppo import ReachTarget

    from learning.policy import Policy
    from learning.ppo import train as ppo

    config = ppo.PPOConfig(**PPO)
    policy = Policy.create(jax.random.PRNGKey(0), 1, hidden=config.hidden, dtype=jnp.float64)
    seen = []

    def callback(model, record):
        seen.append(len(model.policy.normalizer.mean.sharding.device_set))

    trained, history = ppo.train_ppo(ReachTarget(), config, iterations=4, policy=policy,
                                     quiet=True, devices=devices, callback=callback)  # fmt: skip
    _save(os.path.join(out, f"ppo_d{devices}{suffix}.npz"), trained, history, seen)


def run_shac(args, devices: int, suffix: str) -> None:
    import jax
    import jax.numpy as jnp

    from learning.env import EnvConfig
    from learning.policy import Policy
    from learning.shac import train as shac
    from trajopt import sharding

    config = shac.SHACConfig(env=EnvConfig(robot="solo12"), **SHAC)
    policy = Policy.create(jax.random.PRNGKey(0), 12, hidden=config.policy_hidden,
                           dtype=jnp.float64, final_scale=0.3)  # fmt: skip
    result = shac.train(config, policy, iterations=args.iterations, quiet=True, devices=devices)
    # the per-device batch the compiled iteration sees when the state is placed on the mesh
    mesh = sharding.make_mesh(devices)
    placed = shac.shard_state(shac.init_state(config, policy), mesh)
    shards = [s.data.shape[0] for s in placed.env.sim.q.addressable_shards]
    _save(os.path.join(args.out, f"shac_d{devices}{suffix}.npz"), result.state, result.metrics,
          shards)  # fmt: skip


def run_shac_resume(args, suffix: str) -> None:
    import jax
    import jax.numpy as jnp

    from learning.env import EnvConfig
    from learning.metrics_log import MetricsLog
    from learning.policy import Policy
    from learning.shac import train as shac

    config = shac.SHACConfig(env=EnvConfig(robot="solo12"), **SHAC)
    policy = Policy.create(jax.random.PRNGKey(0), 12, hidden=config.policy_hidden,
                           dtype=jnp.float64, final_scale=0.3)  # fmt: skip
    first = args.iterations - 1
    shac.train(config, policy, iterations=first, quiet=True, devices=args.resume_from,
               checkpoint_dir=args.checkpoint_dir, checkpoint_every=first,
               progress_fn=MetricsLog(args.checkpoint_dir))  # fmt: skip
    rest = shac.train(config, policy, iterations=args.iterations, quiet=True,
                      devices=args.resume_to, checkpoint_dir=args.checkpoint_dir,
                      resume=True, progress_fn=MetricsLog(args.checkpoint_dir))  # fmt: skip
    name = f"shac_resume_d{args.resume_from}_d{args.resume_to}{suffix}.npz"
    _save(os.path.join(args.out, name), rest.state, rest.metrics, [args.resume_to])


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("algo", choices=("ppo", "shac"))
    p.add_argument("--devices", type=int, nargs="+", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--checkpoint-dir")
    p.add_argument("--resume-from", type=int)
    p.add_argument("--resume-to", type=int)
    p.add_argument("--coordinator")
    p.add_argument("--num-processes", type=int)
    p.add_argument("--process-id", type=int)
    args = p.parse_args(argv)

    from trajopt import sharding

    distributed = sharding.initialize_distributed(args.coordinator, args.num_processes,
                                                  args.process_id)  # fmt: skip
    import jax

    import dynamics  # noqa: F401  (float64, as in the test suite)

    jax.config.update("jax_numpy_rank_promotion", "raise")
    suffix = f"_p{jax.process_index()}" if distributed else ""
    for devices in args.devices:
        if args.algo == "ppo":
            run_ppo(devices, args.out, suffix)
        else:
            run_shac(args, devices, suffix)
    if args.resume_from is not None:
        run_shac_resume(args, suffix)
    print("done", jax.process_index(), jax.device_count(), flush=True)


if __name__ == "__main__":
    main()
