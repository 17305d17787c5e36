"""Scale-out code paths on fake CPU devices: SHAC environment steps/s against the
device count, and batched FDDP throughput against the batch size.

    python benchmarks/bench_sharding.py                      # prints; --write updates BENCHMARKS.md
    python benchmarks/bench_sharding.py --envs 16 --horizon 8 --batches 1 4 8 --repeats 3

Runs itself in a subprocess with `XLA_FLAGS=--xla_force_host_platform_device_count=4` (JAX
fixes the device count at start-up). Fake CPU devices share the machine's cores: on a 2-core
machine, more devices cannot run faster, and they add partitioning and collective overhead.
The numbers show that the code paths run and what they cost here, not a scaling curve.

1. SHAC (`learning.shac.train.train(devices=d)`, Solo12, smooth contact, float64,
   `fast_compile`): the same global batch on d = 1, 2, 4 devices; env steps/s = num_envs x
   horizon / iteration time, median over the timed iterations (the first iteration, which
   compiles, is not timed).
2. Batched FDDP (`trajopt.batched.solve_batched`, Solo12 trot, a grid of forward velocities):
   problems/s for batch sizes B (one compiled structure per B; compilation reported apart),
   against B single solves with `fddp.solve_fddp` (already compiled), and B = max on 4 devices.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HEADING = "## Scale-out on fake CPU devices"
DEVICES = 4


def _load() -> float:
    return os.getloadavg()[0]


def bench_training(envs: int, horizon: int, iterations: int) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from learning.env import EnvConfig
    from learning.policy import Policy
    from learning.shac.train import SHACConfig, train

    config = SHACConfig(env=EnvConfig(robot="solo12"), num_envs=envs, horizon=horizon,
                        critic_iterations=4, fast_compile=True)  # fmt: skip
    policy = Policy.create(jax.random.PRNGKey(0), 12, dtype=jnp.float64)
    rows = []
    for d in (1, 2, 4):
        load = _load()
        began = time.perf_counter()
        result = train(config, policy, iterations=iterations, quiet=True, devices=d)
        total = time.perf_counter() - began
        rates = [r["env_steps_per_s"] for r in result.metrics[1:]]
        first = result.metrics[0]["wall_time"]
        rows.append({"devices": d, "per_device": envs // d, "steps_per_s": float(np.median(rates)),
                     "first_iteration_s": first, "total_s": total, "load": load})  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def bench_batched(batches: list[int], repeats: int, max_iterations: int) -> dict:
    import numpy as np

    from trajopt import batched, sharding
    from trajopt.engine import fddp
    from trajopt.gaits import make_problem
    from trajopt.solver import initial_guess

    biggest = max(batches)
    velocities = np.linspace(0.0, 0.4, biggest)
    problems = [make_problem("solo12", "trot", float(v), duration=0.06, dt=0.02, substeps=2)
                for v in velocities]  # fmt: skip
    guesses = [np.asarray(initial_guess(p)[1]) for p in problems]
    kwargs = dict(max_iterations=max_iterations)
    fddp.solve_fddp(problems[0], None, guesses[0], verbose=False, **kwargs)  # compile
    load = _load()
    began, began_cpu = time.perf_counter(), time.process_time()
    for p, us in zip(problems, guesses):
        fddp.solve_fddp(p, None, us, verbose=False, **kwargs)
    single = (time.perf_counter() - began) / biggest
    single_cpu = (time.process_time() - began_cpu) / biggest
    rows = []
    for b, devices in [(b, None) for b in batches] + [(biggest, 2), (biggest, DEVICES)]:
        load_b = _load()
        began = time.perf_counter()
        batched.solve_batched(problems[:b], np.stack(guesses[:b]), devices=devices, **kwargs)
        first = time.perf_counter() - began
        times, cpu = [], []
        for _ in range(repeats):
            began, began_cpu = time.perf_counter(), time.process_time()
            out = batched.solve_batched(problems[:b], np.stack(guesses[:b]), devices=devices,
                                        **kwargs)  # fmt: skip
            times.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
        seconds = float(np.median(times))
        iterations = max(o.iterations for o in out)
        rows.append({"batch": b, "devices": devices or 1, "seconds": seconds,
                     "problems_per_s": b / seconds, "compile_s": first - seconds,
                     "cpu_s": float(np.median(cpu)), "layout": batched.block_layout(
                         None if devices is None else sharding.make_mesh(devices)),
                     "iterations": iterations, "load": load_b})  # fmt: skip
        print(rows[-1], flush=True)
        batched.clear_compiled()
    return {"single_s": single, "single_cpu_s": single_cpu, "single_load": load, "rows": rows,
            "horizon": problems[0].horizon}  # fmt: skip


def render(training: list[dict], batch: dict, args) -> str:
    from benchmarks.markdown_report import cpu_name, versions

    lines = [
        HEADING,
        "",
        f"`python benchmarks/bench_sharding.py --envs {args.envs} --horizon {args.horizon} "
        f"--iterations {args.iterations} --batches {' '.join(map(str, args.batches))} "
        f"--repeats {args.repeats} --max-iterations {args.max_iterations}"
        + (" --skip-training" if args.skip_training else "")
        + f"`, in one process with `XLA_FLAGS=--xla_force_host_platform_device_count={DEVICES}`, "
        f"{datetime.date.today().isoformat()}.",
        "",
        f"- CPU: {cpu_name()}, {os.cpu_count()} cores; {versions('jax', 'jaxlib')}. 1-min load "
        "average at the start of each row in the tables.",
        "- **Two CPU cores cannot show real scaling** (the fake devices share them): these "
        "rows show that the sharded paths run and their cost here; "
        "tests/learning/test_sharded_training.py and tests/trajopt/test_batched_trajopt.py "
        "check their results.",
        "",
    ]
    if training:
        lines += [
            f"SHAC (`shac.train(devices=d)`), Solo12, {args.envs} environments (the global "
            f"batch) x horizon {args.horizon}, float64, XLA's fast-compile level; env steps/s = "
            f"{args.envs * args.horizon} / iteration time, median of iterations "
            f"2-{args.iterations}:",
            "",
            "| devices | envs per device | env steps/s | first iteration (compile) s | load |",
            "| --- | --- | --- | --- | --- |",
        ]
        for r in training:
            lines.append(f"| {r['devices']} | {r['per_device']} | {r['steps_per_s']:.0f} | "
                         f"{r['first_iteration_s']:.0f} | {r['load']:.1f} |")  # fmt: skip
        lines.append("")
    lines += [
        f"Batched FDDP (`trajopt.batched.solve_batched`), Solo12 trot, {batch['horizon']} knots, "
        "a grid of forward velocities 0-0.4 m/s, at most "
        f"{args.max_iterations} iterations; single solves (`fddp.solve_fddp`, compiled): "
        f"{batch['single_s'] * 1e3:.0f} ms per problem ({batch['single_cpu_s'] * 1e3:.0f} ms "
        f"CPU), {1 / batch['single_s']:.1f} problems/s (load {batch['single_load']:.1f}). "
        "CPU: the process's CPU time over all threads.",
        "",
        "| batch | devices | a device's block | s per batch (median) | CPU s | problems/s | "
        "compile s | iterations | load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in batch["rows"]:
        lines.append(f"| {r['batch']} | {r['devices']} | {r['layout']} | {r['seconds']:.2f} | "
                     f"{r['cpu_s']:.2f} | {r['problems_per_s']:.1f} | {r['compile_s']:.0f} | "
                     f"{r['iterations']} | {r['load']:.1f} |")  # fmt: skip
    lines += [
        "",
        "One device: the batch is vmapped (every problem runs until the slowest stops); "
        "several devices: each solves its problems one by one (`lax.map`).",
    ]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", type=int, default=16)
    p.add_argument("--horizon", type=int, default=8)
    p.add_argument("--iterations", type=int, default=6)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-iterations", type=int, default=10)
    p.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    p.add_argument("--skip-training", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.child:  # re-run with the fake devices
        env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES}",
                   JAX_PLATFORMS="cpu")  # fmt: skip
        argv = sys.argv[1:] if argv is None else list(argv)
        done = subprocess.run([sys.executable, __file__, *argv, "--child"], env=env)
        raise SystemExit(done.returncode)
    import dynamics  # noqa: F401  (float64)

    training = [] if args.skip_training else bench_training(args.envs, args.horizon,
                                                            args.iterations)  # fmt: skip
    batch = bench_batched(args.batches, args.repeats, args.max_iterations)
    print(json.dumps({"training": training, "batched": batch}, indent=1))
    from benchmarks.markdown_report import publish

    publish(ROOT / "BENCHMARKS.md" if args.write else None, HEADING,
            render(training, batch, args))  # fmt: skip


if __name__ == "__main__":
    main()
