"""Run a controller through the UDP transport against a robot process on loopback.

    python examples/deploy_network.py --robot go2 --seconds 5 --out results
    python examples/deploy_network.py --drop 0.1 --corrupt 0.02     # through a lossy link
    python examples/deploy_network.py --controller mpc --velocity 0.5   # MPC trot, lockstep

Starts `python -m hardware.robot_server` (a simulated robot, MuJoCo by default, in real
time) as a subprocess, connects a `hardware.backends.udp.UdpRobot` to it (optionally
through a `hardware.faults.UdpFaultProxy` that drops and corrupts datagrams), runs the
stand controller through the safety layer in wall-clock time (controller thread at `--control-rate`,
command loop at `--command-rate`), then asks the robot for its counters, shuts it down and prints:
timing statistics (jitter, overruns, missed ticks), what each side rejected and counted, the safety
interventions, and the base height. Saves a summary (json).

`--controller mpc` runs the MPC trot in real time (`controllers.realtime_mpc.RealTimeMPC`): the
robot process simulates in wall-clock time and never waits; a solver process (`--solver`,
pinned to the last core, the rest on the others: `--solver-core`) replans (one FDDP iteration
per cycle, `--iterations`: at 50 Hz) from the newest measurement, from the state its planning model
predicts when the plan will arrive (`--lookahead`, by default the recent plan age), while the
controller calls (`--control-rate`, 100 Hz for the MPC by default) apply the newest plan at the
current time. The first plan is solved before the robot starts. It prints the MPC's cycle-time
statistics, overruns (cycles longer than one 20 ms knot) and plan ages.

    python examples/deploy_network.py --controller mpc --velocity 0.5 --seconds 10

`--lockstep` instead runs the plain MPC (three FDDP iterations per 20 ms cycle, the plan's first
knot held) in simulated time: the robot process simulates only when the controller's side
(`LockstepUdpRobot`) sends STEP, through the same transport, checks, drivers and safety layer.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os

import dynamics
from controllers.mpc_process import pin_beside_the_solver
from controllers.realtime_mpc import realtime_mpc_controller
from controllers.state_feedback import mpc_controller, mpc_safety_config
from hardware import control_loop, robot_server
from hardware.backends.udp import LockstepUdpRobot, UdpRobot
from hardware.faults import UdpFaultProxy
from hardware.interface import JointMap, VelocityCommand
from hardware.pose import PoseController
from hardware.safety import SafetyConfig, SafetyLayer
from hardware.timing import format_summary
from native import c_library
from trajopt.problem import DERIVATIVES


def robot_process(robot: str, backend: str, command_timeout: float, startup_timeout=120.0,
                  lockstep=False, timestep=0.002):  # fmt: skip
    """The robot process on a free loopback port; yields `(process, port)`; always stopped."""
    args = ["--robot", robot, "--backend", backend, "--command-timeout", str(command_timeout),
            "--max-command-age", str(command_timeout), "--max-lifetime", "3600",
            "--timestep", str(timestep)] + (["--lockstep"] if lockstep else [])  # fmt: skip
    return robot_server.spawn(args, startup_timeout=startup_timeout)


def run(robot_name="go2", seconds=5.0, backend="mujoco", control_rate=None, command_rate=500.0,
        drop=0.0, corrupt=0.0, timeout=0.3, controller="stand", lockstep=False, velocity=0.5,
        horizon=0.5, iterations=None, lookahead="auto", substeps=2,
        contact="smooth", sweeps=10, solver="process", solver_core="auto",
        derivatives="compiled", cycle_budget=None):  # fmt: skip
    """Run one deployment (see the module docstring); returns the summary dict. Defaults by
    controller: the stand at 50 Hz; the MPC at 100 Hz with 1 FDDP iteration per cycle in real
    time, 50 Hz with 3 per cycle in lockstep. `lookahead` [s] or "auto": the real-time MPC's
    latency compensation (`RealTimeMPC`); `substeps`, `contact`, `sweeps`, `derivatives`
    (of the impulse solve, `trajopt.problem.Problem`; "compiled" by default: the implicit
    derivatives in generated C, the cycle that walks, BENCHMARKS.md "MPC", "real time over
    UDP against MuJoCo"): the MPC's planning model. `solver`: "process" (the solves in a
    process of their own) or "thread"; `solver_core`: the core that process runs on, the
    robot process and this one on the others ("auto": the last core when
    there are two or more; None: not pinned). `cycle_budget` [s]: the real-time MPC's time per
    cycle (`iterations` are a maximum: a cycle does not begin an iteration that would end past
    it, `trajopt.engine.fddp.next_iteration_overruns`; the summary counts the iterations each cycle
    ran)."""
    joint_map = JointMap.from_model(dynamics.load_robot(robot_name))
    realtime_mpc = controller == "mpc" and not lockstep
    if control_rate is None:
        control_rate = 100.0 if realtime_mpc else 50.0
    if iterations is None:
        iterations = 3 if controller == "mpc" and lockstep else 1
    original = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if realtime_mpc and solver == "process":
        solver_core = pin_beside_the_solver(solver_core)
    try:
        return _run(robot_name, seconds, backend, control_rate, command_rate, drop, corrupt,
                    timeout, controller, lockstep, velocity, horizon, iterations, lookahead,
                    substeps, contact, sweeps, solver, solver_core, joint_map, realtime_mpc,
                    derivatives, cycle_budget)
    finally:  # a caller in this process (a test) gets its cores back
        if original is not None:
            os.sched_setaffinity(0, original)


def _run(robot_name, seconds, backend, control_rate, command_rate, drop, corrupt, timeout,
         controller, lockstep, velocity, horizon, iterations, lookahead, substeps, contact,
         sweeps, solver, solver_core, joint_map, realtime_mpc, derivatives,
         cycle_budget):  # fmt: skip
    source = None
    if controller == "mpc":
        if realtime_mpc:
            ctrl = realtime_mpc_controller(robot_name, joint_map, "trot", horizon, iterations,
                                           lookahead=lookahead, substeps=substeps,
                                           contact=contact, num_sweeps=sweeps,
                                           derivatives=derivatives, time_budget=cycle_budget,
                                           process=solver == "process",
                                           core=solver_core)  # fmt: skip
            # the first plan and every compilation before the robot runs: the reset then takes
            # one cycle, and the robot is not left passive meanwhile
            ctrl.prepare()
        else:
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
        if realtime_mpc:
            stack.callback(ctrl.shutdown)
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
        mpc_summary = ctrl.summary() if realtime_mpc else None
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
        "mpc": mpc_summary,
        **result.summary(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--backend", default="mujoco", choices=("mujoco", "sim"))
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--control-rate", type=float, default=None,
                        help="[Hz] (default: 100 for the real-time MPC, else 50)")  # fmt: skip
    parser.add_argument("--command-rate", type=float, default=500.0, help="[Hz]")
    parser.add_argument("--drop", type=float, default=0.0, help="datagram loss, each way")
    parser.add_argument("--corrupt", type=float, default=0.0, help="corrupted datagrams")
    parser.add_argument("--timeout", type=float, default=0.3, help="all watchdogs [s]")
    parser.add_argument("--controller", default="stand", choices=("stand", "mpc"))
    parser.add_argument(
        "--lockstep",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="simulate on the controller's STEP (simulated time) instead of in real time",
    )
    parser.add_argument("--velocity", type=float, default=0.5, help="MPC forward command [m/s]")
    parser.add_argument("--horizon", type=float, default=0.5, help="MPC horizon [s]")
    parser.add_argument("--iterations", type=int, default=None,
                        help="MPC FDDP iterations per cycle (default: 1 real time, 3 lockstep)")
    parser.add_argument("--lookahead", default="auto",
                        help="real-time MPC latency compensation [s], or 'auto' (the recent "
                             "median cycle time rounded up to knots), 0 for none")  # fmt: skip
    parser.add_argument("--substeps", type=int, default=2,
                        help="real-time MPC: contact steps per 20 ms knot in the planning model")
    parser.add_argument("--contact", default="smooth", choices=("smooth", "hard"),
                        help="real-time MPC: the planning model's contact")
    parser.add_argument("--sweeps", type=int, default=10,
                        help="real-time MPC: prox sweeps of the planning model's contact solve")
    parser.add_argument("--derivatives", default="compiled",
                        choices=DERIVATIVES,
                        help="real-time MPC: the planning model's impulse-solve derivatives "
                             "(compiled, the default: the implicit ones in C generated by "
                             "CasADi, needs a C compiler; implicit: the same in JAX)")  # fmt: skip
    parser.add_argument("--solver", default="process", choices=("process", "thread"),
                        help="real-time MPC: solve in a separate process or in a thread")
    parser.add_argument("--solver-core", default="auto",
                        help="real-time MPC: the solver process's CPU core (the rest run on the "
                             "others); 'auto' (the last of two or more) or 'none'")
    parser.add_argument("--cycle-budget", type=float, default=None,
                        help="real-time MPC: seconds per cycle; --iterations is then a maximum "
                             "(e.g. --iterations 2 --cycle-budget 0.016)")  # fmt: skip
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    if args.solver_core not in ("auto", "none"):
        try:
            args.solver_core = int(args.solver_core)
        except ValueError:
            parser.error(f"--solver-core must be a core index, 'auto' or 'none', "
                         f"got {args.solver_core!r}")  # fmt: skip
    elif args.solver_core == "none":
        args.solver_core = None
    if args.derivatives == "compiled" and args.controller == "mpc" and not args.lockstep:
        if not c_library.compiler_available():
            parser.error(f"--derivatives compiled needs a C compiler "
                         f"({c_library.compiler()!r} was not found: install gcc or set CC), "
                         "or use --derivatives implicit")
    if args.lookahead != "auto":
        try:
            args.lookahead = float(args.lookahead)
        except ValueError:
            parser.error(f"--lookahead must be 'auto' or seconds, got {args.lookahead!r}")
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    summary = run(args.robot, args.seconds, args.backend, args.control_rate,
                  args.command_rate, args.drop, args.corrupt, args.timeout, args.controller,
                  args.lockstep, args.velocity, args.horizon, args.iterations, args.lookahead,
                  args.substeps, args.contact, args.sweeps, args.solver,
                  args.solver_core, args.derivatives, args.cycle_budget)  # fmt: skip
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
    if summary["mpc"] is not None and summary["mpc"]["cycles"] == 0:
        print(f"MPC solver: no cycle after the first plan, solver error {summary['mpc']['error']}")
    elif summary["mpc"] is not None:
        m = summary["mpc"]
        print(f"MPC solver: {m['cycles']} cycles, median {1e3 * m['median_s']:.0f} ms, p99 "
              f"{1e3 * m['p99_s']:.0f} ms, max {1e3 * m['max_s']:.0f} ms, overruns (> 20 ms) "
              f"{m['overruns']}, plan age median {1e3 * m['plan_age_median_s']:.0f} ms, "
              f"p99 {1e3 * m['plan_age_p99_s']:.0f} ms, fallbacks {m['fallback_cycles']}, "
              f"stand {m['stand_cycles']}, iterations per cycle {m['iterations_per_cycle']}, "
              f"solver error {m['error']}")  # fmt: skip
    if args.controller == "mpc":
        print(f"average forward speed after 1.5 s: {summary['average_speed_m_per_s']:.3f} m/s "
              f"(command {args.velocity} m/s)")  # fmt: skip
    print(f"settled base height {summary['settled_base_height_m']:.4f} m, peak joint speed "
          f"{summary['peak_joint_speed_fraction']:.2f} of the velocity limit, "
          f"safety mode {summary['safety_mode']}")  # fmt: skip
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"deploy_network_{args.robot}.json")
    with open(path, "w") as f:
        json.dump(summary, f, indent=2)
    print(f"summary saved to {os.path.abspath(path)}")
    return summary


if __name__ == "__main__":
    main()
