"""Measurements and joint commands in shared memory, between two processes without a shared lock.

    link = SharedLink.create(nu=12)               # the high-rate process
    peer = SharedLink.attach(link.names, nu=12)   # the controller's process (after spawn)
    link.publish_state(measurement, t, command)   # 500 Hz side
    m, t, command = peer.state()                  # newest, or None before the first
    peer.send_command(command)                    # controller side
    link.command()                                # newest JointCommand, or None

Each direction is one float64 block behind a sequence lock: the writer makes the counter odd,
writes, makes it even; a reader copies the block and keeps the copy only if the counter was
even and unchanged around it (else it copies again). Neither side ever waits for the other,
so a controller that stalls (a compile, a slow solve, a busy computer) never delays the
high-rate process, and the reverse. x86's stores and loads are not reordered with each other
(TSO), which is what the lock needs between the counter and the block.

Layouts (`nu` joints):
- state: `t` [s] the high-rate loop's time since its start, the `Measurement` fields (optional
  ones with a presence flag; `robot_mode` and `base_state_source` as codes), the operator's
  `VelocityCommand` at that time (vx, vy, yaw rate; base height NaN for None).
- command: `JointCommand` (`timestamp`, `sequence`, `arm` and its five `(nu,)` arrays).
- control: counters `reset_request`, `reset_done` (the controller's `reset` handshake: the
  high-rate side asks with a measurement, the controller side answers once its `reset`
  returned, e.g. after a compile) and `stop` (either side ends the run).
"""

from __future__ import annotations

from multiprocessing import shared_memory

import numpy as np

from .interface import JointCommand, Measurement, RobotMode, VelocityCommand

SOURCES = (None, "ground_truth", "sport_state", "estimator")  # base_state_source codes
CONTROL = ("reset_request", "reset_done", "stop")


def _fields(spec: list) -> dict:
    """`{name: slice}` of consecutive fields `[(name, size)]`."""
    out, start = {}, 0
    for name, size in spec:
        out[name] = slice(start, start + size)
        start += size
    out["_size"] = start
    return out


def state_layout(nu: int) -> dict:
    """The state block's fields (module docstring)."""
    return _fields([
        ("t", 1), ("timestamp", 1), ("sequence", 1), ("joint_q", nu), ("joint_qd", nu),
        ("base_quat", 4), ("base_angular_velocity", 3), ("base_linear_acceleration", 3),
        ("has_joint_tau", 1), ("joint_tau", nu), ("has_base_linear_velocity", 1),
        ("base_linear_velocity", 3), ("has_base_position", 1), ("base_position", 3),
        ("robot_mode", 1), ("has_foot_force", 1), ("foot_force", 4),
        ("has_motor_temperature", 1), ("motor_temperature", nu), ("base_state_source", 1),
        ("command", 4),
    ])  # fmt: skip


def command_layout(nu: int) -> dict:
    """The command block's fields (module docstring)."""
    return _fields([("timestamp", 1), ("sequence", 1), ("arm", 1),
                    *((name, nu) for name in JointCommand.ARRAYS)])  # fmt: skip


def pack_state(m: Measurement, t: float, command: VelocityCommand | None,
               layout: dict) -> np.ndarray:  # fmt: skip
    """The state block of measurement `m` at loop time `t` [s] under `command` (None: zero)."""
    out = np.zeros(layout["_size"])
    out[layout["t"]] = t
    out[layout["timestamp"]] = m.timestamp
    out[layout["sequence"]] = m.sequence
    for name in ("joint_q", "joint_qd", "base_quat", "base_angular_velocity",
                 "base_linear_acceleration"):  # fmt: skip
        out[layout[name]] = getattr(m, name)
    for name in ("joint_tau", "base_linear_velocity", "base_position", "foot_force",
                 "motor_temperature"):  # fmt: skip
        value = getattr(m, name)
        if value is not None:
            out[layout["has_" + name]] = 1.0
            out[layout[name]] = value
    out[layout["robot_mode"]] = int(m.robot_mode)
    out[layout["base_state_source"]] = SOURCES.index(m.base_state_source)
    command = command or VelocityCommand()
    height = np.nan if command.base_height is None else command.base_height
    out[layout["command"]] = (command.vx, command.vy, command.yaw_rate, height)
    return out


def unpack_state(block: np.ndarray, layout: dict) -> tuple[Measurement, float, VelocityCommand]:
    """`(measurement, t [s], command)` of a state block (`pack_state`'s inverse)."""

    def get(name):
        return block[layout[name]].copy()

    optional = {}
    for name in ("joint_tau", "base_linear_velocity", "base_position", "foot_force",
                 "motor_temperature"):  # fmt: skip
        optional[name] = get(name) if block[layout["has_" + name]][0] else None
    m = Measurement(
        timestamp=float(block[layout["timestamp"]][0]),
        sequence=int(block[layout["sequence"]][0]),
        joint_q=get("joint_q"), joint_qd=get("joint_qd"), base_quat=get("base_quat"),
        base_angular_velocity=get("base_angular_velocity"),
        base_linear_acceleration=get("base_linear_acceleration"),
        robot_mode=RobotMode(int(block[layout["robot_mode"]][0])),
        base_state_source=SOURCES[int(block[layout["base_state_source"]][0])],
        **optional,
    )  # fmt: skip
    vx, vy, yaw_rate, height = (float(a) for a in block[layout["command"]])
    command = VelocityCommand(vx, vy, yaw_rate, None if np.isnan(height) else height)
    return m, float(block[layout["t"]][0]), command


