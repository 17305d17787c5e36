"""Run a controller on a Go2 over the robot's own protocol (Unitree SDK 2's DDS topics), through
the hardware interface, a state estimator and the safety layer, in real time, and log the run.

    python examples/deploy_go2.py --seconds 10                          # simulated Go2, stand up
    python examples/deploy_go2.py --controller policy --velocity 0.5    # the shipped policy
    python examples/deploy_go2.py --controller mpc --velocity 0.5       # the real-time MPC
    python examples/deploy_go2.py --controller mpc --lockstep --seconds 5   # ... in robot time
    python examples/view.py --log runs/deploy_go2_mpc_<time>            # look at the run

    # unitree_mujoco (its simulate/config.yaml: domain 1, interface lo), started beforehand:
    python examples/deploy_go2.py --no-sim --domain 1 --interface lo
    # the robot: domain 0 on the wired network card (e.g. eth0, 192.168.123.x), sport mode
    # released first; lay the robot down, hold the remote (L2 + B = e-stop), then run this and
    # press START (stand up), A (the controller), SELECT (back to hold, again: passive):
    python examples/deploy_go2.py --no-sim --domain 0 --interface eth0 --release-sport-mode

Without `--no-sim` the example starts the simulated Go2 (`python -m hardware.go2.sim`: MuJoCo
behind the same topics, with its true base state on a topic of ours for the log,
`--ground-truth-topic`) on `--domain` over loopback, and stops it at the end. The backend
(`hardware.go2.robot`) sends LowCmd at 500 Hz from its own thread; the safety layer runs at
`--command-rate`, the controller at its own rate in a thread of its own.

The start-up sequence (`hardware.startup.StartupSequence`, in `with_startup`) wraps the
controller: PASSIVE (damping) -> STAND_UP (from the measured pose to standing in `--stand-up`
s) -> HOLD -> CONTROLLER, on the remote's buttons (START: stand up, A: the controller, SELECT:
stop) and, with `--auto-start` (the default in simulation), from software: stand up as soon as
the drivers are armed, the controller `SETTLE` s after the stand-up once the base state is
there. The controller then runs `--seconds` (the velocity command `--velocity` after
`WALK_AFTER` s); `--controller stand` only stands up and holds for `--seconds`:
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
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import subprocess
import sys
import time

import numpy as np

import dynamics
from controllers.mpc_process import pin_beside_the_solver
from hardware import control_loop
from hardware.deployment_log import DeploymentLogWriter, RecordingRobot
from hardware.estimated_robot import EstimatedRobot
from hardware.estimator import EstimatorConfig, StateEstimator
from hardware.go2 import conversions
from hardware.go2.robot import Go2Robot, LockstepGo2Robot
from hardware.go2.sim import spawn as spawn_simulated_go2
from hardware.interface import JointMap, VelocityCommand
from hardware.pose import StandUpController
from hardware.safety import SafetyConfig, SafetyLayer
from hardware.startup import AutoStart, StartupSequence
from hardware.timing import format_summary

LYING = (0.0, 1.36, -2.65)  # [rad] hip, thigh, calf of each leg, lying on the belly
WALK_AFTER = 1.0  # [s] zero velocity command before `--velocity`
SETTLE = 1.0  # [s] holding the standing pose after the stand-up, before the controller
SHIPPED_POLICY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "policies",
                              "go2_omni_proprio")


def lying_configuration(model) -> np.ndarray:
    q = np.asarray(model.q_standing, dtype=float).copy()
    q[2], q[7:] = 0.12, np.tile(LYING, 4)
    return q


@dataclasses.dataclass
class MPCOptions:
    """The real-time MPC's settings (`controllers.realtime_mpc.realtime_mpc_controller`; the
    defaults are `examples/deploy_network.py`'s, the configuration that walks)."""

    horizon: float = 0.5
    iterations: int = 1
    lookahead: float | str = "auto"
    substeps: int = 2
    contact: str = "smooth"
    sweeps: int = 10
    derivatives: str = "compiled"
    solver: str = "process"
    solver_core: int | str | None = "auto"


