"""Deploying a controller on a Go2 over its DDS protocol (Unitree SDK 2's topics): the stand, an
exported policy or the real-time MPC, behind the start-up sequence and the safety layer, in real
time on the simulated Go2 or the robot, with the run's deployment log.

    summary, result = run_go2("policy", seconds=10.0, policy="examples/policies/go2_omni_proprio")
    summary, result = run_go2("mpc", seconds=5.0, mpc=MPCOptions(iterations=1))

The example `deploy_go2.py` is argument parsing and printing over this module.

A run (`run_go2`): the controller (`make_controller`: "stand", "policy" through
`learning.deployment.policy_controller`, or "mpc" with `MPCOptions`, prepared before any robot
is connected), the simulated Go2 on DDS (`simulated_go2`, `hardware.go2.sim`; lying on its
belly, `LYING`, for the stand), and the high-rate path (`learning.go2_command_path`): in a
process of its own by default (`command_path="process"`: `hardware.command_process`, the
controller here, the two sharing state and commands through shared memory), or in this one
(`"thread"`, and always in lockstep). The high-rate path holds the backend
(`hardware.go2.robot.Go2Robot`, or `LockstepGo2Robot` in robot time), the state estimator in
place of the backend's base state when asked or when no sport state arrives
(`go2_command_path.make_estimated_robot`), and the start-up sequence
(`learning.deployment.startup`) handing over to the controller `SETTLE_AFTER_STAND_UP` s after
the stand-up; the velocity command from `WALK_AFTER` s into the controller phase (zero
before), by `steer` (`hardware.steering.make_steering`): "fixed", `velocity` forward [m/s];
"remote", the remote's sticks (`StickSteering` on `Go2Robot.wireless_remote`; in simulation
`sim_sticks` holds them, `hardware.go2.sim --sticks`); "cmd_vel", ROS 2 Twists on
`cmd_vel_topic` (`hardware.ros2_types.CmdVelReader` on the robot's DDS participant); the sticks
and cmd_vel mapped onto the controller's command box (`command_box`) under the acceleration
limits of `learning.deployment.tour_ramp`; the safety layer at `command_rate`.

The deployment log (`hardware.deployment_log`; by default dated under `log_dir`,
`default_log_folder`), written while the run goes on: per command tick the measurement, the
command sent, the start-up phase, the velocity command (`steering_command`: vx, vy [m/s],
yaw rate [rad/s]), the estimator's output (`estimator_probe`) and, in simulation, the true
base state (`truth_probe`: position (3,) world frame [m], linear velocity (3,) base frame
[m/s]). The summary: the steering's mode, box and counters (`steering`), the loop's
(`loop_summary`) and the true base height and forward speed of the controller phase from the
log (`ground_truth_summary`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import time

import numpy as np

import dynamics
from hardware import control_loop
from hardware.command_process import CommandPathProcess, run_controller
from hardware.interface import JointMap
from hardware.safety import SafetyConfig
from hardware.steering import CommandBox

from .deployment import (
    COMMAND_RATE,
    ESTIMATED_INPUTS,
    SOFT_START_SECONDS,
    load_runtime,
    policy_controller,
    tour_ramp,
)
from .go2_command_path import WALK_AFTER, Go2PathSpec, serve_go2, serve_go2_path
from .policy_export import command_ranges, load_numpy_policy, policy_inputs

LYING = (0.0, 1.36, -2.65)  # [rad] hip, thigh, calf of each Go2 leg, lying on the belly
SETTLE_AFTER_STAND_UP = 1.0  # [s] holding the standing pose after the stand-up
# the command box of the controllers without training ranges (the MPC trot, walked at 0.5 m/s
# forward in the tests, its sideways and turning limits a cautious guess; the stand ignores it)
DEFAULT_COMMAND_BOX = {"vx": (-0.5, 0.5), "vy": (-0.3, 0.3), "yaw_rate": (-0.5, 0.5)}


def lying_configuration(model) -> np.ndarray:
    """`q (nq,)` of Go2 `model` lying on its belly (base 0.12 m high, legs folded: `LYING`)."""
    q = np.asarray(model.q_standing, dtype=float).copy()
    q[2], q[7:] = 0.12, np.tile(LYING, 4)
    return q


@dataclasses.dataclass
class MPCOptions:
    """The real-time MPC's settings (`controllers.realtime_mpc.realtime_mpc_controller`; the
    defaults are `examples/deploy_network.py`'s, the configuration that walks): horizon [s],
    FDDP iterations per cycle, latency compensation lookahead [s] or "auto", substeps,
    contact model, prox sweeps, derivatives, solver "process" or "thread", the solver
    process's core (an int, "auto" or None)."""

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
    an exported policy's (folder `policy`) declared "inputs", the MPC's whole base state,
    nothing for the stand."""
    if kind == "policy":
        return tuple(policy_inputs(load_numpy_policy(policy).config))
    if kind == "mpc":
        return ESTIMATED_INPUTS
    return ()


def command_box(kind: str, policy=None) -> CommandBox:
    """The velocity commands controller `kind` accepts: an exported policy's (folder `policy`)
    training ranges (`policy_export.command_ranges`), else `DEFAULT_COMMAND_BOX`."""
    if kind == "policy":
        return CommandBox.from_ranges(command_ranges(load_numpy_policy(policy).config))
    return CommandBox.from_ranges(DEFAULT_COMMAND_BOX)


def make_controller(kind: str, joint_map: JointMap, policy=None, stand_up=1.5, lockstep=False,
                    mpc: MPCOptions | None = None, solver_core=None):  # fmt: skip
    """`(controller, SafetyConfig changes, controller period [s])` for a Go2: "stand" (stand up
    over `stand_up` [s] and hold), "policy" (the exported policy in folder `policy`, NumPy
    runner, `check_conventions`) or "mpc" (the real-time MPC, prepared here: its first plan
    and every compilation, before any robot is connected; with `lockstep` the plain MPC)."""
    if kind == "stand":
        from hardware.pose import StandUpController

        return StandUpController(joint_map, stand_up), {}, 0.02
    if kind == "policy":
        runner, config = load_runtime(policy, "numpy")
        controller = policy_controller(runner, config, joint_map)
        return controller, {"soft_start_duration": SOFT_START_SECONDS}, float(config["control_dt"])
    if kind == "mpc":
        from controllers.realtime_mpc import realtime_mpc_controller
        from controllers.state_feedback import mpc_controller, mpc_safety_config

        safety = mpc_safety_config(soft_start=0.2)
        changes = {k: getattr(safety, k) for k in safety.__dataclass_fields__}
        o = mpc or MPCOptions()
        if lockstep:
            return mpc_controller("go2", joint_map, "trot", o.horizon, 3), changes, 0.02
        controller = realtime_mpc_controller(
            "go2", joint_map, "trot", o.horizon, o.iterations, lookahead=o.lookahead,
            substeps=o.substeps, contact=o.contact, num_sweeps=o.sweeps,
            derivatives=o.derivatives, process=o.solver == "process", core=solver_core,
        )  # fmt: skip
        controller.prepare()
        return controller, changes, 0.01
    raise ValueError(f"unknown controller {kind!r}")


@contextlib.contextmanager
def simulated_go2(domain, lying: bool, lifetime: float, lockstep: bool = False, extra=()):
    """The simulated Go2 process (`hardware.go2.sim`) on DDS `domain` over loopback, lying
    (`lying_configuration`) or standing, living at most `lifetime` [s]; nothing when
    `domain` is None."""
    if domain is None:
        yield None
        return
    from hardware.go2.sim import spawn as spawn_simulated_go2

    args = ["--domain", str(domain), "--interface", "lo", "--max-lifetime", str(lifetime)]
    if lockstep:
        args.append("--lockstep")
    if lying:
        model = dynamics.load_robot("go2")
        args += ["--q0", json.dumps(lying_configuration(model).tolist())]
    with spawn_simulated_go2(args + list(extra), stderr=subprocess.DEVNULL) as proc:
        yield proc


def default_log_folder(log_dir: str, controller: str) -> str:
    """`log_dir/deploy_go2_<controller>_<date-time>_<pid>`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join(log_dir, f"deploy_go2_{controller}_{stamp}_{os.getpid()}")


