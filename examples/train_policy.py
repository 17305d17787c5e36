"""Train a velocity-tracking policy with SHAC through the differentiable simulator.

    python examples/train_policy.py --robot go2 --iterations 200 --envs 64 --horizon 32
    python examples/train_policy.py --robot go2 --iterations 400 --resume      # continue a run
    python examples/train_policy.py --init results/distill_go2/policy.eqx   # distilled start
    python examples/train_policy.py --envs 4096 --devices 8 --dtype float32  # 512 per device
    python examples/train_policy.py --gait-period 0.4     # the policy also observes a gait clock
    python examples/train_policy.py --terrain tiles       # blind, on rough-ground tiles

`--envs` is the global batch, split over `--devices` devices (default: all that JAX sees) by
`learning.shac.train.train`. Several hosts: run the same command on each with
`--coordinator HOST:PORT --num-processes N --process-id I` (or the environment variables
`DIFFLOCO_COORDINATOR`, `DIFFLOCO_NUM_PROCESSES`, `DIFFLOCO_PROCESS_ID`); process 0 writes
the checkpoints, the policy and the report.

Environments: `learning.env` (commands vx in [-1, 1] m/s, vy in [-0.5, 0.5]
m/s, yaw rate in [-1, 1] rad/s, domain randomisation of payload, friction, PD gains, latency and
pushes; `--no-randomization` turns it off). `--terrain tiles`: the environments walk the tiles
of one height field (`contact.terrain_tiles`: `--terrain-kinds`, `--terrain-levels` levels of
difficulty, `--tile-size`, `--cell-size`) under the terrain curriculum
(`learning.env_terrain.TerrainCurriculum`, starting at levels up to `--max-initial-level`),
blind; the metrics then have the mean curriculum level (`terrain_level`). Checkpoints every
`--checkpoint-every` iterations in `<out>/checkpoints/`, with `metrics.json`/`metrics.csv`
beside them written after every iteration (`learning.metrics_log.MetricsLog`); `--resume`
continues from the newest one bit for bit. At the end: the policy (`<out>/policy.eqx`,
`learning.policy.load_policy`), its NumPy/ONNX export (`<out>/export/`, if
`learning.policy_export` is available) and an evaluation on fixed commands.
"""

from __future__ import annotations

import argparse
import shlex
import sys

import numpy as np

