"""The Go2's 500 Hz command path timed part by part, on a quiet and on a busy computer.

    python benchmarks/bench_command_path.py                 # benchmarks/results/command_path.json
    python benchmarks/bench_command_path.py --quick --out /tmp/command_path.json

What runs is the high-rate path of `examples/deploy_go2.py --controller policy` as
`learning.go2_command_path` builds it, in this process: `Go2Robot` behind `EstimatedRobot`
(the state estimator) behind `RecordingRobot` (the deployment log and its probes), the
safety layer, the fixed steering (0.5 m/s forward once the policy walks), the start-up
sequence and `control_loop.run` in wall-clock time, for `--ticks` ticks of 2 ms. The
shipped policy (`examples/policies/go2_omni_proprio`, 50 Hz) runs as the deployment runs it:
by default (`--command-path process`, as `serve_go2_path`) in a process of its own
(`hardware.command_process.run_controller`) behind a shared-memory link, a
`SharedCommandController` in the loop's controller thread, each tick sending its LowCmd
itself and the interpreter lock handed over every 0.2 ms (`SWITCH_INTERVAL`); with
`--command-path thread` (as `serve_go2`) the policy itself in the controller thread and the
LowCmds sent by `Go2Robot`'s writer thread at 500 Hz. Timers wrapped around the parts (a few
perf_counter calls a tick) give, per call or per tick, in microseconds:

    take_decode  `Go2Robot._poll` calls that took exactly one LowState: the DDS take and its
                 decoding (`packed.LowStateDecoder`, from its bytes); the loop's read and its
                 LowCmd send (or the writer thread) both poll, so each LowState is decoded
                 by one of them. With the simulated Go2 it also takes its ground-truth topic
                 (a deployment in simulation logs it), and always the empty
                 `rt/sportmodestate`
    estimator    `StateEstimator.update`, per call (one per LowState)
    safety       `SafetyLayer.observe` + `SafetyLayer.command`, per tick
    encode_crc   `packed.LowCmdPacker.pack` (slot mapping, CRC), per LowCmd (in the
                 tick, or in the writer thread with `--command-path thread`)
    dds_write    the LowCmd's write (`dds.write_serialized`), per LowCmd (the same)
    log_row      `RecordingRobot.write` less the inner robot's `write` (the drivers' check
                 and, in process mode, the LowCmd send): the row (measurement, command,
                 probes) and `DeploymentLogWriter.append`, per tick
    log_chunk    the log's background thread stacking and writing a chunk of 500 rows
                 (`deployment_log.write_chunk`), per chunk (the last one, written when the
                 log closes after the run, is shorter): not in the tick, but it holds
                 the interpreter's lock (GIL) the loop needs, up to its switch interval
    tick         the loop's tick from wake-up to the end of its work (`TimingStats` compute)
    loop_late    how late the loop's tick started after its deadline (`TimingStats` jitter:
                 the wake-up of `control_loop.sleep_until` plus any overrun before it)
    sleep_late   the scheduler alone: `control_loop.sleep_until` at a 2 ms period with no
                 work, `--ticks` times, in the same conditions (run before the deployment)

Four cases: quiet or loaded (`hardware.busy_load.busy_load(2)`, one busy process pinned to
each of the two cores), and with the simulated Go2 (`python -m hardware.go2.sim`, MuJoCo,
started as `learning.go2_deployment.simulated_go2` starts it, standing up and walking at
0.5 m/s under the policy) or without it (a LowState stream recorded from MuJoCo, the same
policy walking behind `SensorNoise.go2()`, published at 500 Hz by a thread of this process
through a DataWriter on the robot's own DDS participant; the LowCmds then go to no reader).

Cores: this process (its threads: the loop, the controller thread, the LowCmd writer in
thread mode, the log writer, Cyclone's) is pinned to CPU 1 with `os.sched_setaffinity`, the
simulated Go2 (every thread) and the policy's process to CPU 0, so neither the physics nor
the policy takes the loop's core (the deployment itself pins neither); the busy processes
take one core each. On a one-core machine everything shares the one. Each case also records
the share of the CPUs that other processes used meanwhile (another engineer's tests on a
shared machine) and the hypervisor stole.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import importlib.metadata
import json
import math
import os
import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
POLICY = ROOT / "examples" / "policies" / "go2_omni_proprio"
COMMAND_DT = 0.002  # [s] the command path's period (500 Hz)
BUSY_PROCESSES = 2  # one per core of the development machine
WALK_VELOCITY = 0.5  # [m/s] forward command once the policy walks
RECORD_MARGIN = 2.0  # [s] recorded beyond the run, so the replay never runs out
PARTS = {  # key: (label of the table, what one sample is)
    "take_decode": ("(a) DDS take + decode, one LowState", "per _poll that took one LowState"),
    "estimator": ("(b) estimator update", "per StateEstimator.update"),
    "safety": ("(c) safety observe + command", "per tick"),
    "encode_crc": ("(d) LowCmd encode + CRC", "per LowCmd"),
    "dds_write": ("(e) LowCmd DDS write", "per LowCmd"),
    "log_row": ("(f) log row (RecordingRobot)", "per tick"),
    "log_chunk": ("(f) log chunk to disk (log thread)", "per chunk of 500 rows, the last shorter"),
    "tick": ("(g) whole loop tick", "per tick"),
    "loop_late": ("(h) loop tick start after deadline", "per tick"),
    "sleep_late": ("(h) `sleep_until` wake-up, no work", "per 2 ms deadline"),
}
CASES = {  # key: (busy processes, simulated Go2)
    "quiet_nosim": (0, False),
    "quiet_sim": (0, True),
    "loaded_nosim": (BUSY_PROCESSES, False),
    "loaded_sim": (BUSY_PROCESSES, True),
}


# --------------------------------------------------------------------------- statistics
def stats_us(samples_s) -> dict:
    """`{"median_us", "p99_us", "max_us", "n"}` of durations in seconds (NaN when empty)."""
    a = 1e6 * np.asarray(samples_s, dtype=float)
    if a.size == 0:
        return {"median_us": math.nan, "p99_us": math.nan, "max_us": math.nan, "n": 0}
    return {"median_us": float(np.median(a)), "p99_us": float(np.percentile(a, 99)),
            "max_us": float(np.max(a)), "n": int(a.size)}  # fmt: skip


def timing_stats_us(summary: dict, kind: str) -> dict:
    """`stats_us`'s fields from a `TimingStats.summary()`: `kind` "compute" (the tick's work)
    or "jitter" (its lateness)."""
    return {"median_us": 1e6 * summary[f"{kind}_median_s"],
            "p99_us": 1e6 * summary[f"{kind}_p99_s"],
            "max_us": 1e6 * summary[f"{kind}_max_s"], "n": int(summary["ticks"])}  # fmt: skip


def paired_sum(a: list, b: list) -> list:
    """Per tick `a + b` of two per-tick series (the shorter's length)."""
    n = min(len(a), len(b))
    return [x + y for x, y in zip(a[:n], b[:n])]


def paired_difference(outer: list, inner: list) -> list:
    """Per tick `outer - inner`: a call's own time less the nested call's."""
    n = min(len(outer), len(inner))
    return [x - y for x, y in zip(outer[:n], inner[:n])]


# --------------------------------------------------------------------------- timers
def timed(fn, sink: list):
    """`fn` that appends each call's wall time [s] to `sink`."""
    clock = time.perf_counter

    def call(*args, **kwargs):
        t = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            sink.append(clock() - t)

    return call


def timed_poll(go2, sink: list):
    """`go2._poll` that appends `(wall time [s], LowStates taken)` per call to `sink` (it runs
    under `go2.lock`, so the counter is consistent)."""
    poll, clock, counters = go2._poll, time.perf_counter, go2.counters

    def call(now):
        before, t = counters["states"], clock()
        try:
            return poll(now)
        finally:
            sink.append((clock() - t, counters["states"] - before))

    return call


@contextlib.contextmanager
def instrumented(go2, estimator, safety, recorder):
    """Timers on the parts of the command path (module docstring) for the block; yields
    `{part: [samples]}` (raw: `poll` (duration, states), `observe`, `command`, `row`,
    `inner_write` per call). Every timer is taken off at the end (no reference cycles left to
    keep the DDS entities alive)."""
    import hardware.deployment_log as log_module
    import hardware.go2.robot as go2_module

    raw = {k: [] for k in ("poll", "estimator", "observe", "command", "encode_crc",
                           "dds_write", "row", "inner_write", "log_chunk")}  # fmt: skip
    send, write_chunk = go2_module.write_serialized, log_module.write_chunk
    patched = [(go2, "_poll", timed_poll(go2, raw["poll"])),
               (go2._packer, "pack", timed(go2._packer.pack, raw["encode_crc"])),
               (go2, "write", timed(go2.write, raw["inner_write"])),
               (estimator, "update", timed(estimator.update, raw["estimator"])),
               (safety, "observe", timed(safety.observe, raw["observe"])),
               (safety, "command", timed(safety.command, raw["command"])),
               (recorder, "write", timed(recorder.write, raw["row"]))]  # fmt: skip
    for owner, name, fn in patched:
        setattr(owner, name, fn)
    go2_module.write_serialized = timed(send, raw["dds_write"])
    log_module.write_chunk = timed(write_chunk, raw["log_chunk"])
    try:
        yield raw
    finally:
        log_module.write_chunk = write_chunk
        go2_module.write_serialized = send
        for owner, name, _ in patched:
            delattr(owner, name)  # the class's method again


def part_samples(raw: dict) -> dict:
    """`{part: samples [s]}` of parts (a)-(f) from `instrumented`'s raw timings."""
    return {
        "take_decode": [d for d, states in raw["poll"] if states == 1],
        "estimator": raw["estimator"],
        "safety": paired_sum(raw["observe"], raw["command"]),
        "encode_crc": raw["encode_crc"],
        "dds_write": raw["dds_write"],
        "log_row": paired_difference(raw["row"], raw["inner_write"]),
        "log_chunk": raw["log_chunk"],
    }


# --------------------------------------------------------------------------- cores
def core_plan() -> dict:
    """`{"benchmark": cpu, "sim": cpu, "busy": [cpus]}`: this process on the second CPU it may
    use, the simulated Go2 (and the policy's process) on the first (the same one on a
    one-core machine), the busy processes on every one."""
    cpus = sorted(os.sched_getaffinity(0))
    return {"benchmark": cpus[min(1, len(cpus) - 1)], "sim": cpus[0], "busy": cpus}


@contextlib.contextmanager
def on_cpu(cpu: int, back: int):
    """This thread on `cpu` for the block (a process started there inherits it), then on
    `back`."""
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, {back})