def run_go2(controller="stand", seconds=10.0, domain=1, interface="lo", sim=True, policy=None,
            velocity=0.5, command_rate=COMMAND_RATE, stand_up=1.5, release_sport_mode=False,
            lockstep=False, state_timeout=0.1, estimator="auto", estimator_settings=None,
            mpc: MPCOptions | None = None, log_folder=None, log_dir="runs",
            command_line=None, auto_start=None, steer="fixed", sim_sticks=(),
            cmd_vel_topic="cmd_vel", command_path=None):  # fmt: skip
    """One deployment on a Go2 over its DDS protocol (`examples/deploy_go2.py`'s docstring);
    returns `(summary, control_loop.LoopResult)`.

    controller: "stand", "policy" (folder `policy`) or "mpc" (`make_controller`); seconds [s]
    of the controller phase (after stand-up and `SETTLE_AFTER_STAND_UP`; "stand": the whole
    run), `velocity` [m/s] forward from `WALK_AFTER` s into it; domain, interface: DDS; sim:
    start the simulated Go2 (`simulated_go2`); command_rate [Hz] of the safety layer;
    stand_up [s]; lockstep: the simulated Go2 in robot time; state_timeout [s]: stale
    measurement -> damping; estimator: "on", "off" or "auto" (on when no sport state
    arrives), with `EstimatorConfig(**estimator_settings)`; log_folder (None: dated under
    `log_dir`): the deployment log, written while it runs; auto_start: the start-up requests
    from software as well as from the remote (default: in simulation only); steer: "fixed",
    "remote" or "cmd_vel" (the module docstring); sim_sticks: `(T, D, lx, rx, ry, ly)` holds of
    the simulated remote's sticks, T [s] from the first command the simulated Go2 accepted
    (about the loop's start; `hardware.go2.sim --sticks`); cmd_vel_topic: the ROS 2 topic;
    command_path: "process" (default in real time: the high-rate path in a process of its own,
    `learning.go2_command_path`, the controller in this one) or "thread" (both here; the
    default with `lockstep`)."""
    from controllers.mpc_process import pin_beside_the_solver

    auto_start = sim if auto_start is None else bool(auto_start)
    mpc = mpc or MPCOptions()
    realtime_mpc = controller == "mpc" and not lockstep
    original = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    solver_core = None
    if realtime_mpc and mpc.solver == "process":
        solver_core = pin_beside_the_solver(mpc.solver_core)
    try:
        return _run_go2(
            controller, seconds, domain, interface, sim, policy, velocity, command_rate,
            stand_up, release_sport_mode, lockstep, state_timeout, estimator,
            dict(estimator_settings or {}), mpc, solver_core, realtime_mpc,
            log_folder or default_log_folder(log_dir, controller), command_line, auto_start,
            steer, [tuple(h) for h in sim_sticks], cmd_vel_topic,
            command_path or ("thread" if lockstep else "process"),
        )  # fmt: skip
    finally:  # a caller in this process (a test) gets its cores back
        if original is not None:
            os.sched_setaffinity(0, original)


