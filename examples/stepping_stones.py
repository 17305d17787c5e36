"""Stepping stones: Go2 trots across two rows of square stones with gaps wider than a foot.

    python examples/stepping_stones.py --out results              # Go2, 3 stones a row

The terrain is a height field (`contact.terrain.heightfield`, 1 cm cells, exact distance, so a
stone's side is a wall): a start platform, `--stones` square stones of side `--stone-size` a
row, one row under each side's feet, `--gap` apart, and a landing platform, all at z = 0 with
`--depth` deep gaps between them. The problem is the library's trot over it with a base height
reference kept above the stones' tops (`stones_reference`) and two terms of the problem's own:

- `trajopt.residual_library.footholds`: every stance foot at its foothold, which
  `trajopt.footholds` places on the nearest stone's centre where the trot's nominal foothold
  falls among the stones (`stone_placement`);
- `swing_above_tops` (written here, in a few lines): a swinging foot `--swing-height` above the
  stones' tops, in place of the gait's clearance above the terrain, which over a gap would let
  the foot skim the stones' edges.

Contacts still come out of the contact model (contact-implicit): the gait's stance flags only
shape them.

FDDP solves it twice (`plan_over_stones`): on flat ground at the stones' height from the
rollout of the kinematic guess's controls on the placed footholds (single shooting; in the
generated C where a compiler exists: the ground is a plane), then over the stones from that
plan (multiple shooting, in JAX: the height field is not a plane). Over the stones from the
guess alone, the first full step's rollout puts feet into the gaps, and the solve does not
recover from there; nor does a multiple-shooting solve from the guess's own states, whose
defects the first steps close with the feet off their footholds. The planner steps the contact
at 2 ms (10 substeps a knot) with hard contact, so that the plan played open loop puts its
feet where it planned them: a plan at 5 ms with smooth contact drifts from itself by more than
the 2 cm a foot has on its stone over the crossing. On flat ground the impulses take the
paper's 20 fixed sweeps (solved to the tolerance, that solve stops at a kink of exact Coulomb
contact far from the footholds); over the stones they are solved to `CONTACT_TOLERANCE`, so
the plan rests on Coulomb contact at every knot. The default course (3 stones a row, 0.2 m
apart, the trot's stride at 0.4 m/s) is crossed in 2.8 s.

The plan is then re-simulated open loop (`trajopt.replay.resimulate_finer`) at a 2 ms step with
hard contact, its impulses solved to 1e-4 m/s. Printed and saved (in the summary, next to the
result), for the plan and the re-simulation: the loaded feet among the stones, those
over a stone and their largest distance from its centre, those over no stone (none expected)
with their largest force, the feet that crossed onto the landing and how far the base got.
Plots (the gait plot shows the plan's contact pattern), an HTML replay and a Meshcat viewer as
for the main job (`--no-view`: none).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import dynamics
from contact.terrain import flat, heightfield, signed_distance
from trajopt import footholds, residual_library
from trajopt.gait_metrics import CONTACT_THRESHOLD, contact_flags
from trajopt.gaits import make_problem, with_swing_peak
from trajopt.kinematic_guess import base_path
from trajopt.problem import CONTACT_TOLERANCE
from trajopt.replay import resimulate_finer
from trajopt.solver import default_derivatives, solve
from trajopt.terms import Term
from viz import save_and_publish

RESIM_STEP = 0.002  # [s] the re-simulation's contact step
CELL = 0.01  # [m] the height field's cell
ON_STONE = 0.005  # [m] a loaded foot deeper than this below the stones' tops is in a gap


@dataclasses.dataclass(frozen=True)
class Stones:
    """The course: stone centres `(k, 2)` (world xy, m), the stones' side, where the start
    platform ends and the landing begins along x (m)."""

    centres: np.ndarray
    size: float
    platform_end: float
    landing_start: float

    def among_stones(self, x):
        """Whether world x lies between the platforms."""
        return (np.asarray(x) > self.platform_end) & (np.asarray(x) < self.landing_start)


def stone_course(rows_y, *, first=0.34, count=3, size=0.08, gap=0.12, depth=0.1, cell=CELL):
    """`(Stones, Heightfield)`: `count` stones a row at `y in rows_y` (each snapped to the grid),
    the first centred at x = `first`, `size + gap` apart; platforms `gap` before the first and
    after the last. Centres and edges lie on the grid's nodes when `first`, `size / 2` and
    `gap` are multiples of `cell`, so every stone's top is flat over its whole side."""
    for name, value in (("size", size), ("gap", gap), ("depth", depth), ("cell", cell)):
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be positive, got {value}")
    for name, value in (("size / 2", 0.5 * size), ("gap", gap), ("first", first)):
        if abs(value / cell - round(value / cell)) > 1e-6:
            raise ValueError(f"{name} must be a multiple of the cell ({cell} m), got {value}")
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    rows_y = cell * np.round(np.asarray(rows_y, dtype=float) / cell)
    pitch = size + gap
    xs = first + pitch * np.arange(count)
    centres = np.array([[x, y] for x in xs for y in rows_y])
    platform_end = first - 0.5 * size - gap
    landing_start = xs[-1] + 0.5 * size + gap
    x0, y0 = platform_end - 1.0, min(rows_y) - 0.3
    gx = x0 + cell * np.arange(int(round((landing_start + 1.5 - x0) / cell)) + 1)
    gy = y0 + cell * np.arange(int(round((max(rows_y) - min(rows_y) + 0.6) / cell)) + 1)
    X, Y = np.meshgrid(gx, gy, indexing="ij")
    solid = (X <= platform_end + 1e-9) | (X >= landing_start - 1e-9)
    for cx, cy in centres:
        solid |= (np.abs(X - cx) <= 0.5 * size + 1e-9) & (np.abs(Y - cy) <= 0.5 * size + 1e-9)
    heights = np.where(solid, 0.0, -depth)
    course = Stones(centres, size, platform_end, landing_start)
    return course, heightfield(heights, x0, y0, cell)


