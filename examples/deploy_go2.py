"""Run a controller on a Go2 over the robot's own protocol (Unitree SDK 2's DDS topics), through
the hardware interface and the safety layer, in real time.

    python examples/deploy_go2.py --seconds 10                          # simulated Go2, stand up
    python examples/deploy_go2.py --controller policy --velocity 0.5    # the shipped policy
    python examples/deploy_go2.py --controller mpc --velocity 0.5       # the MPC (see below)
    python examples/deploy_go2.py --controller mpc --lockstep --seconds 5   # ... in robot time

    # unitree_mujoco (its simulate/config.yaml: domain 1, interface lo), started beforehand:
    python examples/deploy_go2.py --no-sim --domain 1 --interface lo
    # the robot: domain 0 on the wired network card (e.g. eth0, 192.168.123.x), sport mode
    # released first; lay the robot down, hold the remote (L2 + B = e-stop), then:
    python examples/deploy_go2.py --no-sim --domain 0 --interface eth0 --release-sport-mode

Without `--no-sim` the example starts the simulated Go2 (`python -m
hardware.go2.sim`: MuJoCo behind the same topics) on `--domain` over loopback, lying
on the floor, and stops it at the end. The backend (`hardware.go2.robot`)
sends LowCmd at 500 Hz from its own thread; the safety layer runs at `--command-rate`, the
controller at its own rate in a thread of its own:
- `stand`: `StandUpController`, from the measured pose to standing in `--stand-up` s, then hold;
- `policy`: an exported policy folder (`learning.policy_export`; default the
  shipped walking policy `examples/policies/go2_forward`), at the rate and with the gains it
  was exported with; it needs the base velocity, which comes from
  `rt/sportmodestate` (simulators; on the robot a state estimator of your own);
- `mpc`: the MPC trot of `controllers.state_feedback`, 3 FDDP iterations per cycle. It is not
  fast enough for real time on a 2-core machine (BENCHMARKS.md): its commands arrive late and
  the safety layer damps after its command timeout. With `--lockstep` the simulated Go2
  simulates only when told (`LockstepGo2Robot`, a `Step_` message of ours after each command
  tick): the MPC then runs over the same LowCmd/LowState messages in robot time.
The remote's L2 + B latches the e-stop. Prints the timing, the safety interventions, the
backend's and the simulated robot's counters; saves the loop log (npz) and a summary (json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import subprocess

import numpy as np

import dynamics
from hardware import control_loop
from hardware.go2.robot import Go2Robot, LockstepGo2Robot
from hardware.go2.sim import spawn as spawn_simulated_go2
from hardware.interface import JointMap, VelocityCommand
from hardware.pose import StandUpController
from hardware.safety import SafetyConfig, SafetyLayer
from hardware.timing import format_summary

LYING = (0.0, 1.36, -2.65)  # [rad] hip, thigh, calf of each leg, lying on the belly
WALK_AFTER = 1.0  # [s] zero velocity command before `--velocity`
SHIPPED_POLICY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "policies", "go2_forward")


def lying_configuration(model) -> np.ndarray:
    q = np.asarray(model.q_standing, dtype=float).copy()
    q[2], q[7:] = 0.12, np.tile(LYING, 4)
    return q


def make_controller(kind: str, joint_map: JointMap, policy=None, stand_up=1.5, horizon=0.5):
    """`(controller, SafetyConfig changes, controller period [s])`."""
    if kind == "stand":
        return StandUpController(joint_map, stand_up), {}, 0.02
    if kind == "policy":
        from learning.policy_adapter import PolicyController
        from learning.policy_export import load_numpy_policy

        runner = load_numpy_policy(policy)
        config = runner.config
        if tuple(config["joint_names"]) != joint_map.names:
            raise ValueError(f"the policy's joints {config['joint_names']} are not Go2's")
        controller = PolicyController(
            runner, joint_map, action_scale=config["action_scale"],
            kp=np.asarray(config["kp"]), kd=np.asarray(config["kd"]),
        )  # fmt: skip
        return controller, {"soft_start_duration": 0.2}, float(config["control_dt"])
    if kind == "mpc":
        from controllers.state_feedback import mpc_controller, mpc_safety_config

        controller = mpc_controller("go2", joint_map, "trot", horizon, 3)
        safety = mpc_safety_config(soft_start=0.2)
        return controller, {k: getattr(safety, k) for k in safety.__dataclass_fields__}, 0.02
    raise ValueError(f"unknown controller {kind!r}")


@contextlib.contextmanager
def simulated_go2(domain: int, lying: bool, lifetime: float, lockstep: bool = False):
    """The simulated Go2 process, or nothing when `domain` is None."""
    if domain is None:
        yield None
        return
    args = ["--domain", str(domain), "--interface", "lo", "--max-lifetime", str(lifetime)]
    if lockstep:
        args.append("--lockstep")
    if lying:
        model = dynamics.load_robot("go2")
        args += ["--q0", json.dumps(lying_configuration(model).tolist())]
    with spawn_simulated_go2(args, stderr=subprocess.DEVNULL) as proc:
        yield proc


def run(controller="stand", seconds=10.0, domain=1, interface="lo", sim=True, policy=None,
        velocity=0.5, command_rate=500.0, stand_up=1.5, release_sport_mode=False,
        lockstep=False, state_timeout=0.1):  # fmt: skip
    joint_map = JointMap.from_model(dynamics.load_robot("go2"))
    ctrl, safety_changes, control_dt = make_controller(controller, joint_map, policy, stand_up)
    config = SafetyConfig(
        **{"soft_start_duration": 0.5, "command_timeout": 0.3,
           "measurement_timeout": state_timeout, **safety_changes}
    )  # fmt: skip
    command_dt = 1.0 / command_rate
    control_dt = max(command_dt, round(control_dt / command_dt) * command_dt)
    walk = controller != "stand"
    sim_final = None
    if lockstep and not sim:
        raise ValueError("--lockstep needs the simulated Go2 (no --no-sim)")
    lifetime = seconds + 120 if not lockstep else 3600
    with simulated_go2(domain if sim else None, not walk, lifetime, lockstep) as proc:
        kwargs = dict(domain=domain, interface=interface or None, command_timeout=0.3,
                      max_command_age=0.3, release_sport_mode=release_sport_mode)  # fmt: skip
        if lockstep:
            robot = LockstepGo2Robot(joint_map, **kwargs)
        else:
            robot = Go2Robot(joint_map, state_timeout=state_timeout, **kwargs)
        try:
            result = control_loop.run(
                robot, ctrl, SafetyLayer(joint_map, config), duration=seconds,
                control_dt=control_dt, command_dt=command_dt,
                command_source=lambda t: VelocityCommand(velocity if walk and t >= WALK_AFTER
                                                         else 0.0),
                start_timeout=5.0,
            )  # fmt: skip
            backend = robot.status()
        finally:
            robot.close()
        writer = robot.timing.summary()  # the writer thread has stopped
        if proc is not None:
            proc.send_signal(15)
            out, _ = proc.communicate(timeout=30)
            sim_final = json.loads(out.strip().splitlines()[-1])["final_status"]
            sim_final.pop("history")
    summary = {
        "controller": controller,
        "seconds": seconds,
        "domain": domain,
        "interface": interface,
        "simulated": sim,
        "lockstep": lockstep,
        "velocity_command_m_per_s": velocity if walk else 0.0,
        "average_speed_m_per_s": control_loop.average_speed(result.log, after=WALK_AFTER + 1.0),
        "backend": backend,
        "lowcmd_writer_timing": writer,
        "simulated_go2": sim_final,
        **result.summary(),
    }
    return summary, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--controller", default="stand", choices=("stand", "policy", "mpc"))
    parser.add_argument("--policy", default=SHIPPED_POLICY, help="exported policy folder")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--velocity", type=float, default=0.5, help="forward command [m/s]")
    parser.add_argument("--domain", type=int, default=1, help="DDS domain (robot: 0)")
    parser.add_argument("--interface", default="lo", help="network interface ('' = any)")
    parser.add_argument("--no-sim", action="store_true", help="do not start the simulated Go2")
    parser.add_argument("--release-sport-mode", action="store_true")
    parser.add_argument("--lockstep", action="store_true", help="simulated Go2 in robot time")
    parser.add_argument("--state-timeout", type=float, default=0.1,
                        help="[s] stale state / measurement: damping")  # fmt: skip
    parser.add_argument("--stand-up", type=float, default=1.5, help="stand-up time [s]")
    parser.add_argument("--command-rate", type=float, default=500.0, help="safety layer [Hz]")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    if args.controller == "policy" and (args.policy is None or not os.path.isdir(args.policy)):
        parser.error("--controller policy needs --policy FOLDER (an exported policy)")
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    summary, result = run(
        args.controller, args.seconds, args.domain, args.interface, not args.no_sim,
        args.policy, args.velocity, args.command_rate, args.stand_up, args.release_sport_mode,
        args.lockstep, args.state_timeout,
    )  # fmt: skip
    print(format_summary("command loop", summary["timing"]["command"]))
    print(format_summary("controller", summary["timing"]["controller"]))
    print(format_summary("LowCmd writer", summary["lowcmd_writer_timing"]))
    for e in summary["safety_events"]:
        print(f"  t={e['start']:.3f} {e['kind']} x{e['count']} {e['detail']}")
    b = summary["backend"]
    print(f"backend: {b['counters']}, drivers {b['mode']}, watchdog trips "
          f"{len(b['watchdog_trips'])}, stale-state trips {len(b['state_trips'])}")  # fmt: skip
    if summary["simulated_go2"] is not None:
        s = summary["simulated_go2"]
        print(f"simulated Go2: {s['drivers']}, {s['transport']}, motors {s['mode']}")
    print(f"base height min {summary['min_base_height_m']:.4f} settled "
          f"{summary['settled_base_height_m']:.4f} m, average speed "
          f"{summary['average_speed_m_per_s']:.3f} m/s, "
          f"safety mode {summary['safety_mode']}")  # fmt: skip
    control_loop.save_run(args.out, f"deploy_go2_{args.controller}", result.log, summary)
    return summary


if __name__ == "__main__":
    main()
