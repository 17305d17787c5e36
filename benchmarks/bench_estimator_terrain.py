"""The state estimator off the plane: its errors against MuJoCo's truth on the terrain presets,
for each `EstimatorConfig.ground` option.

    python benchmarks/bench_estimator_terrain.py                 # 3 seeds, all terrains
    python benchmarks/bench_estimator_terrain.py --seeds 0 --terrains slope --seconds 6

A MuJoCo Go2 (`hardware.backends.mujoco_sim.MuJoCoRobot`, 500 Hz) walks along +x over a
`contact.terrain_presets` terrain (level up to x = 1 m, then the feature) under the shipped
flat-ground policy (`--policy`, default `examples/policies/go2_omni`) at `--velocity`; the
policy sees MuJoCo's TRUE base state (the estimator is under test, not the policy), so one
run gives the same walk to every estimator. Each `ground` option's `StateEstimator`
(`learning.deployment.estimator_config` with that `ground`) runs on the same noisy
measurements (`hardware.sensor_noise.SensorNoise.go2()`, seeded), each sample once.

Errors over the valid samples from `START` s on (the filter starts on four loaded feet while
the robot stands; the estimate's z and MuJoCo's share their origin, the level start at z = 0):
base height `p_z - z` [m] (world), world velocity `|v - v_true|` and base-frame velocity
`|R^T v - v_true,base|` [m/s] (norms of 3-vectors), RMS and max over the walk; the NIS
(28 rows, chi-square with 28 degrees of freedom for a consistent filter): its median and the
share of samples above the fault gate (`StateEstimator.nis_gate`), and the fault if one was
latched. Medians over `--seeds` (sensor noise and the walk's noise draw). The table goes to its
section of BENCHMARKS.md (not with `--no-write`), the walks per seed to stdout, the numbers to
`benchmarks/results/estimator_terrain.json`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HEADING = "## Estimator off the plane"
STAND = 0.5  # [s] the standing pose before the policy
FALL_MARGIN = 0.5  # [s] errors end this long before a safety intervention (a fall's start)
START = 0.3  # [s] errors from here on (the estimator starts within 0.1 s of loaded feet)
GROUNDS = ("flat", "touchdown")
METRICS = ("height_rms", "height_max", "vel_world_rms", "vel_world_max", "vel_base_rms",
           "vel_base_max", "vz_bias", "nis_median", "nis_over_gate", "height_max_sigmas",
           "vel_max_sigmas", "sigma_z_median", "sigma_v_median", "valid_share",
           "seconds")  # fmt: skip


class Recorder:
    """A robot wrapper (`hardware.robot_wrapper.RobotWrapper` interface) that runs every
    estimator in `estimators` on each new noisy sample and records the truth next to them;
    the controller gets the measurement unchanged (with MuJoCo's true base state)."""

    def __init__(self, robot, estimators: dict):
        self.robot, self.joint_map, self.estimators = robot, robot.joint_map, estimators
        self.sequence = None
        self.rows = {"t": [], "position": [], "v_world": [], "v_base": []}
        self.est = {name: {"valid": [], "p": [], "v": [], "v_base": [], "nis": [], "var": []}
                    for name in estimators}  # fmt: skip

    def __getattr__(self, name):
        if name == "robot":
            raise AttributeError(name)
        return getattr(self.robot, name)

    def write(self, command):
        self.robot.write(command)

    def now(self):
        return self.robot.now()

    def read(self):
        from hardware.interface import rotation_from_quat

        m = self.robot.read()
        if m is None or m.sequence == self.sequence:
            return m
        self.sequence = m.sequence
        rotation = rotation_from_quat(m.base_quat)  # NoisySensors passes the attitude through
        self.rows["t"].append(float(m.timestamp))
        self.rows["position"].append(np.asarray(m.base_position, float).copy())
        self.rows["v_base"].append(np.asarray(m.base_linear_velocity, float).copy())
        self.rows["v_world"].append(rotation @ np.asarray(m.base_linear_velocity, float))
        for name, estimator in self.estimators.items():
            e = estimator.update(m)
            rec = self.est[name]
            rec["valid"].append(e.valid)
            rec["p"].append(estimator.x[0:3].copy() if e.valid else np.full(3, np.nan))
            rec["v"].append(estimator.x[3:6].copy() if e.valid else np.full(3, np.nan))
            rec["v_base"].append(e.base_linear_velocity if e.valid else np.full(3, np.nan))
            rec["nis"].append(e.nis)
            rec["var"].append(np.diag(estimator.P)[0:6].copy())  # p, v variances
        return m

    def arrays(self) -> tuple[dict, dict]:
        truth = {k: np.asarray(v) for k, v in self.rows.items()}
        est = {n: {k: np.asarray(v) for k, v in r.items()} for n, r in self.est.items()}
        return truth, est


@dataclasses.dataclass(frozen=True)
class Walk:
    """A walk: `terrain` ("flat" or a `contact.terrain_presets` name), the base's start `x0`
    [m] (on the ground there, standing pose, facing +x), the forward command `velocity`
    [m/s] after `STAND` s, and its length `seconds` [s]."""

    terrain: str
    x0: float
    velocity: float
    seconds: float

    def ground(self):
        from contact.terrain_presets import preset

        return None if self.terrain == "flat" else preset(self.terrain)


# The shipped policy climbs the slope (at 0.5 m/s; it falls at 0.8), walks down the slope and
# down the stairs, and crosses `rough`; it does not climb a 10 cm riser (nor a 5 cm one): on
# `stairs_up` it stalls at the first riser, front feet on the first tread, until it falls.
WALKS = {
    "flat": Walk("flat", 0.0, 0.5, 10.0),
    "flat_60s": Walk("flat", 0.0, 0.5, 60.0),  # touchdown heights drift: no absolute anchor
    "slope_up": Walk("slope", 0.3, 0.5, 10.0),  # level, 15 degrees up, the plateau
    "slope_down": Walk("slope", 2.4, 0.5, 8.0),  # plateau, 15 degrees down, level
    "stairs_up": Walk("stairs", 0.3, 0.5, 8.0),  # stalls at the first riser
    "stairs_down": Walk("stairs", 2.9, 0.5, 8.0),  # the landing, 10 cm risers down, level
    "rough": Walk("rough", 0.0, 0.5, 10.0),
}


def start_height(walk: Walk) -> float:
    """[m] the ground's height under the start (0 on flat ground)."""
    from contact.terrain import height

    ground = walk.ground()
    return 0.0 if ground is None else float(height(ground, walk.x0, 0.0))


def walk_run(walk: Walk, seed: int, policy_folder: str, grounds=GROUNDS) -> dict:
    """One truth-fed walk; returns `{"truth": ..., "estimates": {ground: ...}, "gates":
    {ground: nis_gate}, "faults": {ground: fault}, "end": t of the first safety intervention
    that is not NORMAL (inf: none), "z0": the start's ground height}`."""
    import dynamics
    from benchmarks.bench_estimator import StandThenPolicy
    from hardware import control_loop
    from hardware.backends.mujoco_sim import MuJoCoRobot
    from hardware.estimator import StateEstimator
    from hardware.interface import VelocityCommand
    from hardware.pose import PoseController
    from hardware.safety import Mode, SafetyConfig, SafetyLayer
    from hardware.sensor_noise import NoisySensors, SensorNoise
    from learning.deployment import estimator_config
    from learning.policy_adapter import PolicyController
    from learning.policy_export import load_numpy_policy

    model = dynamics.load_robot("go2")
    policy = load_numpy_policy(policy_folder)
    config = policy.config
    z0 = start_height(walk)
    q0 = np.array(model.q_standing, dtype=float)
    q0[0], q0[2] = walk.x0, q0[2] + z0
    inner = MuJoCoRobot(model, timestep=0.002, terrain=walk.ground(), q0=q0)
    noisy = NoisySensors(inner, SensorNoise.go2(), seed=seed)
    base = estimator_config(model)
    estimators = {g: StateEstimator(model, dataclasses.replace(base, ground=g)) for g in grounds}
    robot = Recorder(noisy, estimators)
    gains = {"kp": np.asarray(config["kp"]), "kd": np.asarray(config["kd"])}
    adapter = PolicyController(policy, inner.joint_map, action_scale=config["action_scale"],
                               **gains)  # fmt: skip
    stand = PoseController.standing(inner.joint_map)

    def source(t):
        return VelocityCommand(walk.velocity if t >= STAND else 0.0, 0.0, 0.0)

    end = [np.inf]

    def on_tick(t, safety, _robot):
        if safety.mode in (Mode.DAMPING, Mode.ESTOP) and not np.isfinite(end[0]):
            end[0] = t

    safety = SafetyLayer(inner.joint_map, SafetyConfig(soft_start_duration=0.2))
    # the policy sees MuJoCo's true base state (in the measurement)
    control_loop.run(robot, StandThenPolicy(stand, adapter, STAND), safety, duration=walk.seconds,
                     control_dt=config["control_dt"], command_dt=0.002,
                     command_source=source, on_tick=on_tick)  # fmt: skip
    truth, est = robot.arrays()
    return {
        "truth": truth,
        "estimates": est,
        "gates": {g: e.nis_gate for g, e in estimators.items()},
        "faults": {g: e.fault for g, e in estimators.items()},
        "end": end[0],
        "z0": z0,
    }


def errors(run: dict, ground: str, start: float = START) -> dict:
    """The module docstring's metrics for `ground`'s estimator over its valid samples from
    `start` [s] to `FALL_MARGIN` before the safety layer damped (a fall)."""
    truth, est, gate = run["truth"], run["estimates"][ground], run["gates"][ground]
    t = truth["t"]
    window = (t >= start) & (t < run["end"] - FALL_MARGIN)
    keep = est["valid"] & window
    if not keep.any():
        return {k: float("nan") for k in METRICS}
    dz = est["p"][keep, 2] - (truth["position"][keep, 2] - run["z0"])
    dv_world = est["v"][keep] - truth["v_world"][keep]
    dvw = np.linalg.norm(dv_world, axis=1)
    dvb = np.linalg.norm(est["v_base"][keep] - truth["v_base"][keep], axis=1)
    nis = est["nis"][keep]
    nis = nis[np.isfinite(nis)]
    sigma_z = np.sqrt(est["var"][keep, 2])  # the filter's own standard deviations
    sigma_v = np.sqrt(est["var"][keep, 3:6])

    def rms(x):
        return float(np.sqrt(np.mean(x**2)))

    return {
        "height_rms": rms(dz), "height_max": float(np.max(np.abs(dz))),
        "vel_world_rms": rms(dvw), "vel_world_max": float(np.max(dvw)),
        "vel_base_rms": rms(dvb), "vel_base_max": float(np.max(dvb)),
        "vz_bias": float(np.mean(dv_world[:, 2])),
        "nis_median": float(np.median(nis)), "nis_over_gate": float(np.mean(nis > gate)),
        "height_max_sigmas": float(np.max(np.abs(dz) / sigma_z)),
        "vel_max_sigmas": float(np.max(np.abs(dv_world) / sigma_v)),
        "sigma_z_median": float(np.median(sigma_z)),
        "sigma_v_median": float(np.median(sigma_v)),
        "valid_share": float(np.mean(est["valid"][window])),
        "seconds": float(np.sum(window) * 0.002),
    }  # fmt: skip


def summarise_walk(run: dict) -> dict:
    """Where the walk went: x and true ground-relative z at start and end of the window."""
    t, p = run["truth"]["t"], run["truth"]["position"]
    window = (t >= START) & (t < run["end"] - FALL_MARGIN)
    p = p[window]
    return {
        "x_start": float(p[0, 0]), "x_end": float(p[-1, 0]),
        "z_min": float(np.min(p[:, 2])), "z_max": float(np.max(p[:, 2])),
        "intervention_s": None if not np.isfinite(run["end"]) else float(run["end"]),
    }  # fmt: skip


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--walks", nargs="+", default=list(WALKS), choices=list(WALKS))
    parser.add_argument("--grounds", nargs="+", default=list(GROUNDS), choices=GROUNDS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--policy", default=str(ROOT / "examples" / "policies" / "go2_omni"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" /
                                             "estimator_terrain.json"))  # fmt: skip
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from benchmarks.markdown_report import cpu_name, publish

    logging.disable(logging.ERROR)  # the safety layer's limits and falls: in the table
    t0 = time.perf_counter()
    rows, walks = {}, {}
    for name in args.walks:
        per_seed = {g: [] for g in args.grounds}
        walks[name] = {"walk": dataclasses.asdict(WALKS[name]), "seeds": []}
        for seed in args.seeds:
            run = walk_run(WALKS[name], seed, args.policy, args.grounds)
            walks[name]["seeds"].append({"seed": seed, **summarise_walk(run)})
            for g in args.grounds:
                per_seed[g].append({**errors(run, g), "fault": run["faults"][g]})
        for g in args.grounds:
            rows[(name, g)] = {
                "median": {k: float(np.median([r[k] for r in per_seed[g]]))
                           for k in per_seed[g][0] if k != "fault"},
                "seeds": per_seed[g],
            }  # fmt: skip
    shown = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-write"]
    command = "python benchmarks/bench_estimator_terrain.py " + shlex.join(shown)
    lines = [
        HEADING,
        "",
        f"`{command.strip()}` on {cpu_name()}: seeds {', '.join(map(str, args.seeds))}, "
        "medians over seeds; "
        "errors against MuJoCo's truth from 0.3 s to the end (or 0.5 s before a safety "
        "intervention); the base-frame velocity errors are in the JSON.",
        "",
        "| walk | ground | height RMS / max [mm] | world vel. RMS / max [m/s] | v_z bias [m/s] "
        "| NIS median | NIS > gate | max abs(dz) / sigma_z | faults |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, g), row in rows.items():
        m = row["median"]
        faults = sum(r["fault"] is not None for r in row["seeds"])
        lines.append(
            f"| {name} | {g} | {1e3 * m['height_rms']:.1f} / {1e3 * m['height_max']:.1f} | "
            f"{m['vel_world_rms']:.3f} / {m['vel_world_max']:.3f} | {m['vz_bias']:+.3f} | "
            f"{m['nis_median']:.1f} | "
            f"{100 * m['nis_over_gate']:.2f}% | {m['height_max_sigmas']:.1f} | "
            f"{faults}/{len(row['seeds'])} |"
        )
    reach = [f"{name} {np.median([r['x_end'] for r in w['seeds']]):.2f}"
             for name, w in walks.items()]  # fmt: skip
    lines += ["", f"Where the walks ended (median x [m]; the features start at 1 m): "
              f"{', '.join(reach)}."]  # fmt: skip
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING, "\n".join(lines))
    per_seed = ["", "| walk | seed | x start -> end [m] | true z min / max [m] | intervention "
                "[s] |", "|---|---|---|---|---|"]  # fmt: skip
    for name, w in walks.items():
        for r in w["seeds"]:
            when = "none" if r["intervention_s"] is None else f"{r['intervention_s']:.2f}"
            per_seed.append(f"| {name} | {r['seed']} | {r['x_start']:.2f} -> {r['x_end']:.2f} | "
                            f"{r['z_min']:.3f} / {r['z_max']:.3f} | {when} |")  # fmt: skip
    print("\n".join(per_seed))
    out = {
        "command": command.strip(),
        "seconds_wall": time.perf_counter() - t0,
        "args": vars(args),
        "rows": [{"walk": n, "ground": g, **row} for (n, g), row in rows.items()],
        "walks": walks,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, default=str)
    print(f"\nwritten {os.path.relpath(args.out, ROOT)} ({out['seconds_wall']:.0f} s)")
    return out


if __name__ == "__main__":
    main()