def stone_placement(course: Stones):
    """`place` for `trajopt.footholds`: a nominal foothold among the stones (or within half a
    side of a platform's edge) moves to the nearest stone's centre, or half a side onto the
    platform where that edge is nearer along x; elsewhere on a platform it stays."""
    nearest = footholds.nearest_point(course.centres)
    reach = 0.5 * course.size
    edges = (course.platform_end - reach, course.landing_start + reach)

    def place(i, p):
        x = float(p[0])
        if not edges[0] < x <= edges[1]:
            return np.asarray(p, dtype=float)
        stone = nearest(i, p)
        edge = min(edges, key=lambda e: abs(e - x))
        return stone if abs(stone[0] - x) < abs(edge - x) else np.array([edge, float(p[1]), 0.0])

    return place


def swing_above_tops(model, reference, *, weight: float, name="swing_above_tops") -> Term:
    """`(1 - s_i) (p_i,z - r_i - h_i)` for every foot i `(nfeet,)` [m]: a swinging foot's
    sphere bottom at the clearance reference `h_i` above the stones' tops (z = 0), with `s_i`
    the reference's stance flag and `r_i` the foot radius. It replaces the gait's
    `foot_clearance`, which measures the sphere's distance to the terrain: over a gap that is
    the distance to the gap's floor or the nearest side, and a swinging foot held at it there
    would skim the stones' edges. Targets per knot: `[h_i, s_i]` rows `(T+1, nfeet, 2)`."""
    rows = np.stack([np.asarray(reference.swing_height, dtype=float),
                     np.asarray(reference.stance, dtype=float)], axis=-1)  # fmt: skip
    radius = np.broadcast_to(np.asarray(model.foot_radius, dtype=float), (model.nfeet,))
    feet = [model.frame_id(foot) for foot in model.foot_names]

    def residual(ctx):
        out = []
        for i, frame in enumerate(feet):
            z = ctx.frame_placement(frame)[1][2]
            out.append((1.0 - ctx.target[i, 1]) * (z - radius[i] - ctx.target[i, 0]))
        return ctx.ops.vec(out)

    return Term(name, residual, weight=weight, target=rows, per_knot=True)


def stones_reference(reference, field, dt: float, xy0, swing_height: float):
    """The trot's references over the course: swing clearance scaled to peak at
    `swing_height` [m]; `base_height (T+1,)` kept above the stones' tops (z = 0). The base
    height term measures from the ground distance `d(x, y, 0)` of the point below the base,
    which over a gap is its distance to the gap's floor or the nearest side, so along the base
    path that the velocity reference integrates `h_ref(t) = h_stand + d(x(t), y(t), 0)`."""
    xy, _ = base_path(reference, dt, xy0, 0.0)
    points = jnp.asarray(np.concatenate([xy, np.zeros((len(xy), 1))], axis=1))
    below = np.asarray(jax.vmap(lambda p: signed_distance(field, p)[0])(points))
    base_height = jnp.asarray(np.asarray(reference.base_height) + below)
    return with_swing_peak(dataclasses.replace(reference, base_height=base_height), swing_height)