def controller_inputs(kind: str, policy=None) -> tuple:
    """The Measurement fields a controller reads beyond the joints and the IMU's attitude:
    a policy's declared "inputs", the MPC's whole base state, nothing for the stand."""
    if kind == "policy":
        from learning.policy_export import load_numpy_policy, policy_inputs

        return tuple(policy_inputs(load_numpy_policy(policy).config))
    if kind == "mpc":
        return ("base_linear_velocity", "base_position")
    return ()


def make_controller(kind: str, joint_map: JointMap, policy=None, stand_up=1.5, lockstep=False,
                    mpc: MPCOptions | None = None, solver_core=None):  # fmt: skip
    """`(controller, SafetyConfig changes, controller period [s])`. The real-time MPC is
    prepared here (its first plan and every compilation), before any robot is connected."""
    if kind == "stand":
        return StandUpController(joint_map, stand_up), {}, 0.02
    if kind == "policy":
        from learning.policy_adapter import PolicyController
        from learning.policy_export import load_numpy_policy

        runner = load_numpy_policy(policy)
        config = runner.config
        if tuple(config["joint_names"]) != joint_map.names:
            raise ValueError(f"the policy's joints {config['joint_names']} are not Go2's")
        controller = PolicyController(
            runner, joint_map, action_scale=config["action_scale"],
            kp=np.asarray(config["kp"]), kd=np.asarray(config["kd"]),
        )  # fmt: skip
        return controller, {"soft_start_duration": 0.2}, float(config["control_dt"])
    if kind == "mpc":
        from controllers.realtime_mpc import realtime_mpc_controller
        from controllers.state_feedback import mpc_controller, mpc_safety_config

        safety = mpc_safety_config(soft_start=0.2)
        changes = {k: getattr(safety, k) for k in safety.__dataclass_fields__}
        if lockstep:
            return mpc_controller("go2", joint_map, "trot", (mpc or MPCOptions()).horizon, 3), \
                changes, 0.02  # fmt: skip
        o = mpc or MPCOptions()
        controller = realtime_mpc_controller(
            "go2", joint_map, "trot", o.horizon, o.iterations, lookahead=o.lookahead,
            substeps=o.substeps, contact=o.contact, num_sweeps=o.sweeps,
            derivatives=o.derivatives, process=o.solver == "process", core=solver_core,
        )  # fmt: skip
        controller.prepare()
        return controller, changes, 0.01
    raise ValueError(f"unknown controller {kind!r}")


def with_startup(
    controller,
    joint_map: JointMap,
    go2,
    stand_up: float,
    auto: bool,
    controller_after: float | None,
    required_inputs=(),
) -> AutoStart:
    """THE place where the start-up sequence wraps the controller (`AutoStart`);
    `required_inputs`: the Measurement fields the controller reads (a policy's "inputs")."""
    sequence = StartupSequence(controller, joint_map, buttons=lambda: go2.buttons,
                               stand_duration=stand_up, backend=type(go2).__name__,
                               required_inputs=required_inputs,
                               estimated_inputs=("base_linear_velocity", "base_position"),
                               warm_up=False)  # fmt: skip
    return AutoStart(sequence, auto, controller_after)


@contextlib.contextmanager
def simulated_go2(domain, lying: bool, lifetime: float, lockstep: bool = False, extra=()):
    """The simulated Go2 process, or nothing when `domain` is None."""
    if domain is None:
        yield None
        return
    args = ["--domain", str(domain), "--interface", "lo", "--max-lifetime", str(lifetime)]
    if lockstep:
        args.append("--lockstep")
    if lying:
        model = dynamics.load_robot("go2")
        args += ["--q0", json.dumps(lying_configuration(model).tolist())]
    with spawn_simulated_go2(args + list(extra), stderr=subprocess.DEVNULL) as proc:
        yield proc