@contextlib.contextmanager
def switch_interval(seconds: float):
    """The interpreter's thread switch interval [s] for the block (`sys.setswitchinterval`)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def sleep_lateness(ticks: int, period: float = COMMAND_DT) -> list:
    """How late [s] `control_loop.sleep_until` returns, `ticks` deadlines `period` [s]
    apart, with no work between them."""
    from hardware.control_loop import sleep_until

    late = []
    deadline = time.perf_counter() + period
    for _ in range(ticks):
        sleep_until(deadline)
        late.append(time.perf_counter() - deadline)
        deadline += period
    return late


def machine_cpu_s() -> dict:
    """The machine's CPU time so far [s], all cores (/proc/stat): `idle` (idle and I/O wait:
    timed exactly, where the busy columns are sampled at the timer tick and miss a process
    that runs in short bursts between ticks) and `steal` (taken by the hypervisor from this
    virtual machine)."""
    with open("/proc/stat") as f:
        idle, iowait, _, _, steal = map(int, f.readline().split()[4:9])
    hz = os.sysconf("SC_CLK_TCK")
    return {"idle": (idle + iowait) / hz, "steal": steal / hz}


def own_cpu_s() -> float:
    """CPU time [s] of this process, its reaped children (the simulated Go2, the busy
    processes) and its live `multiprocessing` children (the policy's process)."""
    import multiprocessing

    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    hz = os.sysconf("SC_CLK_TCK")
    for child in multiprocessing.active_children():
        with contextlib.suppress(OSError):
            with open(f"/proc/{child.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / hz
    return total


@contextlib.contextmanager
def others_watched():
    """Yields a dict filled at the end of the block with the share of the machine's CPU
    [0..1] that processes outside this benchmark used (`other_cpu_share`: another engineer's
    tests on a shared machine) and the hypervisor stole (`steal_share`) meanwhile."""
    out: dict = {}
    wall, machine, own = time.perf_counter(), machine_cpu_s(), own_cpu_s()
    yield out
    capacity = (time.perf_counter() - wall) * os.cpu_count()
    after = machine_cpu_s()
    steal = after["steal"] - machine["steal"]
    busy = capacity - (after["idle"] - machine["idle"]) - steal
    out["other_cpu_share"] = (busy - (own_cpu_s() - own)) / capacity
    out["steal_share"] = steal / capacity


# --------------------------------------------------------------------------- the stream
def lowstate_messages(samples: list, joint_map) -> list:
    """`samples` as LowState_ messages, `tick` 2 ms apart from 0 [ms], CRC set."""
    from hardware.go2 import conversions

    perm = conversions.sdk_permutation(joint_map)
    return [conversions.lowstate_from_measurement(m, perm, tick_ms=round(1e3 * COMMAND_DT * k))
            for k, m in enumerate(samples)]  # fmt: skip


@contextlib.contextmanager
def publishing(participant, messages: list, period: float = COMMAND_DT):
    """A thread writing `messages` on `rt/lowstate` through a DataWriter of `participant`,
    one every `period` [s] until the block ends or they run out; yields the count written so
    far (a one-element list). Like a robot, it keeps its own clock: when the thread was held
    up, the messages due meanwhile go out at once (as a burst the network would deliver), so
    the stream never falls behind the clock its ticks count."""
    from hardware.go2 import dds
    from hardware.go2 import messages as msgs

    writer = dds.make_writer(participant, dds.TOPIC_LOWSTATE, msgs.LowState_)
    stop, written = threading.Event(), [0]

    def run():
        deadline = time.perf_counter()
        for msg in messages:
            if stop.wait(max(0.0, deadline - time.perf_counter())):
                return
            writer.write(msg)
            written[0] += 1
            deadline += period

    thread = threading.Thread(target=run, daemon=True, name="lowstate-feed")
    thread.start()
    try:
        yield written
    finally:
        stop.set()
        thread.join(timeout=5.0)


# --------------------------------------------------------------------------- the controller
def controller_main(names: dict, nu: int, policy: str, control_dt: float, cpu: int,
                    ready) -> None:  # fmt: skip
    """The controller's process (`hardware.command_process.run_controller`): the policy on
    CPU `cpu`, at `control_dt` [s], on the shared link `names` until its `stop`; `ready` is
    set once the policy is loaded."""
    os.sched_setaffinity(0, {cpu})
    import dynamics
    from hardware.command_process import run_controller
    from hardware.interface import JointMap
    from hardware.shared_state import SharedLink
    from learning.go2_deployment import make_controller

    link = SharedLink.attach(names, nu)
    try:
        joint_map = JointMap.from_model(dynamics.load_robot("go2"))
        controller, _, _ = make_controller("policy", joint_map, policy)
        ready.set()
        run_controller(link, controller, control_dt=control_dt, running=lambda: True)
    finally:
        link.close()


@contextlib.contextmanager
def controller_process(nu: int, control_dt: float, cpu: int):
    """The policy in a process of its own (`controller_main`) behind a shared link, as the
    deployment runs it (`command_path="process"`); yields the link once the policy is loaded
    there (as the deployment's controller is ready before its high-rate path starts). One
    process serves every case: each run's `SharedCommandController.reset` is a handshake with
    it."""
    import multiprocessing

    from hardware.shared_state import SharedLink

    link = SharedLink.create(nu)
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    args = (link.names, nu, str(POLICY), control_dt, cpu, ready)
    process = context.Process(target=controller_main, args=args, name="controller", daemon=True)
    process.start()
    try:
        while not ready.wait(0.1):
            if not process.is_alive():
                raise RuntimeError(f"the controller's process exited ({process.exitcode})")
        yield link
    finally:
        link.bump("stop")
        process.join(timeout=10.0)
        if process.is_alive():
            process.kill()
            process.join(timeout=5.0)
        link.close()


# --------------------------------------------------------------------------- one case
def stop_simulated_go2(proc) -> dict | None:
    """SIGTERM the simulated Go2 and return its final status (None if it gave none)."""
    proc.send_signal(15)
    out, _ = proc.communicate(timeout=30)
    lines = out.strip().splitlines()
    if not lines:
        return None
    final = json.loads(lines[-1]).get("final_status", {})
    return {"robot_time_s": final.get("robot_time"), "transport": final.get("transport"),
            "drivers": final.get("drivers")}  # fmt: skip


def deployment_run(ticks: int, domain: int, sim: bool, messages: list | None, log_folder: str,
                   link=None):  # fmt: skip
    """The deployment's high-rate path (module docstring) for `ticks` ticks, timed: as
    `go2_command_path.serve_go2_path` runs it, the controller behind shared `link` (a
    `controller_process`), one LowCmd sent by each tick and the interpreter lock handed over
    every `SWITCH_INTERVAL`; or with None as `serve_go2` runs it, the policy in the loop's
    controller thread and the LowCmds sent by `Go2Robot`'s writer thread. Returns
    `{part: stats_us}` and the run's facts."""
    import dynamics
    from hardware.command_process import SharedCommandController
    from hardware.interface import JointMap
    from hardware.safety import SafetyConfig
    from learning.deployment import tour_ramp
    from learning.go2_command_path import RESET_TIMEOUT, SWITCH_INTERVAL, Go2PathSpec, go2_path
    from learning.go2_deployment import (
        SETTLE_AFTER_STAND_UP,
        command_box,
        controller_inputs,
        make_controller,
    )

    stand_up = 1.5  # [s] the deployment's default
    joint_map = JointMap.from_model(dynamics.load_robot("go2"))
    policy, safety_changes, control_dt = make_controller("policy", joint_map, str(POLICY))
    control_dt = max(COMMAND_DT, round(control_dt / COMMAND_DT) * COMMAND_DT)
    config = SafetyConfig(**{"soft_start_duration": 0.5, **safety_changes})
    config = dataclasses.replace(config, command_timeout=0.3, measurement_timeout=0.1)
    box = command_box("policy", str(POLICY))
    accel, yaw_accel = tour_ramp(box.ranges())
    spec = Go2PathSpec(
        domain=domain, interface="lo", lockstep=False, ground_truth=sim, state_timeout=0.1,
        release_sport_mode=False, estimator="on", estimator_settings={}, stand_up=stand_up,
        auto_start=True, controller_after=stand_up + SETTLE_AFTER_STAND_UP,
        required_inputs=controller_inputs("policy", str(POLICY)), steer="fixed",
        box=box.ranges(), velocity=WALK_VELOCITY, accel=accel, yaw_accel=yaw_accel,
        cmd_vel_topic="cmd_vel", safety=config, duration=ticks * COMMAND_DT,
        control_dt=control_dt, command_dt=COMMAND_DT, log_folder=log_folder,
        header={"robot": "go2", "benchmark": "command_path"},
        connect_timeout=2.0 if sim else 0.0,
    )  # fmt: skip
    apart = link is not None
    controller = SharedCommandController(link, reset_timeout=RESET_TIMEOUT) if apart else policy
    with contextlib.ExitStack() as stack:
        if apart:
            stack.enter_context(switch_interval(SWITCH_INTERVAL))
        path = stack.enter_context(go2_path(controller, spec, writer_thread=not apart))
        go2 = path.go2
        fed = None
        if messages is not None:  # from now on: the replay must outlast the run
            fed = stack.enter_context(publishing(go2.participant, messages))
        before = dict(go2.counters)
        with instrumented(go2, path.robot.estimator, path.safety, path.recorder) as raw:
            result = path.run(spec)
            path.log.close()  # its last (shorter) chunk, timed too
        counted = {k: go2.counters[k] - before[k] for k in ("states", "sent")}
    started = path.started
    robot = path.robot
    writer = go2.timing.summary() if go2.threaded else None  # its thread stopped at `close`
    loop = result.timing["command"]
    parts = {k: stats_us(v) for k, v in part_samples(raw).items()}
    parts["tick"] = timing_stats_us(loop, "compute")
    parts["loop_late"] = timing_stats_us(loop, "jitter")
    seconds = ticks * COMMAND_DT
    facts = {
        "ticks": loop["ticks"],
        "missed_ticks": loop["missed_ticks"],
        "overruns": loop["overruns"],
        "lowstates_taken_per_s": counted["states"] / seconds,
        "lowstates_fed": None if fed is None else fed[0],
        "lowstates_recorded": None if messages is None else len(messages),
        "lowcmds_sent_per_s": counted["sent"] / seconds,
        "lowcmd_writer_late_p99_us": None if writer is None else 1e6 * writer["jitter_p99_s"],
        "lowcmd_writer_missed_ticks": None if writer is None else writer["missed_ticks"],
        "controller_calls": result.controller_calls,
        "controller_started_s": started.controller_started,
        "safety_mode": result.safety.mode.value,
        "safety_events": sorted({e.kind for e in result.safety.events}),
        "estimator_fault": robot.estimator_fault,
    }
    return parts, facts


def run_case(busy: int, sim: bool, ticks: int, domain: int, cores: dict, messages, link=None):
    """One case: the simulated Go2 (pinned to `cores["sim"]`) or the recorded `messages`,
    `busy` busy processes, the scheduler alone (`sleep_lateness`), then the deployment
    (`deployment_run`, the controller behind `link` or in this process). Returns the case's
    result."""
    from hardware.busy_load import busy_load
    from hardware.go2.conversions import TOPIC_GROUND_TRUTH
    from learning.go2_deployment import simulated_go2

    lifetime = ticks * COMMAND_DT + 120.0
    extra = ["--ground-truth-topic", TOPIC_GROUND_TRUTH]  # as the deployment starts it
    load_before = os.getloadavg()[0]
    sim_status = None
    with others_watched() as others, contextlib.ExitStack() as stack:
        proc = None
        if sim:
            with on_cpu(cores["sim"], back=cores["benchmark"]):
                proc = stack.enter_context(simulated_go2(domain, False, lifetime, extra=extra))
        stack.enter_context(busy_load(busy, cpus=cores["busy"]))
        sleep_late = stats_us(sleep_lateness(ticks))
        with tempfile.TemporaryDirectory(prefix="bench_command_path_") as folder:
            parts, facts = deployment_run(ticks, domain, sim, None if sim else messages,
                                          os.path.join(folder, "log"), link)  # fmt: skip
        if proc is not None:
            sim_status = stop_simulated_go2(proc)
    parts["sleep_late"] = sleep_late
    if facts["lowstates_taken_per_s"] > 1.1 / COMMAND_DT:
        print(f"warning: {facts['lowstates_taken_per_s']:.0f} LowStates/s on DDS domain {domain}: "
              "another publisher there? (--domain)", flush=True)  # fmt: skip
    return {"busy_processes": busy, "simulated_go2": sim, "domain": domain,
            "load_before": load_before, **others, "parts": parts, **facts,
            "simulated_go2_status": sim_status}  # fmt: skip


# --------------------------------------------------------------------------- report
def finite_case(case: dict) -> bool:
    """Every part of `case` has finite median, p99 and max."""
    return all(math.isfinite(s[k]) for s in case["parts"].values()
               for k in ("median_us", "p99_us", "max_us"))  # fmt: skip


def table_row(label: str, cells) -> str:
    """One Markdown table row."""
    return "| " + " | ".join([label, *cells]) + " |"


def case_title(key: str) -> str:
    """The column title of a `CASES` key: "quiet, no sim", "loaded, sim", ..."""
    busy, sim = CASES[key]
    return f"{'loaded' if busy else 'quiet'}, {'sim' if sim else 'no sim'}"


def policy_place(controller_cpu: int | None) -> str:
    """Where the policy ran: its own process on CPU `controller_cpu`, or (None) the path's
    controller thread."""
    if controller_cpu is None:
        return "the path's controller thread"
    return f"its own process on CPU {controller_cpu}"


def markdown_section(results: dict) -> str:
    """The benchmark's table in Markdown: a row per part, a column per case with the median /
    p99 [us], then the loop's missed ticks, overruns and largest lateness, and the machine."""
    keys = [k for k in CASES if k in results["cases"]]
    cases = [results["cases"][k] for k in keys]
    rows = [table_row("median / p99 us", [case_title(k) for k in keys]),
            "|---|" + "---:|" * len(keys)]  # fmt: skip
    for part, (label, _) in PARTS.items():
        cells = [c["parts"][part] for c in cases]
        rows.append(table_row(label, [f"{s['median_us']:.0f} / {s['p99_us']:.0f}" for s in cells]))
    rows.append(table_row("missed ticks", [str(c["missed_ticks"]) for c in cases]))
    rows.append(table_row("overruns (tick > 2 ms)", [str(c["overruns"]) for c in cases]))
    late = [f"{c['parts']['loop_late']['max_us']:.0f}" for c in cases]
    rows.append(table_row("max loop lateness us", late))
    others = [f"{100 * c['other_cpu_share']:.0f} / {100 * c['steal_share']:.0f}" for c in cases]
    rows.append(table_row("other processes / steal, % of the CPUs", others))
    pin = results["pinning"]
    load = " ".join(f"{x:.2f}" for x in results["load_average_start"])
    head = [
        "## Go2 command path",
        "",
        "Written by `benchmarks/bench_command_path.py`.",
        "",
        f"- Command: `{results['command']}`",
        f"- CPU: {results['cpu']}, {results['cores']} cores; the path pinned to CPU "
        f"{pin['benchmark']}, the simulated Go2 to CPU {pin['sim']}; the policy in "
        f"{policy_place(pin['controller'])}; loaded: {BUSY_PROCESSES} busy processes, one "
        "pinned to each core",
        f"- Load average at start (1, 5, 15 min): {load}; {results['ticks']} ticks of 2 ms "
        "per case",
        "",
    ]
    return "\n".join(head + rows)


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for name in ("numpy", "cyclonedds", "mujoco"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[name] = importlib.metadata.version(name)
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=4000, help="2 ms ticks per case")
    parser.add_argument("--quick", action="store_true", help="small settings (a smoke test)")
    parser.add_argument("--domain", type=int, default=None, help="first DDS domain (4 used)")
    parser.add_argument("--command-path", default="process", choices=("process", "thread"),
                        help="the policy in a process of its own (the deployment's default) "
                        "or in the loop's controller thread")  # fmt: skip
    parser.add_argument("--out", default=str(RESULTS / "command_path.json"), help="JSON file")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    if args.quick:
        args.ticks = min(args.ticks, 300)
    sys.path.insert(0, str(ROOT))
    scripts = str(ROOT / "benchmarks")  # `controller_main` by name in a spawned process
    added = scripts not in sys.path
    if added:
        sys.path.append(scripts)
    from benchmarks.markdown_report import cpu_name

    load_start = os.getloadavg()
    original = os.sched_getaffinity(0)
    cores = core_plan()
    os.sched_setaffinity(0, {cores["benchmark"]})
    domain = args.domain if args.domain is not None else 150 + os.getpid() % 60
    try:
        import dynamics
        from hardware.interface import JointMap
        from learning.policy_export import load_numpy_policy
        from learning.sensor_stream import record_walk

        joint_map = JointMap.from_model(dynamics.load_robot("go2"))
        control_dt = float(load_numpy_policy(str(POLICY)).config["control_dt"])
        with contextlib.ExitStack() as stack:
            link = None
            if args.command_path == "process":
                link = stack.enter_context(
                    controller_process(joint_map.nu, control_dt, cores["sim"])
                )
            seconds = args.ticks * COMMAND_DT + RECORD_MARGIN
            print(f"recording {seconds:.1f} s of MuJoCo ...", flush=True)
            messages = lowstate_messages(record_walk(seconds)[0], joint_map)
            cases = {}
            for i, (key, (busy, sim)) in enumerate(CASES.items()):
                print(f"{key} ...", flush=True)
                cases[key] = run_case(busy, sim, args.ticks, domain + i, cores, messages, link)
    finally:
        os.sched_setaffinity(0, original)
        if added:
            sys.path.remove(scripts)
    command = "python benchmarks/bench_command_path.py " + shlex.join(argv or sys.argv[1:])
    results = {
        "command": command.strip(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "load_average_start": list(load_start),
        "load_average_end": list(os.getloadavg()),
        "pinning": {
            **{k: cores[k] for k in ("benchmark", "sim", "busy")},
            "controller": cores["sim"] if args.command_path == "process" else None,
        },
        "command_path": args.command_path,
        "ticks": args.ticks,
        "period_s": COMMAND_DT,
        "versions": versions(),
        "parts": {k: {"label": label, "sample": what} for k, (label, what) in PARTS.items()},
        "cases": cases,
    }
    if not args.no_write:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1, default=float))
        print(f"wrote {out}")
    print()
    print(markdown_section(results))
    return results


if __name__ == "__main__":
    main()
