"""Gradients of the contact time-stepper (issue 3): `hard`, `smooth` and `penalty`.

1. Transformations: `step` is jit-able and vmap-able over one batch mixing states, friction,
   kappa, stiffness, damping, `dt` and body mass; forward mode (`jacfwd`) of a step and reverse
   mode (`value_and_grad`) of a 200-step rollout with impacts, sliding and tumbling give finite
   derivatives with respect to the state and every parameter leaf.
2. Correctness: away from contact switches both agree with central finite differences: the
   step Jacobian (state perturbed on the manifold with `dynamics.integrate`, velocity and
   parameters; all three models, the hard one in a fixed mode), the 200-step gradient (smooth
   and penalty) and, marked slow, `check_grads` of a Solo12 step including the joint torques.
3. Use: a one-parameter optimisation that needs a gradient *before* contact is made converges
   with `smooth`, while `hard` cannot move (its gradient is exactly zero there).

Compile time dominates on a small CPU machine (a reverse-mode step of an 8-corner box takes
~10 s to compile under load, a 200-step gradient of Solo12 ~20-40 s, against milliseconds to
run), so each compiled function is built once and shared (module fixtures), XLA's backend
optimisation is off (`FAST_COMPILE`: about 2x quicker to compile, run times stay in
milliseconds) and the robot variants are marked slow.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import dynamics
from contact import CONTACT_MODELS, Plane, StepParams, compute_foot_contacts, simulate, step
from dynamics import State, free_body
from dynamics.actuator import default_gains, pd_torque

FAST_COMPILE = {"xla_backend_optimization_level": 0}
jit = functools.partial(jax.jit, compiler_options=FAST_COMPILE)

BOX_SIZE = (0.2, 0.1, 0.05)
BOX_HALF_HEIGHT = BOX_SIZE[2] / 2
NO_TORQUE = jnp.zeros(0)  # a free body has no actuated joint
NUM_STEPS = 200


@pytest.fixture(scope="module")
def box():
    return free_body.box(mass=1.0, size=BOX_SIZE)


@pytest.fixture(scope="module")
def params():
    return StepParams()


@pytest.fixture(scope="module", params=CONTACT_MODELS)
def contact(request):
    return request.param


def _box_state(model, z, rotation=(0.0, 0.0, 0.0), v=(0.0,) * 6):
    """Box with its centre at height `z`, rotated by the rotation vector `rotation`."""
    upright = jnp.array([0.0, 0.0, z, 0.0, 0.0, 0.0, 1.0])
    q = dynamics.integrate(model, upright, jnp.concatenate([jnp.zeros(3), jnp.array(rotation)]))
    return State(q, jnp.array(v, dtype=float))


def _with_friction(params, mu):
    t = params.terrain
    return params.replace(terrain=Plane(normal=t.normal, height=t.height, friction=mu))


def _scaled(params, model, log_multipliers):
    """Parameters and model with (mu, kappa, stiffness, damping, k_f, dt, mass) multiplied by
    `exp(log_multipliers (7,))`: dimensionless coordinates for finite differences."""
    m = jnp.exp(log_multipliers)
    p = _with_friction(params, params.terrain.friction * m[0]).replace(
        kappa=params.kappa * m[1],
        stiffness=params.stiffness * m[2],
        damping=params.damping * m[3],
        friction_viscosity=params.friction_viscosity * m[4],
        dt=params.dt * m[5],
    )
    return p, model.replace(body_mass=model.body_mass * m[6])


# ------------------------------------------------------ 1 + 2. one step: vmap, jacfwd and FD
def _fixed_mode_box(box, params, contact):
    """A box 1 mm into the ground, sliding (0.5 m/s) and spinning (1 rad/s) on its four bottom
    corners: every bottom corner stays penetrating and sliding, every top corner stays 4 cm
    above the ground, for any perturbation below ~1e-4, so `step` is smooth there for all three
    models (the hard model's kinks are at gap = 0 or margin, `|u_t| = 0` and `p_n = 0`).

    Returns `(f, x0)`: `f(x) -> [q_next (-) q_ref, v_next] (12,)` with
    `x = [dq (6), v (6), log-multipliers of (mu, kappa, stiffness, damping, k_f, dt, mass) (7)]`
    and the box state `q = q0 (+) dq`.
    """
    s0 = _box_state(box, BOX_HALF_HEIGHT - 1e-3, v=(0.5, 0.2, 0.0, 0.0, 0.0, 1.0))
    q_ref = step(box, params, s0, NO_TORQUE, contact=contact)[0].q

    def f(x):
        p, model = _scaled(params, box, x[12:])
        s = State(dynamics.integrate(box, s0.q, x[:6]), x[6:12])
        s_next, _ = step(model, p, s, NO_TORQUE, contact=contact)
        return jnp.concatenate([dynamics.difference(box, q_ref, s_next.q), s_next.v])

    return f, jnp.concatenate([jnp.zeros(6), s0.v, jnp.zeros(7)])


@pytest.mark.parametrize(
    "contact",
    # hard's step shares smooth's batching and forward mode; its Jacobian against central
    # differences is tests/contact/test_implicit_derivatives.py's (fast): ~20 s, in slow
    [pytest.param("hard", marks=pytest.mark.slow), "smooth", "penalty"],
    indirect=True,
)
def test_step_vmap_jacfwd_and_finite_differences(box, params, contact):
    """One compiled `vmap` of a step over a batch that mixes states, parameters and masses, its
    forward-mode Jacobian, and central differences.

    vmap: the batch holds the 2n central-difference points *and* four far-apart elements
    (resting, falling tilted, fast sliding on a light box, heavy box pushed in with other
    friction, kappa, stiffness, `dt`); each far element equals the unbatched `jit(f)` on it.

    FD tolerance. Central differences err by `h^2 |f'''| / 6 + eps_mach |f| / h`. The shortest
    length scale of the step is the smooth activation width `1/kappa = 3e-4 m` (penalty and
    hard: the 1 mm penetration), so with `h = 1e-6` the truncation error is `~(h kappa)^2 / 6
    ~ 2e-6` relative and the round-off `eps_mach / h ~ 2e-10`; the balance `h ~ L
    eps_mach^(1/3)` would be smaller, but the fixed solver sweeps add iteration round-off, so
    we keep `h = 1e-6` and assert `|J_ad - J_fd| <= 1e-5 max|J|` entrywise.
    """
    f, x0 = _fixed_mode_box(box, params, contact)
    n = x0.shape[0]
    far = jnp.stack(
        [
            jnp.zeros(n).at[6:12].set(0.0),  # resting (dq = 0 is the 1 mm penetration)
            jnp.zeros(n).at[2].set(0.03).at[3].set(0.3).at[8].set(-1.0).at[17].set(-0.3),
            jnp.zeros(n).at[6].set(2.0).at[18].set(np.log(0.5)).at[12].set(np.log(0.4)),
            jnp.concatenate(
                [
                    jnp.zeros(6),
                    jnp.array([0, 0.3, -0.2, 0, 0, 0.0]),
                    jnp.log(jnp.array([1.2, 0.1, 5.0, 2.0, 0.5, 0.5, 4.0])),
                ]
            ),
        ]
    )
    identity = jnp.eye(n)
    h = 1e-6
    points = jnp.concatenate([x0[None, :] + h * identity, x0[None, :] - h * identity, far])
    values = jit(jax.vmap(f))(points)
    assert np.all(np.isfinite(np.asarray(values)))
    single = jit(f)
    for i in range(far.shape[0]):
        np.testing.assert_allclose(values[2 * n + i], single(far[i]), rtol=1e-12, atol=1e-12)

    j_fd = np.asarray((values[:n] - values[n : 2 * n]) / (2.0 * h)).T
    j_fwd = np.asarray(jit(jax.jacfwd(f))(x0))
    assert np.all(np.isfinite(j_fwd))
    scale = np.max(np.abs(j_fwd))
    err = np.abs(j_fwd - j_fd)
    assert err.max() <= 1e-5 * scale, (
        contact,
        err.max(),
        scale,
        np.unravel_index(np.argmax(err), err.shape),
    )
    # friction acts (sliding); each model's own contact parameter matters, the others do not
    d_friction, d_kappa, d_stiffness = (np.abs(j_fwd[:, 12 + i]).max() for i in range(3))
    assert d_friction > 1e-3
    assert (d_kappa > 0.0) == (contact == "smooth")
    assert (d_stiffness > 0.0) == (contact == "penalty")


# ------------------------------------------------------------- 1 + 2. through 200 steps
@pytest.fixture(scope="module")
def rollout_value_and_grad(contact):
    """One compiled 200-step reverse-mode `value_and_grad` per contact model, shared below.

    `f(dq (6,), v0 (6,), params, model, q0 (7,), target (13,), w_lin (13,), w_quad (13,))`
    rolls the box out from `State(q0 (+) dq, v0)` and returns `((loss, (x_T, contacts)),
    (d/d dq, d/d v0, d/d params))` with `x_T = [q_T, v_T] (13,)`,
    `loss = w_lin . x_T + w_quad . (x_T - target)^2`, `contacts` the summed activation weights.
    The model (gravity, mass) and the loss weights are traced, so the tumbling-box and the
    push problems share one compilation.
    """

    def loss(dq, v0, p, model, q0, target, w_lin, w_quad):
        s = State(dynamics.integrate(model, q0, dq), v0)
        final, (_, infos) = simulate(model, p, s, lambda _: NO_TORQUE, NUM_STEPS, contact=contact)
        x = jnp.concatenate([final.q, final.v])
        value = jnp.vdot(w_lin, x) + jnp.vdot(w_quad, (x - target) ** 2)
        return value, (x, jnp.sum(infos.active))

    return jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))


def test_gradients_through_200_steps(box, params, contact, rollout_value_and_grad):
    """A box thrown tilted and spinning onto the ground: corner impacts, edges, sliding (and
    bouncing for the penalty model) in 200 steps (0.4 s); loss = final height + sum of squared
    velocities. Reverse-mode gradients with respect to the initial state (on the manifold) and
    every parameter leaf are finite; friction matters for all models, kappa only for smooth,
    stiffness only for penalty. For smooth and penalty the directional derivative (initial
    velocity, friction, kappa, stiffness, damping) matches central differences of the 200-step
    loss (h = 1e-6, rtol 1e-4: impacts make the rollout stiff). The hard model switches contact
    modes inside any FD interval along this trajectory, so it is only checked for finiteness.
    """
    s0 = _box_state(box, 0.07, rotation=(0.4, -0.3, 0.2), v=(1.0, 0.3, -0.5, 2.0, -1.0, 3.0))
    weights = (jnp.zeros(13), jnp.zeros(13).at[2].set(1.0), jnp.zeros(13).at[7:].set(1.0))
    zero_p = jax.tree.map(jnp.zeros_like, params)

    def run(dv, dp):
        p = jax.tree.map(lambda a, d: a + d, params, dp)
        return rollout_value_and_grad(jnp.zeros(6), s0.v + dv, p, box, s0.q, *weights)

    (value, (_, contacts_made)), grads = run(jnp.zeros(6), zero_p)
    assert float(contacts_made) > 100  # several corners in contact for much of the rollout
    assert all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(grads)), grads
    g_dq, g_v, g_params = grads
    assert np.linalg.norm(g_v) > 0.0 and np.linalg.norm(g_dq) > 0.0
    assert abs(float(g_params.terrain.friction)) > 0.0
    assert (float(g_params.kappa) != 0.0) == (contact == "smooth")
    assert (float(g_params.stiffness) != 0.0) == (contact == "penalty")
    if contact == "hard":
        return

    direction_v = jnp.linspace(-1.0, 1.0, 6)
    direction_p = _with_friction(zero_p, jnp.asarray(0.1)).replace(
        kappa=jnp.asarray(300.0), stiffness=jnp.asarray(2e3), damping=jnp.asarray(40.0)
    )
    d_rev = float(jnp.vdot(g_v, direction_v)) + sum(
        float(jnp.vdot(g, d))
        for g, d in zip(jax.tree.leaves(g_params), jax.tree.leaves(direction_p))
    )
    h = 1e-6
    ends = [
        float(run(s * h * direction_v, jax.tree.map(lambda d, s=s: s * h * d, direction_p))[0][0])
        for s in (1.0, -1.0)
    ]
    d_fd = (ends[0] - ends[1]) / (2 * h)
    np.testing.assert_allclose(d_rev, d_fd, rtol=1e-4)


# ---------------------------------------------------------- 3. optimisation through contact
PUSH_GAP = 0.01  # m, initial gap of the bottom face
PUSH_VX0 = 1.0  # m/s
PUSH_TARGET_VX = 0.9  # m/s


def _adam(value_and_grad, x, iterations, lr, decay, beta1=0.0, beta2=0.999):
    """A few lines of Adam (optax is not a dependency), learning rate `lr decay^k`.

    `beta1 = 0` (no momentum, i.e. bias-corrected RMSProp) by default: here the gradient grows
    by ~100x at touchdown, and momentum gathered on the approach overshoots the target (with
    the usual 0.9 the run below stalls 0.015 m/s past it)."""
    m = v = jnp.zeros_like(x)
    history = []
    for k in range(1, iterations + 1):
        value, g = value_and_grad(x)
        history.append((float(x), float(value), float(g)))
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat, v_hat = m / (1 - beta1**k), v / (1 - beta2**k)
        x = x - lr * decay ** (k - 1) * m_hat / (jnp.sqrt(v_hat) + 1e-30)
    return x, history


@pytest.mark.parametrize("contact", ["hard", "smooth"], indirect=True)
def test_push_into_contact_needs_smooth_gradients(box, params, contact, rollout_value_and_grad):
    """Zero gravity: a box drifts 1 cm above a plate at `vx = 1 m/s`; choose its downward
    velocity `vz0` so that after 0.4 s (200 steps) it moves at 0.9 m/s. The only way to slow
    it is the friction impulse of hitting the plate, `mu * |vz0|` per unit mass (inelastic
    impact, sliding throughout), so the answer is `vz0 ~ -0.1 / mu = -0.125 m/s`.

    The initial guess `vz0 = -0.01 m/s` drifts only 4 mm in the horizon and never touches.
    Hard model: the activation `[gap < margin]` is piecewise constant and the speculative
    impulse is exactly zero while the gap stays open, so `d vx_T / d vz0 = 0` exactly and Adam
    cannot move. Smooth model: the approaching corners 6-10 mm away already carry impulses
    weighted by `sigmoid(bias - kappa gap) ~ 1e-10..1e-5`; tiny, but the derivative has the
    right sign (faster approach, more friction), Adam's normalised steps follow it into
    contact, where the gradient becomes O(1) and the target is met. (At `vz0 = 0` exactly both
    gradients vanish: the normal impulse is zero, not just small, without an approach
    velocity.) This is the paper's case for the smoothed model: gradients before touchdown.
    """
    weightless = box.replace(gravity=jnp.zeros(3))
    s0 = _box_state(box, BOX_HALF_HEIGHT + PUSH_GAP)
    target = jnp.zeros(13).at[7].set(PUSH_TARGET_VX)
    quad = jnp.zeros(13).at[7].set(1.0)

    def value_and_grad(vz0):
        v0 = jnp.zeros(6).at[0].set(PUSH_VX0).at[2].set(vz0)
        (value, (x, _)), (_, g_v, _) = rollout_value_and_grad(
            jnp.zeros(6), v0, params, weightless, s0.q, target, jnp.zeros(13), quad
        )
        return value, g_v[2]

    vz0, history = _adam(value_and_grad, jnp.asarray(-0.01), iterations=20, lr=0.05, decay=0.9)
    error = float(jnp.sqrt(value_and_grad(vz0)[0]))
    if contact == "hard":
        assert all(g == 0.0 for _, _, g in history)  # no information at all
        assert float(vz0) == -0.01
        np.testing.assert_allclose(error, PUSH_VX0 - PUSH_TARGET_VX, rtol=1e-6)
    else:
        assert 0.0 < history[0][2] < 1e-3  # tiny but informative (d loss / d vz0 > 0)
        assert error < 2e-3, (error, float(vz0), history[-5:])
        mu = float(params.terrain.friction)
        np.testing.assert_allclose(float(vz0), -(PUSH_VX0 - PUSH_TARGET_VX) / mu, rtol=0.25)


# ---------------------------------------------------------------- robots (slow to compile)
@pytest.fixture(scope="module")
def solo12():
    return dynamics.load_robot("solo12")


def _standing_configuration(model, params, gap):
    """Standing pose shifted vertically so that the lowest foot has gap `gap`."""
    q = jnp.asarray(model.q_standing)
    gaps = compute_foot_contacts(model, params.terrain, q).gap
    return q.at[2].add(gap - jnp.min(gaps))


@pytest.mark.slow
@pytest.mark.parametrize("contact", CONTACT_MODELS, indirect=True)
def test_robot_pd_drop_gradients_finite(solo12, params, contact):
    """Solo12 dropped from 5 cm under joint PD, 200 steps (0.4 s: touchdown and settling);
    loss = final base height + sum of squared velocities. Gradients with respect to a joint
    target offset (12,) and every parameter leaf are finite, the offset one nonzero."""
    model = solo12
    kp, kd = default_gains(model)
    q_target = jnp.asarray(model.q_standing)[7:]
    s0 = State(_standing_configuration(model, params, 0.05), jnp.zeros(model.nv))

    def loss(offset, p):
        def controller(s):
            return pd_torque(model, s, q_target + offset, kp, kd)

        final, (_, infos) = simulate(model, p, s0, controller, NUM_STEPS, contact=contact)
        return final.q[2] + jnp.sum(final.v**2), jnp.sum(infos.active)

    (value, active), (g_offset, g_params) = jit(
        jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)
    )(jnp.zeros(model.nu), params)
    assert float(active) > 200  # the feet are down for most of the rollout
    assert np.all(np.isfinite(np.asarray(g_offset))) and np.linalg.norm(g_offset) > 0.0
    assert all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(g_params))


@pytest.mark.slow
@pytest.mark.parametrize("contact", ["smooth", "penalty"], indirect=True)
def test_robot_step_check_grads(solo12, params, contact):
    """`check_grads` (fwd and rev, random directions) of one Solo12 step standing on four feet
    1 mm into the ground (no switch within the FD step) with respect to the configuration on the
    manifold, the velocity, the joint torques and log-parameters. FD step 1e-6, tolerance 1e-4
    (error budget as in the box test; directional derivatives here are O(10-100))."""
    model = solo12
    q0 = _standing_configuration(model, params, -1e-3)
    kp, kd = default_gains(model)
    crouch = jnp.asarray(model.q_standing)[7:] + 0.1
    tau0 = pd_torque(model, State(q0, jnp.zeros(model.nv)), crouch, kp, kd)
    v0 = 0.01 * jnp.sin(jnp.arange(model.nv, dtype=float))

    @jax.jit  # check_grads re-traces f inside jvp/vjp: compiler_options are top-level only
    def f(dq, v, tau, log_m):
        p, scaled_model = _scaled(params, model, log_m)
        s = State(dynamics.integrate(model, q0, dq), v)
        s_next, _ = step(scaled_model, p, s, tau, contact=contact)
        return jnp.concatenate([dynamics.difference(model, q0, s_next.q), s_next.v])

    args = (jnp.zeros(model.nv), v0, tau0, jnp.zeros(7))
    check_grads(f, args, order=1, modes=("fwd", "rev"), eps=1e-6, atol=1e-4, rtol=1e-4)
