"""The start-up sequence of a real robot: passive -> stand up -> hold -> controller, driven by
the remote's buttons, with the e-stop from every state.

    startup = StartupSequence(policy_controller, joint_map, buttons=lambda: robot.buttons,
                              required_inputs=("base_linear_velocity", ...), backend="Go2Robot")
    control_loop.run(robot, startup, SafetyLayer(joint_map), duration=600.0,
                     on_tick=startup.on_tick)

Phases (`Phase`) and what each commands:

    PASSIVE     damping: `Kp = 0`, `Kd = damping_kd`, `qd* = 0` (the legs yield slowly)
    STAND_UP    from the joint pose MEASURED on entry, `q0`, to the standing pose `q_s` over
                `stand_duration` T, with soft-start gains:
                    w = smoothstep((t - t_enter) / T)
                    q* = q0 + w (q_s - q0),  Kp = Kp_s (f + (1 - f) w),  Kd = Kd_s
                (`f` = `kp_start_fraction`); then HOLD by itself
    HOLD        `q_s` with the standing gains `Kp_s`, `Kd_s`
    CONTROLLER  the inner controller (a policy, the MPC), `reset(measurement)` on entry
    ESTOP       damping, latched: every later request is refused

Requests (`Request`) and the transitions they make (`decide`, pure):

    STAND       PASSIVE -> STAND_UP                      (drivers ACTIVE only)
    CONTROLLER  HOLD -> CONTROLLER                       (the inputs it needs present)
    STOP        CONTROLLER -> HOLD;  HOLD, STAND_UP -> PASSIVE
    ESTOP       any -> ESTOP
Any other pair is refused with its reason (e.g. CONTROLLER from PASSIVE: stand up first),
recorded in `transitions` and logged (logger "hardware.startup"). Also: the robot reporting
`RobotMode.ESTOP` -> ESTOP; reporting DAMPING (its own watchdog) in STAND_UP, HOLD or
CONTROLLER -> PASSIVE; an input the inner controller needs going missing in CONTROLLER -> HOLD.

Buttons (`RemoteButtons`): a callable `buttons() -> int` gives the remote's button bits (Go2:
`wireless_remote` bytes 2-3, little-endian, `Go2Robot.buttons`; our simulated Go2 presses
them with `--press`). A press (bit up on the previous call, down now) makes one request:
START -> STAND, A -> CONTROLLER, SELECT -> STOP (as unitree_rl_gym's deploy_real uses them);
L2 + B held together -> ESTOP (the same combination `Go2Robot` latches its drivers on).
`request(...)` makes the same requests from software.

Inputs: `required_inputs` names the `Measurement` fields the inner controller reads
(`missing_inputs`); `reset` (which `control_loop.run` calls before the safety layer arms the
drivers) raises `MissingInputsError`, naming them and `backend`, when the first measurement
lacks any: a policy that needs a base velocity the backend does not give never arms.

The sequence is a `Controller`: `control_loop.run` runs it unchanged, behind the safety layer,
whose own checks and damping still apply; `on_tick` latches the safety layer's ESTOP when the
sequence is in ESTOP (for backends whose drivers do not latch it themselves).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .interface import Controller, JointCommand, JointMap, Measurement, RobotMode, VelocityCommand
from .pose import interpolate_pose

logger = logging.getLogger(__name__)


class Phase(enum.Enum):
    PASSIVE = "passive"
    STAND_UP = "stand_up"
    HOLD = "hold"
    CONTROLLER = "controller"
    ESTOP = "estop"


class Request(enum.Enum):
    STAND = "stand"
    CONTROLLER = "controller"
    STOP = "stop"
    ESTOP = "estop"


@dataclass(frozen=True)
class RemoteButtons:
    """Button bits that make each request. Defaults: the Go2 remote's (`wireless_remote`
    bytes 2-3; `hardware.go2.conversions.Buttons`): START bit 2, SELECT bit 3, L2 bit 5,
    A bit 8, B bit 9. `estop` fires when all its bits are down."""

    stand: int = 1 << 2  # START
    controller: int = 1 << 8  # A
    stop: int = 1 << 3  # SELECT
    estop: int = (1 << 5) | (1 << 9)  # L2 + B


@dataclass(frozen=True)
class Transition:
    """One request or automatic change at `t` [s]: `source` -> `target` when `accepted`, else
    refused (`target` is `source`); `reason` says why (or what caused it)."""

    t: float
    source: Phase
    target: Phase
    reason: str
    accepted: bool


class MissingInputsError(ValueError):
    """The controller needs measurement fields the backend does not provide."""


# --------------------------------------------------------------------------- pure logic
INPUT_NAMES = frozenset(f.name for f in dataclasses.fields(Measurement)) | {
    "projected_gravity",
    "base_rotation",
}


def check_input_names(required: Sequence[str]) -> tuple[str, ...]:
    """`required` as a tuple; raises ValueError for a name that is not a Measurement field or
    property (`INPUT_NAMES`)."""
    if isinstance(required, str):
        raise ValueError(
            f"required inputs must be a sequence of names, got the string {required!r}"
        )
    unknown = [name for name in required if name not in INPUT_NAMES]
    if unknown:
        raise ValueError(
            f"required inputs {unknown} are not Measurement fields (known: {sorted(INPUT_NAMES)})"
        )
    return tuple(required)


def missing_inputs(required: Sequence[str], measurement: Measurement) -> list[str]:
    """The names in `required` (Measurement fields or properties, e.g. "joint_q",
    "base_linear_velocity", "projected_gravity") that `measurement` lacks (None), in order.

    Raises ValueError for a name that is not a Measurement field."""
    check_input_names(required)
    return [name for name in required if getattr(measurement, name) is None]


def inputs_message(missing: Sequence[str], backend: str, measurement: Measurement) -> str:
    """Why a controller cannot run: the missing inputs and the backend that lacks them."""
    return (
        f"the controller needs {', '.join(missing)}, which the backend {backend} does not "
        f"provide (base_state_source: {measurement.base_state_source}): give it a state "
        "estimator or use a controller that does not read them"
    )


def requests_from_buttons(buttons: int, previous: int, layout: RemoteButtons) -> list[Request]:
    """The requests of the remote's button bits `buttons` after `previous`: ESTOP alone while
    all of `layout.estop` are down, else one request per button pressed since `previous`."""
    if layout.estop and buttons & layout.estop == layout.estop:
        return [Request.ESTOP]
    pressed = buttons & ~previous
    pairs = ((layout.stand, Request.STAND), (layout.controller, Request.CONTROLLER),
             (layout.stop, Request.STOP))  # fmt: skip
    return [request for bits, request in pairs if bits and pressed & bits == bits]


def decide(
    phase: Phase,
    request: Request,
    *,
    robot_active: bool = True,
    inputs_error: str | None = None,
) -> tuple[Phase, str | None]:
    """`(next phase, None)` when `request` is allowed in `phase`, `(phase, reason)` when it is
    refused (table in the module docstring). `robot_active`: the drivers report ACTIVE
    (STAND needs it); `inputs_error`: why the inner controller's inputs are not there (refuses
    CONTROLLER), or None."""
    if request is Request.ESTOP:
        return Phase.ESTOP, None
    if phase is Phase.ESTOP:
        return phase, "the e-stop is latched"
    if request is Request.STAND:
        if phase is not Phase.PASSIVE:
            return phase, f"already standing ({phase.value}); STAND is taken in passive only"
        if not robot_active:
            return phase, "the drivers are not active yet (the safety layer arms them first)"
        return Phase.STAND_UP, None
    if request is Request.CONTROLLER:
        if phase is Phase.CONTROLLER:
            return phase, "the controller is already running"
        if phase is not Phase.HOLD:
            return phase, f"stand up first: the controller starts from hold, not {phase.value}"
        if inputs_error is not None:
            return phase, inputs_error
        return Phase.CONTROLLER, None
    if request is Request.STOP:
        if phase is Phase.CONTROLLER:
            return Phase.HOLD, None
        if phase in (Phase.HOLD, Phase.STAND_UP):
            return Phase.PASSIVE, None
        return phase, "already passive"
    raise ValueError(f"unknown request {request!r}")


def stand_up_command(q_start, q_stand, kp, kd, s: float, kp_start_fraction: float):
    """`(q* (nu,), Kp (nu,), Kd (nu,))` at progress `s` of the stand-up (clipped to [0, 1]):
    `w = smoothstep(s)`, `q* = q_start + w (q_stand - q_start)`,
    `Kp = kp (f + (1 - f) w)`, `Kd = kd`, with `f = kp_start_fraction`."""
    w = float(interpolate_pose(0.0, 1.0, s))
    q = interpolate_pose(q_start, q_stand, s)
    kp = np.asarray(kp, dtype=float) * (kp_start_fraction + (1.0 - kp_start_fraction) * w)
    return q, kp, np.asarray(kd, dtype=float).copy()


# --------------------------------------------------------------------------- the controller
class StartupSequence:
    """`Controller` running the start-up phases around `inner` (see the module docstring).

    Args:
        inner: the controller of the CONTROLLER phase.
        joint_map: joint order, the standing pose and gains.
        buttons: `() -> int` the remote's button bits now; None: software requests only.
        layout: which bits make which request.
        stand_duration: [s] of the stand-up interpolation.
        q_stand (nu,) [rad], kp, kd: the standing pose and gains (default the joint map's).
        kp_start_fraction: the stand-up's first Kp as a fraction of `kp`, in [0, 1].
        damping_kd: [N m s/rad] Kd in PASSIVE and ESTOP (default the standing Kd).
        required_inputs: Measurement fields `inner` reads (`missing_inputs`).
        estimated_inputs: those of `required_inputs` that a state estimator fills once it has
            started (`hardware.estimated_robot`): not required by `reset`, required to enter
            CONTROLLER.
        backend: the robot backend's name, for messages.
        warm_up: `reset` also resets `inner` once (JAX compiles there, before the robot arms).
    """

    def __init__(
        self,
        inner: Controller,
        joint_map: JointMap,
        *,
        buttons: Callable[[], int] | None = None,
        layout: RemoteButtons = RemoteButtons(),
        stand_duration: float = 2.0,
        q_stand=None,
        kp=None,
        kd=None,
        kp_start_fraction: float = 0.25,
        damping_kd=None,
        required_inputs: Sequence[str] = (),
        estimated_inputs: Sequence[str] = (),
        backend: str = "in use",
        warm_up: bool = True,
    ):
        nu = joint_map.nu
        if not stand_duration > 0:
            raise ValueError(f"stand_duration must be > 0 s, got {stand_duration}")
        if not 0.0 <= kp_start_fraction <= 1.0:
            raise ValueError(f"kp_start_fraction must be in [0, 1], got {kp_start_fraction}")
        required_inputs = check_input_names(required_inputs)
        self.inner = inner
        self.joint_map = joint_map
        self.buttons = buttons
        self.layout = layout
        self.stand_duration = float(stand_duration)
        self.kp_start_fraction = float(kp_start_fraction)
        self.required_inputs = tuple(required_inputs)
        self.estimated_inputs = tuple(check_input_names(estimated_inputs))
        self.backend = backend
        self.warm_up = warm_up

        def per_joint(value, default, name):
            out = np.broadcast_to(np.asarray(default if value is None else value, float), (nu,))
            if not np.all(np.isfinite(out)):
                raise ValueError(f"{name} must be finite, got {value}")
            return out.copy()

        self.q_stand = per_joint(q_stand, joint_map.q_default, "q_stand")
        self.kp = per_joint(kp, joint_map.kp_default, "kp")
        self.kd = per_joint(kd, joint_map.kd_default, "kd")
        self.damping_kd = per_joint(damping_kd, joint_map.kd_default, "damping_kd")
        self.phase = Phase.PASSIVE
        self.transitions: list[Transition] = []
        self.previous_buttons = 0
        self.t_enter = 0.0
        self.q_start: np.ndarray | None = None

    # ------------------------------------------------------------- Controller
    def reset(self, measurement: Measurement) -> None:
        """Start in PASSIVE. Raises MissingInputsError (before the loop arms the robot) when
        `measurement` lacks a required input, ValueError for the wrong joint count."""
        if measurement.nu != self.joint_map.nu:
            raise ValueError(f"robot has {measurement.nu} joints, expected {self.joint_map.nu}")
        missing = missing_inputs(self.required_inputs, measurement)
        missing = [name for name in missing if name not in self.estimated_inputs]
        if missing:
            message = inputs_message(missing, self.backend, measurement)
            logger.error("refusing to start: %s", message)
            raise MissingInputsError(f"refusing to start: {message}")
        if self.warm_up:
            self.inner.reset(measurement)
        self.phase = Phase.PASSIVE
        self.transitions = []
        self.previous_buttons = self._read_buttons()  # a button held at start is no press

    def __call__(
        self, measurement: Measurement, t: float, command: VelocityCommand
    ) -> JointCommand | None:
        self._follow_robot(measurement, t)
        buttons = self._read_buttons()
        for request in requests_from_buttons(buttons, self.previous_buttons, self.layout):
            self.request(request, measurement, t, "remote")
        self.previous_buttons = buttons
        if self.phase is Phase.STAND_UP and t - self.t_enter >= self.stand_duration:
            self._enter(Phase.HOLD, measurement, t, "stand-up done")
        if self.phase is Phase.CONTROLLER:
            missing = missing_inputs(self.required_inputs, measurement)
            if missing:
                reason = inputs_message(missing, self.backend, measurement)
                self._enter(Phase.HOLD, measurement, t, f"inputs lost: {reason}")
        return self._command(measurement, t, command)

    # ------------------------------------------------------------- requests
    def request(self, request: Request, measurement: Measurement, t: float, by: str = "software"):
        """Apply `request` at `t` [s] with the newest `measurement`; True when accepted."""
        missing = missing_inputs(self.required_inputs, measurement)
        inputs_error = inputs_message(missing, self.backend, measurement) if missing else None
        target, refusal = decide(
            self.phase, request, robot_active=measurement.robot_mode == RobotMode.ACTIVE,
            inputs_error=inputs_error,
        )  # fmt: skip
        if refusal is not None:
            self._refuse(t, f"{request.value} ({by}) refused: {refusal}")
            return False
        if target is self.phase:  # ESTOP again
            return True
        if target is Phase.CONTROLLER:
            try:
                self.inner.reset(measurement)
            except Exception as exc:
                self._refuse(t, f"controller ({by}) refused: its reset raised "
                                f"{type(exc).__name__}: {exc}")  # fmt: skip
                return False
        self._enter(target, measurement, t, f"{request.value} ({by})")
        return True

    def _follow_robot(self, measurement: Measurement, t: float) -> None:
        mode = measurement.robot_mode
        if mode == RobotMode.ESTOP and self.phase is not Phase.ESTOP:
            self._enter(Phase.ESTOP, measurement, t, "the robot reports ESTOP")
        elif mode == RobotMode.DAMPING and self.phase in (
            Phase.STAND_UP, Phase.HOLD, Phase.CONTROLLER
        ):  # fmt: skip
            self._enter(Phase.PASSIVE, measurement, t, "the robot's drivers report DAMPING")

    def _enter(self, phase: Phase, measurement: Measurement, t: float, reason: str) -> None:
        self.transitions.append(Transition(t, self.phase, phase, reason, True))
        level = logging.ERROR if phase is Phase.ESTOP else logging.INFO
        logger.log(level, "t=%.3f %s -> %s: %s", t, self.phase.value, phase.value, reason)
        self.phase, self.t_enter = phase, t
        if phase is Phase.STAND_UP:
            self.q_start = np.asarray(measurement.joint_q, dtype=float).copy()

    def _refuse(self, t: float, reason: str) -> None:
        self.transitions.append(Transition(t, self.phase, self.phase, reason, False))
        logger.warning("t=%.3f %s: %s", t, self.phase.value, reason)

    def _read_buttons(self) -> int:
        return 0 if self.buttons is None else int(self.buttons())

    # ------------------------------------------------------------- commands
    def _command(self, m: Measurement, t: float, command: VelocityCommand):
        stamp = {"timestamp": m.timestamp}
        if self.phase in (Phase.PASSIVE, Phase.ESTOP):
            return JointCommand.damping(m.joint_q, self.damping_kd, **stamp)
        if self.phase is Phase.STAND_UP:
            s = (t - self.t_enter) / self.stand_duration
            q, kp, kd = stand_up_command(self.q_start, self.q_stand, self.kp, self.kd, s,
                                         self.kp_start_fraction)  # fmt: skip
            return JointCommand.create(q, kp, kd, nu=len(q), **stamp)
        if self.phase is Phase.HOLD:
            return JointCommand.create(self.q_stand, self.kp, self.kd, nu=len(self.kp), **stamp)
        return self.inner(m, t, command)

    def on_tick(self, t: float, safety, robot) -> None:
        """A `control_loop.run` `on_tick`: latch the safety layer's ESTOP in ESTOP."""
        if self.phase is Phase.ESTOP:
            safety.estop(robot.now(), "start-up sequence e-stop")

    # ------------------------------------------------------------- reporting
    def refusals(self) -> list[Transition]:
        return [tr for tr in self.transitions if not tr.accepted]

    def phases(self) -> list[Phase]:
        """The phases entered, in order, starting from PASSIVE."""
        return [Phase.PASSIVE] + [tr.target for tr in self.transitions if tr.accepted]


class AutoStart:
    """The start-up sequence (`hardware.startup.StartupSequence`: passive -> stand up -> hold
    -> controller) around the controller, with its requests from the remote's buttons (START:
    stand up, A: the controller, SELECT: stop, L2 + B: e-stop) and, with `auto`, from
    software: STAND at the first call the drivers accept, CONTROLLER from `controller_after`
    [s] on (again at each call until accepted: the estimator's base state may come later).
    A `Controller`; `walking(t, after)` is True from `after` s after the controller phase
    began."""

    def __init__(self, sequence, auto: bool, controller_after: float | None):
        self.sequence = sequence
        self.auto = bool(auto)
        self.controller_after = controller_after
        self.controller_started: float | None = None
        self.stood = False  # the auto start's STAND was accepted (not again after a STOP)

    def reset(self, measurement) -> None:
        self.controller_started, self.stood = None, False
        self.sequence.reset(measurement)

    def __call__(self, measurement, t, command):
        phase = self.sequence.phase
        if self.auto and phase is Phase.PASSIVE and not self.stood:  # once the drivers arm
            self.stood = self.sequence.request(Request.STAND, measurement, t, "auto start")
        elif (self.auto and phase is Phase.HOLD and self.controller_after is not None
              and t >= self.controller_after and self.controller_started is None
              and measurement.base_linear_velocity is not None
              and measurement.base_position is not None):  # fmt: skip
            self.sequence.request(Request.CONTROLLER, measurement, t, "auto start")
        out = self.sequence(measurement, t, command)
        if self.sequence.phase is Phase.CONTROLLER and self.controller_started is None:
            self.controller_started = t
        return out

    def walking(self, t: float, after: float) -> bool:
        started = self.controller_started
        return started is not None and t >= started + after

    def on_tick(self, t, safety, robot) -> None:
        self.sequence.on_tick(t, safety, robot)
