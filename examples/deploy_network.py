"""Run a controller through the UDP transport against a robot process on loopback.

    python examples/deploy_network.py --robot go2 --seconds 5 --out results
    python examples/deploy_network.py --drop 0.1 --corrupt 0.02     # through a lossy link
    python examples/deploy_network.py --controller mpc --velocity 0.5   # MPC trot, lockstep

Starts `python -m controllers.hardware.robot_server` (a simulated robot, MuJoCo by default, in real
time) as a subprocess, connects a `controllers.hardware.backends.udp.UdpRobot` to it (optionally
through a `controllers.hardware.faults.UdpFaultProxy` that drops and corrupts datagrams), runs the
stand controller through the safety layer in wall-clock time (controller thread at `--control-rate`,
command loop at `--command-rate`), then asks the robot for its counters, shuts it down and prints:
timing statistics (jitter, overruns, missed ticks), what each side rejected and counted, the safety
interventions, and the base height. Saves a summary (json).

`--controller mpc` runs the MPC trot (`controllers.state_feedback.mpc_controller`). Its cycle
(about 0.15 s per FDDP iteration for Go2 on this CPU, three per cycle) is slower than real
time, so by default it runs in lockstep: the robot process (`--lockstep`) simulates only when
the controller's side (`LockstepUdpRobot`) sends STEP, and the loop runs in simulated time,
through the same transport, checks, drivers and safety layer. `--no-lockstep` runs it in real
time anyway (it falls behind and the safety layer damps the robot).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os

import dynamics
from controllers.hardware import control_loop, robot_server
from controllers.hardware.backends.udp import LockstepUdpRobot, UdpRobot
from controllers.hardware.faults import UdpFaultProxy
from controllers.hardware.interface import JointMap, VelocityCommand
from controllers.hardware.pose import PoseController
from controllers.hardware.safety import SafetyConfig, SafetyLayer
from controllers.hardware.timing import format_summary
from controllers.state_feedback import mpc_controller, mpc_safety_config


def robot_process(robot: str, backend: str, command_timeout: float, startup_timeout=120.0,
                  lockstep=False, timestep=0.002):  # fmt: skip
    """The robot process on a free loopback port; yields `(process, port)`; always stopped."""
    args = ["--robot", robot, "--backend", backend, "--command-timeout", str(command_timeout),
            "--max-command-age", str(command_timeout), "--max-lifetime", "3600",
            "--timestep", str(timestep)] + (["--lockstep"] if lockstep else [])  # fmt: skip
    return robot_server.spawn(args, startup_timeout=startup_timeout)


def run(robot_name="go2", seconds=5.0, backend="mujoco", control_rate=50.0, command_rate=500.0,
        drop=0.0, corrupt=0.0, timeout=0.3, controller="stand", lockstep=None, velocity=0.5,
        horizon=0.5, iterations=3):  # fmt: skip
    joint_map = JointMap.from_model(dynamics.load_robot(robot_name))
    lockstep = controller == "mpc" if lockstep is None else lockstep
    source = None
    if controller == "mpc":
        ctrl = mpc_controller(robot_name, joint_map, "trot", horizon, iterations)
        config = mpc_safety_config()
        source = lambda t: VelocityCommand(velocity if t >= 0.5 else 0.0, 0.0, 0.0)  # noqa: E731
    else:
        ctrl = PoseController.standing(joint_map)
        config = SafetyConfig(soft_start_duration=1.0)
    config = dataclasses.replace(config, command_timeout=timeout, measurement_timeout=timeout)
    with contextlib.ExitStack() as stack:
        proc, port = stack.enter_context(
            robot_process(
                robot_name, backend, timeout, lockstep=lockstep, timestep=1.0 / command_rate
            )  # fmt: skip
        )
        address = ("127.0.0.1", port)
        proxy = None
        if drop > 0 or corrupt > 0:
            proxy = stack.enter_context(UdpFaultProxy(address))
            for link in (proxy.to_robot, proxy.to_controller):
                link.drop, link.corrupt = drop, corrupt
            address = proxy.address
        if lockstep:
            robot = LockstepUdpRobot(address, joint_map, connect_timeout=10)
        else:
            robot = UdpRobot(address, joint_map, max_measurement_age=timeout, connect_timeout=10)
        stack.callback(robot.close)
        result = control_loop.run(
            robot,
            ctrl,
            SafetyLayer(joint_map, config),
            duration=seconds,
            control_dt=1.0 / control_rate,
            command_dt=1.0 / command_rate,
            command_source=source,
            start_timeout=10.0,
        )
        status = robot.status(timeout=3.0)
        robot.shutdown_robot()
        proc.wait(timeout=10)
    return {
        "robot": robot_name,
        "backend": backend,
        "controller": controller,
        "lockstep": lockstep,
        "seconds": seconds,
        "average_speed_m_per_s": control_loop.average_speed(
            result.log, after=min(1.5, 0.5 * seconds)
        ),
        "controller_side": {"counters": dict(robot.counters), "lost_measurements": robot.lost},
        "robot_side": status,
        "link": None if proxy is None else proxy.counters,
        "robot_process_exit_code": proc.returncode,
        **result.summary(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--backend", default="mujoco", choices=("mujoco", "sim"))
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--control-rate", type=float, default=50.0, help="[Hz]")
    parser.add_argument("--command-rate", type=float, default=500.0, help="[Hz]")
    parser.add_argument("--drop", type=float, default=0.0, help="datagram loss, each way")
    parser.add_argument("--corrupt", type=float, default=0.0, help="corrupted datagrams")
    parser.add_argument("--timeout", type=float, default=0.3, help="all watchdogs [s]")
    parser.add_argument("--controller", default="stand", choices=("stand", "mpc"))
    parser.add_argument(
        "--lockstep",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="simulate on the controller's STEP (default: with --controller mpc)",
    )
    parser.add_argument("--velocity", type=float, default=0.5, help="MPC forward command [m/s]")
    parser.add_argument("--horizon", type=float, default=0.5, help="MPC horizon [s]")
    parser.add_argument("--iterations", type=int, default=3, help="MPC FDDP iterations/cycle")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    summary = run(args.robot, args.seconds, args.backend, args.control_rate,
                  args.command_rate, args.drop, args.corrupt, args.timeout, args.controller,
                  args.lockstep, args.velocity, args.horizon, args.iterations)  # fmt: skip
    print(format_summary("command loop", summary["timing"]["command"]))
    print(format_summary("controller", summary["timing"]["controller"]))
    rejected = {k: v for k, v in summary["controller_side"]["counters"].items() if v}
    print(f"controller side: {rejected}, lost {summary['controller_side']['lost_measurements']}")
    side = summary["robot_side"]
    print(f"robot side: mode {side['mode']}, transport "
          f"{ {k: v for k, v in side['transport'].items() if v} }, drivers "
          f"{ {k: v for k, v in side['driver'].items() if v} }")  # fmt: skip
    for e in summary["safety_events"]:
        print(f"  t={e['start']:.3f} {e['kind']} x{e['count']} {e['detail']}")
    if args.controller == "mpc":
        print(f"average forward speed after 1.5 s: {summary['average_speed_m_per_s']:.3f} m/s "
              f"(command {args.velocity} m/s)")  # fmt: skip
    print(f"settled base height {summary['settled_base_height_m']:.4f} m, "
          f"safety mode {summary['safety_mode']}")  # fmt: skip
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"deploy_network_{args.robot}.json")
    with open(path, "w") as f:
        json.dump(summary, f, indent=2)
    print(f"summary saved to {os.path.abspath(path)}")
    return summary


if __name__ == "__main__":
    main()
