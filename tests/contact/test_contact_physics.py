"""Contact physics against textbook mechanics (issue 3).

Every test states the analytic expectation and why its tolerance is what it is. Simulations run
at `dt = 2 ms` through one jitted `contact.simulate` chunk of `CHUNK` steps per (model, contact
model): compilation (3-15 s each) dominates, so all scenarios of a model share it (the terrain,
friction and initial state are traced) and trajectories are cached per scenario.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import contact
import dynamics
from dynamics import State, free_body
from dynamics.actuator import standing_controller

DT = 0.002
CHUNK = 250  # steps per compiled call (0.5 s); longer runs loop over chunks
G = 9.81
CONTACT_MODELS = ("hard", "smooth", "penalty")
MOREAU = ("hard", "smooth")  # midpoint time-stepping, impulses from the Coulomb prox solver


# ----------------------------------------------------------------------------- simulation
@functools.partial(jax.jit, static_argnames=("contact_model", "actuated"))
def _simulate_chunk(model, params, state, contact_model, actuated):
    if actuated:
        controller = standing_controller(model)
    else:
        controller = lambda s: jnp.zeros(0)  # noqa: E731  (free bodies: no actuated joint)
    return contact.simulate(model, params, state, controller, CHUNK, contact=contact_model)


def simulate(model, params, q0, v0, contact_model, seconds, actuated=False):
    """`(states, infos)` as NumPy arrays, states after each of the `seconds / dt` steps."""
    num_steps = int(round(seconds / params.dt))
    state = State(jnp.asarray(q0, dtype=float), jnp.asarray(v0, dtype=float))
    chunks = []
    for _ in range(0, num_steps, CHUNK):
        state, trajectory = _simulate_chunk(
            model, params, state, contact_model=contact_model, actuated=actuated
        )
        chunks.append(jax.tree_util.tree_map(np.asarray, trajectory))
    return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs)[:num_steps], *chunks)


@functools.cache
def body(name):
    return free_body.sphere() if name == "sphere" else free_body.box()


@functools.cache
def robot(name):
    return dynamics.load_robot(name)


def mass_of(model):
    return float(np.sum(np.asarray(model.body_mass)))


def rest_height(name):
    """Base height of a free body resting on z = 0 (sphere radius 0.1 m, box half height)."""
    return 0.1 if name == "sphere" else 0.025


def quaternion_y(angle):
    """xyzw quaternion of a rotation by `angle` about the world y axis (Pinocchio order)."""
    return Rotation.from_euler("y", angle).as_quat()


def energy_function(model):
    """`E(q, v) = 0.5 v^T M v - m g . com` [J], jitted."""
    mass = mass_of(model)

    @jax.jit
    def energy(q, v):
        kinetic = 0.5 * v @ dynamics.mass_matrix(model, q) @ v
        return kinetic - mass * model.gravity @ dynamics.center_of_mass(model, q)

    return jax.vmap(energy)


def first_contact(infos):
    """Index of the first step with a nonzero normal impulse."""
    touching = np.any(infos.impulse[:, :, 2] > 0.0, axis=1)
    assert touching.any()
    return int(np.argmax(touching))


# ----------------------------------------------------------------------------- free fall
@pytest.mark.parametrize("contact_model", CONTACT_MODELS)
def test_free_fall_matches_g_t2_over_2(contact_model):
    """z(t) = z0 + w0 t - g t^2 / 2, v_z = w0 - g t for a sphere far above the ground.

    The midpoint scheme (hard, smooth) `q+ = q + dt (v + v+)/2`, `v+ = v - g dt` is the
    trapezoidal rule, exact for constant acceleration: only round-off remains (< 1e-12 m over
    150 steps at z ~ 2 m). The penalty model is semi-implicit Euler `q+ = q + dt v+`, which
    gives `z_n = z0 + w0 t_n - g dt^2 n (n + 1) / 2`: behind the parabola by exactly
    `g dt t / 2` (first order in dt), checked to the same round-off.
    """
    model = body("sphere")
    params = contact.StepParams(dt=DT)
    z0, w0, u0 = 2.0, 0.5, 0.3
    states, infos = simulate(
        model, params, [0, 0, z0, 0, 0, 0, 1], [u0, 0, w0, 0, 0, 0], contact_model, 0.3
    )
    t = DT * np.arange(1, len(states.q) + 1)
    parabola = z0 + w0 * t - 0.5 * G * t**2
    assert np.all(infos.impulse == 0.0)
    np.testing.assert_allclose(states.v[:, 2], w0 - G * t, rtol=0, atol=1e-12)
    np.testing.assert_allclose(states.q[:, 0], u0 * t, rtol=0, atol=1e-12)
    if contact_model in MOREAU:
        np.testing.assert_allclose(states.q[:, 2], parabola, rtol=0, atol=1e-12)
    else:
        np.testing.assert_allclose(states.q[:, 2], parabola - 0.5 * G * DT * t, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- drop and rest
DROP_HEIGHT = 0.2  # [m] above the resting height: touchdown at sqrt(2 g h) = 1.98 m/s
DROP_SECONDS = 10.0


@functools.cache
def drop(name, contact_model):
    model = body(name)
    q0 = [0, 0, rest_height(name) + DROP_HEIGHT, 0, 0, 0, 1]
    return simulate(model, contact.StepParams(dt=DT), q0, np.zeros(6), contact_model, DROP_SECONDS)


def at(seconds):
    return int(round(seconds / DT)) - 1


@pytest.mark.parametrize("contact_model", CONTACT_MODELS)
@pytest.mark.parametrize("name", ["sphere", "box"])
def test_drop_comes_to_rest_without_bounce(name, contact_model):
    """Inelastic contact: once the first impulse acts, the body never moves up again.

    Hard and smooth enforce `u_n+ >= 0` (no restitution), so after touchdown `v_z <= 0` at
    every step; 1e-9 m/s allows round-off. The penalty spring must first compress (4 mm for the
    sphere) and then extends back to its static deflection while the overdamped damper removes
    the energy (critical damping 2 sqrt(k m) = 283 N s/m < 400): it moves up, but never above
    its final resting height (1e-9 m: round-off).
    """
    states, infos = drop(name, contact_model)
    touch = first_contact(infos)
    z, vz = states.q[touch:, 2], states.v[touch:, 2]
    if contact_model in MOREAU:
        assert vz.max() <= 1e-9
    else:
        assert z.max() <= z[-1] + 1e-9
    # at rest at the end: speeds below 1e-4 m/s (smooth still creeps at 3e-5 m/s, see below)
    assert np.abs(states.v[-1]).max() < 1e-4


@pytest.mark.parametrize("contact_model", CONTACT_MODELS)
@pytest.mark.parametrize("name", ["sphere", "box"])
def test_drop_rests_with_small_penetration_and_no_drift(name, contact_model):
    """After 1 s of settling, the body rests with < 1 mm penetration and no drift up to 10 s.

    hard: the speculative touchdown lands on the surface (gap 0 to 1e-9 m) and a resting contact
        keeps `u_n = 0` exactly, so the height does not change (1e-9 m over 9 s; measured
        2.4e-11 m for the box, whose four coupled contacts are solved to 1e-12 m/s).
    penalty: the static deflection of the springs, `m g / (n k)` with n = 1 (sphere) or 4
        (box face) contacts: 0.49 mm and 0.12 mm; rtol 1e-6 (the damper has long died out).
    smooth: by design the activation `w = sigmoid(bias - kappa gap) < 1` engages 2.7 mm above
        the surface, so the body hovers ~1.2 mm above it at 1 s and creeps down: each step only
        `w` of the stopping impulse acts, so `v = -(1 - w) g dt`, i.e. with `1 - w ~ exp(kappa
        gap - bias)`: `exp(-kappa gap(t)) = exp(-kappa gap(t0)) + kappa g dt exp(-bias) (t - t0)`
        (logarithmic creep; it reaches the surface after ~50 s). The sphere follows this law
        within 2 % (measured 0.013 %); the box's four coupled contacts creep a little slower
        (0.69 mm over 9 s measured, bound 1 mm); neither penetrates within 10 s.
    Horizontal drift: none for hard/penalty (1e-9 m); smooth: the Gauss-Seidel order breaks the
    box's symmetry slightly, measured 6e-5 m over 10 s, bound 2e-4 m.
    """
    states, infos = drop(name, contact_model)
    model = body(name)
    rest = rest_height(name)
    settled = slice(at(1.0), None)
    height = states.q[settled, 2] - rest  # > 0 above the surface
    penetration = -infos.gap[settled].min()
    assert penetration < 1e-3
    if contact_model == "hard":
        np.testing.assert_allclose(height, 0.0, atol=1e-9)
        assert abs(height[-1] - height[0]) < 1e-9
    elif contact_model == "penalty":
        n = 1 if name == "sphere" else 4
        deflection = mass_of(model) * G / (n * contact.StepParams().stiffness)
        np.testing.assert_allclose(-height, deflection, rtol=1e-6)
    else:
        assert np.all(height > 0.0)
        creep = height[0] - height[-1]
        assert 0.0 < creep < 1e-3
        if name == "sphere":
            p = contact.StepParams()
            t = DT * np.arange(len(height))
            predicted = (
                -np.log(np.exp(-p.kappa * height[0]) + p.kappa * G * DT * np.exp(-p.bias) * t)
                / p.kappa
            )
            np.testing.assert_allclose(height[-1], predicted[-1], rtol=0.02)
            np.testing.assert_allclose(height, predicted, rtol=0.02)
    horizontal = np.abs(states.q[:, :2] - states.q[0, :2]).max()
    assert horizontal < (2e-4 if contact_model == "smooth" else 1e-9)


# ----------------------------------------------------------------------------- friction
@pytest.mark.parametrize("contact_model", CONTACT_MODELS)
@pytest.mark.parametrize("mu, v0", [(0.5, 1.0), (0.3, 2.0)])
def test_sliding_block_stops_after_v0_squared_over_2_mu_g(contact_model, mu, v0):
    """A box sliding on its face decelerates at mu g and stops after `v0^2 / (2 mu g)`.

    The four face corners carry `m g` in total whatever their share, so the friction is
    `mu m g`. Tolerance 2 % (issue 3); measured: hard 6e-6 and 1.5e-6, smooth 1.5e-5 and 4e-6
    (the touching weight sigmoid(8) = 0.99966 barely weakens friction), penalty -0.92 % and
    -0.29 %: semi-implicit Euler `x+ = x + dt v+` lags by `v0 dt / 2`, i.e. `-mu g dt / v0` =
    -0.98 % and -0.29 % (the viscous tail below the cone gives back a little).

    It slides flat: the friction's pitching moment `mu m g h / 2` only shifts load from the
    rear corners to the front ones. Rigid contacts barely tilt (measured: hard 1.7e-6 rad,
    smooth 9e-5 rad); the penalty springs (k_e per corner, height h = 0.05 m, corners L = 0.2 m
    apart) tilt by `mu m g h / (2 k_e L^2)` = 1.5e-4 rad (mu = 0.5, measured 1.53e-4) and sink
    by the static deflection `m g / (4 k_e)` = 0.12 mm + 0.015 mm (half the tilt): measured
    min gap -0.14 mm (hard -1e-7 m, smooth -0.016 mm). Bounds: tilt < 1e-3 rad and min corner
    gap > -0.2 mm. (The penalty model used to clip a jointly solved viscous impulse to each cone
    afterwards: the box then pitched by 0.07-0.24 rad and one end sank 10-25 mm.)
    """
    model = body("box")
    params = contact.StepParams(dt=DT, terrain=contact.flat(friction=mu))
    q0 = [0, 0, rest_height("box"), 0, 0, 0, 1]
    states, infos = simulate(model, params, q0, [v0, 0, 0, 0, 0, 0], contact_model, 1.0)
    distance = v0**2 / (2 * mu * G)  # stops within 0.68 s of the 1 s simulated
    np.testing.assert_allclose(states.q[-1, 0], distance, rtol=0.02)
    assert np.abs(states.v[-1]).max() < 1e-4  # stopped (smooth creeps at 1e-5 m/s)
    assert abs(states.q[-1, 1]) < 1e-4  # went straight
    tilt = Rotation.from_quat(states.q[:, 3:7]).magnitude()
    assert tilt.max() < 1e-3
    assert infos.gap.min() > -2e-4


MU_INCLINE = 0.5
STICK_ANGLE = np.deg2rad(20.0)  # tan = 0.36 < mu
SLIP_ANGLE = np.deg2rad(35.0)  # tan = 0.70 > mu


@functools.cache
def on_incline(angle, contact_model, seconds=2.0):
    """Box released at rest on `incline(angle)`: `(s, states, infos)`, s the displacement along
    the slope (positive uphill, +x rising)."""
    model = body("box")
    params = contact.StepParams(dt=DT, terrain=contact.incline(angle, friction=MU_INCLINE))
    normal = np.array([-np.sin(angle), 0.0, np.cos(angle)])
    q0 = np.concatenate([rest_height("box") * normal, quaternion_y(-angle)])
    states, infos = simulate(model, params, q0, np.zeros(6), contact_model, seconds)
    uphill = np.array([np.cos(angle), 0.0, np.sin(angle)])
    return (states.q[:, :3] - q0[:3]) @ uphill, states, infos


@pytest.mark.parametrize("contact_model", CONTACT_MODELS)
def test_block_sticks_on_incline_when_tan_theta_below_mu(contact_model):
    """tan(20 deg) = 0.36 < mu = 0.5: static friction holds the box (2 s).

    hard: exact Coulomb sticking, displacement 0 (1e-9 m; measured 4e-13 m).
    smooth: the static friction impulse is also scaled by `w = sigmoid(bias - kappa gap) < 1`,
        so the box creeps like it does into the ground: measured 1.8e-6 m in 2 s, bound 1e-5 m.
    penalty: viscous friction below the cone: the box slides at the speed where the four
        corners' viscous forces carry the slope's pull, `m g sin(theta) / (4 k_f)` = 0.42 mm/s
        (analytic; rtol 2 %, measured 5e-9), i.e. 0.84 mm in 2 s.
    """
    s, states, _ = on_incline(STICK_ANGLE, contact_model)
    if contact_model == "hard":
        assert np.abs(s).max() < 1e-9
    elif contact_model == "smooth":
        assert np.abs(s).max() < 1e-5
    else:
        creep = -mass_of(body("box")) * G * np.sin(STICK_ANGLE) / (4 * 2.0e3)
        assert contact.StepParams().friction_viscosity == 2.0e3
        np.testing.assert_allclose(states.v[-1, 0], creep, rtol=0.02)
        assert np.abs(s).max() < 1e-3


@pytest.mark.parametrize("contact_model", CONTACT_MODELS)
def test_block_slides_on_incline_at_g_sin_minus_mu_cos(contact_model):
    """tan(35 deg) = 0.70 > mu = 0.5: the box slides down at `g (sin(theta) - mu cos(theta))`
    = 1.609 m/s^2. Measured from the trajectory: least-squares slope of the along-slope
    velocity over 0.2-2 s (base-frame x is along the slope). Tolerance 2 % (issue 3); measured
    error < 1e-4 for hard and smooth, 1e-8 for penalty. The box must also stay on the slope
    (normal offset from the first step below 0.1 mm: it neither sinks nor hops). Penalty: the
    springs settle at their static deflection `m g cos(theta) / (4 k_e)` = 0.100 mm below the
    released box (rtol 1e-3, measured 2e-5), 0.068 mm of it after the first step. (Before the
    penalty friction was made consistent: 1.31 m/s^2 and the box hopped 7.8 cm off the slope.)
    """
    s, states, _ = on_incline(SLIP_ANGLE, contact_model)
    t = DT * np.arange(1, len(s) + 1)
    after = t > 0.2
    acceleration = np.polyfit(t[after], states.v[after, 0], 1)[0]
    expected = -G * (np.sin(SLIP_ANGLE) - MU_INCLINE * np.cos(SLIP_ANGLE))
    np.testing.assert_allclose(acceleration, expected, rtol=0.02)
    np.testing.assert_allclose(2 * np.polyfit(t[after], s[after], 2)[0], expected, rtol=0.02)
    normal = np.array([-np.sin(SLIP_ANGLE), 0.0, np.cos(SLIP_ANGLE)])
    offset = (states.q[:, :3] - states.q[0, :3]) @ normal
    assert np.abs(offset).max() < 1e-4
    if contact_model == "penalty":
        deflection = mass_of(body("box")) * G * np.cos(SLIP_ANGLE) / (4 * 2.0e4)
        assert contact.StepParams().stiffness == 2.0e4
        sunk = rest_height("box") - states.q[-1, :3] @ normal
        np.testing.assert_allclose(sunk, deflection, rtol=1e-3)


# ----------------------------------------------------------------------------- cone and energy
MU_ROUGH = 0.8


@functools.cache
def tumbling_box(contact_model, seed):
    """The box thrown from 0.3 m with a random orientation and random velocities (spin up to
    a few rad/s), 3 s: it hits the ground on corners and edges, slides, rolls over, rests."""
    rng = np.random.default_rng(seed)
    q0 = np.concatenate([[0.0, 0.0, 0.3], Rotation.random(random_state=seed).as_quat()])
    v0 = np.concatenate([rng.normal(size=3) * 0.5, rng.normal(size=3) * 3.0])
    params = contact.StepParams(dt=DT, terrain=contact.flat(friction=MU_ROUGH))
    states, infos = simulate(body("box"), params, q0, v0, contact_model, 3.0)
    return q0, v0, states, infos


def assert_impulses_in_cone(impulse, mu):
    """`p_n >= 0` and `|p_t| <= mu p_n` at every step and contact; 1e-12 N s of round-off (the
    impulses are ~1e-2 N s, the projection scales p_t to exactly mu p_n)."""
    p_t = np.linalg.norm(impulse[..., :2], axis=-1)
    p_n = impulse[..., 2]
    assert p_n.min() >= 0.0
    assert np.all(p_t <= mu * p_n + 1e-12)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("contact_model", CONTACT_MODELS)
def test_tumbling_box_impulses_stay_in_friction_cone(contact_model, seed):
    _, _, _, infos = tumbling_box(contact_model, seed)
    assert np.any(infos.impulse[..., 2] > 0.0)
    assert_impulses_in_cone(infos.impulse, MU_ROUGH)


def coriolis_energy_gain(model, v, dt):
    """Energy the explicit Coriolis term adds per step in free flight [J], `(T,)`.

    The step evaluates the bias `h(q_mid, v)` at the *start* velocity. For a free body, in
    base-frame coordinates `u` (linear) and `w` (angular) with inertia `I`, that is explicit
    Euler on `u' = -w x u`, `w' = -I^-1 (w x I w)`, whose rotations are not norm-preserving:
    `|u - dt w x u|^2 = |u|^2 + dt^2 |w x u|^2`, so per step
        dE = dt^2 / 2 (m |w x u|^2 + (w x I w)^T I^-1 (w x I w))    (second order in dt).
    """
    inertia = np.asarray(dynamics.mass_matrix(model, jnp.asarray(model.q_standing)))[3:, 3:]
    u, w = v[:, :3], v[:, 3:]
    a, b = np.cross(w, u), np.cross(w, w @ inertia)
    rotational = np.einsum("ni,ij,nj->n", b, np.linalg.inv(inertia), b)
    return 0.5 * dt**2 * (mass_of(model) * np.sum(a * a, axis=1) + rotational)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("contact_model", CONTACT_MODELS)
def test_tumbling_box_energy_never_increases(contact_model, seed):
    """Without actuation, `E = 0.5 v^T M v - m g . com` never increases, step by step.

    Contacts only dissipate (inelastic, maximally dissipative friction). The one source of
    energy is the scheme itself: the explicit Coriolis term adds `coriolis_energy_gain` per
    step (O(dt^2); measured dE / that bound has median 1.00 in free flight). Tolerance: each
    step's gain below 1.5 x that bound + 1e-9 J. At these spins (a few rad/s) it is < 1e-4 J
    a step against E0 ~ 1 J; note that a fast spin makes it large (at 17 rad/s a flying box
    gains ~60 % of its translational kinetic energy per second at dt = 2 ms).
    Penalty: the stored spring energy `sum k max(-gap, 0)^2 / 2` must be counted; the spring
    is explicit (symplectic Euler), which only conserves a modified energy, so for penalty the
    check is that the total energy never exceeds its initial value (1e-6 J).
    And over the whole throw: the box ends at rest with less energy than it started with.
    """
    model = body("box")
    q0, v0, states, infos = tumbling_box(contact_model, seed)
    q = np.concatenate([q0[None], states.q])
    v = np.concatenate([v0[None], states.v])
    energy = np.asarray(energy_function(model)(jnp.asarray(q), jnp.asarray(v)))
    gain = np.diff(energy)
    if contact_model in MOREAU:
        assert np.all(gain <= 1.5 * coriolis_energy_gain(model, v[:-1], DT) + 1e-9)
    else:
        penetration = np.maximum(-infos.gap, 0.0)
        stored = 0.5 * contact.StepParams().stiffness * np.sum(penetration**2, axis=1)
        total = energy[1:] + stored
        assert total.max() <= energy[0] + 1e-6
    assert energy[-1] < energy[0]
    # at rest on one of its faces: E = m g (half a side of 0.2 x 0.1 x 0.05 m), within
    # 1.5e-2 J = m g x 1.5 mm (smooth still hovers ~0.8 mm above the face after 3 s, 8 mJ)
    resting = mass_of(model) * G * np.array([0.1, 0.05, 0.025])
    assert np.abs(energy[-1] - resting).min() < 1.5e-2


# ----------------------------------------------------------------------------- quadrupeds
QUADRUPEDS = ("solo12", "go2")  # anymal_c: another ~15 s of compilation, left out
SLOPE = np.deg2rad(10.0)
MU_FEET = 0.8
SETTLE = 2.0  # [s] the PD legs sag to their loaded pose within ~1 s


def standing_on(model, angle, lift=0.0):
    """Standing pose rotated by the slope and placed with its feet on `incline(angle)`,
    `lift` [m] higher along the normal."""
    q0 = np.array(model.q_standing, dtype=float)
    height = q0[2] + lift  # `q_standing` puts the lowest foot on z = 0
    q0[:3] = [-np.sin(angle) * height, 0.0, np.cos(angle) * height]
    q0[3:7] = quaternion_y(-angle)
    return q0


@functools.cache
def quadruped(name, scenario, contact_model="hard"):
    """`(states, infos)` of the robot under `standing_controller` (default PD gains):
    "flat" / "slope": 10 s standing; "drop": released 0.2 m above flat ground, 5 s."""
    model = robot(name)
    angle = SLOPE if scenario == "slope" else 0.0
    params = contact.StepParams(dt=DT, terrain=contact.incline(angle, friction=MU_FEET))
    lift = 0.2 if scenario == "drop" else 0.0
    seconds = 5.0 if scenario == "drop" else 10.0
    q0 = standing_on(model, angle, lift)
    return simulate(model, params, q0, np.zeros(model.nv), contact_model, seconds, actuated=True)


@pytest.mark.parametrize("contact_model", MOREAU)
@pytest.mark.parametrize("scenario", ["flat", "slope"])
@pytest.mark.parametrize("name", QUADRUPEDS)
def test_quadruped_stands_without_sliding(name, scenario, contact_model):
    """Joint PD on the default pose holds the robot for 10 s on flat ground and on a 10 degree
    slope (mu = 0.8 > tan 10 deg = 0.18), hard and smooth contact.

    After `SETTLE` s: every foot stays in contact, foot contact points move < 2 mm (static
    friction: ideally 0; measured hard: solo12 0.0005 / 0.07 mm, go2 0.07 / 0.30 mm, flat /
    slope; smooth 0.3-0.6 mm, mostly the feet creeping into the ground as in the drop test), the
    base height along the normal stays in a 2 mm band (measured < 0.6 mm) and above 80 % of the
    standing height (the legs did not fold).
    """
    model = robot(name)
    states, infos = quadruped(name, scenario, contact_model)
    settled = slice(at(SETTLE), None)
    assert np.all(infos.active[settled] > 0.99)
    assert np.all(infos.impulse[settled, :, 2] > 0.0)
    drift = np.linalg.norm(infos.point[settled] - infos.point[at(SETTLE)], axis=-1)
    assert drift.max() < 2e-3
    angle = SLOPE if scenario == "slope" else 0.0
    normal = np.array([-np.sin(angle), 0.0, np.cos(angle)])
    height = states.q[settled, :3] @ normal
    assert height.max() - height.min() < 2e-3
    assert height.min() > 0.8 * float(model.q_standing[2])
    assert_impulses_in_cone(infos.impulse, MU_FEET)


@pytest.mark.parametrize("contact_model", MOREAU)
@pytest.mark.parametrize("name", QUADRUPEDS)
def test_quadruped_dropped_settles_on_four_feet(name, contact_model):
    """Released 0.2 m above the ground in the standing pose, the robot lands on its feet and
    settles: all four feet in contact over the last 3 s, every joint and base velocity below
    1e-2 (m/s, rad/s) after 5 s (measured: solo12 1e-7 hard, 1e-4 smooth; go2 2e-3: its base
    sways fore and aft at ~1 Hz after the landing, damped only by Kd = 2, still 1.4e-2 at 3 s),
    base above 80 % of the standing height; impulses in the cone throughout (impact included)."""
    model = robot(name)
    states, infos = quadruped(name, "drop", contact_model)
    last = slice(at(2.0), None)
    assert np.all(infos.impulse[last, :, 2] > 0.0)
    assert np.abs(states.v[-1]).max() < 1e-2
    assert states.q[-1, 2] > 0.8 * float(model.q_standing[2])
    assert_impulses_in_cone(infos.impulse, MU_FEET)
