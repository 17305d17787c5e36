"""Deployment logs: what a run on a robot measured, estimated and sent, one row per command tick,
written while it runs.

    with DeploymentLogWriter("runs/deploy_go2_mpc_20270101-120000", header) as log:
        robot = RecordingRobot(go2, log, safety=safety, probes={"estimator": estimate_row})
        control_loop.run(robot, controller, safety, ...)
    run = DeploymentLog.load("runs/deploy_go2_mpc_20270101-120000")
    run["joint_q"]            # (ticks, nu) [rad]
    run["base_state_source"]  # (ticks,) str: "estimator", "sport_state", "ground_truth", ""

A log is a folder:
    log.json            the header (robot, controller, policy folder, estimator settings, ...:
                        whatever the caller passes), the columns with their shapes and kinds,
                        the string tables, the chunk files, `complete` (False until `close`),
                        and the run's summary once closed.
    ticks_00000.npz     rows 0 .. chunk_ticks - 1 as arrays `(rows, *shape)`, then the next...

Nothing waits for the disk in the caller's thread: `append` copies the row into the chunk's
column arrays (allocated at the chunk's first row, `(chunk_ticks, *shape)` each); every
`chunk_ticks` rows a background thread writes them as the chunk (to a temporary name, then
renamed) and rewrites `log.json` the same way, so a folder read at any moment is a
consistent log of the chunks written so far. An interrupted run (an exception, Ctrl-C) keeps
every row when `close` runs in a `finally` (the `with` block does that); a killed process loses
at most the rows of the chunk in progress.

Columns. A row is `{name: value}`: numbers and arrays (float64; bools and ints kept as such)
or strings (stored as int16 codes into a per-column table in the header, decoded on load). A
column's shape is fixed by its first value; a row without a column (or `None`) gets NaN
(floats), -1 (ints), False (bools) or "" (strings), also in the chunks written before the
column first appeared. Names are free; `RecordingRobot` uses the `Measurement` field names
for the measurement, `command_<field>` for the `JointCommand` written, `safety_mode` and
`<probe>_<key>` for each probe (the estimator's output, the simulator's ground truth).
"""

from __future__ import annotations

import json
import os
import queue
import threading
from collections.abc import Callable

import numpy as np

from .interface import JointCommand, Measurement
from .robot_wrapper import RobotWrapper

HEADER = "log.json"
CHUNK_PATTERN = "ticks_{:05d}.npz"
FORMAT = "diffloco-deployment-log/1"
STRING = "str"  # the kind of a string column


def _fill(kind: str):
    return {"f": np.nan, "i": -1, "u": 0, "b": False, STRING: -1}.get(kind, np.nan)


def _column_of(name: str, value) -> tuple[str, tuple]:
    """`(kind, shape)` of a column from its first value: numpy kind letter or STRING."""
    if isinstance(value, str):
        return STRING, ()
    a = np.asarray(value)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"column {name!r}: expected numbers, bools or a str, got {a.dtype}")
    return ("f" if a.dtype.kind == "f" else a.dtype.kind), a.shape