def _run_go2(controller, seconds, domain, interface, sim, policy, velocity, command_rate,
             stand_up, release_sport_mode, lockstep, state_timeout, estimator,
             estimator_settings, mpc, solver_core, realtime_mpc, log_folder, command_line,
             auto_start, steer, sim_sticks, cmd_vel_topic, command_path):  # fmt: skip
    from hardware.deployment_log import rewrite_summary
    from hardware.go2 import conversions

    model = dynamics.load_robot("go2")
    joint_map = JointMap.from_model(model)
    if lockstep and not sim:
        raise ValueError("--lockstep needs the simulated Go2 (no --no-sim)")
    if estimator not in ("on", "off", "auto"):
        raise ValueError(f"estimator must be 'on', 'off' or 'auto', got {estimator!r}")
    if sim_sticks and not sim:
        raise ValueError("sim_sticks holds the simulated Go2's sticks: it needs sim=True")
    if command_path not in ("process", "thread"):
        raise ValueError(f"command_path must be 'process' or 'thread', got {command_path!r}")
    if command_path == "process" and lockstep:
        raise ValueError("lockstep runs in robot time in one process: command_path='thread'")
    box = command_box(controller, policy)
    fixed_velocity = (velocity if controller != "stand" else 0.0) if steer == "fixed" else None
    accel, yaw_accel = tour_ramp(box.ranges())
    ctrl, safety_changes, control_dt = make_controller(controller, joint_map, policy, stand_up,
                                                       lockstep, mpc, solver_core)  # fmt: skip
    config = SafetyConfig(**{"soft_start_duration": 0.5, **safety_changes})
    config = dataclasses.replace(config, command_timeout=0.3, measurement_timeout=state_timeout)
    command_dt = 1.0 / command_rate
    control_dt = max(command_dt, round(control_dt / command_dt) * command_dt)
    walk = controller != "stand"
    extra = ["--ground-truth-topic", conversions.TOPIC_GROUND_TRUTH] if sim else []
    for hold in sim_sticks:
        extra += ["--sticks", *(str(float(v)) for v in hold)]
    if sim_sticks:  # T from the first LowCmd, about the loop's start
        extra.append("--press-after-command")
    duration = stand_up + SETTLE_AFTER_STAND_UP + seconds if walk else seconds
    lifetime = duration + 180 if not lockstep else 3600
    steering_header = {"mode": steer, "box": box.ranges(), "accel_m_per_s2": accel,
                       "yaw_accel_rad_per_s2": yaw_accel,
                       "cmd_vel_topic": cmd_vel_topic if steer == "cmd_vel" else None,
                       "sim_sticks": [list(h) for h in sim_sticks]}  # fmt: skip
    header = {
        "robot": "go2", "controller": controller,
        "policy": os.path.abspath(policy) if controller == "policy" else None,
        "simulated": sim, "lockstep": lockstep, "domain": domain, "interface": interface,
        "velocity_command_m_per_s": fixed_velocity, "walk_after_s": WALK_AFTER,
        "steering": steering_header, "command_path": command_path,
        "stand_up_s": stand_up, "auto_start": auto_start, "control_dt": control_dt,
        "command_dt": command_dt,
        "mpc": dataclasses.asdict(mpc) if controller == "mpc" else None,
        "joint_names": list(joint_map.names), "foot_names": list(model.foot_names),
        "command_line": command_line,
    }  # fmt: skip
    spec = Go2PathSpec(
        domain=domain, interface=interface or None, lockstep=lockstep, ground_truth=sim,
        state_timeout=state_timeout, release_sport_mode=release_sport_mode,
        estimator=estimator, estimator_settings=estimator_settings, stand_up=stand_up,
        auto_start=auto_start, controller_after=stand_up + SETTLE_AFTER_STAND_UP if walk else None,
        required_inputs=controller_inputs(controller, policy), steer=steer, box=box.ranges(),
        velocity=velocity, accel=accel, yaw_accel=yaw_accel, cmd_vel_topic=cmd_vel_topic,
        safety=config, duration=duration, control_dt=control_dt, command_dt=command_dt,
        log_folder=log_folder, header=header,
    )  # fmt: skip
    with contextlib.ExitStack() as outer:  # the simulator, the MPC's solver
        if realtime_mpc:
            outer.callback(ctrl.shutdown)
        proc = outer.enter_context(
            simulated_go2(domain if sim else None, not walk, lifetime, lockstep, extra)
        )
        controller_process = None
        try:
            if command_path == "process":
                served, controller_process = _serve_apart(ctrl, spec, joint_map.nu, control_dt)
            else:
                served = serve_go2(ctrl, spec)
        finally:
            print(f"deployment log: {os.path.abspath(log_folder)}")
        result, part = served["result"], served["summary"]
        mpc_summary = ctrl.summary() if realtime_mpc else None
        sim_final = None
        if proc is not None:
            proc.send_signal(15)
            out, _ = proc.communicate(timeout=30)
            sim_final = json.loads(out.strip().splitlines()[-1])["final_status"]
            sim_final.pop("history")
    steering_counters = part.pop("steering_counters")
    summary = {
        "controller": controller, "seconds": seconds, "domain": domain,
        "interface": interface, "simulated": sim, "lockstep": lockstep,
        "command_path": command_path, "log": os.path.abspath(log_folder),
        "velocity_command_m_per_s": fixed_velocity,
        "steering": {**steering_header, "counters": steering_counters},
        **part, "simulated_go2": sim_final, "mpc": mpc_summary,
        "controller_process": controller_process, **loop_summary(result),
    }  # fmt: skip
    summary["ground_truth"] = ground_truth_summary(log_folder)
    rewrite_summary(log_folder, summary)
    return summary, result


