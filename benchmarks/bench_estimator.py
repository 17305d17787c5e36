"""The state estimator: its cost per update and its errors against MuJoCo's ground truth.

    python benchmarks/bench_estimator.py            # writes "## State estimator" in BENCHMARKS.md
    python benchmarks/bench_estimator.py --quick --no-write

1. Leg kinematics per call (`hardware.leg_kinematics`: the C, Pinocchio and this project's
   NumPy path), median over `--kinematics-calls` calls.
2. `StateEstimator.update` per call, median and p99 over `--updates` updates, replaying the
   noisy measurements of a MuJoCo trot (`SensorNoise.go2()`), pinned to one core.
3. The omnidirectional tour of `examples/deploy_policy.py` (`OMNI_TOUR`, `--segment` s per
   command) under the shipped `go2_omni` policy fed with MuJoCo's TRUE base state, the
   estimator running on `SensorNoise.go2()` measurements behind `EstimatedRobot`: RMS of the
   base-frame velocity error (norm of the 3-vector, and per component), max |height error|,
   xy drift at the end, NIS median.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HEADING = "## State estimator"
STAND = 0.5  # [s] standing pose before the policy


def pin_to_core() -> int:
    """Pin this process to the last CPU it may run on; returns that CPU."""
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def timed(fn, calls: int) -> np.ndarray:
    out = np.empty(calls)
    for k in range(calls):
        t0 = time.perf_counter()
        fn()
        out[k] = time.perf_counter() - t0
    return out


class StandThenPolicy:
    """A `Controller`: the standing pose `stand` until `stand_s` [s], then the policy's
    `adapter` on `observe(measurement)` (e.g. the measurement with a simulator's true base
    state), reset with the first measurement it sees."""

    def __init__(self, stand, adapter, stand_s: float = STAND, observe=None):
        self.stand, self.adapter, self.stand_s = stand, adapter, stand_s
        self.observe = observe or (lambda m: m)
        self.started = False

    def reset(self, m):
        self.stand.reset(m)
        self.started = False

    def __call__(self, m, t, command):
        if t < self.stand_s - 1e-9:
            return self.stand(m, t, command)
        m = self.observe(m)
        if not self.started:
            self.adapter.reset(m)
            self.started = True
        return self.adapter(m, t, command)


def walk(seconds: float, commands, segment: float, seed: int = 0):
    """The truth-fed policy on MuJoCo behind NoisySensors and EstimatedRobot (module
    docstring); returns the EstimatedRobot (its `history`) and the noisy measurements."""
    import dynamics
    from hardware import control_loop
    from hardware.backends.mujoco_sim import MuJoCoRobot
    from hardware.estimated_robot import EstimatedRobot
    from hardware.estimator import StateEstimator
    from hardware.interface import VelocityCommand
    from hardware.pose import PoseController
    from hardware.safety import SafetyConfig, SafetyLayer
    from hardware.sensor_noise import NoisySensors, SensorNoise
    from learning.policy_adapter import PolicyController
    from learning.policy_export import load_numpy_policy

    policy = load_numpy_policy(ROOT / "examples" / "policies" / "go2_omni")
    config = policy.config
    model = dynamics.load_robot("go2")
    inner = MuJoCoRobot(model, timestep=0.002)
    noisy = NoisySensors(inner, SensorNoise.go2(), seed=seed)
    robot = EstimatedRobot(noisy, StateEstimator(model))
    adapter = PolicyController(
        policy,
        inner.joint_map,
        action_scale=config["action_scale"],
        kp=np.asarray(config["kp"]),
        kd=np.asarray(config["kd"]),
    )
    stand = PoseController.standing(inner.joint_map)
    recorded = []

    def truth(m):
        g = robot.ground_truth
        return m.replace(base_linear_velocity=g.base_linear_velocity,
                         base_position=g.base_position, base_state_source=g.source)  # fmt: skip

    commands = np.asarray(commands, dtype=float)

    def source(t):
        k = int((t - STAND) // segment)
        if t < STAND:
            return VelocityCommand()
        return VelocityCommand(*commands[min(k, len(commands) - 1)])

    safety = SafetyLayer(inner.joint_map, SafetyConfig(soft_start_duration=0.2))
    control_loop.run(
        robot,
        StandThenPolicy(stand, adapter, observe=truth),
        safety,
        duration=seconds,
        control_dt=config["control_dt"],
        command_dt=0.002,
        command_source=source,
        on_tick=lambda t, s, r: recorded.append(noisy.last),
    )
    return robot, recorded, safety.mode.value


def update_costs(model, samples: list, updates: int, arithmetic: str) -> np.ndarray:
    """[s] `updates` timed `StateEstimator.update` calls with `arithmetic`, replaying `samples`
    (the first 200 start the filter, untimed; at the end it resets and replays again)."""
    from hardware.estimator import EstimatorConfig, StateEstimator

    kinematics = "auto" if arithmetic == "c" else "pinocchio"  # NumPy's: without any C
    estimator = StateEstimator(model, EstimatorConfig(arithmetic=arithmetic, kinematics=kinematics))
    for m in samples[:200]:  # start it
        estimator.update(m)
    replay = samples[200:]
    costs, i = [], 0
    while len(costs) < updates:
        if i == len(replay):  # replayed to the end: start again (a reset and re-start)
            estimator.reset()
            for m in samples[:200]:
                estimator.update(m)
            i = 0
        t0 = time.perf_counter()
        estimator.update(replay[i])
        costs.append(time.perf_counter() - t0)
        i += 1
    return np.array(costs)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=5000)
    parser.add_argument("--kinematics-calls", type=int, default=2000)
    parser.add_argument("--segment", type=float, default=1.8, help="[s] per tour command")
    parser.add_argument("--quick", action="store_true", help="small settings (a smoke test)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.updates, args.kinematics_calls, args.segment = 300, 100, 0.3
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "examples"))
    from deploy_policy import OMNI_TOUR

    import dynamics
    from benchmarks.markdown_report import cpu_name, publish, versions
    from hardware.leg_kinematics import leg_kinematics

    cpu = pin_to_core()
    load = os.getloadavg()
    model = dynamics.load_robot("go2")
    q = np.asarray(model.q_standing)[7:] + 0.05
    kin = {}
    for backend in ("c", "pinocchio", "numpy"):
        k = leg_kinematics(model, backend)
        kin[backend] = float(np.median(timed(lambda k=k: k(q), args.kinematics_calls)))

    seconds = STAND + 0.5 + len(OMNI_TOUR) * args.segment
    robot, recorded, mode = walk(seconds, OMNI_TOUR, args.segment)
    h = robot.history_arrays()
    keep = h["valid"] & (h["t"] >= 0.3)
    dv = h["velocity"][keep] - h["true_velocity"][keep]
    dz = h["position"][keep, 2] - h["true_position"][keep, 2]
    drift = (h["position"][keep][-1, :2] - h["true_position"][keep][-1, :2]) - (
        h["position"][keep][0, :2] - h["true_position"][keep][0, :2]
    )

    # the cost per update, the compiled arithmetic and NumPy's, on the same recorded samples
    samples = [m for m in recorded if m is not None]
    costs = update_costs(model, samples, args.updates, "c")
    numpy_costs = update_costs(model, samples, args.updates, "numpy")
    out = {
        "kinematics_us": {k: v * 1e6 for k, v in kin.items()},
        "update_median_us": float(np.median(costs) * 1e6),
        "update_p99_us": float(np.percentile(costs, 99) * 1e6),
        "numpy_update_median_us": float(np.median(numpy_costs) * 1e6),
        "numpy_update_p99_us": float(np.percentile(numpy_costs, 99) * 1e6),
        "velocity_rms": float(np.sqrt(np.mean(np.sum(dv**2, axis=1)))),
        "velocity_rms_xyz": np.sqrt(np.mean(dv**2, axis=0)).tolist(),
        "height_max_error": float(np.max(np.abs(dz))),
        "drift_xy": drift.tolist(),
        "nis_median": float(np.nanmedian(h["nis"][keep])),
        "seconds": float(h["t"][-1]),
        "safety_mode": mode,
        "fault": robot.estimator_fault,
    }
    command = "python benchmarks/bench_estimator.py " + shlex.join(argv or sys.argv[1:])
    lines = [
        HEADING,
        "",
        f"`{command.strip()}` on {cpu_name()} (pinned to CPU {cpu}; load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}); "
        f"{versions('numpy', 'scipy', 'pinocchio', 'mujoco')}.",
        "",
        "| quantity | value |",
        "|---|---|",
        f"| leg kinematics per call, C `leg_kinematics.c` (used, inside the C update) | "
        f"{kin['c'] * 1e6:.1f} us (median of {args.kinematics_calls}) |",
        f"| leg kinematics per call, Pinocchio | {kin['pinocchio'] * 1e6:.1f} us |",
        f"| leg kinematics per call, NumPy `dynamics.kinematics` | {kin['numpy'] * 1e6:.1f} us |",
        f"| `StateEstimator.update` median, p99 ({len(costs)} updates), C arithmetic (used) | "
        f"{out['update_median_us']:.1f} us, {out['update_p99_us']:.1f} us |",
        "| the same, NumPy arithmetic (Pinocchio kinematics); its median over C's | "
        f"{out['numpy_update_median_us']:.1f} us, {out['numpy_update_p99_us']:.1f} us; "
        f"{out['numpy_update_median_us'] / out['update_median_us']:.2f}x |",
        f"| tour ({out['seconds']:.1f} s, {len(OMNI_TOUR)} commands, `SensorNoise.go2()`): "
        f"velocity RMS error, norm of 3 | {out['velocity_rms']:.4f} m/s |",
        "| per component x, y, z (base frame) | "
        + ", ".join(f"{v:.4f}" for v in out["velocity_rms_xyz"])
        + " m/s |",
        f"| max height error | {out['height_max_error'] * 1e3:.2f} mm |",
        f"| xy drift at the end | {np.linalg.norm(drift):.3f} m |",
        f"| NIS median (28 rows) | {out['nis_median']:.2f} |",
        f"| estimator fault, safety mode | {out['fault']}, {mode} |",
    ]
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING, "\n".join(lines))
    return out


if __name__ == "__main__":
    main()
