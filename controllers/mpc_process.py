"""The MPC's solves in a separate process: `SolverProcess`, the solver end of `RealTimeMPC`.

    solver = SolverProcess(dict(robot="go2", gait="trot", command=(0, 0, 0)), core=1)
    first, warm = solver.reset(state, lookahead=0.02)       # plan and warm-up CycleOutcome
    outcome = solver.cycle(state, t, lookahead, command, last_targets)
    solver.close()

Why a process: in the controller's process the solves share the interpreter with the 500 Hz
command loop and the controller thread, and their Python parts wait for the GIL behind them, so
a cycle takes longer there than alone on a quiet core (`examples/deploy_network.py` runs both).
In its own process, optionally pinned to its own core (`os.sched_setaffinity` before JAX starts
its threads), a solve runs as fast as alone.

The process holds its own `controllers.mpc.MPC`, built from the same keyword arguments as the
caller's, and commits every outcome it computes; the caller commits the same outcomes to its
copy (`MPC.adopt`, `MPC.commit`), so both hold the same plan, mode and failure count, and the
caller's copy serves `targets_at` while the process solves. A request sends the measured state,
its time, the lookahead, the command and the caller's last applied targets (the next problem's
`u_prev`); a reply is a `CycleOutcome` (NumPy arrays, pickled over a pipe).

Errors: an exception in the process comes back as a `RuntimeError` naming it (the process then
keeps serving); a process that died raises `RuntimeError` at the next request. `close` stops it
(and is safe to call twice); a forgotten process ends with its parent (daemon).
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import traceback

import numpy as np

from dynamics.configuration import State
from hardware.collection_pauses import freeze_survivors, frozen_heap

STARTUP_TIMEOUT = 600.0  # [s] building the MPC in the new process (imports, compilation)


def pin_beside_the_solver(solver_core):
    """Pin this process (and so the processes it starts: a robot, a simulated Go2) to every
    core but `solver_core` ("auto": the last of two or more; None: nothing pinned); returns the
    solver's core (`SolverProcess`'s `core`)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if solver_core == "auto":
        solver_core = cores[-1] if len(cores) >= 2 else None
    if solver_core is None:
        return None
    others = set(cores) - {int(solver_core)}
    if others:
        os.sched_setaffinity(0, others)
    return int(solver_core)


def _serve(connection, mpc_options: dict, core: int | None, factory: str) -> None:
    """The process's loop: build the MPC, then answer requests until "close" or a closed pipe."""
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(core)})  # before JAX creates its thread pools
    try:
        module, name = factory.split(":")
        mpc = getattr(importlib.import_module(module), name)(**mpc_options)
    except Exception as exc:  # bad options: tell the caller, then stop
        connection.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    connection.send(("ready", None))
    with frozen_heap():  # no full collection pass in a cycle (built MPC and JAX frozen)
        _answer(connection, mpc)


def _answer(connection, mpc) -> None:
    """Answer requests until "close" or a closed pipe."""
    prepared = None
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return
        kind, args = request
        if kind == "close":
            return
        try:
            reply = _handle(mpc, kind, args, prepared)
            if kind == "prepare":
                prepared = mpc.plan
                freeze_survivors()  # the programs it compiled
            connection.send(("ok", reply))
        except Exception as exc:
            detail = traceback.format_exc(limit=3)
            connection.send(("error", f"{type(exc).__name__}: {exc}\n{detail}"))


def _handle(mpc, kind: str, args: dict, prepared):
    """One request on the process's MPC (see `SolverProcess`)."""
    state = State(np.asarray(args["q"]), np.asarray(args["v"]))
    if kind in ("prepare", "reset"):
        mpc.set_command(*args["command"])
        if kind == "reset" and prepared is not None:
            mpc.reset(state, 0.0, init=prepared, iterations=mpc.iterations)
        else:
            mpc.reset(state, 0.0)
        first = (mpc.plan, mpc.stats.cycles[-1].wall_time)
        warm = mpc.plan_cycle(state, 0.0, args["lookahead"])
        mpc.commit(warm)
        return first, warm
    if kind == "cycle":
        if tuple(args["command"]) != tuple(mpc.command):
            mpc.set_command(*args["command"])
        mpc.last_targets = np.asarray(args["last_targets"], dtype=float).copy()
        outcome = mpc.plan_cycle(state, args["t"], args["lookahead"])
        mpc.commit(outcome)
        return outcome
    raise ValueError(f"unknown request {kind!r}")


