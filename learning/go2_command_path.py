"""The Go2's high-rate path: the DDS link, the state estimator, the start-up sequence, the
steering, the safety layer and the deployment log, around a controller, in the process that
calls `serve_go2` (with the controller) or in a process of its own (`serve_go2_path`, with a
`hardware.command_process.SharedCommandController` in the controller's place).

    served = serve_go2(controller, spec)                       # in this process
    path = CommandPathProcess(serve_go2_path, nu=12, kwargs={"spec": spec})   # apart

`spec` (`Go2PathSpec`) holds everything but the controller, all picklable: a spawned process
rebuilds the link, the estimator and the log from it. What this path does per command tick is
`hardware.control_loop.run`'s: read (every LowState that arrived, through the estimator when
it is on), check, write, log; `learning.go2_deployment` chooses where it runs and assembles the
run's summary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys

import dynamics
from hardware import control_loop
from hardware.command_process import SharedCommandController
from hardware.estimated_robot import EstimatedRobot
from hardware.estimator import EstimatorConfig, StateEstimator
from hardware.interface import JointMap, VelocityCommand
from hardware.safety import SafetyConfig, SafetyLayer
from hardware.steering import CommandBox, GatedSource, make_steering

from .deployment import startup

WALK_AFTER = 1.0  # [s] zero velocity command after the controller starts, before `velocity`
RESET_TIMEOUT = 300.0  # [s] the controller's reset in another process (a first plan, a compile)
# [s] how long a thread of the high-rate process may hold the interpreter lock while another
# waits for it (CPython's default 5 ms is two and a half ticks: the log writer's chunk or the
# LowCmd writer would hold the command loop past its deadline)
SWITCH_INTERVAL = 2e-4


@dataclasses.dataclass(frozen=True)
class Go2PathSpec:
    """The high-rate path's settings (`learning.go2_deployment.run_go2` documents each):
    DDS `domain` and `interface`, `lockstep`, `ground_truth` (subscribe to the simulated Go2's
    true base state), `state_timeout` [s], `release_sport_mode`, `estimator` ("on", "off",
    "auto") with `estimator_settings`, the start-up (`stand_up` [s], `auto_start`,
    `controller_after` [s] or None, `required_inputs`), the steering (`steer`, `box` ranges,
    `velocity` [m/s], `accel` [m/s^2], `yaw_accel` [rad/s^2], `cmd_vel_topic`), the safety
    layer's `safety` config, the loop's `duration`, `control_dt`, `command_dt` [s], and the
    deployment log's `log_folder` and `header`, and the `connect_timeout` [s] for the first
    LowState (0: do not wait, for a caller that starts the robot's side afterwards)."""

    domain: int
    interface: str | None
    lockstep: bool
    ground_truth: bool
    state_timeout: float
    release_sport_mode: bool
    estimator: str
    estimator_settings: dict
    stand_up: float
    auto_start: bool
    controller_after: float | None
    required_inputs: tuple
    steer: str
    box: dict
    velocity: float
    accel: float
    yaw_accel: float
    cmd_vel_topic: str
    safety: SafetyConfig
    duration: float
    control_dt: float
    command_dt: float
    log_folder: str
    header: dict
    connect_timeout: float = 2.0


def make_estimated_robot(robot, estimator_settings: dict):
    """`(EstimatedRobot(robot, StateEstimator(go2, EstimatorConfig(**settings))),
    the config as a dict)` (`hardware.estimated_robot`, `hardware.estimator`)."""
    config = EstimatorConfig(**estimator_settings)
    estimator = StateEstimator(dynamics.load_robot("go2"), config)
    wrapped = EstimatedRobot(robot, estimator, replace_ground_truth=True)
    return wrapped, json.loads(json.dumps(dataclasses.asdict(config), default=str))


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


def serve_go2_path(link, spec: Go2PathSpec) -> dict:
    """`serve_go2` in a process of its own, the controller behind `link`
    (`hardware.command_process.CommandPathProcess`'s `serve`), its threads handing over the
    interpreter lock every `SWITCH_INTERVAL`, each LowCmd sent by the command loop itself."""
    sys.setswitchinterval(SWITCH_INTERVAL)
    controller = SharedCommandController(link, reset_timeout=RESET_TIMEOUT)
    return serve_go2(controller, spec, writer_thread=False)


@dataclasses.dataclass
class Go2Path:
    """The high-rate path `go2_path` assembled: the backend `go2` (`Go2Robot` or
    `LockstepGo2Robot`), the `robot` the loop reads (`go2`, or its `EstimatedRobot` when
    `use_estimator`), the start-up sequence `started` around the controller, the steering
    (`source`, gated as `steering` until `WALK_AFTER` s into the controller phase), the
    `safety` layer, the deployment `log` and the `recorder` that writes it."""

    go2: object
    robot: object
    use_estimator: bool
    started: object
    source: object
    steering: GatedSource
    safety: SafetyLayer
    log: object
    recorder: object

    def run(self, spec: Go2PathSpec) -> control_loop.LoopResult:
        """`hardware.control_loop.run` of this path for `spec.duration` [s]."""
        return control_loop.run(
            self.recorder, self.started, self.safety, duration=spec.duration,
            control_dt=spec.control_dt, command_dt=spec.command_dt, start_timeout=5.0,
            on_tick=self.started.on_tick, command_source=self.steering,
        )  # fmt: skip

    def close_link(self) -> None:
        """Close the steering's cmd_vel reader (if any), then the robot and its participant
        (the LowCmd writer thread stops); safe to call twice."""
        if hasattr(self.source, "close"):
            self.source.close()
        self.go2.close()


@contextlib.contextmanager
def go2_path(controller, spec: Go2PathSpec, *, writer_thread: bool = True):
    """The high-rate path around `controller` (`Go2Path`, module docstring), closed on exit:
    the link, and the log with whatever summary it has (an interrupted run keeps what was
    written). `writer_thread`: the backend's own LowCmd thread (else one LowCmd per write)."""
    from hardware.deployment_log import DeploymentLogWriter, RecordingRobot
    from hardware.go2 import conversions
    from hardware.go2.robot import Go2Robot, LockstepGo2Robot

    joint_map = JointMap.from_model(dynamics.load_robot("go2"))
    kwargs = dict(domain=spec.domain, interface=spec.interface, command_timeout=0.3,
                  max_command_age=0.3, release_sport_mode=spec.release_sport_mode,
                  ground_truth=spec.ground_truth, connect_timeout=spec.connect_timeout)  # fmt: skip
    if spec.lockstep:
        go2 = LockstepGo2Robot(joint_map, **kwargs)
    else:
        go2 = Go2Robot(joint_map, state_timeout=spec.state_timeout, writer_thread=writer_thread,
                       **kwargs)  # fmt: skip
    source = log = None
    try:
        use_estimator = spec.estimator == "on" or (spec.estimator == "auto" and go2.sport is None)
        robot, estimator_settings = go2, spec.estimator_settings
        if use_estimator:
            robot, estimator_settings = make_estimated_robot(go2, spec.estimator_settings)
        started = startup(
            controller, joint_map, stand_duration=spec.stand_up, auto=spec.auto_start,
            controller_after=spec.controller_after, required_inputs=spec.required_inputs,
            buttons=lambda: go2.buttons, backend=type(go2).__name__,
        )  # fmt: skip
        box = CommandBox.from_ranges(spec.box)
        source = make_steering(spec.steer, box, fixed=VelocityCommand(spec.velocity),
                               remote=go2.wireless_remote, participant=go2.participant,
                               topic=spec.cmd_vel_topic, accel=spec.accel,
                               yaw_accel=spec.yaw_accel)  # fmt: skip
        steering = GatedSource(source, lambda t: started.walking(t, WALK_AFTER))
        probes = {"startup": lambda: {"phase": started.sequence.phase.value},
                  "steering": lambda: {"command": steering.command.as_array()}}  # fmt: skip
        if spec.ground_truth:
            probes["truth"] = truth_probe(go2)
        if use_estimator:
            probes["estimator"] = estimator_probe(robot)
        header = dict(spec.header)
        header["estimator"] = {"on": use_estimator, "requested": spec.estimator,
                               "settings": estimator_settings}  # fmt: skip
        header["ground_truth"] = conversions.TOPIC_GROUND_TRUTH if spec.ground_truth else None
        log = DeploymentLogWriter(spec.log_folder, header)
        safety = SafetyLayer(joint_map, spec.safety)
        recorder = RecordingRobot(robot, log, safety=safety, probes=probes)
        yield Go2Path(go2, robot, use_estimator, started, source, steering, safety, log,
                      recorder)  # fmt: skip
    finally:
        if source is not None and hasattr(source, "close"):
            source.close()
        go2.close()
        if log is not None:
            log.close(log.summary)


def serve_go2(controller, spec: Go2PathSpec, *, writer_thread: bool = True) -> dict:
    """Run the high-rate path (`go2_path`) around `controller` for `spec.duration` [s];
    returns `{"result": control_loop.LoopResult, "summary": its part of the run's summary}`.
    The deployment log is closed with that part (`hardware.deployment_log`)."""
    with go2_path(controller, spec, writer_thread=writer_thread) as path:
        result = path.run(spec)
        started = path.started
        began = started.controller_started
        summary = {
            "estimator": path.use_estimator,
            "startup": [(round(tr.t, 3), tr.source.value, tr.target.value, tr.reason, tr.accepted)
                        for tr in started.sequence.transitions],
            "controller_started_s": began,
            "steering_counters": path.steering.counters,
            "average_speed_m_per_s": float("nan") if began is None else
            control_loop.average_speed(result.log, after=began + WALK_AFTER + 1.0),
            "backend": path.go2.status(), "log_probe_failures": path.recorder.probe_failures,
        }  # fmt: skip
        path.close_link()  # the LowCmd writer thread stops: its timing is complete
        summary["lowcmd_writer_timing"] = path.go2.timing.summary()
        path.log.close(summary)
    return {"result": result, "summary": summary}
