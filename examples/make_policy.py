"""One command from a robot to a deployable policy.

    python examples/make_policy.py --robot go1 --out results/policy_go1
    python examples/make_policy.py --robot path/to/my_dog.urdf --out results/policy_my_dog
    python examples/make_policy.py --robot go1 --out results/policy_go1 --tiny   # a smoke run
    python examples/make_policy.py --robot anymal_c --out results/policy_anymal_c \
        --select-checkpoints 3          # keep the best of SHAC's last 3 on held-out seeds

Stages (`learning.pipeline`): the gait library's plans, a warm start distilled from the MPC,
SHAC on what the robot measures (noise, pushes, rotor inertia, randomisation), the export
(`<out>/policy`, deployable with `examples/deploy_policy.py --policy <out>/policy` or
`examples/deploy_go2.py`), and a check on the randomised MuJoCo tour with the state estimator
in the loop. Each stage saves its artefact and is skipped when the command runs again, so an
interrupted run resumes where it stopped (`--restart` starts over). Ends with a table: time
per stage, tracking and falls.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from learning.pipeline import PolicyRecipe, closing_table, command_box, make_policy


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--robot", required=True,
                   help="an example-robot-data quadruped (dynamics.available_robots()) or a "
                        "URDF path")  # fmt: skip
    p.add_argument("--out", required=True, help="folder for every stage's artefacts")
    p.add_argument("--tiny", action="store_true", help="every stage at its smallest settings")
    p.add_argument("--restart", action="store_true", help="discard an earlier run in --out")
    defaults = PolicyRecipe()
    p.add_argument("--shac-iterations", type=int, default=defaults.shac_iterations)
    p.add_argument("--select-checkpoints", type=int, default=defaults.select_checkpoints,
                   help="compare the newest N SHAC checkpoints on held-out tour seeds and keep "
                   "the one that walked most (0: the last)")
    p.add_argument("--check-seeds", type=int, default=defaults.check_seeds)
    p.add_argument("--seed", type=int, default=defaults.seed)
    a = p.parse_args(argv)
    recipe = PolicyRecipe.tiny() if a.tiny else PolicyRecipe(
        shac_iterations=a.shac_iterations, select_checkpoints=a.select_checkpoints,
        check_seeds=a.check_seeds, seed=a.seed,
    )  # fmt: skip
    argv = sys.argv[1:] if argv is None else argv
    command = " ".join(["python examples/make_policy.py", *map(shlex.quote, argv)])
    print(f"{a.robot}: command box (vx, vy, yaw rate) = {command_box(a.robot)}")
    state = make_policy(a.robot, a.out, recipe, restart=a.restart, command=command)
    print(closing_table(state))
    return state


if __name__ == "__main__":
    main()