class SolverProcess:
    """`controllers.mpc.MPC(**mpc_options)` in a process of its own (module docstring).

    Args:
        mpc_options: keyword arguments of `MPC` (robot, gait, command, horizon, iterations,
            problem options): they must match the caller's MPC.
        core: pin the process to this CPU core (None: wherever the OS runs it).
        startup_timeout: [s] to build the MPC in the new process.
        factory: "module:callable" that builds the MPC from `mpc_options` in the process
            (default `controllers.mpc:MPC`; tests pass one with a scripted solver).
    """

    def __init__(self, mpc_options: dict, core: int | None = None,
                 startup_timeout: float = STARTUP_TIMEOUT,
                 factory: str = "controllers.mpc:MPC"):  # fmt: skip
        if core is not None and (not isinstance(core, int) or core < 0):
            raise ValueError(f"core must be a CPU index >= 0 or None, got {core!r}")
        # against the machine's cores, not this process's affinity: a caller may already have
        # moved itself off the solver's core (examples/deploy_network.py does)
        cores = os.cpu_count() or 1
        if core is not None and core >= cores:
            raise ValueError(f"core {core} does not exist: this machine has cores 0-{cores - 1}")
        context = multiprocessing.get_context("spawn")
        self._connection, child = context.Pipe()
        self.process = context.Process(
            target=_serve, args=(child, dict(mpc_options), core, factory), daemon=True,
            name="mpc-solver-process",
        )  # fmt: skip
        self.process.start()
        child.close()
        if not self._connection.poll(startup_timeout):
            self.close()
            raise RuntimeError(f"the MPC solver process did not start in {startup_timeout} s")
        status, detail = self._receive()
        if status != "ready":
            self.close()
            raise RuntimeError(f"the MPC solver process could not build the MPC: {detail}")

    def _receive(self):
        try:
            return self._connection.recv()
        except (EOFError, OSError) as exc:
            code = self.process.exitcode
            raise RuntimeError(
                f"the MPC solver process died (exit code {code}): {type(exc).__name__}"
            ) from None

    def _request(self, kind: str, **args):
        if not self.process.is_alive():
            raise RuntimeError(
                f"the MPC solver process is not running (exit code {self.process.exitcode})"
            )
        self._connection.send((kind, args))
        status, reply = self._receive()
        if status == "error":
            raise RuntimeError(f"the MPC solver process failed: {reply}")
        return reply

    @staticmethod
    def _state(state: State) -> dict:
        return {"q": np.asarray(state.q, dtype=float), "v": np.asarray(state.v, dtype=float)}

    def prepare(self, state: State, lookahead: float, command=(0.0, 0.0, 0.0)):
        """The full first solve from `state` and one warm cycle: `((plan, wall), outcome)`;
        the plan is kept as the start of the next `reset`."""
        return self._request("prepare", lookahead=float(lookahead), command=tuple(command),
                             **self._state(state))  # fmt: skip

    def reset(self, state: State, lookahead: float, command=(0.0, 0.0, 0.0)):
        """`MPC.reset` from `state` at t = 0 (from the prepared plan with the cycle's
        iterations after `prepare`) and one warm cycle: `((plan, wall), outcome)`."""
        return self._request("reset", lookahead=float(lookahead), command=tuple(command),
                             **self._state(state))  # fmt: skip

    def cycle(self, state: State, t: float, lookahead: float, command, last_targets):
        """`MPC.plan_cycle(state, t, lookahead)` with `command` and `last_targets` (the
        caller's), committed in the process; returns the `CycleOutcome`."""
        return self._request("cycle", t=float(t), lookahead=float(lookahead),
                             command=tuple(float(c) for c in command),
                             last_targets=np.asarray(last_targets, dtype=float),
                             **self._state(state))  # fmt: skip

    def close(self, timeout: float = 10.0) -> None:
        """Stop the process (waits up to `timeout` s, then terminates it)."""
        if self.process.is_alive():
            try:
                self._connection.send(("close", {}))
            except (OSError, ValueError):
                pass
            self.process.join(timeout)
            if self.process.is_alive():
                self.process.terminate()
                self.process.join(timeout)
        self._connection.close()
