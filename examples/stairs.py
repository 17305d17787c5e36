"""Stairs: Go2 trots up three steps of a staircase along +x onto its top landing.

    python examples/stairs.py --out results                       # Go2, three 6 cm x 0.22 m steps

The terrain is `contact.terrain.steps`: ground z = 0 before `--start` (m along x), then
`--steps` treads of `--step-length` rising `--step-height` each, then the top landing. The
problem is the library's trot at `--velocity` with three changes:

- swing: the clearance profile scaled to `--swing-height` (the clearance is the foot's signed
  distance to the terrain, so it also keeps a swinging foot off the riser ahead);
- base height: the reference `h_ref(t)` (above the tread under the base) makes the base follow
  the stairs' mean slope instead of jumping by a riser where its xy crosses one:
  `z*(x) = z_stand + (1/L) int_{x - L/2}^{x + L/2} H(s) ds`, `h_ref(t) = z*(x(t)) - H(x(t))`,
  with `H` the tread height, `L` the tread length and `x(t)` the base path that the velocity
  reference integrates;
- one term of the problem's own, `trajopt.residual_library.footholds`: every stance foot at its
  foothold, `trajopt.footholds.away_from_risers(terrain, --margin)` moving the trot's nominal
  footholds at least `--margin` from every riser (a foot stands on a tread, not on a nose).

FDDP starts from the kinematic guess on those footholds (`trajopt.footholds.placed_guess`) with
multiple shooting: its knots already stand on the treads, and the defects
`f_{t+1} = F(x_t, u_t) (-) x_{t+1}` close as it goes. Single shooting would roll the guess's PD
targets out from the first knot instead, a rollout that trips on the first riser and that the
solver does not recover from. Contacts still come out of the contact model (contact-implicit):
the stance flags only shape them.

Why these steps: Go2 stands 0.34 m high on legs of about 0.2 + 0.2 m, with 0.38 m between its
front and hind feet. A 6 cm riser is well inside its leg's vertical reach, and a 0.22 m tread
holds one foot with `--margin` on either side while its front and hind feet stand on different
treads; the trot at 0.4 m/s (a foot moves 0.16 m a step) then puts about one foothold on every
tread. The horizon leaves the hind feet a margin beyond the last riser at the end.

The plan is then re-simulated open loop (`trajopt.replay.resimulate_finer`) at a 2 ms step with
hard contact, finer than the planner's, to show the plan does not rely on the planner's
approximation. Printed and saved (in the summary, next to the result), for the plan
and the re-simulation: the final base position, the feet on the top landing at the end (x
beyond the last riser plus the foot radius, z at the landing), the lowest base clearance above
the tread under it and the largest tilt of the base from upright. Plots, an HTML replay and a
Meshcat viewer as for the main job (`--no-view`: none).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import jax.numpy as jnp
import numpy as np

import dynamics
from contact.terrain import height as terrain_height
from contact.terrain import steps
from trajopt import footholds, residual_library
from trajopt.gaits import make_problem, with_swing_peak
from trajopt.kinematic_guess import base_path
from trajopt.problem import CONTACT_TOLERANCE
from trajopt.replay import resimulate_finer
from trajopt.solver import solve
from viz import save_and_publish

RESIM_STEP = 0.002  # [s] the re-simulation's contact step
ON_LANDING = 0.02  # [m] a foot's sphere bottom within this of the landing's height stands on it


def slope_height(terrain, x) -> np.ndarray:
    """`z*(x) - z_stand (n,)` at `x (n,)`: the tread height averaged over one tread length around
    x (module docstring). The average of a staircase over a window of its own tread length is
    the linear interpolation of the tread heights between the tread centres (flat before the
    first tread's centre and beyond the last one's): a continuous ramp through the stairs.
    `terrain.num_steps` must be finite."""
    length, start = float(terrain.step_length), float(terrain.start_x)
    k = np.arange(int(terrain.num_steps) + 1)
    centres = start + length * (k - 0.5)
    return np.interp(np.asarray(x, dtype=float), centres, k * float(terrain.step_height))


def stairs_reference(reference, terrain, dt: float, xy0, swing_height: float):
    """The trot's references on the stairs (module docstring): swing clearance scaled to peak
    at `swing_height` [m], `base_height (T+1,)` following the mean slope along the base path."""
    xy, _ = base_path(reference, dt, xy0, 0.0)
    under = np.asarray(terrain_height(terrain, xy[:, 0], xy[:, 1]))
    base_height = np.asarray(reference.base_height) + slope_height(terrain, xy[:, 0]) - under
    return with_swing_peak(
        dataclasses.replace(reference, base_height=jnp.asarray(base_height)), swing_height
    )


def stairs_problem(robot="go2", *, velocity=0.4, duration=3.6, dt=0.02, substeps=4,
                   step_height=0.06, step_length=0.22, start=0.35, num_steps=3,
                   swing_height=0.1, margin=0.05, foothold_weight=300.0):  # fmt: skip
    """`(problem, terrain, place)`: the trot up the stairs with the footholds term (named
    "footholds") and the `place` function that put its footholds away from the risers."""
    for name, value in (("velocity", velocity), ("step_length", step_length),
                        ("swing_height", swing_height), ("margin", margin)):  # fmt: skip
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be positive, got {value}")
    if not (np.isfinite(step_height) and step_height >= 0):
        raise ValueError(f"step_height must be non-negative, got {step_height}")
    if num_steps < 1:
        raise ValueError(f"num_steps must be at least 1, got {num_steps}")
    if substeps < 1:
        raise ValueError(f"substeps must be at least 1, got {substeps}")
    problem = make_problem(robot, "trot", velocity, duration=duration, dt=dt, substeps=substeps,
                           derivatives="implicit")  # fmt: skip
    q0 = np.asarray(problem.model.q_standing)
    terrain = steps(step_height, step_length, start, num_steps=float(num_steps))
    reference = stairs_reference(problem.data.reference, terrain, dt, q0[:2], swing_height)
    problem = problem.replace_data(
        params=dataclasses.replace(problem.data.params, terrain=terrain), reference=reference
    )
    place = footholds.away_from_risers(terrain, margin)
    rows = footholds.stance_footholds(problem, place)
    problem = problem.with_terms(
        residual_library.footholds(problem.model, rows, weight=foothold_weight)
    )
    return problem, terrain, place


def climb(model, terrain, q: np.ndarray) -> dict:
    """How the base and feet of `q (N, nq)` went up the stairs: the final base xyz, the feet on
    the top landing at the end (sphere beyond the last riser, its bottom within `ON_LANDING`
    of the landing's height), the lowest base height above the tread under the base, and the
    largest tilt [rad] of the base's z axis from the world's."""
    q = np.asarray(q)
    feet = footholds.foot_positions(model, q[-1:])[0]
    radius = np.broadcast_to(np.asarray(model.foot_radius, float), (feet.shape[0],))
    top = float(terrain.num_steps * terrain.step_height)
    last_riser = float(terrain.start_x + terrain.num_steps * terrain.step_length)
    on_top = (feet[:, 0] - radius > last_riser) & (np.abs(feet[:, 2] - radius - top) < ON_LANDING)
    clearance = q[:, 2] - np.asarray(terrain_height(terrain, q[:, 0], q[:, 1]))
    qx, qy = q[:, 3], q[:, 4]
    up_z = 1.0 - 2.0 * (qx * qx + qy * qy)  # R[2, 2]: the base z axis against the world's
    return {
        "final_base_xyz": q[-1, :3].tolist(),
        "feet_on_top_landing": int(np.sum(on_top)),
        "final_feet_xyz": feet.tolist(),
        "min_base_clearance_m": float(np.min(clearance)),
        "max_tilt_rad": float(np.max(np.arccos(np.clip(up_z, -1.0, 1.0)))),
    }


def summarize(problem, terrain, traj) -> dict:
    q, _, _, _ = resimulate_finer(problem, traj, step=RESIM_STEP)
    plan = climb(problem.model, terrain, traj.q)
    resim = climb(problem.model, terrain, q)
    return {
        "status": traj.status,
        "iterations": traj.iterations,
        "cost": traj.cost,
        "stairs": {
            "step_height_m": float(terrain.step_height),
            "step_length_m": float(terrain.step_length),
            "start_x_m": float(terrain.start_x),
            "num_steps": int(terrain.num_steps),
        },
        "top_landing_x_m": float(terrain.start_x + terrain.num_steps * terrain.step_length),
        **{f"plan_{k}": v for k, v in plan.items()},
        **{f"resimulated_{k}": v for k, v in resim.items()},
        "resimulation": (f"{RESIM_STEP * 1e3:g} ms step, hard contact solved to "
                         f"{CONTACT_TOLERANCE:g} m/s"),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--velocity", type=float, default=0.4, help="[m/s] forward")
    parser.add_argument("--duration", type=float, default=3.6, help="horizon [s]")
    parser.add_argument("--steps", type=int, default=3, help="treads below the top landing")
    parser.add_argument("--step-height", type=float, default=0.06, help="[m] riser")
    parser.add_argument("--step-length", type=float, default=0.22, help="[m] tread")
    parser.add_argument("--start", type=float, default=0.35, help="[m] x of the first riser")
    parser.add_argument("--swing-height", type=float, default=0.1, help="[m] foot clearance")
    parser.add_argument("--margin", type=float, default=0.05,
                        help="[m] least distance of a foothold from a riser")  # fmt: skip
    parser.add_argument("--substeps", type=int, default=4,
                        help="the planner's contact steps per 20 ms knot")  # fmt: skip
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--out", default="results")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--no-view", action="store_true", help="write plots and replay only")
    parser.add_argument("--zmq-url", help="show the result in this running Meshcat server")
    args = parser.parse_args(argv)
    if args.iterations < 0:
        parser.error(f"--iterations must be non-negative, got {args.iterations}")
    try:
        problem, terrain, place = stairs_problem(
            args.robot, velocity=args.velocity, duration=args.duration, substeps=args.substeps,
            step_height=args.step_height, step_length=args.step_length, start=args.start,
            num_steps=args.steps, swing_height=args.swing_height, margin=args.margin,
        )  # fmt: skip
    except ValueError as exc:
        parser.error(str(exc))
    t0 = time.perf_counter()
    traj = solve(problem, footholds.placed_guess(problem, place), shooting="multiple",
                 max_iterations=args.iterations, verbose=not args.quiet)  # fmt: skip
    summary = summarize(problem, terrain, traj)
    summary["wall_time_incl_compile_s"] = time.perf_counter() - t0
    save_and_publish(traj, os.path.join(args.out, f"stairs_{args.robot}"), summary,
                     serve=not args.no_view, zmq_url=args.zmq_url,
                     hidden=("final_feet_xyz",))  # fmt: skip
    return traj, summary


if __name__ == "__main__":
    main()
