"""Energy drift of the Moreau midpoint step (hard contact, no actuation), measured.

    python benchmarks/energy_drift.py            # ~1-2 min on 2 cores, prints a table

The step evaluates the bias `h(q_mid, v)` (Coriolis, centrifugal, gravity) at the midpoint
configuration but the *start* velocity, so the velocity-dependent part is explicit: for a free
body in base-frame coordinates (`u` linear, `w` angular, inertia `I`), explicit Euler on
`u' = -w x u`, `w' = -I^-1 (w x I w)` adds, per step,

    dE = dt^2 / 2 (m |w x u|^2 + (w x I w)^T I^-1 (w x I w))        (second order in dt)

(`tests/contact/test_contact_physics.py::coriolis_energy_gain`; contacts only dissipate).
Measured here:

1. a free spinning body: a 0.2 x 0.1 x 0.05 m, 1 kg box without gravity or contact, spinning
   about the axis (1, 1, 1) at 5-50 rad/s (its kinetic energy is exactly constant): the
   largest one-step gain and the gain over 1 s relative to the kinetic energy, and the
   measured gain over the formula's;
2. a passive Go2 (zero torque) dropped from 0.3 m above its standing height onto flat ground
   (mu 0.8), 0.5 s (flight, touchdown, the legs folding; only the feet collide), once released
   at rest and once tumbling (base spin (1, 2, 3) rad/s, joint rates N(0, 2) rad/s): the
   largest one-step gain of `E = 0.5 v^T M v - m g . com` relative to the initial E (ground at
   z = 0), and the sum of all one-step gains over the run relative to it (contacts dissipate
   far more: E falls).

Both at dt = 1 ms (and 2 ms for reference), float64.

3. the remedy, in free flight without gravity (no contact: the same midpoint formulas as
   `contact.step`, written out here): `h` at the start velocity (`contact.step`'s choice; for
   the box it reproduces 1.) against `h` at the predicted midpoint velocity `(v + v_free) / 2`
   (one more RNEA and back-substitution per step), for the box at 50 rad/s and the tumbling Go2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import contact  # noqa: E402
import dynamics  # noqa: E402
from dynamics import State, free_body  # noqa: E402


def energy_function(model):
    """`E(q, v) = 0.5 v^T M v - m g . com` [J], vmapped over a trajectory."""
    mass = float(np.sum(model.body_mass))

    def energy(q, v):
        kinetic = 0.5 * v @ dynamics.mass_matrix(model, q) @ v
        return kinetic - mass * jnp.asarray(model.gravity) @ dynamics.center_of_mass(model, q)

    return jax.jit(jax.vmap(energy))


def kinetic_function(model):
    return jax.jit(jax.vmap(lambda q, v: 0.5 * v @ dynamics.mass_matrix(model, q) @ v))


def passive_run(model, params, q0, v0, seconds):
    """Zero-torque hard-contact rollout; returns `q (T+1, nq)`, `v (T+1, nv)`."""
    steps = int(round(seconds / float(params.dt)))
    controls = jnp.zeros((steps, model.nu))
    run = jax.jit(lambda s, u: contact.rollout(model, params, s, u, contact="hard"))
    _, (states, infos) = run(State(jnp.asarray(q0), jnp.asarray(v0)), controls)
    assert contact.first_bad_step(infos) is None
    q = np.concatenate([np.asarray(q0)[None], np.asarray(states.q)])
    v = np.concatenate([np.asarray(v0)[None], np.asarray(states.v)])
    return q, v


def formula_gain(model, v, dt):
    """The explicit-Coriolis gain per step [J] of a free body (module docstring)."""
    inertia = np.asarray(dynamics.mass_matrix(model, jnp.asarray(model.q_standing)))[3:, 3:]
    u, w = v[:, :3], v[:, 3:]
    a, b = np.cross(w, u), np.cross(w, w @ inertia)
    rotational = np.einsum("ni,ij,nj->n", b, np.linalg.inv(inertia), b)
    return 0.5 * dt**2 * (float(np.sum(model.body_mass)) * np.sum(a * a, axis=1) + rotational)


def spinning_box(dt: float, spin: float, seconds: float = 1.0):
    model = free_body.box()
    model = model.replace(gravity=np.zeros(3))  # torque-free: E = KE is constant
    params = contact.StepParams(dt=dt, terrain=contact.flat(height=-1e4))  # never touches
    q0 = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    v0 = np.concatenate([np.zeros(3), spin * np.ones(3) / np.sqrt(3.0)])
    q, v = passive_run(model, params, q0, v0, seconds)
    energy = np.asarray(energy_function(model)(jnp.asarray(q), jnp.asarray(v)))
    kinetic0 = float(kinetic_function(model)(jnp.asarray(q[:1]), jnp.asarray(v[:1]))[0])
    gain = np.diff(energy)
    predicted = formula_gain(model, v[:-1], dt)
    return {
        "max_step_gain_over_kinetic": float(gain.max() / kinetic0),
        "gain_1s_over_kinetic": float((energy[-1] - energy[0]) / kinetic0),
        "measured_over_formula_median": float(np.median(gain / predicted)),
    }


def dropped_go2(dt: float, tumbling: bool, seconds: float = 0.5, seed: int = 0):
    model = dynamics.load_robot("go2")
    params = contact.StepParams(dt=dt, terrain=contact.flat(friction=0.8))
    q0 = np.array(model.q_standing, dtype=float)
    q0[2] += 0.3
    v0 = np.zeros(model.nv)
    if tumbling:
        v0[3:6] = [1.0, 2.0, 3.0]
        v0[6:] = 2.0 * np.random.default_rng(seed).normal(size=model.nu)
    q, v = passive_run(model, params, q0, v0, seconds)
    energy = np.asarray(energy_function(model)(jnp.asarray(q), jnp.asarray(v)))
    relative = np.diff(energy) / energy[0]
    k = int(np.argmax(relative))
    return {
        "max_step_gain_over_E": float(relative[k]),
        "at_time_s": float(k * dt),
        "sum_of_gains_over_E": float(np.sum(np.maximum(relative, 0.0))),
        "E_end_over_E_start": float(energy[-1] / energy[0]),
    }


def free_flight_kinetic(model, q0, v0, dt, seconds, predictor: bool):
    """Kinetic energy `(T + 1,)` of the midpoint step without contact or gravity
    (`model.gravity` must be zero): `q_m = q (+) v dt/2`, `v+ = v - dt M(q_m)^-1 h(q_m, v_h)`,
    `q+ = q (+) dt (v + v+)/2`, with `v_h = v` (as `contact.step`) or, with `predictor`,
    `v_h = (v + v_free) / 2` from a first pass."""
    from dynamics.configuration import integrate

    zero = jnp.zeros(model.nv)

    def body(carry, _):
        q, v = carry
        q_mid = integrate(model, q, 0.5 * dt * v)
        mass = dynamics.mass_matrix(model, q_mid)
        v_next = v - dt * jnp.linalg.solve(mass, dynamics.rnea(model, q_mid, v, zero))
        if predictor:
            v_mid = 0.5 * (v + v_next)
            v_next = v - dt * jnp.linalg.solve(mass, dynamics.rnea(model, q_mid, v_mid, zero))
        q_next = integrate(model, q, 0.5 * dt * (v + v_next))
        return (q_next, v_next), 0.5 * v_next @ dynamics.mass_matrix(model, q_next) @ v_next

    steps = int(round(seconds / dt))
    run = jax.jit(lambda q, v: jax.lax.scan(body, (q, v), None, length=steps)[1])
    kinetic0 = 0.5 * v0 @ dynamics.mass_matrix(model, q0) @ v0
    return np.concatenate([[float(kinetic0)], np.asarray(run(q0, v0))])


def remedy(dt: float, seed: int = 0):
    """3. of the module docstring: `{name: {scheme: (max one-step gain, total gain)}}`, both
    relative to the initial kinetic energy."""
    box = free_body.box().replace(gravity=np.zeros(3))
    go2 = dynamics.load_robot("go2").replace(gravity=np.zeros(3))
    v_go2 = np.zeros(go2.nv)
    v_go2[3:6] = [1.0, 2.0, 3.0]
    v_go2[6:] = 2.0 * np.random.default_rng(seed).normal(size=go2.nu)
    v_box = np.concatenate([np.zeros(3), 50.0 * np.ones(3) / np.sqrt(3.0)])
    cases = {
        "box 50 rad/s, 1 s": (box, np.array([0, 0, 1.0, 0, 0, 0, 1]), v_box, 1.0),
        "go2 tumbling, 0.5 s": (go2, np.asarray(go2.q_standing), v_go2, 0.5),
    }
    out = {}
    for name, (model, q0, v0, seconds) in cases.items():
        out[name] = {}
        for scheme, predictor in (("h(v)", False), ("h((v + v_free) / 2)", True)):
            kinetic = free_flight_kinetic(
                model, jnp.asarray(q0), jnp.asarray(v0), dt, seconds, predictor
            )
            gain = np.diff(kinetic) / kinetic[0]
            out[name][scheme] = (float(gain.max()), float(np.sum(gain)))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dts", type=float, nargs="+", default=[0.001, 0.002])
    parser.add_argument("--spins", type=float, nargs="+", default=[5.0, 20.0, 50.0])
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__}, float64 {jax.config.jax_enable_x64}")
    for name, schemes in remedy(args.dts[0]).items():
        for scheme, (step_gain, total) in schemes.items():
            print(
                f"free flight, {name}, dt {1e3 * args.dts[0]:.0f} ms, bias at {scheme}: max "
                f"one-step gain {step_gain:.2e} of KE, total {total:+.2e} of KE",
                flush=True,
            )
    for dt in args.dts:
        for spin in args.spins:
            r = spinning_box(dt, spin)
            print(
                f"box  dt {1e3 * dt:.0f} ms  spin {spin:4.0f} rad/s: max one-step gain "
                f"{r['max_step_gain_over_kinetic']:.2e} of KE, over 1 s "
                f"{r['gain_1s_over_kinetic']:+.2e} of KE, measured/formula "
                f"{r['measured_over_formula_median']:.3f}",
                flush=True,
            )
        for tumbling in (False, True):
            r = dropped_go2(dt, tumbling)
            print(
                f"go2  dt {1e3 * dt:.0f} ms  {'tumbling' if tumbling else 'at rest '}: max "
                f"one-step gain {r['max_step_gain_over_E']:.2e} of E0 (t = {r['at_time_s']:.3f} "
                f"s), sum of gains {r['sum_of_gains_over_E']:.2e} of E0, E(0.5 s) / E0 = "
                f"{r['E_end_over_E_start']:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
