"""From a robot to a deployable policy in five stages, each saving its artefact and resumable.

    from learning.pipeline import PolicyRecipe, make_policy
    rows = make_policy("go1", "results/policy_go1", PolicyRecipe())

The stages (`STAGES`), each in `<out>/<stage>/`:

1. `plans`: the gait library's trot solved at a grid of commands (`learning.distill.dataset.
   build_dataset`), every solve saved as it finishes.
2. `warm_start`: the MPC distilled into a policy that observes the gait clock: the plans and
   DART runs of the MPC with noise on its actions, every visited state labelled by the MPC,
   then behaviour cloning (`learning.distill.recipe.distill_policy`).
3. `shac`: SHAC through the smooth contact model from the warm start, on what the robot
   measures (no base linear velocity), with observation noise, pushes, the robot's rotor
   inertia and the default randomisation, commands changing within episodes
   (`learning.shac.recipe.train_policy`, checkpointed: an interrupted stage resumes). With
   `PolicyRecipe.select_checkpoints` = k, the newest k checkpoints are exported and run on the
   tour's held-out seeds (`held_out_seeds`, never the check's), and the one that walked most
   (ties: the newest) becomes the stage's policy: SHAC's policies need not improve
   monotonically with its iterations.
4. `export`: the policy's deployable folder (`<out>/policy`: weights, conventions with the
   command box, the NumPy runner, ONNX where available, and a README with the command that
   made it).
5. `check`: the randomised MuJoCo tour with the state estimator in the loop, on
   `PolicyRecipe.check_seeds` seeds (`learning.deployment.tour_check`).

`<out>/pipeline.json` records each finished stage (seconds, result); a stage that finished is
skipped when the command runs again, so a run resumes where it stopped. A recipe field that
changed re-runs the stage that reads it and every later one (`STAGE_FIELDS`): more SHAC
iterations continue from the last checkpoint. Another robot in the same folder is refused
(nothing is overwritten) unless `restart` is given.

The command box scales with the robot by dynamic similarity: speeds as `sqrt(g h)` (h the
standing height), yaw rates as `sqrt(g / h)`, from the Go2 policy's box at `BOX_FRACTION`
of it. A robot whose joints are slow for its size gets a smaller box: a leg's joints sweep at
about `v / h`, so the box shrinks (its shape kept) until `vx_max <= JOINT_SPEED_FRACTION
qd_max h`, `qd_max` the slowest leg joint's velocity limit. The box is recorded in
`pipeline.json`; a changed box re-runs every stage.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import textwrap
import time
from dataclasses import dataclass

import numpy as np

from dynamics import load_robot, record_of

STAGES = ("plans", "warm_start", "shac", "export", "check")
BOX_FRACTION = 0.6  # a first policy of an untuned robot: 60 % of Go2's box, in Froude terms
# vx_max / (qd_max h): Go1's and Solo12's Froude boxes sit at 0.10 and 0.09 and their first
# policies walk the tour; ANYmal C's, at 0.19, drove its knees past their velocity limit
JOINT_SPEED_FRACTION = 0.1


@dataclass(frozen=True)
class PolicyRecipe:
    """The settings of `make_policy`. Defaults: the recipe that made `go2_omni_proprio`, with
    the command box scaled to the robot (`command_box`)."""

    plan_iterations: int = 30  # FDDP iterations per plan
    plan_seconds: float = 1.0  # each plan's horizon [s]
    plan_speeds: int = 3  # forward commands in [0, vx_max] for the plans and DART runs
    dart_seconds: float = 10.0  # per command, an MPC run with noisy actions [s]
    dart_runs: int = 2
    bc_epochs: int = 300
    shac_iterations: int = 1500
    envs: int = 32
    horizon: int = 32
    push: float = 1.0  # largest push [m/s]
    actor_lr: float = 3e-4
    # the newest SHAC checkpoints compared on held-out seeds of the tour (0: the last one)
    select_checkpoints: int = 0
    check_seeds: int = 8
    check_segment_seconds: float | None = None  # None: the tour's own
    eval_seconds: float = 4.0
    seed: int = 0

    def __post_init__(self):
        at_least = {"plan_iterations": 1, "plan_speeds": 0, "dart_runs": 0, "bc_epochs": 1,
                    "shac_iterations": 1, "envs": 1, "horizon": 1, "select_checkpoints": 0,
                    "check_seeds": 1}  # fmt: skip
        for name, low in at_least.items():
            value = getattr(self, name)
            if not isinstance(value, int | np.integer) or value < low:
                raise ValueError(f"PolicyRecipe.{name} must be an integer >= {low}, got {value!r}")
        positive = ["plan_seconds", "dart_seconds", "actor_lr", "eval_seconds"]
        if self.check_segment_seconds is not None:  # None: the tour's own
            positive.append("check_segment_seconds")
        for name, value in ((name, getattr(self, name)) for name in positive):
            if not np.isfinite(value) or value <= 0:
                raise ValueError(f"PolicyRecipe.{name} must be positive, got {value!r}")
        if not np.isfinite(self.push) or self.push < 0:  # no pushes: 0
            raise ValueError(f"PolicyRecipe.push must be >= 0, got {self.push!r}")

    @classmethod
    def tiny(cls) -> PolicyRecipe:
        """Every stage at the smallest settings that still run it (for tests)."""
        return cls(plan_iterations=2, plan_seconds=0.2, plan_speeds=1, dart_seconds=0.2,
                   dart_runs=1, bc_epochs=2, shac_iterations=2, envs=2, horizon=4,
                   select_checkpoints=2, check_seeds=1, check_segment_seconds=0.5,
                   eval_seconds=0.2)  # fmt: skip

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def command_box(robot: str) -> tuple:
    """`(vx_max [m/s], vy_max [m/s], yaw_rate_max [rad/s])` of a robot's policy: Go2's box
    scaled by dynamic similarity to the robot's standing height, times `BOX_FRACTION`, and
    shrunk to the joints' speed (module docstring)."""
    from learning.policy_export import COMMAND_NAMES, DEFAULT_COMMAND_RANGES

    go2_box = [DEFAULT_COMMAND_RANGES[name][1] for name in COMMAND_NAMES]  # Go2's policies'
    model = load_robot(robot)
    height = float(model.q_standing[2])
    ratio = height / float(load_robot("go2").q_standing[2])
    speed, turn = BOX_FRACTION * np.sqrt(ratio), BOX_FRACTION / np.sqrt(ratio)
    joint_speed = float(np.min(np.asarray(model.velocity_limit)[model.nv - model.nu :]))
    shrink = min(1.0, JOINT_SPEED_FRACTION * joint_speed * height / (go2_box[0] * speed))
    return tuple(round(float(c), 2) for c in (go2_box[0] * speed * shrink,
                                                  go2_box[1] * speed * shrink,
                                                  go2_box[2] * turn * shrink))  # fmt: skip