from contact.terrain_tiles import KINDS, TileLayout
from learning.env_config import TerrainConfig
from learning.shac.recipe import train_policy
from trajopt import sharding


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--robot", default="go2")
    p.add_argument("--iterations", type=int, default=100, help="total SHAC iterations")
    p.add_argument("--envs", type=int, default=64, help="parallel environments")
    p.add_argument("--horizon", type=int, default=32, help="policy steps per iteration")
    p.add_argument("--contact", choices=("smooth", "penalty"), default="smooth")
    p.add_argument("--out", default="results/shac")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    p.add_argument(
        "--init",
        default=None,
        help="start from a saved policy (save_policy file or exported folder)",
    )
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--no-randomization", action="store_true")
    p.add_argument("--lr", type=float, default=1e-3, help="actor learning rate")
    p.add_argument(
        "--critic-bootstrap",
        action="store_true",
        help="add the critic's value at the horizon to the actor loss (SHAC proper)",
    )
    p.add_argument("--vx-range", type=float, nargs=2, metavar=("LO", "HI"), help="[m/s]")
    p.add_argument("--vy-range", type=float, nargs=2, metavar=("LO", "HI"), help="[m/s]")
    p.add_argument("--yaw-range", type=float, nargs=2, metavar=("LO", "HI"), help="[rad/s]")
    p.add_argument(
        "--latency",
        type=float,
        nargs=2,
        metavar=("LO", "HI"),
        help="action-latency blend range in [0, 1]",
    )
    p.add_argument("--push", type=float, help="largest push [m/s]")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-export", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--eval-envs", type=int, default=16, help="evaluation runs (random commands)")
    p.add_argument("--eval-seconds", type=float, default=4.0)
    p.add_argument(
        "--fast-compile",
        action="store_true",
        help="XLA optimisation level 0: compiles faster, runs slower (short runs)",
    )
    p.add_argument(
        "--devices",
        type=int,
        default=None,
        help="devices to split --envs over (default: all JAX sees)",
    )
    p.add_argument(
        "--dtype",
        choices=("float64", "float32"),
        default="float64",
        help="the environment's float type (float32 on GPUs)",
    )
    p.add_argument(
        "--gait-period",
        type=float,
        default=None,
        help="[s] the policy also observes a gait clock of this period",
    )
    p.add_argument(
        "--command-interval",
        type=float,
        default=None,
        help="[s] a new command this often within an episode (default: one each)",
    )
    p.add_argument(
        "--command-extremes",
        type=float,
        default=0.0,
        help="probability of each command component at an end of its range",
    )
    p.add_argument(
        "--no-base-velocity",
        action="store_true",
        help="the policy does not observe the base linear velocity",
    )
    p.add_argument(
        "--observation-noise",
        action="store_true",
        help="legged_gym-like uniform noise on the observations",
    )
    p.add_argument(
        "--terrain",
        default="flat",
        choices=("flat", "tiles"),
        help="flat ground, or rough-ground tiles under a curriculum (blind)",
    )
    p.add_argument(
        "--terrain-kinds",
        nargs="+",
        default=list(KINDS),
        metavar="KIND",
        help=f"tile kinds, of {', '.join(KINDS)}",
    )
    p.add_argument("--terrain-levels", type=int, default=10, help="difficulty levels")
    p.add_argument("--tile-size", type=float, default=4.0, help="[m] side of a tile")
    p.add_argument("--cell-size", type=float, default=0.1, help="[m] height field cell")
    p.add_argument(
        "--max-initial-level",
        type=int,
        default=2,
        help="environments start at levels up to this one",
    )
    p.add_argument("--coordinator", help="multi-host: HOST:PORT of process 0")
    p.add_argument("--num-processes", type=int, help="multi-host: number of processes")
    p.add_argument("--process-id", type=int, help="multi-host: this process's index")
    a = p.parse_args(argv)
    try:
        terrain = terrain_config(a)
    except ValueError as e:
        p.error(str(e))
    sharding.initialize_distributed(a.coordinator, a.num_processes, a.process_id)
    argv = sys.argv[1:] if argv is None else argv
    command = " ".join(["python examples/train_policy.py", *map(shlex.quote, argv)])
    return train_policy(
        a.robot, a.iterations, a.envs, a.horizon, a.contact, a.out, a.resume, a.init,
        a.checkpoint_every, not a.no_randomization, a.lr, a.seed, a.eval_envs, a.eval_seconds,
        export=not a.no_export, quiet=a.quiet, critic_bootstrap=a.critic_bootstrap,
        fast_compile=a.fast_compile, command=command, devices=a.devices, dtype=a.dtype,
        gait_period=a.gait_period, command_interval=a.command_interval,
        command_extremes=a.command_extremes, base_velocity=not a.no_base_velocity,
        observation_noise=a.observation_noise, terrain=terrain,
        task=dict(vx=a.vx_range, vy=a.vy_range, yaw_rate=a.yaw_range, latency=a.latency,
                  push=a.push))  # fmt: skip


def terrain_config(a) -> TerrainConfig | None:
    """The `TerrainConfig` of the `--terrain*` flags (None for flat ground); `ValueError`
    naming the flag for an unknown kind or a bad size."""
    if a.terrain == "flat":
        return None
    unknown = [k for k in a.terrain_kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"--terrain-kinds: unknown {unknown}, choose from {', '.join(KINDS)}")
    if a.terrain_levels < 1:
        raise ValueError(f"--terrain-levels must be >= 1, got {a.terrain_levels}")
    if not 0 <= a.max_initial_level < a.terrain_levels:
        raise ValueError(f"--max-initial-level must be in [0, --terrain-levels), got "
                         f"{a.max_initial_level}")  # fmt: skip
    try:
        layout = TileLayout(tuple(a.terrain_kinds), a.terrain_levels, a.tile_size, a.cell_size,
                            border=2.0)  # fmt: skip
    except ValueError as e:
        raise ValueError(f"--tile-size/--cell-size: {e}") from None
    return TerrainConfig(layout=layout, max_initial_level=a.max_initial_level)


if __name__ == "__main__":
    np.set_printoptions(precision=3, suppress=True)
    main()
