"""Run an exported locomotion policy through the hardware interface and safety layer on MuJoCo.

    python examples/deploy_policy.py --policy results/policy_go2 --seconds 5 --velocity 0.5
    python examples/deploy_policy.py --policy results/policy_go2 --runtime onnx

The folder is what `learning.policy_export.export_policy` writes (weights, conventions,
the standalone NumPy runner, the ONNX graph), for the robot its policy.json names. The run is
`learning.deployment.run_mujoco`; this script parses its arguments and prints. The policy runs
with the folder's own NumPy runner (`--runtime numpy`, what a robot computer without JAX runs),
onnxruntime (`onnx`) or JAX (`jax`), inside `PolicyController` at the period it was exported
with (`control_dt`), with the exported gains; the safety layer and the writes run at
`--command-rate` = MuJoCo's rate, in simulated time.
The robot stands for 0.5 s, then gets `--velocity` forward (with `--vy`, `--yaw-rate`), or
the `--commands` one after another, `--segment-seconds` each (`--commands omni`: a tour of the
omnidirectional box the policy was trained on, `learning.deployment.tour_commands`; on Go2's
box `OMNI_TOUR`), ramped at `--accel`, `--yaw-accel` (0: step changes).
`--terrain stairs|slope|rough|blocks` (or a JSON file of `contact.terrain.terrain_to_dict`) runs
it on that ground in MuJoCo (`contact.terrain_presets`: level at the start, the feature 1 m
ahead along +x; with `--randomize` the draw's friction replaces the terrain's).
`--randomize SEED` runs MuJoCo under one draw of domain
randomisation (`hardware.backends.mujoco_disturbances`: payload, friction, command
latency, pushes; the training environment's ranges, `--push` and `--latency-ms` to change
them). `--estimator` runs the robot as a Go2 with its sport service released would be: its
sensors noisy as a Go2's (`hardware.sensor_noise.SensorNoise.go2`; the foot forces' noise and
the estimator's contact thresholds scaled to another robot's weight), MuJoCo's true base state
taken away, and the base velocity and position estimated from the IMU, the joints and the
foot forces (`hardware.estimated_robot.EstimatedRobot`); a policy that observes the base
velocity then observes the estimate. The run then starts as on the robot, through the
start-up sequence (`hardware.startup`): the robot holds its standing pose until
`STAND_SECONDS`, while the estimator starts on four loaded feet, and the policy takes over
only if the measurement has every input the policy needs (refused before arming otherwise).
Prints timing statistics, safety interventions, the tracking per command (MuJoCo's base
velocity in the heading frame, averaged after `SETTLE_SECONDS` of each command) and the base
heights; saves the loop log (npz) and a summary (json).

    python examples/deploy_policy.py --policy examples/policies/go2_omni --commands omni \
        --seconds 28 --randomize 0
"""

from __future__ import annotations

import argparse
import logging
import os

import numpy as np

from contact.terrain_presets import PRESETS, terrain_from_argument
from hardware import control_loop
from hardware.backends.mujoco_disturbances import DisturbanceRanges
from hardware.timing import format_summary
from learning.deployment import (  # noqa: F401  (the names this example had: tests, benchmarks)
    COMMAND_ACCEL,
    COMMAND_YAW_ACCEL,
    OMNI_TOUR,
    STAND_SECONDS,
    BaseVelocityRecorder,
    command_schedule,
    run_mujoco,
    tour_commands,
)
from learning.policy_export import command_ranges, load_numpy_policy

HOW_TO_EXPORT = """\
an exported policy folder is needed (--policy FOLDER). Train a policy
(learning.shac, learning.distill; examples/distill_policy.py --out results/distill_go2 exports to
results/distill_go2/export) or export a learning.policy.Policy yourself:

    from learning.policy_export import export_policy
    export_policy(policy, "results/policy_go2", robot="go2")

then run: python examples/deploy_policy.py --policy results/policy_go2"""

run = run_mujoco  # one run: (summary, loop result); the benchmarks call it by this name