class DeploymentLogWriter:
    """Writes a deployment log folder while a run goes on (module docstring).

    Args:
        folder: the log folder (created; a folder that already holds a log is refused).
        header: JSON-serialisable facts about the run (robot, controller, policy folder,
            estimator settings, ...), stored under "header" in `log.json`.
        chunk_ticks: rows per chunk file (a killed process loses at most these).
    """

    def __init__(self, folder: str, header: dict | None = None, *, chunk_ticks: int = 500):
        if int(chunk_ticks) < 1:
            raise ValueError(f"chunk_ticks must be >= 1, got {chunk_ticks!r}")
        if os.path.exists(os.path.join(folder, HEADER)):
            raise FileExistsError(f"{folder} already holds a deployment log ({HEADER})")
        os.makedirs(folder, exist_ok=True)
        self.folder = folder
        self.header = dict(header or {})
        json.dumps(self.header, default=float)  # refuse an unserialisable header now
        self.chunk_ticks = int(chunk_ticks)
        self.columns: dict = {}  # name -> (kind, shape)
        self.strings: dict = {}  # name -> [value, ...] (the code is the index)
        self.chunks: list = []  # [(file, rows)]
        self.ticks = 0
        self.summary = None
        self.complete = False
        self.error: str | None = None  # the background writer's failure, if any
        self._chunk: dict = {}  # name -> (chunk_ticks, *shape) array of the chunk in progress
        self._codes: dict = {}  # name -> {string: its code} of each string column
        self._plans: dict = {}  # the chunk's row plans (`_write_row`), by the row's column names
        self._rows = 0  # rows in the chunk in progress
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._write_loop, daemon=True, name="log-writer")
        self._thread.start()
        self._closed = False
        self._submit()  # log.json exists from the start

    # ------------------------------------------------------------- the caller's side
    def append(self, row: dict) -> None:
        """Add one tick's row `{column: value}` (see the module docstring for the kinds)."""
        if self._closed:
            raise RuntimeError("append after close")
        with self._lock:
            try:
                self._write_row(self._rows, row)
            except (TypeError, ValueError):
                for name, (kind, _) in self.columns.items():  # a refused row leaves no trace
                    if name in self._chunk:
                        self._chunk[name][self._rows] = _fill(kind)
                raise
            self._rows += 1
            self.ticks += 1
            if self._rows >= self.chunk_ticks:
                self._submit()

    def _write_row(self, i: int, row: dict) -> None:
        """Copy `row`'s values into row `i` of the chunk's columns; with the lock. A row with
        the columns of one already written to this chunk, in the same order (every tick's, in
        a run), follows that row's plan: its columns, string codes and shapes looked up once."""
        plan = self._plans.get(tuple(row))
        if plan is None:
            self._write_row_new(i, row)
            return
        for (name, column, codes, shape), value in zip(plan, row.values()):
            if value is None:
                continue
            if codes is not None:
                code = codes.get(value) if type(value) is str else None
                if code is None:  # a new string, or not a string: the general path says which
                    self._write_value(i, name, value)
                else:
                    column[i] = code
                continue
            if (value.shape if type(value) is np.ndarray else np.shape(value)) != shape:
                raise ValueError(f"column {name!r} has shape {shape}, got {np.shape(value)}")
            column[i] = value

    def _write_row_new(self, i: int, row: dict) -> None:
        """`_write_row` for a row of new columns or order: each column by name, then its plan."""
        for name, value in row.items():
            if value is not None:
                self._write_value(i, name, value)
        if all(name in self._chunk for name in row):  # every column has an array now
            self._plans[tuple(row)] = [
                (name, self._chunk[name], self._codes.get(name), self.columns[name][1])
                for name in row
            ]

    def _write_value(self, i: int, name: str, value) -> None:
        """Write `value` in row `i` of column `name` (its array made at its first value)."""
        column = self._chunk.get(name)
        if column is None:
            column = self._chunk[name] = self._chunk_column(name, value)
        if name in self.strings:
            if not isinstance(value, str):
                raise TypeError(f"column {name!r} holds strings, got {value!r}")
            codes = self._codes[name]
            if value not in codes:
                codes[value] = len(self.strings[name])
                self.strings[name].append(value)
            column[i] = codes[value]
            return
        shape = value.shape if type(value) is np.ndarray else np.shape(value)
        if shape != column.shape[1:]:
            raise ValueError(f"column {name!r} has shape {column.shape[1:]}, got {shape}")
        column[i] = value

    def _chunk_column(self, name: str, value) -> np.ndarray:
        """The chunk's array for column `name` (registered from `value` if new), every row
        absent until written."""
        if name not in self.columns:
            self.columns[name] = _column_of(name, value)
            if self.columns[name][0] == STRING:
                self.strings[name], self._codes[name] = [], {}
        kind, shape = self.columns[name]
        return _filled(self.chunk_ticks, kind, shape)

    def flush(self) -> None:
        """Write the rows appended so far and wait until they are on disk."""
        with self._lock:
            self._submit()
        self._queue.join()

    def close(self, summary: dict | None = None) -> str:
        """Write the remaining rows, mark the log complete (with `summary`, JSON-serialisable,
        if given) and stop the writer thread. Safe to call twice. Returns the folder."""
        if self._closed:
            return self.folder
        with self._lock:
            self.summary = summary
            self.complete = True
            self._submit()
            self._closed = True
        self._queue.put(None)
        self._thread.join()
        if self.error is not None:
            raise RuntimeError(f"the deployment log could not be written: {self.error}")
        return self.folder

    def __enter__(self) -> DeploymentLogWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close(self.summary)

    # ------------------------------------------------------------- the writer thread
    def _submit(self) -> None:
        """Hand the pending rows and a snapshot of the header to the writer; with the lock."""
        rows, arrays = self._rows, self._chunk
        self._rows, self._chunk, self._plans = 0, {}, {}
        chunk = None
        if rows:
            name = CHUNK_PATTERN.format(len(self.chunks))
            chunk = (name, rows, {n: a[:rows] for n, a in arrays.items()})
            self.chunks.append((name, rows))
        header = self._header_json()
        self._queue.put((chunk, dict(self.columns), header))

    def _header_json(self) -> dict:
        return {
            "format": FORMAT,
            "header": self.header,
            "columns": {n: {"kind": k, "shape": list(s)} for n, (k, s) in self.columns.items()},
            "strings": {n: list(t) for n, t in self.strings.items()},
            "chunks": [{"file": f, "rows": r} for f, r in self.chunks],
            "ticks": sum(r for _, r in self.chunks),
            "complete": self.complete,
            "summary": self.summary,
        }

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                chunk, columns, header = item
                if self.error is None:
                    if chunk is not None:
                        name, rows, arrays = chunk
                        write_chunk(os.path.join(self.folder, name), rows, arrays, columns)
                    _atomic_json(os.path.join(self.folder, HEADER), header)
            except Exception as exc:  # the run goes on; close() reports it
                self.error = f"{type(exc).__name__}: {exc}"
            finally:
                self._queue.task_done()


