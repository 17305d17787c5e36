"""A forward jump to a landing target: a task the gait library cannot express.

    python examples/jump.py --distance 0.4 --out results          # Go2, 0.4 m ahead

The problem is the library's pronk with its references replaced by one jump: all four feet down
for `--push` s, in the air for `--flight` s (a swing-height bump), down again; the base velocity
reference carries the distance over the push's last 0.1 s and the flight. One term of the
problem's own (`trajopt.residual_library.base_pose`, terminal) puts the base `--distance` m ahead
of where it starts, level, at the standing height. The contacts still come out of the contact
model (contact-implicit): the stance flags only shape them.

The plan is then re-simulated open loop (`trajopt.replay.resimulate_finer`) at a 2 ms step with
hard contact, finer than the planner's (`--substeps` per 20 ms knot, smooth contact), to show
it does not rely on the planner's approximation (both solve their impulses to 1e-4 m/s).
Printed and saved (in the summary, next to the result): the landing error (the base's final xy
against the target) and the longest flight (all four feet below 1 N) in the plan and in the
re-simulation. Plots, an HTML replay and a Meshcat viewer as for the main job (`--no-view`:
none).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import jax.numpy as jnp
import numpy as np

import dynamics
from trajopt import residual_library
from trajopt.gait_metrics import CONTACT_THRESHOLD, contact_flags
from trajopt.gaits import make_problem
from trajopt.problem import CONTACT_TOLERANCE
from trajopt.replay import resimulate_finer
from trajopt.solver import solve
from viz import save_and_publish

RESIM_STEP = 0.002  # [s] the re-simulation's contact step
SWING_HEIGHT = 0.08  # [m] the flight's foot-clearance bump
PUSH_LEAD = 0.1  # [s] of the push over which the base velocity reference is on


def jump_reference(reference, dt: float, distance: float, push: float, flight: float):
    """The pronk's references replaced by one jump (module docstring): stance flags `(T+1, 4)`,
    the swing-height bump in flight, the forward base velocity `distance / (PUSH_LEAD + flight)`
    from `push - PUSH_LEAD` to touchdown."""
    n = reference.stance.shape[0]
    t = dt * np.arange(n)
    down = ((t < push) | (t >= push + flight)).astype(float)
    bump = SWING_HEIGHT * np.sin(np.pi * np.clip((t - push) / flight, 0.0, 1.0)) * (1.0 - down)
    vx = np.where((t >= push - PUSH_LEAD) & (t < push + flight), distance / (PUSH_LEAD + flight),
                  0.0)  # fmt: skip
    feet = reference.stance.shape[1]
    return dataclasses.replace(
        reference,
        stance=jnp.asarray(np.tile(down[:, None], (1, feet))),
        swing_height=jnp.asarray(np.tile(bump[:, None], (1, feet))),
        base_velocity=jnp.asarray(np.stack([vx, 0.0 * vx, 0.0 * vx], axis=1)),
    )


def jump_problem(robot="go2", distance=0.4, *, push=0.3, flight=0.2, duration=0.9, dt=0.02,
                 substeps=4, landing_weight=300.0):  # fmt: skip
    """The jump problem (module docstring); the landing term is named "landing" (its target,
    `[x, y, z, R.ravel()]`, moves with `problem.with_target`)."""
    for name, value in (("distance", distance), ("push", push), ("flight", flight)):
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be positive, got {value}")
    if push + flight >= duration:
        raise ValueError(f"push + flight ({push + flight} s) must end before the horizon "
                         f"({duration} s) so that the robot lands")  # fmt: skip
    if push < PUSH_LEAD:
        raise ValueError(f"push must be at least {PUSH_LEAD} s, got {push}")
    problem = make_problem(robot, "pronk", 0.0, duration=duration, dt=dt, substeps=substeps,
                           derivatives="implicit")  # fmt: skip
    reference = jump_reference(problem.data.reference, dt, distance, push, flight)
    problem = problem.replace_data(reference=reference)
    q0 = np.asarray(problem.model.q_standing)
    landing = residual_library.base_pose(
        problem.model, [q0[0] + distance, q0[1], q0[2]], weight=landing_weight, terminal=True,
        name="landing",
    )  # fmt: skip
    return problem.with_terms(landing)


def longest_flight(force: np.ndarray, dt: float) -> float:
    """[s] the longest run of knots with every foot's normal force below `CONTACT_THRESHOLD`."""
    best = run = 0
    for airborne in ~np.any(contact_flags(force, CONTACT_THRESHOLD), axis=1):
        run = run + 1 if airborne else 0
        best = max(best, run)
    return best * dt


def landing_error(q: np.ndarray, target_xy) -> float:
    """[m] the base's final xy against the target."""
    return float(np.linalg.norm(np.asarray(q)[-1, :2] - np.asarray(target_xy)))


def summarize(problem, traj, distance: float) -> dict:
    q0 = np.asarray(problem.model.q_standing)
    target = q0[:2] + [distance, 0.0]
    q, _, force, _ = resimulate_finer(problem, traj, step=RESIM_STEP)
    return {
        "distance_m": distance,
        "status": traj.status,
        "iterations": traj.iterations,
        "cost": traj.cost,
        "plan_landing_error_m": landing_error(traj.q, target),
        "plan_flight_s": longest_flight(np.asarray(traj.force), traj.dt),
        "resimulated_landing_error_m": landing_error(q, target),
        "resimulated_flight_s": longest_flight(force, traj.dt),
        "resimulated_final_base_xyz": np.asarray(q)[-1, :3].tolist(),
        "resimulation": (f"{RESIM_STEP * 1e3:g} ms step, hard contact solved to "
                         f"{CONTACT_TOLERANCE:g} m/s"),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--distance", type=float, default=0.4, help="landing target ahead [m]")
    parser.add_argument("--push", type=float, default=0.3, help="[s] on four feet first")
    parser.add_argument("--flight", type=float, default=0.2, help="[s] of reference flight")
    parser.add_argument("--duration", type=float, default=0.9, help="horizon [s]")
    parser.add_argument("--substeps", type=int, default=4,
                        help="the planner's contact steps per 20 ms knot")  # fmt: skip
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--out", default="results")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--no-view", action="store_true", help="write plots and replay only")
    parser.add_argument("--zmq-url", help="show the result in this running Meshcat server")
    args = parser.parse_args(argv)
    try:
        problem = jump_problem(args.robot, args.distance, push=args.push, flight=args.flight,
                               duration=args.duration, substeps=args.substeps)  # fmt: skip
    except ValueError as exc:
        parser.error(str(exc))
    t0 = time.perf_counter()
    traj = solve(problem, max_iterations=args.iterations, verbose=not args.quiet)
    summary = summarize(problem, traj, args.distance)
    summary["wall_time_incl_compile_s"] = time.perf_counter() - t0
    save_and_publish(traj, os.path.join(args.out, f"jump_{args.robot}"), summary,
                     serve=not args.no_view, zmq_url=args.zmq_url)  # fmt: skip
    return traj, summary


if __name__ == "__main__":
    main()