def parse_commands(values, ranges=None) -> np.ndarray | None:
    """`--commands`: None, ["omni"] (the tour of the command box `ranges`, `tour_commands`;
    None: Go2's box, `OMNI_TOUR`) or "vx,vy,yaw" strings -> (K, 3)."""
    if not values:
        return None
    if values == ["omni"]:
        return tour_commands(ranges)
    rows = []
    for v in values:
        parts = v.split(",")
        try:
            row = [float(x) for x in parts]
        except ValueError:
            row = []
        if len(row) != 3 or not np.all(np.isfinite(row)):
            raise ValueError(f"--commands: each command is 'vx,vy,yaw_rate' (three numbers) or "
                             f"the word omni, got {v!r}")  # fmt: skip
        rows.append(row)
    return np.asarray(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=None, help="exported policy folder")
    parser.add_argument("--runtime", default="numpy", choices=("numpy", "onnx", "jax"))
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--velocity", type=float, default=0.5, help="forward command [m/s]")
    parser.add_argument("--vy", type=float, default=0.0, help="sideways command [m/s], left")
    parser.add_argument("--yaw-rate", type=float, default=0.0, help="[rad/s], counter-clockwise")
    parser.add_argument(
        "--commands",
        nargs="+",
        metavar="VX,VY,YAW",
        help="commands one after another (or: omni, a tour of the box)",
    )
    parser.add_argument(
        "--segment-seconds", type=float, default=2.5, help="[s] per command of --commands"
    )
    parser.add_argument(
        "--accel", type=float, default=COMMAND_ACCEL, help="command ramp [m/s^2] (0: step changes)"
    )
    parser.add_argument(
        "--yaw-accel",
        type=float,
        default=COMMAND_YAW_ACCEL,
        help="yaw-rate command ramp [rad/s^2] (0: step changes)",
    )
    parser.add_argument(
        "--randomize",
        type=int,
        metavar="SEED",
        help="domain randomisation in MuJoCo: payload, friction, latency, pushes",
    )
    parser.add_argument(
        "--push",
        type=float,
        default=DisturbanceRanges.push_velocity,
        help="largest push with --randomize [m/s]",
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=1e3 * DisturbanceRanges.latency_s,
        help="largest command latency with --randomize [ms]",
    )
    parser.add_argument(
        "--estimator",
        action="store_true",
        help="Go2-like sensor noise, no true base state: the state estimator",
    )
    parser.add_argument("--command-rate", type=float, default=500.0, help="[Hz] = MuJoCo rate")
    parser.add_argument("--soft-start", type=float, default=0.2, help="[s]")
    parser.add_argument("--max-target-rate", type=float, default=None,
                        help="[rad/s] the safety layer's limit on the PD targets' rate (default: "
                             "the joint velocity limits; the MPC runs with 30)")  # fmt: skip
    parser.add_argument("--terrain", default=None, metavar="|".join(PRESETS),
                        help="MuJoCo's ground: a preset or a terrain_to_dict JSON file (default: "
                             "flat)")  # fmt: skip
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    if args.policy is None or not os.path.isdir(args.policy):
        where = "" if args.policy is None else f"no folder {args.policy!r}: "
        parser.error(where + HOW_TO_EXPORT)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        box = None
        if args.commands == ["omni"]:  # the tour of the policy's own box
            box = command_ranges(load_numpy_policy(args.policy).config)
        commands = parse_commands(args.commands, box)
        terrain = None if args.terrain is None else terrain_from_argument(args.terrain)
    except ValueError as e:
        parser.error(str(e))
    ranges = DisturbanceRanges(push_velocity=args.push, latency_s=1e-3 * args.latency_ms)
    summary, result = run(args.policy, args.runtime, args.seconds, args.velocity,
                          args.command_rate, args.soft_start, args.max_target_rate, args.vy,
                          args.yaw_rate, commands, args.segment_seconds, args.randomize,
                          ranges, args.accel, args.yaw_accel, args.estimator,
                          terrain)  # fmt: skip
    print(f"policy {summary['policy']} ({args.runtime}) on {summary['robot']}, "
          f"{summary['control_rate_hz']:.0f} Hz, terrain {args.terrain or 'flat'}")  # fmt: skip
    summary["terrain"] = args.terrain
    print(format_summary("command loop", summary["timing"]["command"]))
    print(format_summary("controller", summary["timing"]["controller"]))
    for e in summary["safety_events"]:
        print(f"  t={e['start']:.3f} {e['kind']} x{e['count']} {e['detail']}")
    if summary["randomization"]:
        r = summary["randomization"]
        print(f"randomisation (seed {r['seed']}): payload {r['payload_kg']:+.2f} kg, friction "
              f"{r['friction']:.2f}, latency {1e3 * r['latency_s']:.1f} ms, "
              f"{len(r['applied_pushes'])} pushes applied")  # fmt: skip
    for r in summary["tracking"]:
        vx, vy, wz = r["command"]
        print(f"  command ({vx:+.2f}, {vy:+.2f}, {wz:+.2f}) from {r['start_s']:.1f} s: "
              f"linear error {r['linear_error']:.3f} m/s, yaw-rate error "
              f"{r['yaw_rate_error']:.3f} rad/s")  # fmt: skip
    if summary["estimator"]:
        e = summary["estimator"]
        print(f"estimator: velocity RMS error {e.get('velocity_rms_m_per_s', float('nan')):.3f} "
              f"m/s, height RMS error {e.get('height_rms_m', float('nan')):.4f} m, valid "
              f"{e['valid_share']:.0%}, fault {e['fault']}")  # fmt: skip
    print(f"average speed {summary['average_speed_m_per_s']:.3f} m/s "
          f"(command {args.velocity} m/s), base height min {summary['min_base_height_m']:.4f} "
          f"settled {summary['settled_base_height_m']:.4f} m, "
          f"safety mode {summary['safety_mode']}")  # fmt: skip
    name = f"deploy_policy_{result.safety.joint_map.robot}"
    control_loop.save_run(args.out, name, result.log, summary)
    return summary


if __name__ == "__main__":
    main()