# --------------------------------------------------------------------------- log probes
def truth_probe(go2):
    """A log probe of the simulated Go2's true base state as `go2` received it (`Go2Robot.truth`
    from `--ground-truth-topic`): `{"base_position" (3,) world [m], "base_linear_velocity" (3,)
    base frame [m/s]}`, or {} before the first sample."""

    def probe() -> dict:
        sample = go2.truth  # (receive time, position, velocity)
        if sample is None:
            return {}
        return {"base_position": sample[1], "base_linear_velocity": sample[2]}

    return probe


def estimator_probe(robot):
    """A log probe of `EstimatedRobot` `robot`: its newest `hardware.estimator.Estimate`'s
    velocity (base frame) [m/s], position [m], height above the stance feet [m], NIS (total
    and per foot), contact weights, valid flag and fault ("" when none)."""

    def probe() -> dict:
        e = robot.estimate
        return {
            "base_linear_velocity": e.base_linear_velocity,
            "base_position": e.base_position,
            "base_height": e.base_height,
            "nis": e.nis,
            "foot_nis": e.foot_nis,
            "contact_weights": e.contact_weights,
            "valid": bool(e.valid),
            "fault": e.fault or "",
        }

    return probe


def make_estimated_robot(robot, estimator_settings: dict):
    """`(EstimatedRobot(robot, StateEstimator(go2, EstimatorConfig(**settings))),
    the config as a dict)` (`hardware.estimated_robot`, `hardware.estimator`)."""
    config = EstimatorConfig(**estimator_settings)
    estimator = StateEstimator(dynamics.load_robot("go2"), config)
    wrapped = EstimatedRobot(robot, estimator, replace_ground_truth=True)
    return wrapped, json.loads(json.dumps(dataclasses.asdict(config), default=str))


