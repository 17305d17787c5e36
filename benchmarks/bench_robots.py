"""Every loadable quadruped's record, and the standing-pose rule against the SRDF poses.

    python benchmarks/bench_robots.py              # writes the "## Robot records" section
    python benchmarks/bench_robots.py --no-write   # prints it

For each robot of `dynamics.available_robots()`: where its standing pose, gains and gait sizes
came from and their values, then both standing poses (the SRDF's and the one the rule computes
from the URDF alone, `dynamics.robot_rules.computed_standing_pose`) held for 2 s by the record's
PD gains in MuJoCo (an engine this project did not write), and the settled base heights. The
peer of the rule is the SRDF written by each robot's makers.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HEADING = "## Robot records"
HOLD_SECONDS = 2.0
SAME_STAND = 0.02  # [m] the two poses "stand alike" within this


def settled(model, q0, kp, kd) -> tuple:
    """`(base height [m], lowest foot force [N])` after `HOLD_SECONDS` of PD on `q0` in MuJoCo."""
    from hardware.backends.mujoco_sim import MuJoCoRobot
    from hardware.interface import JointCommand

    robot = MuJoCoRobot(model.replace(q_standing=q0), q0=q0, command_timeout=100.0)
    command = JointCommand.create(np.asarray(q0)[7:], kp, kd, timestamp=robot.now(), sequence=1,
                                  arm=True)  # fmt: skip
    robot.write(command)
    robot.advance(HOLD_SECONDS)
    m = robot.read()
    return float(m.base_position[2]), float(np.min(m.foot_force))


def kind(source: str) -> str:
    """"rule", "SRDF" or "given" (a datasheet, a measurement, a record file) for a source."""
    if source.startswith("rule"):
        return "rule"
    return "SRDF" if "SRDF" in source else "given"


def measure(name: str) -> dict:
    import dynamics
    from dynamics import robot_rules as rules

    start = time.perf_counter()
    model, record = dynamics.load_robot(name), dynamics.robot_record(name)
    pm = dynamics.load_pinocchio(name).model
    q_rule = rules.computed_standing_pose(pm, record.foot_names, name)
    q_rule[2] = rules.standing_base_height(pm, q_rule, record.foot_names, record.foot_radius)
    has_srdf = dynamics.load_pinocchio(name).srdf_standing is not None
    row = {
        "robot": name, "mass": model.total_mass, "pose": kind(record.source_of("q_standing")),
        "kp": record.kp, "kd": record.kd, "gains": kind(record.source_of("kp")),
        "period": record.gait_period, "swing": record.swing_height,
        "gait_sizes": kind(record.source_of("gait_period")), "foot_radius": record.foot_radius,
        "rule_height": settled(model, q_rule, record.kp, record.kd)[0],
        "srdf_height": settled(model, np.asarray(model.q_standing), record.kp, record.kd)[0]
        if has_srdf else None,
    }  # fmt: skip
    row["seconds"] = time.perf_counter() - start
    return row


def render(rows, command: str) -> str:
    from benchmarks.markdown_report import cpu_name, versions

    lines = [
        HEADING, "",
        "Written by `benchmarks/bench_robots.py`.", "",
        f"- Command: `{command}`",
        f"- Date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- CPU: {cpu_name()}; " + versions("mujoco", "pinocchio"),
        "- Each robot's record (`dynamics.robot_record`): pose, gains and gait sizes with their "
        "source: SRDF, rule (`dynamics.robot_rules`) or given (`dynamics.robots.BUILT_IN`). "
        "Then the SRDF's standing pose and the rule's (from the URDF alone), each held "
        f"{HOLD_SECONDS:.0f} s by the record's PD in MuJoCo: settled base heights, alike within "
        f"{100 * SAME_STAND:.0f} cm.",
        "",
        "| robot | mass kg | pose | Kp | Kd | gains | period s | swing m | gait sizes | "
        "SRDF pose stands at m | rule's pose stands at m | alike |",
        "|---|---:|---|---:|---:|---|---:|---:|---|---:|---:|---|",
    ]  # fmt: skip
    alike = 0
    with_srdf = [r for r in rows if r["srdf_height"] is not None]
    for r in rows:
        if r["srdf_height"] is None:
            srdf, verdict = "no SRDF", "-"
        else:
            diff = r["rule_height"] - r["srdf_height"]
            ok = abs(diff) <= SAME_STAND
            alike += ok
            srdf, verdict = f"{r['srdf_height']:.3f}", ("yes" if ok else "no") + f" ({diff:+.3f})"
        lines.append(
            f"| {r['robot']} | {r['mass']:.1f} | {r['pose']} | {r['kp']:.1f} | {r['kd']:.2f} "
            f"| {r['gains']} | {r['period']:.3f} | {r['swing']:.3f} | {r['gait_sizes']} | {srdf} "
            f"| {r['rule_height']:.3f} | {verdict} |"
        )
    lines += ["", f"The rule's pose stands within {100 * SAME_STAND:.0f} cm of the SRDF's on "
              f"{alike} of {len(with_srdf)} robots with an SRDF."]  # fmt: skip
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="*", default=None, help="default: every loadable one")
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    import dynamics
    from benchmarks.markdown_report import publish

    names = args.robots or list(dynamics.available_robots())
    rows = []
    for name in names:
        rows.append(measure(name))
        print(f"{name}: {rows[-1]['seconds']:.1f} s", flush=True)
    command = "python benchmarks/bench_robots.py" + (" --no-write" if args.no_write else "")
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING, render(rows, command))
    return rows


if __name__ == "__main__":
    main()
