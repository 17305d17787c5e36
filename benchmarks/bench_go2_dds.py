"""The Go2 DDS link measured: message costs in Python, a loopback run against the simulated Go2.

    python benchmarks/bench_go2_dds.py                 # writes the "Go2 over DDS" section
    python benchmarks/bench_go2_dds.py --quick --no-write

1. Per message, in this process (median of `--reps` calls): encoding and decoding LowCmd_ and
   LowState_ with our one-call codec (`hardware.go2.codec.fast_cdr`) and with Cyclone's own
   per-field encoder, and the LowCmd CRC.
2. Loopback: the simulated Go2 (`python -m hardware.go2.sim`, MuJoCo) on its own DDS
   domain and `Go2Robot` with `StandUpController` through the safety layer for `--seconds`,
   in real time: the LowCmd writer's interval and lateness, the LowStates taken per second,
   the commands the robot accepted per second, its overruns, the base height. The load average
   is recorded with the numbers: on a shared machine they say what the link did under it.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Go2 over DDS"


def median_us(fn, reps: int) -> float:
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return 1e6 * float(np.median(samples))


def message_rows(reps: int) -> list:
    from cyclonedds.idl import IdlStruct

    import dynamics
    from hardware.backends.mujoco_sim import MuJoCoRobot
    from hardware.go2 import conversions
    from hardware.go2.crc import set_crc
    from hardware.interface import JointCommand, JointMap

    model = dynamics.load_robot("go2")
    joint_map = JointMap.from_model(model)
    perm = conversions.sdk_permutation(joint_map)
    command = JointCommand.create(joint_map.q_default, 80.0, 2.0)
    lowcmd = conversions.lowcmd_from_command(command, perm)
    lowstate = conversions.lowstate_from_measurement(MuJoCoRobot(model).read(), perm)
    rows = []
    for name, sample in (("LowCmd_", lowcmd), ("LowState_", lowstate)):
        cls = type(sample)
        data = sample.serialize()
        rows.append({
            "message": name,
            "bytes": len(data),
            "encode_ours_us": median_us(sample.serialize, reps),
            "encode_cyclone_us": median_us(lambda s=sample: IdlStruct.serialize(s), reps),
            "decode_ours_us": median_us(lambda c=cls, d=data: c.deserialize(d), reps),
            "decode_cyclone_us": median_us(
                lambda c=cls, d=data: IdlStruct.deserialize.__func__(c, d), reps
            ),
        })  # fmt: skip
    rows.append({"message": "LowCmd_ CRC", "crc_us": median_us(lambda: set_crc(lowcmd), reps)})
    return rows


def loopback_run(seconds: float, domain: int) -> dict:
    import dynamics
    from hardware import control_loop
    from hardware.go2 import sim
    from hardware.go2.robot import Go2Robot
    from hardware.interface import JointMap
    from hardware.pose import StandUpController
    from hardware.safety import SafetyConfig, SafetyLayer

    joint_map = JointMap.from_model(dynamics.load_robot("go2"))
    config = SafetyConfig(soft_start_duration=0.5, command_timeout=0.3, measurement_timeout=0.1)
    load_before = os.getloadavg()[0]
    args = ["--domain", str(domain), "--interface", "lo", "--max-lifetime", str(seconds + 60)]
    with sim.spawn(args, stderr=subprocess.DEVNULL) as proc:
        robot = Go2Robot(joint_map, domain=domain, interface="lo", command_timeout=0.3,
                         state_timeout=0.1, max_command_age=0.3)  # fmt: skip
        try:
            result = control_loop.run(robot, StandUpController(joint_map, 1.0),
                                      SafetyLayer(joint_map, config), duration=seconds)  # fmt: skip
            status = robot.status()
        finally:
            robot.close()
        proc.send_signal(15)
        out, _ = proc.communicate(timeout=30)
    final = json.loads(out.strip().splitlines()[-1])["final_status"]
    writer = robot.timing.summary()
    z = result.log["base_position"][:, 2]
    return {
        "seconds": seconds,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "writer_interval_median_ms": 1e3 * writer["interval_median_s"],
        "writer_interval_p99_ms": 1e3 * writer["interval_p99_s"],
        "writer_interval_max_ms": 1e3 * writer["interval_max_s"],
        "writer_late_p99_ms": 1e3 * writer["jitter_p99_s"],
        "writer_missed_ticks": writer["missed_ticks"],
        "lowcmd_sent_per_s": status["counters"]["sent"] / seconds,
        "lowstate_taken_per_s": status["counters"]["states"] / seconds,
        "robot_accepted_per_s": final["drivers"]["accepted"] / seconds,
        "robot_bad_crc": final["drivers"]["bad_crc"],
        "robot_time_s": final["robot_time"],
        "robot_overruns": final["transport"]["overruns"],
        "min_base_height_after_2s_m": float(np.nanmin(z[result.log["t"] > 2.0])),
        "safety_mode": result.safety.mode.value,
        "watchdog_trips": len(status["watchdog_trips"]) + len(final["watchdog_trips"]),
    }


def render(rows: list, run: dict, command: str) -> str:
    sys.path.insert(0, str(ROOT))
    from benchmarks.markdown_report import cpu_name, versions

    lines = [
        HEADING,
        "",
        "Written by `benchmarks/bench_go2_dds.py`.",
        "",
        f"- Command: `{command}`",
        f"- Date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- CPU: {cpu_name()}, {os.cpu_count()} cores; {versions('numpy')}, "
        f"cyclonedds {importlib.metadata.version('cyclonedds')}",
        f"- Load average (1 min) before / after the loopback run: {run['load_before']:.1f} / "
        f"{run['load_after']:.1f}",
        "",
        "Per message in Python (median): our one-call codec against Cyclone's per-field one.",
        "",
        "| message | CDR bytes | encode ours us | encode Cyclone us | decode ours us | "
        "decode Cyclone us |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "bytes" in r:
            lines.append(f"| {r['message']} | {r['bytes']} | {r['encode_ours_us']:.0f} | "
                         f"{r['encode_cyclone_us']:.0f} | {r['decode_ours_us']:.0f} | "
                         f"{r['decode_cyclone_us']:.0f} |")  # fmt: skip
        else:
            lines += ["", f"LowCmd CRC (C layout + zlib): {r['crc_us']:.0f} us."]
    lines += [
        "",
        f"Loopback, {run['seconds']:g} s in real time: `Go2Robot` + `StandUpController` + "
        "safety layer against the simulated Go2 (MuJoCo, 2 ms steps) in another process.",
        "",
        "| quantity | value |",
        "|---|---:|",
        f"| LowCmd writer interval median / p99 / max ms | {run['writer_interval_median_ms']:.2f}"
        f" / {run['writer_interval_p99_ms']:.2f} / {run['writer_interval_max_ms']:.1f} |",
        f"| LowCmd writer lateness p99 ms, missed ticks | {run['writer_late_p99_ms']:.2f}, "
        f"{run['writer_missed_ticks']} |",
        f"| LowCmd sent per s / accepted by the robot per s | {run['lowcmd_sent_per_s']:.0f} / "
        f"{run['robot_accepted_per_s']:.0f} |",
        f"| LowState taken per s (newest only) | {run['lowstate_taken_per_s']:.0f} |",
        f"| robot time simulated / overruns | {run['robot_time_s']:.2f} s / "
        f"{run['robot_overruns']} |",
        f"| bad CRCs, watchdog trips | {run['robot_bad_crc']}, {run['watchdog_trips']} |",
        f"| min base height after 2 s m, safety mode | {run['min_base_height_after_2s_m']:.3f}, "
        f"{run['safety_mode']} |",
    ]
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="loopback run [s]")
    parser.add_argument("--reps", type=int, default=2000, help="calls per message timing")
    parser.add_argument("--domain", type=int, default=None, help="DDS domain of the run")
    parser.add_argument("--quick", action="store_true", help="1 s run, 50 calls")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.reps = min(args.seconds, 2.5), min(args.reps, 50)
    sys.path.insert(0, str(ROOT))
    from benchmarks.markdown_report import publish

    domain = args.domain if args.domain is not None else 100 + os.getpid() % 100
    rows = message_rows(args.reps)
    run = loopback_run(args.seconds, domain)
    command = "python benchmarks/bench_go2_dds.py " + " ".join(argv or sys.argv[1:])
    text = render(rows, run, command.strip())
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING, text)
    return {"messages": rows, "loopback": run}


if __name__ == "__main__":
    main()