def _filled(rows: int, kind: str, shape: tuple) -> np.ndarray:
    """`(rows, *shape)` of a column of `kind`, every row its absent value (`_fill`)."""
    dtype = {"f": float, "i": np.int64, "u": np.uint64, "b": bool, STRING: np.int16}[kind]
    return np.full((rows, *shape), _fill(kind), dtype=dtype)


def write_chunk(path: str, rows: int, chunk: dict, columns: dict) -> None:
    """A chunk of `rows` rows, its column arrays `{name: (rows, *shape)}`, into `path` (an
    .npz, written under a temporary name, then renamed), with every column of `columns`
    `{name: (kind, shape)}`: one the chunk lacks is written absent."""
    arrays = {n: chunk[n] if n in chunk else _filled(rows, k, tuple(s))
              for n, (k, s) in columns.items()}  # fmt: skip
    tmp = path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def _atomic_json(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, default=float)
    os.replace(tmp, path)


def rewrite_summary(folder: str, summary: dict) -> None:
    """Replace the summary of the closed, complete log in `folder` (a run whose logging
    process finished before the caller knew everything its summary holds)."""
    path = os.path.join(folder, HEADER)
    with open(path) as f:
        meta = json.load(f)
    if not meta.get("complete"):
        raise ValueError(f"{folder}: the log is not complete; close it before its summary")
    meta["summary"] = summary
    _atomic_json(path, meta)


class DeploymentLog:
    """A deployment log read back: `header` (the caller's), `meta` (all of `log.json`),
    `arrays` `{column: (ticks, *shape)}` with string columns decoded (`""` where absent);
    `log[name]` is `log.arrays[name]`."""

    def __init__(self, meta: dict, arrays: dict, folder: str | None = None):
        self.meta, self.arrays, self.folder = meta, arrays, folder
        self.header = meta.get("header", {})

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def __contains__(self, name: str) -> bool:
        return name in self.arrays

    def __len__(self) -> int:
        return int(self.meta.get("ticks", 0))

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete"))

    @property
    def summary(self) -> dict | None:
        return self.meta.get("summary")

    @classmethod
    def load(cls, folder: str) -> DeploymentLog:
        """Read a log folder (complete or not: the chunks `log.json` lists)."""
        path = os.path.join(folder, HEADER)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{folder} is not a deployment log: no {HEADER}")
        with open(path) as f:
            meta = json.load(f)
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")
        columns = {n: (c["kind"], tuple(c["shape"])) for n, c in meta["columns"].items()}
        parts: dict = {n: [] for n in columns}
        for chunk in meta["chunks"]:
            with np.load(os.path.join(folder, chunk["file"])) as data:
                for name, (kind, shape) in columns.items():
                    if name in data.files:
                        parts[name].append(data[name])
                    else:  # the column appeared in a later chunk
                        parts[name].append(_filled(chunk["rows"], kind, shape))
        arrays = {}
        for name, (kind, shape) in columns.items():
            a = np.concatenate(parts[name]) if parts[name] else np.zeros((0, *shape))
            if kind == STRING:
                table = np.array(list(meta["strings"][name]) + [""], dtype=object)
                a = table[a.astype(int)]  # code -1 (absent) picks the trailing ""
            arrays[name] = a
        return cls(meta, arrays, folder)


