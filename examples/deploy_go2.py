"""Run a controller on a Go2 over the robot's own protocol (Unitree SDK 2's DDS topics), through
the hardware interface, a state estimator and the safety layer, in real time, and log the run.

    python examples/deploy_go2.py --seconds 10                          # simulated Go2, stand up
    python examples/deploy_go2.py --controller policy --velocity 0.5    # the shipped policy
    python examples/deploy_go2.py --controller mpc --velocity 0.5       # the real-time MPC
    python examples/deploy_go2.py --controller mpc --lockstep --seconds 5   # ... in robot time
    # steered by the remote's sticks, here the simulated remote's (T D LX RX RY LY: from T s
    # after the first command for D s): forward, then sideways to the right, then released
    python examples/deploy_go2.py --controller policy --seconds 15 --steer remote \
        --sim-sticks 5 4 0 0 0 0.6 --sim-sticks 9 4 0.8 0 0 0
    # steered by ROS 2 (any node publishing geometry_msgs/Twist on /cmd_vel in the domain)
    python examples/deploy_go2.py --controller policy --seconds 60 --steer cmd_vel
    python examples/view.py --log runs/deploy_go2_mpc_<time>            # look at the run

    # unitree_mujoco (its simulate/config.yaml: domain 1, interface lo), started beforehand:
    python examples/deploy_go2.py --no-sim --domain 1 --interface lo
    # the robot: domain 0 on the wired network card (e.g. eth0, 192.168.123.x), sport mode
    # released first; lay the robot down, hold the remote (L2 + B = e-stop), then run this and
    # press START (stand up), A (the controller), SELECT (back to hold, again: passive):
    python examples/deploy_go2.py --no-sim --domain 0 --interface eth0 --release-sport-mode

Without `--no-sim` the example starts the simulated Go2 (`python -m hardware.go2.sim`: MuJoCo
behind the same topics, with its true base state on a topic of ours for the log,
`--ground-truth-topic`) on `--domain` over loopback, and stops it at the end. The high-rate
path (`learning.go2_command_path`: the DDS link, whose backend `hardware.go2.robot` sends
LowCmd at 500 Hz from its own thread; the estimator; the safety layer at `--command-rate`;
the log) runs in a process of its own (`--command-path process`, the default in real time,
`hardware.command_process`), the controller in this one at its own rate, the two handing
state and commands through shared memory; `--command-path thread` runs both here (the
controller in a thread). `--load N` starts N busy processes beside the run
(`hardware.busy_load`): a stand-in for the robot's slower or busier computer.

The start-up sequence (`hardware.startup.StartupSequence`, in `learning.deployment.startup`)
wraps the controller: PASSIVE (damping) -> STAND_UP (from the measured pose to standing in
`--stand-up` s) -> HOLD -> CONTROLLER, on the remote's buttons (START: stand up, A: the
controller, SELECT: stop) and, with `--auto-start` (the default in simulation), from software:
stand up as soon as the drivers are armed, the controller `SETTLE_AFTER_STAND_UP` s after the
stand-up once the base state is there. The controller then runs `--seconds` (the velocity
command `--velocity` after `WALK_AFTER` s); `--controller stand` only stands up and holds for
`--seconds`:
- `policy`: an exported policy folder (`learning.policy_export`; default the shipped walking
  policy `examples/policies/go2_omni_proprio`), at the rate and with the gains it was exported with;
- `mpc`: the MPC trot in real time (`controllers.realtime_mpc.RealTimeMPC`, as
  `examples/deploy_network.py` runs it): a solver process (pinned to `--solver-core`, this
  process and the simulated Go2 on the other cores) replans with `--iterations` FDDP
  iterations per cycle (1: the cycle that holds 50 Hz) from the newest measurement, with the
  latency compensation `--lookahead`, while the controller calls (100 Hz) apply the newest
  plan; the first plan is solved before the robot starts. With `--lockstep` instead the plain
  MPC (3 iterations per 20 ms cycle) runs in robot time (`LockstepGo2Robot`: the simulated Go2
  simulates only when told, a `Step_` message of ours after each command tick).
Steering (`--steer`, `hardware.steering`): `fixed` (default) commands `--velocity` forward;
`remote` the remote's sticks (left stick up: forward, right: move right; right stick right:
turn clockwise; a 10 % deadband; full deflection the command box's end); `cmd_vel` ROS 2
`geometry_msgs/Twist` on `--cmd-vel-topic` (DDS topic `rt/cmd_vel`, on `--domain` over
`--interface`: no ROS needed here; a Twist older than 0.5 s: stand). The command box is the
policy's training ranges (its policy.json's "command_ranges", by default vx +-1 m/s,
vy +-0.5 m/s, yaw rate +-1 rad/s), for the MPC and the stand
`learning.go2_deployment.DEFAULT_COMMAND_BOX`; the command is acceleration-limited and zero
until `WALK_AFTER` s into the controller phase. `--sim-sticks T D LX RX RY LY` (repeatable)
holds the simulated Go2's sticks (`hardware.go2.sim --sticks`, T from its first command).
The shipped policy reads only the IMU and the joints. A policy that observes the base velocity,
and the MPC (which needs the base position too), take them from the state
estimator (`hardware.estimated_robot.EstimatedRobot`; `--estimator on`, the default when the
robot publishes no `rt/sportmodestate`: the robot once its sport service is released, and our
simulated Go2) or from the backend (`--estimator off`: `rt/sportmodestate` of unitree_mujoco
or the sport service; in our simulation the true base state). A measurement without them
holds the sequence in HOLD.

The remote's L2 + B latches the e-stop. Prints the timing, the MPC's cycle statistics, the
safety interventions, the backend's and the simulated robot's counters; writes the deployment
log (`hardware.deployment_log`: per command tick the LowState-derived measurement, the command
sent, the estimator's output, the simulator's ground truth, the start-up phase; under
`--log-dir`, written while it runs, so an interrupted run keeps what it did; its folder is
printed at the end) and the loop log (npz) and summary (json) under `--out`.

The run is `learning.go2_deployment.run_go2`; this script parses its arguments and prints.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import numpy as np

from hardware import control_loop
from hardware.busy_load import busy_load
from hardware.timing import format_summary
from learning.go2_deployment import MPCOptions, run_go2

SHIPPED_POLICY = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "policies", "go2_omni_proprio"
)

run = run_go2  # one deployment: (summary, loop result); the tests call it by this name


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--controller", default="stand", choices=("stand", "policy", "mpc"))
    parser.add_argument("--policy", default=SHIPPED_POLICY, help="exported policy folder")
    parser.add_argument("--seconds", type=float, default=10.0, help="the controller phase [s]")
    parser.add_argument("--velocity", type=float, default=0.5, help="forward command [m/s]")
    parser.add_argument("--steer", default="fixed", choices=("fixed", "remote", "cmd_vel"),
                        help="the velocity command: --velocity, the remote's sticks or "
                             "ROS 2 cmd_vel")  # fmt: skip
    parser.add_argument("--cmd-vel-topic", default="cmd_vel", help="ROS 2 topic (--steer cmd_vel)")
    parser.add_argument("--sim-sticks", nargs=6, type=float, action="append", default=[],
                        metavar=("T", "D", "LX", "RX", "RY", "LY"),
                        help="simulated remote: hold the sticks from T s (after the first "
                             "command) for D s; repeatable")  # fmt: skip
    parser.add_argument("--domain", type=int, default=1, help="DDS domain (robot: 0)")
    parser.add_argument("--interface", default="lo", help="network interface ('' = any)")
    parser.add_argument("--no-sim", action="store_true", help="do not start the simulated Go2")
    parser.add_argument("--release-sport-mode", action="store_true")
    parser.add_argument("--lockstep", action="store_true", help="simulated Go2 in robot time")
    parser.add_argument("--state-timeout", type=float, default=0.1,
                        help="[s] stale state / measurement: damping")  # fmt: skip
    parser.add_argument("--stand-up", type=float, default=1.5, help="stand-up time [s]")
    parser.add_argument("--command-rate", type=float, default=500.0, help="safety layer [Hz]")
    parser.add_argument("--estimator", default="auto", choices=("on", "off", "auto"),
                        help="the state estimator for the base state (auto: on when the robot "
                             "publishes no rt/sportmodestate; off: the backend's, in "
                             "simulation the simulated Go2's true state)")  # fmt: skip
    parser.add_argument("--horizon", type=float, default=0.5, help="MPC horizon [s]")
    parser.add_argument("--iterations", type=int, default=1,
                        help="real-time MPC: FDDP iterations per cycle")  # fmt: skip
    parser.add_argument(
        "--lookahead", default="auto", help="real-time MPC latency compensation [s] or 'auto'"
    )
    parser.add_argument(
        "--derivatives",
        default="compiled",
        choices=("compiled", "implicit"),
        help="real-time MPC: the impulse-solve derivatives (compiled needs gcc)",
    )
    parser.add_argument("--solver", default="process", choices=("process", "thread"))
    parser.add_argument(
        "--solver-core",
        default="auto",
        help="real-time MPC: the solver process's core, 'auto' or 'none'",
    )
    parser.add_argument(
        "--auto-start",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="stand up and start the controller from software, not only on "
        "the remote's START and A (default: in simulation)",
    )
    parser.add_argument("--log-dir", default="runs", help="deployment logs go under it")
    parser.add_argument("--log", default=None, help="this run's log folder (default: dated)")
    parser.add_argument("--out", default="results")
    parser.add_argument("--command-path", default="auto", choices=("auto", "process", "thread"),
                        help="the high-rate path in its own process or in this one "
                             "(auto: process in real time, thread in lockstep)")  # fmt: skip
    parser.add_argument("--load", type=int, default=0,
                        help="busy processes beside the run: a slower or busier computer")
    args = parser.parse_args(argv)
    if args.load < 0:
        parser.error(f"--load must be a count of busy processes >= 0, got {args.load}")
    if args.controller == "policy" and (args.policy is None or not os.path.isdir(args.policy)):
        parser.error("--controller policy needs --policy FOLDER (an exported policy)")
    if args.sim_sticks and args.no_sim:
        parser.error("--sim-sticks holds the simulated Go2's sticks: not with --no-sim")
    solver_core = {"auto": "auto", "none": None}.get(args.solver_core, args.solver_core)
    if isinstance(solver_core, str) and solver_core != "auto":
        try:
            solver_core = int(solver_core)
        except ValueError:
            parser.error(f"--solver-core must be a core, 'auto' or 'none', got {solver_core!r}")
    lookahead = args.lookahead
    if lookahead != "auto":
        try:
            lookahead = float(lookahead)
        except ValueError:
            parser.error(f"--lookahead must be 'auto' or seconds, got {lookahead!r}")
    given = sys.argv[1:] if argv is None else list(argv)
    command_line = " ".join(["python examples/deploy_go2.py", *given])
    mpc = MPCOptions(horizon=args.horizon, iterations=args.iterations, lookahead=lookahead,
                     derivatives=args.derivatives, solver=args.solver,
                     solver_core=solver_core)  # fmt: skip
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    with busy_load(args.load):
        summary, result = _run(args, mpc, command_line)
    report(summary)
    control_loop.save_run(args.out, f"deploy_go2_{args.controller}", result.log, summary)
    return summary


def _run(args, mpc, command_line):
    return run(
        args.controller, args.seconds, args.domain, args.interface, not args.no_sim,
        args.policy, args.velocity, args.command_rate, args.stand_up, args.release_sport_mode,
        args.lockstep, args.state_timeout, args.estimator, mpc=mpc, log_folder=args.log,
        log_dir=args.log_dir, auto_start=args.auto_start, command_line=command_line,
        steer=args.steer, sim_sticks=args.sim_sticks, cmd_vel_topic=args.cmd_vel_topic,
        command_path=None if args.command_path == "auto" else args.command_path,
    )  # fmt: skip


def report(summary: dict) -> None:
    """Print what a run measured: the loops' timing, the MPC's cycles, the safety events,
    the backend's counters, the base state and the steering."""
    print(format_summary("command loop", summary["timing"]["command"]))
    apart = summary["controller_process"]
    if apart is not None:
        print(format_summary("controller (its own process)", apart["timing"]))
        print(f"controller calls {apart['calls']}, errors {apart['errors']}")
    else:
        print(format_summary("controller", summary["timing"]["controller"]))
    print(format_summary("LowCmd writer", summary["lowcmd_writer_timing"]))
    m = summary["mpc"]
    if m is not None:
        print(
            f"MPC solver: {m['cycles']} cycles, median {1e3 * m.get('median_s', np.nan):.1f} "
            f"ms, p99 {1e3 * m.get('p99_s', np.nan):.1f} ms, overruns {m['overruns']} "
            f"({m['overruns'] / max(m['cycles'], 1):.0%}), plan age median "
            f"{1e3 * m['plan_age_median_s']:.1f} ms p99 {1e3 * m['plan_age_p99_s']:.1f} ms, "
            f"lookahead {1e3 * m['lookahead_median_s']:.0f} ms, error {m['error']}"
        )
    for e in summary["safety_events"]:
        print(f"  t={e['start']:.3f} {e['kind']} x{e['count']} {e['detail']}")
    b = summary["backend"]
    print(f"backend: {b['counters']}, drivers {b['mode']}, watchdog trips "
          f"{len(b['watchdog_trips'])}, stale-state trips {len(b['state_trips'])}")  # fmt: skip
    if summary["simulated_go2"] is not None:
        s = summary["simulated_go2"]
        print(f"simulated Go2: {s['drivers']}, {s['transport']}, motors {s['mode']}")
    print(f"base height (as measured{', estimated' if summary['estimator'] else ''}) min "
          f"{summary['min_base_height_m']:.4f} settled {summary['settled_base_height_m']:.4f} m, "
          f"average speed {summary['average_speed_m_per_s']:.3f} m/s, "
          f"safety mode {summary['safety_mode']}")  # fmt: skip
    steering = summary["steering"]
    print(f"steering: {steering['mode']}, box {steering['box']}, counters {steering['counters']}")
    if summary["ground_truth"] is not None:
        g = summary["ground_truth"]
        print(
            f"ground truth: base height min {g['min_base_height_m']:.4f} m, average speed "
            f"{g['average_speed_m_per_s']:.3f} m/s"
        )


if __name__ == "__main__":
    main()
