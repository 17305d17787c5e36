"""Height-field terrain cost: the batched contact distance query and the contact step on flat
ground, on tiles of one height field, and on per-environment height fields.

    python benchmarks/bench_terrain.py             # writes "## Terrain" in BENCHMARKS.md, and JSON
    python benchmarks/bench_terrain.py --no-write  # prints the section only

In one process, `--batch` environments (default 256), each a robot's four feet:

1. Query: `vmap` over environments and feet of `contact.signed_distance` (gap and normal), the
   feet at heights uniform in 0..`--clearance` above the ground (training: stance and swing).
2. Step: a jitted `vmap` of a `lax.scan` of `--steps` `contact.step`s (`smooth`) of the robot
   standing under its joint PD, per environment.

Layouts: `flat` (a `Plane`), `tiles` (one shared `Heightfield` of `--levels` levels x 6 kinds of
`--tile` m tiles, `in_axes=None`; each environment on its own tile's centre) and `per-env`
(a `Heightfield` per environment with a leading batch axis, one tile with its border,
`in_axes=0`), each with the distance query's default 7 x 7-cell window and with the 3 x 3-cell
one (`window=1`: exact for gaps below one cell, which covers the step's activation cut-off, so
the steps are the same). Times are medians of repeats (`bench_contact.time_call`), in
microseconds per environment step (query: per environment, four feet).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import contact  # noqa: E402
import dynamics  # noqa: E402
from contact import terrain_tiles as tt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import markdown_report  # noqa: E402
from bench_contact import batch_states, setup, time_call  # noqa: E402

HEADING = "## Terrain"
RESULTS = REPO / "benchmarks" / "results" / "terrain.json"
LAYOUTS = ("flat", "tiles", "per-env", "tiles, window 1", "per-env, window 1")


def _cast(tree, dtype):
    """Every floating leaf of a pytree as `dtype` (static fields stay)."""
    floating = lambda x: jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)  # noqa: E731
    return jax.tree.map(lambda x: jnp.asarray(x, dtype) if floating(x) else x, tree)


def terrains(args, dtype):
    """`{layout: (terrain, in_axes, spawn_xy (B, 2))}` in `dtype`."""
    layout = tt.TileLayout(num_levels=args.levels, tile_size=args.tile, cell_size=args.cell,
                           border=args.border)  # fmt: skip
    rng = np.random.default_rng(0)
    levels = rng.integers(0, layout.num_levels, args.batch)
    kinds = np.arange(args.batch) % len(layout.kinds)
    x, y = tt.tile_centre(layout, levels, kinds)
    bank = tt.tile_bank(layout, seed=0)
    zeros, centres = np.zeros((args.batch, 2)), np.stack([x, y], axis=1)
    cases = {"flat": (_cast(contact.flat(), dtype), None, zeros)}
    for window, suffix in ((3, ""), (1, ", window 1")):
        shared = _cast(tt.tile_terrain(layout, seed=0, window=window), dtype)
        own = _cast(tt.env_terrains(layout, bank, levels, kinds, window=window), dtype)
        cases["tiles" + suffix] = (shared, None, centres)
        cases["per-env" + suffix] = (own, 0, zeros)
    return layout, cases


def feet(terrain, in_axes, spawn, clearance, dtype, seed=1):
    """`(B, 4, 3)` foot points around each spawn, `0..clearance` above the ground."""
    rng = np.random.default_rng(seed)
    b = spawn.shape[0]
    xy = spawn[:, None, :] + rng.uniform(-0.3, 0.3, (b, 4, 2))
    xy = jnp.asarray(xy, dtype)
    ground = jax.vmap(lambda t, p: jax.vmap(lambda q: contact.height(t, q[0], q[1]))(p),
                      in_axes=(in_axes, 0))(terrain, xy)  # fmt: skip
    z = ground + jnp.asarray(rng.uniform(0.0, clearance, (b, 4)), dtype)
    return jnp.concatenate([xy, z[..., None]], axis=-1)


def query_fn(in_axes):
    per_env = jax.vmap(contact.signed_distance, in_axes=(None, 0))
    return jax.jit(jax.vmap(per_env, in_axes=(in_axes, 0)))


def step_fn(model, params, controller, steps, in_axes):
    def run(terrain, x):
        p = params.replace(terrain=terrain)
        final, _ = contact.simulate(model, p, x, controller, steps, contact="smooth")
        return final

    return jax.jit(jax.vmap(run, in_axes=(in_axes, 0)))


def measure(args) -> list[dict]:
    dtype = jnp.dtype(args.dtype)
    layout, cases = terrains(args, dtype)
    model, params, controller, state = setup(args.robot, args.dtype)
    rows = []
    for name in LAYOUTS:
        terrain, axes, spawn = cases[name]
        points = feet(terrain, axes, spawn, args.clearance, dtype)
        fn = query_fn(axes)
        t0 = time.perf_counter()
        jax.block_until_ready(fn(terrain, points))
        compile_q = time.perf_counter() - t0
        sec, util = time_call(lambda: jax.block_until_ready(fn(terrain, points)),  # noqa: B023
                              repeats=args.repeats, target_s=0.2)  # fmt: skip
        rows.append({"what": "query", "layout": name, "us_per_env": 1e6 * sec / args.batch,
                     "compile_s": compile_q, "cpu_util": util})  # fmt: skip
        print(rows[-1], flush=True)

        x = batch_states(model, state, args.batch)
        q = np.array(x.q)
        ground = np.asarray(jax.vmap(contact.height, in_axes=(axes, 0, 0))(
            terrain, jnp.asarray(spawn[:, 0], dtype), jnp.asarray(spawn[:, 1], dtype)))  # fmt: skip
        q[:, :2] += spawn
        q[:, 2] += ground
        x = dynamics.State(jnp.asarray(q, dtype), x.v)
        fn = step_fn(model, params, controller, args.steps, axes)
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(terrain, x))
        compile_s = time.perf_counter() - t0
        if not bool(jnp.all(jnp.isfinite(out.q))):
            raise FloatingPointError(f"non-finite state on {name}")
        sec, util = time_call(lambda: jax.block_until_ready(fn(terrain, x)),  # noqa: B023
                              repeats=args.repeats, target_s=0.5)  # fmt: skip
        rows.append({"what": "step", "layout": name,
                     "us_per_env": 1e6 * sec / (args.batch * args.steps),
                     "compile_s": compile_s, "cpu_util": util})  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def render(rows, args, command: str, load: str) -> str:
    flat = {r["what"]: r["us_per_env"] for r in rows if r["layout"] == "flat"}
    lines = [
        HEADING, "",
        f"- Command: `{command}`",
        f"- Date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- CPU: {markdown_report.cpu_name()}, {len(os.sched_getaffinity(0))} of "
        f"{os.cpu_count()} logical cores usable; load average at the start {load}; "
        + markdown_report.versions("jax"),
        f"- {args.robot}, {args.dtype}, {args.batch} environments x 4 feet; query: feet 0.."
        f"{args.clearance} m above the ground; step: `smooth`, a scan of {args.steps} steps "
        f"standing under the joint PD. Tiles: {args.levels} levels x 6 kinds of {args.tile} m, "
        f"{args.cell} m cells, {args.border} m border; per-env: one tile and its border each.",
        "",
        "| what | layout | us per env step | / flat | compile s | CPU util |",
        "|---|---|---:|---:|---:|---:|",
    ]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['what']} | {r['layout']} | {r['us_per_env']:.2f} "
            f"| {r['us_per_env'] / flat[r['what']]:.2f} | {r['compile_s']:.1f} "
            f"| {r['cpu_util']:.2f} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--levels", type=int, default=10)
    parser.add_argument("--tile", type=float, default=8.0)
    parser.add_argument("--cell", type=float, default=0.1)
    parser.add_argument("--border", type=float, default=2.0)
    parser.add_argument("--clearance", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = measure(args)
    command = "python benchmarks/bench_terrain.py " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-write"
    )
    text = render(rows, args, command.strip(), load)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    markdown_report.publish(None if args.no_write else REPO / "BENCHMARKS.md", HEADING, text)


if __name__ == "__main__":
    main()