@dataclasses.dataclass(frozen=True)
class StonesTask:
    """The problem over the stones, the same on flat ground at the stones' height (its base
    height reference without the gaps' correction), the course and the kinematic guess on the
    placed footholds."""

    problem: object
    on_flat: object
    course: Stones
    init: object


def stones_problem(robot="go2", *, gait="trot", velocity=0.4, duration=2.8, dt=0.02,
                   substeps=10, count=3, first=0.34, size=0.08, gap=0.12, depth=0.1,
                   swing_height=0.1, foothold_weight=300.0, contact="hard",
                   flat_sweeps=20) -> StonesTask:  # fmt: skip
    """The trot over the stones with the footholds term (named "footholds"), its impulses
    solved to `CONTACT_TOLERANCE`, and the same on flat ground with the paper's `flat_sweeps`
    fixed sweeps (module docstring), with compiled derivatives where a C compiler exists."""
    for name, value in (("velocity", velocity), ("swing_height", swing_height)):
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be positive, got {value}")
    if substeps < 1:
        raise ValueError(f"substeps must be at least 1, got {substeps}")
    trot = make_problem(robot, gait, velocity, duration=duration, dt=dt, substeps=substeps,
                        contact=contact, derivatives="implicit")  # fmt: skip
    rows_y = sorted({round(float(y), 4) for y in footholds.stance_footholds(trot)[0, :, 1]})
    course, field = stone_course(rows_y, first=first, count=count, size=size, gap=gap,
                                 depth=depth)  # fmt: skip
    xy0 = np.asarray(trot.model.q_standing)[:2]
    place = stone_placement(course)
    rows = footholds.stance_footholds(trot, place)
    weights = dict(trot.data.weights)
    clearance_weight = float(weights["foot_clearance"])
    weights["foot_clearance"] = jnp.asarray(0.0)  # swing_above_tops in its place
    problems = []
    for ground in (field, flat()):
        reference = stones_reference(trot.data.reference, ground, dt, xy0, swing_height)
        problem = trot.replace_data(
            params=dataclasses.replace(trot.data.params, terrain=ground),
            reference=reference,
            weights=weights,
        )
        problems.append(problem.with_terms(
            residual_library.footholds(trot.model, rows, weight=foothold_weight),
            swing_above_tops(trot.model, reference, weight=clearance_weight),
        ))  # fmt: skip
    on_flat = problems[1].replace(contact_tolerance=None, num_sweeps=flat_sweeps,
                                  derivatives=default_derivatives())  # fmt: skip
    return StonesTask(problems[0], on_flat, course, footholds.placed_guess(problems[0], place))


def stance_on_stones(model, course: Stones, q: np.ndarray, force: np.ndarray) -> dict:
    """Where the loaded feet stand: for every transition `t` and foot with a normal force above
    `CONTACT_THRESHOLD`, the foot at `q[t+1]`. Among the stones (between the platforms): the
    number of such contacts, those over a stone (xy within half a side of its centre) and the
    largest xy distance of those from the centre, and those over no stone (in a gap, or the
    foot scraping a side) with their largest normal force [N]."""
    feet = footholds.foot_positions(model, np.asarray(q)[1:])
    force = np.asarray(force)
    loaded = contact_flags(force, CONTACT_THRESHOLD)
    among = loaded & course.among_stones(feet[..., 0])
    points, normal = feet[among], force[among][:, 2]
    offset = np.abs(points[:, None, :2] - course.centres[None])  # (n, stones, 2)
    over = np.any(np.all(offset <= 0.5 * course.size, axis=2), axis=1)
    distance = np.linalg.norm(offset, axis=2).min(axis=1)
    return {
        "contacts_among_stones": int(points.shape[0]),
        "contacts_on_stones": int(np.sum(over)),
        "max_centre_error_m": float(distance[over].max()) if np.any(over) else None,
        "contacts_off_stones": int(np.sum(~over)),
        "max_force_off_stones_n": float(normal[~over].max()) if np.any(~over) else 0.0,
    }


def feet_on_landing(model, course: Stones, q: np.ndarray) -> int:
    """How many feet of the last configuration of `q (N, nq)` have crossed onto the landing:
    the sphere beyond the landing's edge, its bottom no deeper than `ON_STONE` below the top
    (standing on it or swinging over it)."""
    feet = footholds.foot_positions(model, np.asarray(q)[-1:])[0]
    radius = np.broadcast_to(np.asarray(model.foot_radius, float), (feet.shape[0],))
    beyond = feet[:, 0] - radius > course.landing_start
    return int(np.sum(beyond & (feet[:, 2] - radius > -ON_STONE)))