class RecipeMismatch(ValueError):
    """`out` holds a run of another robot (restart to replace it)."""


# The recipe's fields each stage reads; a changed field re-runs its stage and every later one
STAGE_FIELDS = {
    "plans": ("plan_iterations", "plan_seconds", "plan_speeds"),
    "warm_start": ("dart_seconds", "dart_runs", "bc_epochs", "eval_seconds", "seed"),
    "shac": ("shac_iterations", "envs", "horizon", "push", "actor_lr", "select_checkpoints"),
    "export": (),
    "check": ("check_seeds", "check_segment_seconds"),
}


def _load_state(path: str, robot: str, recipe: PolicyRecipe, restart: bool) -> dict:
    """The saved state, less the stages whose recipe fields changed and those after them."""
    fresh = {"robot": robot, "recipe": recipe.to_dict(), "stages": {}}
    if restart or not os.path.isfile(path):
        return fresh
    with open(path) as f:
        state = json.load(f)
    if state.get("robot") != robot:
        raise RecipeMismatch(
            f"{path} holds a run of robot {state.get('robot')!r}, not {robot!r}; pass "
            "restart=True (--restart) to replace it, or another output folder"
        )
    old, new = state.get("recipe", {}), recipe.to_dict()
    changed = [stage for stage in STAGES if any(old.get(f) != new[f] for f in STAGE_FIELDS[stage])]
    if changed:  # shac keeps its checkpoints: more iterations continue from the last one
        stale = STAGES[STAGES.index(changed[0]) :]
        state["stages"] = {k: v for k, v in state["stages"].items() if k not in stale}
    state["recipe"] = new
    return state


def _save_state(path: str, state: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=2, default=float)
    os.replace(tmp, path)  # a crash leaves the old state or the new one, never half of one


def _plans(robot, recipe, out, context):
    from learning.distill import dataset

    data = dataset.build_dataset(
        robot, context["plan_commands"], ("trot",), duration=recipe.plan_seconds,
        folder=os.path.join(out, "plans"), max_iterations=recipe.plan_iterations, clock=True,
    )  # fmt: skip
    with open(os.path.join(out, "plans", "dataset.json")) as f:
        solves = json.load(f).get("solves", [])
    statuses = sorted({s.get("status", "") for s in solves if isinstance(s, dict)})
    return {"samples": len(data), "solves": len(context["plan_commands"]), "statuses": statuses}