def pack_command(c: JointCommand, layout: dict) -> np.ndarray:
    out = np.zeros(layout["_size"])
    out[layout["timestamp"]] = c.timestamp
    out[layout["sequence"]] = c.sequence
    out[layout["arm"]] = float(c.arm)
    for name in JointCommand.ARRAYS:
        out[layout[name]] = getattr(c, name)
    return out


def unpack_command(block: np.ndarray, layout: dict) -> JointCommand:
    arrays = {name: block[layout[name]].copy() for name in JointCommand.ARRAYS}
    return JointCommand(
        **arrays,
        timestamp=float(block[layout["timestamp"]][0]),
        sequence=int(block[layout["sequence"]][0]),
        arm=bool(block[layout["arm"]][0]),
    )


class SeqlockBlock:
    """One float64 block behind a sequence lock (module docstring), in shared memory `shm`:
    `[counter, block (size,)]`."""

    def __init__(self, shm: shared_memory.SharedMemory, size: int):
        self.shm = shm
        self.array = np.ndarray((size + 1,), dtype=np.float64, buffer=shm.buf)
        self.size = size

    @property
    def version(self) -> int:
        """Writes completed so far (the counter halved; odd counters are writes under way)."""
        return int(self.array[0]) // 2

    def write(self, block: np.ndarray) -> None:
        self.array[0] += 1.0  # odd: a write is under way
        self.array[1:] = block
        self.array[0] += 1.0

    def read(self, attempts: int = 1000) -> np.ndarray | None:
        """A consistent copy of the block, or None before the first write. Raises
        RuntimeError if no consistent copy was had in `attempts` (a writer that died
        mid-write)."""
        for _ in range(attempts):
            before = self.array[0]
            if before % 2.0 == 1.0:
                continue
            copy = self.array[1:].copy()
            if self.array[0] == before:
                return None if before == 0.0 else copy
        raise RuntimeError("shared block: no consistent copy (its writer stopped mid-write?)")


class SharedLink:
    """The state, command and control blocks of one high-rate process and its controller
    (module docstring). `create` makes them (the owner unlinks them on `close`); `attach`
    opens them by `names` in another process."""

    def __init__(self, blocks: dict, nu: int, owner: bool):
        self.nu = int(nu)
        self.owner = owner
        self.state_fields, self.command_fields = state_layout(nu), command_layout(nu)
        self._shm = blocks
        self.state_block = SeqlockBlock(blocks["state"], self.state_fields["_size"])
        self.command_block = SeqlockBlock(blocks["command"], self.command_fields["_size"])
        self.control = np.ndarray((len(CONTROL),), dtype=np.float64, buffer=blocks["control"].buf)

    @property
    def names(self) -> dict:
        return {key: shm.name for key, shm in self._shm.items()}

    @classmethod
    def create(cls, nu: int) -> SharedLink:
        if int(nu) < 1:
            raise ValueError(f"nu must be a joint count >= 1, got {nu!r}")
        sizes = {"state": state_layout(nu)["_size"] + 1, "command": command_layout(nu)["_size"] + 1,
                 "control": len(CONTROL)}  # fmt: skip
        blocks = {}
        for key, size in sizes.items():
            blocks[key] = shared_memory.SharedMemory(create=True, size=8 * size)
            np.ndarray((size,), dtype=np.float64, buffer=blocks[key].buf)[:] = 0.0
        return cls(blocks, nu, owner=True)

    @classmethod
    def attach(cls, names: dict, nu: int) -> SharedLink:
        blocks = {key: shared_memory.SharedMemory(name=name) for key, name in names.items()}
        return cls(blocks, nu, owner=False)

    # ------------------------------------------------------- state (high-rate -> controller)
    def publish_state(self, m: Measurement, t: float, command: VelocityCommand | None = None):
        self.state_block.write(pack_state(m, t, command, self.state_fields))

    def state(self) -> tuple[Measurement, float, VelocityCommand] | None:
        block = self.state_block.read()
        return None if block is None else unpack_state(block, self.state_fields)

    # ------------------------------------------------------- commands (controller -> high-rate)
    def send_command(self, command: JointCommand) -> None:
        self.command_block.write(pack_command(command, self.command_fields))

    def command(self) -> JointCommand | None:
        block = self.command_block.read()
        return None if block is None else unpack_command(block, self.command_fields)

    @property
    def commands_sent(self) -> int:
        return self.command_block.version

    # ------------------------------------------------------------- control counters
    def count(self, name: str) -> int:
        return int(self.control[CONTROL.index(name)])

    def bump(self, name: str) -> None:
        self.control[CONTROL.index(name)] += 1.0

    def close(self) -> None:
        """Drop this process's views; the owner also removes the blocks."""
        self.state_block = self.command_block = self.control = None
        for shm in self._shm.values():
            shm.close()
            if self.owner:
                shm.unlink()