def summarize(problem, course: Stones, traj) -> dict:
    q, _, force, _ = resimulate_finer(problem, traj, step=RESIM_STEP)
    plan = stance_on_stones(problem.model, course, traj.q, traj.force)
    resim = stance_on_stones(problem.model, course, q, force)
    return {
        "status": traj.status,
        "iterations": traj.iterations,
        "cost": traj.cost,
        "stone_centres": course.centres.tolist(),
        "stone_size_m": course.size,
        **{f"plan_{k}": v for k, v in plan.items()},
        "plan_feet_on_landing": feet_on_landing(problem.model, course, traj.q),
        "plan_final_base_x_m": float(traj.q[-1, 0]),
        **{f"resimulated_{k}": v for k, v in resim.items()},
        "resimulated_feet_on_landing": feet_on_landing(problem.model, course, q),
        "resimulated_final_base_x_m": float(q[-1, 0]),
        "resimulated_min_base_height_m": float(np.min(q[:, 2])),
        "resimulation": (f"{RESIM_STEP * 1e3:g} ms step, hard contact solved to "
                         f"{CONTACT_TOLERANCE:g} m/s"),
    }


def plan_over_stones(task: StonesTask, *, flat_iterations: int, iterations: int, verbose=True):
    """`(first, traj)`: FDDP from the task's kinematic guess on flat ground at the stones'
    height (single shooting: the rollout of its controls), then over the stones from that plan
    (multiple shooting; `flat_iterations = 0`: from the guess). The stones' tops are at the
    ground's height, so a plan whose stance feet stand on them is the same on both: on flat
    ground the footholds term places the feet with no gap to fall into, then the second solve
    takes the gaps and the stones' sides into account."""
    first = task.init
    if flat_iterations > 0:
        if verbose:
            print(f"on flat ground ({flat_iterations} iterations at most):")
        first = solve(task.on_flat, task.init, shooting="single",
                      max_iterations=flat_iterations, verbose=verbose)  # fmt: skip
    if verbose:
        print(f"over the stones ({iterations} iterations at most):")
    traj = solve(task.problem, first, shooting="multiple", max_iterations=iterations,
                 verbose=verbose)  # fmt: skip
    return first, traj


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--velocity", type=float, default=0.4, help="[m/s] forward")
    parser.add_argument("--duration", type=float, default=2.8, help="horizon [s]")
    parser.add_argument("--stones", type=int, default=3, help="stones a row")
    parser.add_argument("--stone-size", type=float, default=0.08, help="[m] a stone's side")
    parser.add_argument("--gap", type=float, default=0.12, help="[m] between stones")
    parser.add_argument("--depth", type=float, default=0.1, help="[m] of the gaps")
    parser.add_argument("--swing-height", type=float, default=0.1, help="[m] foot clearance")
    parser.add_argument("--substeps", type=int, default=10,
                        help="the planner's contact steps per 20 ms knot")  # fmt: skip
    parser.add_argument("--flat-iterations", type=int, default=100,
                        help="the first solve's, on flat ground")  # fmt: skip
    parser.add_argument("--iterations", type=int, default=40, help="the solve over the stones")
    parser.add_argument("--out", default="results")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--no-view", action="store_true", help="write plots and replay only")
    parser.add_argument("--zmq-url", help="show the result in this running Meshcat server")
    args = parser.parse_args(argv)
    for name in ("substeps", "stones"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    for name in ("flat_iterations", "iterations"):
        if getattr(args, name) < 0:
            flag = name.replace("_", "-")
            parser.error(f"--{flag} must be non-negative, got {getattr(args, name)}")
    try:
        task = stones_problem(
            args.robot, velocity=args.velocity, duration=args.duration, substeps=args.substeps,
            count=args.stones, size=args.stone_size, gap=args.gap, depth=args.depth,
            swing_height=args.swing_height,
        )  # fmt: skip
    except ValueError as exc:
        parser.error(str(exc))
    t0 = time.perf_counter()
    _, traj = plan_over_stones(task, flat_iterations=args.flat_iterations,
                               iterations=args.iterations, verbose=not args.quiet)  # fmt: skip
    summary = summarize(task.problem, task.course, traj)
    summary["wall_time_incl_compile_s"] = time.perf_counter() - t0
    save_and_publish(traj, os.path.join(args.out, f"stepping_stones_{args.robot}"), summary,
                     serve=not args.no_view, zmq_url=args.zmq_url,
                     hidden=("stone_centres",))  # fmt: skip
    return traj, summary


if __name__ == "__main__":
    main()