def _serve_apart(ctrl, spec, nu: int, control_dt: float) -> tuple[dict, dict]:
    """`serve_go2` in a process of its own while `ctrl` runs here at `control_dt` [s]
    (`hardware.command_process`); returns `(served, the controller's timing and counts)`."""
    path = CommandPathProcess(serve_go2_path, nu=nu, kwargs={"spec": spec})
    path.start()
    try:
        timing = run_controller(path.link, ctrl, control_dt=control_dt, running=path.is_alive)
    finally:
        path.stop()
    served = path.join(timeout=60.0)
    return served, timing


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
    """The controller phase's true base height (min) [m], its average speed along world x and
    its speed along its path (the mean forward velocity in the base frame: a heading that
    drifts does not count against it) after `WALK_AFTER + 1` s [m/s], from the deployment log
    in `folder`; None without ground truth."""
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
    velocity = run["truth_base_linear_velocity"][phase][ok]
    t, p = t[ok] - t[ok][0], p[ok]
    walking = t >= WALK_AFTER + 1.0
    return {
        "min_base_height_m": float(np.min(p[:, 2])),
        "average_speed_m_per_s": control_loop.average_speed(
            {"t": t, "base_position": p}, after=WALK_AFTER + 1.0
        ),
        "path_speed_m_per_s": float(np.mean(velocity[walking, 0])) if walking.any() else None,
    }