# --------------------------------------------------------------------------- recording
MEASUREMENT_FIELDS = (
    "joint_q",
    "joint_qd",
    "joint_tau",
    "base_quat",
    "base_angular_velocity",
    "base_linear_acceleration",
    "base_linear_velocity",
    "base_position",
    "foot_force",
    "motor_temperature",
)


def measurement_row(m: Measurement | None) -> dict:
    """A measurement's columns: `stamp` [s], `sequence`, `robot_mode` (int), the array fields
    by name (`MEASUREMENT_FIELDS`, absent ones left out) and `base_state_source` ("" if None)."""
    if m is None:
        return {}
    row = {n: getattr(m, n) for n in MEASUREMENT_FIELDS}
    row.update(
        stamp=float(m.timestamp),
        sequence=int(m.sequence),
        robot_mode=int(m.robot_mode),
        base_state_source=m.base_state_source or "",
    )
    return row


def command_row(c: JointCommand | None) -> dict:
    """A joint command's columns `command_<field>` (`JointCommand.ARRAYS`), (nu,) each."""
    if c is None:
        return {}
    return {f"command_{n}": getattr(c, n) for n in JointCommand.ARRAYS}


class RecordingRobot(RobotWrapper):
    """A `RobotInterface` around `robot` that appends one row to `log` at every `write`: the
    time since the first `read` (`t` [s], robot clock), the newest measurement `read` returned
    (`measurement_row`; `measured` False when it was None), the command written
    (`command_row`), `safety_mode` (`safety.mode.value`, if a safety layer is given) and the
    output of each probe, `{name: () -> {key: value}}`, as `<name>_<key>` (the estimator's
    output, a simulator's ground truth; a probe that raises is counted in `probe_errors`, its
    first exception kept in `probe_failures`, not fatal), and the
    current `tags` (`{column: value}` the caller sets, e.g. the phase of the run).

    The control loop reads and writes once per command tick, so the log has one row per tick.
    Every other attribute (`advance`, `status`, `timing`, ...) is the inner robot's."""

    def __init__(self, robot, log: DeploymentLogWriter, *, safety=None,
                 probes: dict[str, Callable[[], dict]] | None = None):  # fmt: skip
        super().__init__(robot)
        self.log = log
        self.safety = safety
        self.probes = dict(probes or {})
        self.probe_errors = {name: 0 for name in self.probes}
        self.probe_failures: dict = {}  # name -> the first exception of that probe, as text
        self.tags: dict = {}  # constant columns of the rows to come (e.g. {"phase": "stand"})
        self.last: Measurement | None = None
        self.t0: float | None = None

    def read(self) -> Measurement | None:
        m = self.robot.read()
        if self.t0 is None:
            self.t0 = self.robot.now()
        self.last = m
        return m

    def write(self, command: JointCommand) -> None:
        self.robot.write(command)
        now = self.robot.now()
        row = {"t": now - (now if self.t0 is None else self.t0), "measured": self.last is not None}
        row.update(self.tags)
        row.update(measurement_row(self.last))
        row.update(command_row(command))
        if self.safety is not None:
            row["safety_mode"] = self.safety.mode.value
        for name, probe in self.probes.items():
            try:
                values = probe() or {}
            except Exception as exc:
                self.probe_errors[name] += 1
                self.probe_failures.setdefault(name, f"{type(exc).__name__}: {exc}")
                continue
            row.update({f"{name}_{k}": v for k, v in values.items()})
        self.log.append(row)