# --------------------------------------------------------------------------- the run
def default_log_folder(log_dir: str, controller: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join(log_dir, f"deploy_go2_{controller}_{stamp}_{os.getpid()}")


def run(controller="stand", seconds=10.0, domain=1, interface="lo", sim=True, policy=None,
        velocity=0.5, command_rate=500.0, stand_up=1.5, release_sport_mode=False,
        lockstep=False, state_timeout=0.1, estimator="auto", estimator_settings=None,
        mpc: MPCOptions | None = None, log_folder=None, log_dir="runs",
        command_line=None, auto_start=None):  # fmt: skip
    """One deployment (module docstring); returns `(summary, loop result)`. `estimator`: "on",
    "off" or "auto" (on when no sport state arrives); `auto_start`: the start-up requests
    from software as well as from the remote (default: in simulation only)."""
    auto_start = sim if auto_start is None else bool(auto_start)
    mpc = mpc or MPCOptions()
    realtime_mpc = controller == "mpc" and not lockstep
    original = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    solver_core = None
    if realtime_mpc and mpc.solver == "process":
        solver_core = pin_beside_the_solver(mpc.solver_core)
    try:
        return _run(
            controller,
            seconds,
            domain,
            interface,
            sim,
            policy,
            velocity,
            command_rate,
            stand_up,
            release_sport_mode,
            lockstep,
            state_timeout,
            estimator,
            dict(estimator_settings or {}),
            mpc,
            solver_core,
            realtime_mpc,
            log_folder or default_log_folder(log_dir, controller),
            command_line,
            auto_start,
        )
    finally:  # a caller in this process (a test) gets its cores back
        if original is not None:
            os.sched_setaffinity(0, original)


def _run(controller, seconds, domain, interface, sim, policy, velocity, command_rate, stand_up,
         release_sport_mode, lockstep, state_timeout, estimator, estimator_settings, mpc,
         solver_core, realtime_mpc, log_folder, command_line, auto_start):  # fmt: skip
    joint_map = JointMap.from_model(dynamics.load_robot("go2"))
    if lockstep and not sim:
        raise ValueError("--lockstep needs the simulated Go2 (no --no-sim)")
    if estimator not in ("on", "off", "auto"):
        raise ValueError(f"estimator must be 'on', 'off' or 'auto', got {estimator!r}")
    ctrl, safety_changes, control_dt = make_controller(controller, joint_map, policy, stand_up,
                                                       lockstep, mpc, solver_core)  # fmt: skip
    config = SafetyConfig(**{"soft_start_duration": 0.5, **safety_changes})
    config = dataclasses.replace(config, command_timeout=0.3, measurement_timeout=state_timeout)
    command_dt = 1.0 / command_rate
    control_dt = max(command_dt, round(control_dt / command_dt) * command_dt)
    walk = controller != "stand"
    extra = ["--ground-truth-topic", conversions.TOPIC_GROUND_TRUTH] if sim else []
    sim_final = None
    duration = stand_up + SETTLE + seconds if walk else seconds
    lifetime = duration + 180 if not lockstep else 3600
    outer, stack = contextlib.ExitStack(), contextlib.ExitStack()  # the simulator; the rest
    log = None
    try:
        if realtime_mpc:
            outer.callback(ctrl.shutdown)
        proc = outer.enter_context(
            simulated_go2(domain if sim else None, not walk, lifetime, lockstep, extra)
        )
        truth_topic = sim  # the simulated Go2 publishes its true base state
        kwargs = dict(domain=domain, interface=interface or None, command_timeout=0.3,
                      max_command_age=0.3, release_sport_mode=release_sport_mode,
                      ground_truth=truth_topic)  # fmt: skip
        if lockstep:
            go2 = LockstepGo2Robot(joint_map, **kwargs)
        else:
            go2 = Go2Robot(joint_map, state_timeout=state_timeout, **kwargs)
        stack.callback(go2.close)
        use_estimator = estimator == "on" or (estimator == "auto" and go2.sport is None)
        robot = go2
        if use_estimator:
            robot, estimator_settings = make_estimated_robot(go2, estimator_settings)
        startup = with_startup(
            ctrl,
            joint_map,
            go2,
            stand_up,
            auto_start,
            controller_after=stand_up + SETTLE if walk else None,
            required_inputs=controller_inputs(controller, policy),
        )
        probes = {"startup": lambda: {"phase": startup.sequence.phase.value}}
        truth_source = conversions.TOPIC_GROUND_TRUTH if truth_topic else None
        if truth_topic:
            probes["truth"] = truth_probe(go2)
        if use_estimator:
            probes["estimator"] = estimator_probe(robot)
        header = {
            "robot": "go2", "controller": controller,
            "policy": os.path.abspath(policy) if controller == "policy" else None,
            "estimator": {"on": use_estimator, "requested": estimator,
                          "settings": estimator_settings},
            "simulated": sim, "lockstep": lockstep, "domain": domain, "interface": interface,
            "velocity_command_m_per_s": velocity if walk else 0.0, "walk_after_s": WALK_AFTER,
            "stand_up_s": stand_up, "auto_start": auto_start, "control_dt": control_dt,
            "command_dt": command_dt,
            "mpc": dataclasses.asdict(mpc) if controller == "mpc" else None,
            "ground_truth": truth_source, "joint_names": list(joint_map.names),
            "foot_names": list(dynamics.load_robot("go2").foot_names),
            "command_line": command_line,
        }  # fmt: skip
        log = DeploymentLogWriter(log_folder, header)
        safety = SafetyLayer(joint_map, config)
        recorder = RecordingRobot(robot, log, safety=safety, probes=probes)
        result = control_loop.run(
            recorder, startup, safety, duration=duration, control_dt=control_dt,
            command_dt=command_dt, start_timeout=5.0, on_tick=startup.on_tick,
            command_source=lambda t: VelocityCommand(velocity if startup.walking(t, WALK_AFTER)
                                                     else 0.0),
        )  # fmt: skip
        mpc_summary = ctrl.summary() if realtime_mpc else None
        backend = go2.status()
        stack.close()  # the readers, the robot: the LowCmd writer thread stops
        writer = go2.timing.summary()
        if proc is not None:
            proc.send_signal(15)
            out, _ = proc.communicate(timeout=30)
            sim_final = json.loads(out.strip().splitlines()[-1])["final_status"]
            sim_final.pop("history")
        started = startup.controller_started
        summary = {
            "controller": controller, "seconds": seconds, "domain": domain,
            "interface": interface, "simulated": sim, "lockstep": lockstep,
            "estimator": use_estimator, "log": os.path.abspath(log_folder),
            "startup": [(round(tr.t, 3), tr.source.value, tr.target.value, tr.reason, tr.accepted)
                        for tr in startup.sequence.transitions],
            "controller_started_s": started,
            "velocity_command_m_per_s": velocity if walk else 0.0,
            "average_speed_m_per_s": float("nan") if started is None else
            control_loop.average_speed(result.log, after=started + WALK_AFTER + 1.0),
            "backend": backend, "lowcmd_writer_timing": writer, "simulated_go2": sim_final,
            "mpc": mpc_summary, "log_probe_failures": recorder.probe_failures,
            **loop_summary(result),
        }  # fmt: skip
        summary["ground_truth"] = None
        log.close(summary)
        summary["ground_truth"] = ground_truth_summary(log_folder)
        return summary, result
    finally:
        stack.close()
        outer.close()
        if log is not None:
            log.close(log.summary)  # an interrupted run: what was written stays
            print(f"deployment log: {os.path.abspath(log_folder)}")


def loop_summary(result) -> dict:
    """`LoopResult.summary()`, with NaN base heights when no tick had a base position (the
    estimator not yet valid in a short stand-up)."""
    if np.any(np.isfinite(result.log["base_position"][:, 2])):
        return result.summary()
    log = dict(result.log, base_position=np.zeros_like(result.log["base_position"]))
    out = dataclasses.replace(result, log=log).summary()
    out["min_base_height_m"] = out["settled_base_height_m"] = float("nan")
    return out


def ground_truth_summary(folder: str) -> dict | None:
    """The controller phase's true base height (min) [m] and average forward speed after
    `WALK_AFTER + 1` s [m/s] from the log's ground truth; None without one."""
    from hardware.deployment_log import DeploymentLog

    run = DeploymentLog.load(folder)
    if "truth_base_position" not in run:
        return None
    phases = run["startup_phase"]
    phase = phases == "controller" if "controller" in set(phases) else np.ones(len(run), bool)
    t, p = run["t"][phase], run["truth_base_position"][phase]
    ok = np.all(np.isfinite(p), axis=1)
    if not np.any(ok):
        return None
    t, p = t[ok] - t[ok][0], p[ok]
    return {
        "min_base_height_m": float(np.min(p[:, 2])),
        "average_speed_m_per_s": control_loop.average_speed(
            {"t": t, "base_position": p}, after=WALK_AFTER + 1.0
        ),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--controller", default="stand", choices=("stand", "policy", "mpc"))
    parser.add_argument("--policy", default=SHIPPED_POLICY, help="exported policy folder")
    parser.add_argument("--seconds", type=float, default=10.0, help="the controller phase [s]")
    parser.add_argument("--velocity", type=float, default=0.5, help="forward command [m/s]")
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
    args = parser.parse_args(argv)
    if args.controller == "policy" and (args.policy is None or not os.path.isdir(args.policy)):
        parser.error("--controller policy needs --policy FOLDER (an exported policy)")
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
    summary, result = run(
        args.controller, args.seconds, args.domain, args.interface, not args.no_sim,
        args.policy, args.velocity, args.command_rate, args.stand_up, args.release_sport_mode,
        args.lockstep, args.state_timeout, args.estimator, mpc=mpc, log_folder=args.log,
        log_dir=args.log_dir, auto_start=args.auto_start, command_line=command_line,
    )  # fmt: skip
    print(format_summary("command loop", summary["timing"]["command"]))
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
    if summary["ground_truth"] is not None:
        g = summary["ground_truth"]
        print(
            f"ground truth: base height min {g['min_base_height_m']:.4f} m, average speed "
            f"{g['average_speed_m_per_s']:.3f} m/s"
        )
    control_loop.save_run(args.out, f"deploy_go2_{args.controller}", result.log, summary)
    return summary


if __name__ == "__main__":
    main()
