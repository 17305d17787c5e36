"""Load a robot, evaluate its dynamics against Pinocchio and save a summary.

    python examples/inspect_robot.py --robot go2 --out results

Prints the model (mass, joints, feet, limits), the standing pose's foot positions and gravity
torques, how far our JAX/CasADi dynamics are from Pinocchio C++ on random states, and writes
`results/<robot>_summary.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np
import pinocchio as pin

import dynamics
from dynamics.casadi_functions import casadi_forward_dynamics


def summarize(robot: str, n_states: int = 20, seed: int = 0) -> dict:
    model = dynamics.load_robot(robot)
    pm = dynamics.load_pinocchio(robot).model
    data = pm.createData()
    q0 = model.q_standing
    _, feet = dynamics.frame_placements(model, q0, model.foot_names)
    g = dynamics.gravity_forces(model, q0)
    keys = jax.random.split(jax.random.PRNGKey(seed), n_states)
    qs = np.asarray(jax.vmap(lambda k: dynamics.random_configuration(model, k))(keys))
    rng = np.random.default_rng(seed)
    vs, taus = rng.normal(size=(2, n_states, model.nv))
    fd = jax.jit(jax.vmap(lambda *a: dynamics.forward_dynamics(model, *a)))
    t0 = time.perf_counter()
    ours = np.asarray(fd(qs, vs, taus))
    t_jax = time.perf_counter() - t0
    ref = np.stack([pin.aba(pm, data, *x) for x in zip(qs, vs, taus)])
    cas = casadi_forward_dynamics(model)
    cas_out = np.stack([np.asarray(cas(*x)).ravel() for x in zip(qs, vs, taus)])
    return {
        "robot": robot,
        "mass_kg": model.total_mass,
        "nq": model.nq,
        "nv": model.nv,
        "actuated_joints": list(model.actuated_joint_names),
        "feet": list(model.foot_names),
        "foot_radius_m": np.asarray(model.foot_radius).tolist(),
        "effort_limit_Nm": np.asarray(model.effort_limit)[6:].tolist(),
        "standing_base_height_m": float(q0[2]),
        "standing_foot_heights_m": np.asarray(feet[:, 2]).tolist(),
        "standing_gravity_torques_Nm": np.asarray(g[6:]).round(4).tolist(),
        "max_abs_error_jax_vs_pinocchio_aba": float(np.max(np.abs(ours - ref))),
        "max_abs_error_casadi_vs_pinocchio_aba": float(np.max(np.abs(cas_out - ref))),
        "jax_compile_and_run_s": t_jax,
        "random_states": n_states,
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", help=f"one of {dynamics.available_robots()}")
    parser.add_argument("--states", type=int, default=20, help="random states to compare")
    parser.add_argument("--out", default="results", help="folder for the summary JSON")
    args = parser.parse_args(argv)
    summary = summarize(args.robot, args.states)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{args.robot}_summary.json")
    with open(path, "w") as f:
        json.dump(summary, f, indent=2)
    print(dynamics.load_robot(args.robot))
    for key, value in summary.items():
        print(f"  {key}: {value}")
    print(f"summary saved to {os.path.abspath(path)}")
    return summary


if __name__ == "__main__":
    main()
