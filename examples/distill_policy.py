"""Distil trajectory optimisation and the MPC into a policy: dataset, behaviour cloning, DAgger.

    python examples/distill_policy.py --robot go2 --vx 0 0.3 0.6 --out results/distill_go2
    python examples/distill_policy.py --robot go2 --gaits trot walk --vx 0 0.5 --yaw 0 0.5
    python examples/distill_policy.py --robot go2 --clock     # the policy observes the gait clock
    python examples/distill_policy.py --robot go2 --clock --no-solves --dart-seconds 10 \
        --dart-runs 2 --dagger-rounds 0 --vx 0 0.25 0.5 --yaw -0.5 0 0.5   # the recipe that walks

1. Solves one trajectory problem per gait and command (`--vx`, `--vy`, `--yaw` grids,
   `--duration` s each); each solve is saved in `<out>/dataset/` at once and reused when the
   script runs again, so an interrupted build resumes.
   `--dart-seconds S`: also `--dart-runs` MPC runs of S s per command with noise on its actions
   (DART, `--dart-noise`), every visited state labelled with the MPC's own action
   (`learning.distill.cloning.expert_rollouts`, saved in `<out>/dart/`); `--no-solves` keeps
   only those.
   `--dart-starts N --dart-start-seconds S` (default 2 s): N more DART runs per command, only
   the first S s from standing (seeds after the long runs'): more of the start, where the
   students fall.
   `--expert-iterations N`: the MPC expert (DART, DAgger) runs N FDDP iterations per cycle.
2. Behaviour cloning on the (observation, action) pairs (`--bc-epochs`). `--students K`: K
   networks cloned on the same data (network seeds `--seed` .. `--seed` + K - 1: their own
   initialisation and minibatch order), averaged into one policy (`learning.policy.
   average_policies`: one MLP K times as wide whose action is the mean of theirs).
   `--dagger-failures`: then each student runs alone at every command; where it falls it runs
   again for `--dagger-seconds` from standing with the MPC labelling its states
   (`cloning.failure_runs`), and all students are cloned again on the data plus those.
3. `--dagger-rounds` rounds of DAgger with the MPC as expert, `--dagger-seconds` per command.
After each stage it prints the imitation loss and the closed-loop tracking error of the policy
alone in this project's simulator. Saves the policy (`policy.eqx`, `learning.policy.
load_policy`), its NumPy/ONNX export (`export/`) and a report (`report.json`).
"""

from __future__ import annotations

import argparse

import dynamics
from learning.distill.recipe import distill_policy


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--gaits", nargs="+", default=["trot"])
    parser.add_argument("--vx", nargs="+", type=float, default=[0.0, 0.3, 0.6], help="[m/s]")
    parser.add_argument("--vy", nargs="+", type=float, default=[0.0], help="[m/s]")
    parser.add_argument("--yaw", nargs="+", type=float, default=[0.0], help="[rad/s]")
    parser.add_argument("--duration", type=float, default=1.0, help="per solve [s]")
    parser.add_argument("--iterations", type=int, default=30, help="FDDP per solve")
    parser.add_argument("--bc-epochs", type=int, default=300)
    parser.add_argument("--dagger-rounds", type=int, default=2)
    parser.add_argument("--dagger-seconds", type=float, default=2.0, help="per command [s]")
    parser.add_argument("--eval-seconds", type=float, default=3.0)
    parser.add_argument("--mpc-horizon", type=float, default=0.5, help="[s]")
    parser.add_argument("--expert-iterations", type=int, default=1,
                        help="FDDP iterations per MPC cycle of the expert (DART and DAgger)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--students", type=int, default=1,
                        help="networks cloned on the same data (seeds --seed, --seed + 1, ...) "
                             "and averaged into one policy")  # fmt: skip
    parser.add_argument("--out", default="results/distill")
    parser.add_argument("--batched", action="store_true",
                        help="solve each gait's command grid in one batched FDDP call")
    parser.add_argument("--devices", type=int, default=None,
                        help="with --batched: split the grid over this many devices")
    parser.add_argument("--clock", action="store_true",
                        help="the policy observes the gait clock (phase sin/cos and frequency)")
    parser.add_argument("--solves", action=argparse.BooleanOptionalAction, default=True,
                        help="the dataset includes the trajectory solves (--no-solves: only "
                             "the DART runs)")  # fmt: skip
    parser.add_argument("--dart-seconds", type=float, default=0.0,
                        help="per command: an MPC run this long with noisy actions (DART)")
    parser.add_argument("--dart-noise", type=float, default=0.1,
                        help="DART noise on the MPC's executed actions [action units]")
    parser.add_argument("--dart-runs", type=int, default=1,
                        help="DART runs per command, each with its own noise")
    parser.add_argument("--dart-starts", type=int, default=0,
                        help="more DART runs per command, only their start (--dart-start-seconds)")
    parser.add_argument("--dart-start-seconds", type=float, default=2.0,
                        help="length of each --dart-starts run [s]")
    parser.add_argument("--dagger-failures", action="store_true",
                        help="after cloning, DAgger runs of each student where it falls "
                             "(--dagger-seconds each), then clone the students again")  # fmt: skip
    args = parser.parse_args(argv)
    return distill_policy(args.robot, tuple(args.gaits), args.vx, args.vy, args.yaw, args.duration,
               args.iterations, args.bc_epochs, args.dagger_rounds, args.dagger_seconds,
               args.eval_seconds, args.mpc_horizon, args.out, args.seed, args.batched,
               args.devices, args.clock, args.solves, args.dart_seconds,
               args.dart_noise, args.dart_runs, args.expert_iterations,
               args.students, args.dart_starts, args.dart_start_seconds,
               args.dagger_failures)  # fmt: skip


if __name__ == "__main__":
    main()