def _warm_start(robot, recipe, out, context):
    from learning.distill.recipe import distill_policy

    vx = sorted({c[0] for c in context["plan_commands"]})
    _, report = distill_policy(
        robot, ("trot",), vx=vx, yaw=(-context["box"][2] / 2, 0.0, context["box"][2] / 2),
        duration=recipe.plan_seconds, iterations=recipe.plan_iterations,
        bc_epochs=recipe.bc_epochs, dagger_rounds=0, eval_seconds=recipe.eval_seconds,
        out=os.path.join(out, "warm_start"), seed=recipe.seed, clock=True,
        dart_seconds=recipe.dart_seconds, dart_runs=recipe.dart_runs,
        dataset_folder=os.path.join(out, "plans"),
    )  # fmt: skip
    after = report["after_cloning"]
    return {"samples": report["samples"], "tracking_error": after["mean_velocity_error"],
            "fell_fraction": after["fell_fraction"]}  # fmt: skip


def _shac(robot, recipe, out, context):
    from learning.policy import save_policy
    from learning.shac.recipe import checkpoint_policies, train_policy

    folder = os.path.join(out, "shac")
    result, evaluation = train_policy(
        robot, recipe.shac_iterations, recipe.envs, recipe.horizon, out=folder,
        resume=True, init=os.path.join(out, "warm_start", "policy.eqx"),
        checkpoint_every=max(1, min(100, recipe.shac_iterations // 10)),
        actor_lr=recipe.actor_lr, seed=recipe.seed, eval_seconds=recipe.eval_seconds,
        export=False, quiet=False, gait_period=context["gait_period"], command_interval=2.0,
        command_extremes=0.3, base_velocity=False, observation_noise=True,
        task=dict(**_ranges(context["box"]), push=recipe.push),
        command=context["command"], keep=max(3, recipe.select_checkpoints),
    )  # fmt: skip
    # the evaluation is of the last iteration's policy, whichever checkpoint is chosen below
    row = {"tracking_error": evaluation["mean_tracking_error"],
           "yaw_rate_error": evaluation["mean_yaw_rate_error"],
           "fell_fraction": evaluation["fell_fraction"]}  # fmt: skip
    if recipe.select_checkpoints:
        candidates = checkpoint_policies(result, folder, recipe.select_checkpoints)
        walked = _held_out_walked(robot, recipe, folder, context, candidates)
        chosen, policy = max(candidates, key=lambda c: (walked[c[0]], c[0]))  # ties: newest
        save_policy(policy, os.path.join(folder, "policy.eqx"))
        row.update(chosen_iteration=chosen, held_out_walked={str(k): v for k, v in walked.items()})
    return row


def held_out_seeds(recipe: PolicyRecipe) -> list:
    """The tour seeds checkpoints are chosen on: the `check_seeds` after the check's own."""
    return list(range(recipe.check_seeds, 2 * recipe.check_seeds))


def _held_out_walked(robot, recipe, folder, context, candidates) -> dict:
    """`{iteration: seeds walked}` of each candidate `(iteration, policy)` on the tour's
    held-out seeds, each exported to `<folder>/select/<iteration>`."""
    from learning.deployment import tour_check

    walked = {}
    for iteration, policy in candidates:
        exported = os.path.join(folder, "select", str(iteration))
        _export_folder(policy, exported, robot, context)
        result = tour_check(exported, held_out_seeds(recipe), estimator=True,
                            segment_seconds=recipe.check_segment_seconds,
                            progress=context["progress"])  # fmt: skip
        walked[iteration] = result["walked"]
        context["progress"](f"  SHAC iteration {iteration}: {result['walked']} of "
                            f"{result['of']} held-out seeds walked")  # fmt: skip
    return walked


def _export_folder(policy, folder, robot, context) -> dict:
    """`policy` as a deployable folder (`learning.policy_export.export_policy`): the robot's
    conventions, its gait clock and command box; `{kind: path}` of the files."""
    import importlib.util

    from learning.policy_export import export_policy

    return export_policy(policy, folder, robot=robot, gait_period=context["gait_period"],
                         onnx=importlib.util.find_spec("onnx") is not None,
                         command_ranges=_ranges(context["box"]))  # fmt: skip


def _export(robot, recipe, out, context):
    from learning.policy import load_policy

    folder = os.path.join(out, "policy")
    policy = load_policy(os.path.join(out, "shac", "policy.eqx"))
    paths = _export_folder(policy, folder, robot, context)
    with open(os.path.join(folder, "README.md"), "w") as f:
        f.write(policy_readme(robot, context["box"], context["gait_period"], context["command"],
                              recipe))  # fmt: skip
    return {"folder": folder, "files": sorted(os.path.basename(p) for p in paths.values())}


def policy_readme(robot: str, box, gait_period: float, command: str, recipe) -> str:
    """The exported folder's README: inputs, command box, the command and recipe that made it."""
    vx, vy, yaw = box
    about = textwrap.fill(
        f"Inputs: the gyro, gravity from the IMU, the joint encoders and the gait clock (period "
        f"{gait_period:.3f} s); no base linear velocity. Commands: vx in [-{vx}, {vx}] m/s, vy "
        f"in [-{vy}, {vy}] m/s, yaw rate in [-{yaw}, {yaw}] rad/s.", 96
    )  # fmt: skip
    settings = textwrap.fill(f"Recipe: {json.dumps(recipe.to_dict())}", 96)
    return (f"# A {robot} policy made by examples/make_policy.py\n\n{about}\n\nMade by:\n\n"
            f"    {command}\n\n{settings}\n\nStages and results: `pipeline.json` and "
            "`check.json` beside this folder.\n")  # fmt: skip


def _ranges(box) -> dict:
    """The symmetric command ranges of a command box `(vx, vy, yaw_rate)`."""
    return {name: (-float(c), float(c)) for name, c in zip(("vx", "vy", "yaw_rate"), box)}


def _check(robot, recipe, out, context):
    from learning.deployment import tour_check

    result = tour_check(
        os.path.join(out, "policy"), list(range(recipe.check_seeds)), estimator=True,
        segment_seconds=recipe.check_segment_seconds, progress=context["progress"],
    )  # fmt: skip
    with open(os.path.join(out, "check.json"), "w") as f:
        json.dump(result, f, indent=2, default=float)
    return {"walked": result["walked"], "of": result["of"]}


_RUN = {"plans": _plans, "warm_start": _warm_start, "shac": _shac, "export": _export,
        "check": _check}  # fmt: skip


def make_policy(robot: str, out: str, recipe: PolicyRecipe | None = None, *,
                restart: bool = False, command: str = "", progress=print) -> dict:  # fmt: skip
    """Run the stages (module docstring) for `robot` into `out`; returns the state
    `{"robot", "recipe", "box", "stages": {stage: {"seconds", "result"}}}` also saved in
    `<out>/pipeline.json`. `restart`: discard an earlier run in `out`. `command`: the command
    line, written into the policy's README. Raises `RecipeMismatch` for an earlier run of
    another robot, and whatever a stage raises (the finished stages stay recorded)."""
    recipe = PolicyRecipe() if recipe is None else recipe
    model = load_robot(robot)  # an unknown robot or a bad record fails here, before any work
    from trajopt.gaits import gait_period

    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "pipeline.json")
    state = _load_state(path, robot, recipe, restart)
    box = command_box(robot)
    if state.setdefault("box", list(box)) != list(box):  # the plans onwards were for another box
        progress(f"{robot}: the command box changed from {tuple(state['box'])}: every stage "
                 "runs again")  # fmt: skip
        state.update(box=list(box), stages={})
        restart = True
    if restart:
        for stage in STAGES:
            shutil.rmtree(os.path.join(out, stage), ignore_errors=True)
    speeds = np.linspace(0.0, box[0], recipe.plan_speeds + 1)[1:] if recipe.plan_speeds else []
    context = {
        "box": box, "gait_period": gait_period(robot, "trot"), "progress": progress,
        "plan_commands": [(0.0, 0.0, 0.0)] + [(float(v), 0.0, 0.0) for v in speeds],
        "command": command or f"make_policy({robot!r}, {out!r})",
        "record": record_of(model),
    }  # fmt: skip
    _save_state(path, state)
    for k, stage in enumerate(STAGES, 1):
        if stage in state["stages"]:
            progress(f"[{k}/{len(STAGES)}] {stage}: done earlier "
                     f"({state['stages'][stage]['seconds']:.0f} s), skipped")  # fmt: skip
            continue
        progress(f"[{k}/{len(STAGES)}] {stage} ...")
        start = time.perf_counter()
        result = _RUN[stage](robot, recipe, out, context)
        state["stages"][stage] = {"seconds": time.perf_counter() - start, "result": result}
        _save_state(path, state)
        progress(f"[{k}/{len(STAGES)}] {stage}: {time.perf_counter() - start:.0f} s, {result}")
    return state


def closing_table(state: dict) -> str:
    """The run's table: stage, seconds, result, then the deployment check's verdict."""
    lines = ["| stage | seconds | result |", "|---|---|---|"]
    total = 0.0
    for stage in STAGES:
        row = state["stages"].get(stage)
        if row is None:
            lines.append(f"| {stage} | - | not run |")
            continue
        total += row["seconds"]
        result = ", ".join(f"{k} {_fmt(v)}" for k, v in row["result"].items())
        lines.append(f"| {stage} | {row['seconds']:.0f} | {result} |")
    lines.append(f"| total | {total:.0f} | |")
    return "\n".join(lines)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)
