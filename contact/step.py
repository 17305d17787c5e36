"""The time-stepper: `step(model, params, state, tau) -> (state, info)` for three contact models.

    contact="hard"     Moreau midpoint time-stepping, exact Coulomb disk, fixed prox sweeps.
    contact="smooth"   the paper's differentiable variant: sigmoid-weighted impulses.
    contact="penalty"  spring-damper normal force, regularised Coulomb friction (soft baseline).

Hard and smooth (Moreau midpoint, PAPER.md):

    q_m   = q (+) v dt/2
    M, h, J, gap   at q_m                        (CRBA, RNEA(v, 0), foot_contacts)
    v_f   = v + dt M^-1 (tau - h)                free velocity
    c     = J v_f,   G = J M^-1 J^T              free contact velocity, Delassus matrix
    p     = solve_impulses(G, c, mu, w)          fixed sweeps, exact Coulomb disk
    v+    = v_f + M^-1 J^T p
    q+    = q (+) dt (v + v+)/2

with activation weights `w_i = [gap_i < margin]` (hard) or
`w_i = sigmoid(-(kappa gap_i - bias)) [gap_i < max(margin, (bias + 30) / kappa)]` (smooth).
Inelastic: a contact's normal velocity after the step is `>= 0`, never bouncing. No position
correction (no Baumgarte term).

Hard contacts are speculative: for a separated contact (`gap > 0` at the midpoint) the normal
condition is `u_n+ >= -gap / dt` (adding `max(gap, 0) / dt` to the free normal velocity), so
a touchdown ends the step hovering at `gap / 2` with exactly the velocity that brings the next
midpoint onto the surface, where the paper's condition `u_n+ >= 0` stops it: the contact lands
without penetration (to rounding) and without bounce.
The authors' rule (`gap <= 0` at the midpoint, no speculation) leaves up to `1.5 |v_n| dt` of
penetration at each touchdown. Penetrating and resting contacts are treated exactly as in the
paper, so penetration never grows at rest (no drift).

Why the bias in the smooth weight: with the authors' `sigmoid(-kappa gap)`, a resting contact
carries only half its impulse at zero gap, so a body sinks at `(1 - w)/w * g dt` per step until
`w -> 1`, a creep into the ground that lasts for seconds at moderate `kappa`. Shifting the
activation by `bias / kappa` (2.7 mm at the defaults) lets the contact engage just before
touchdown, the smoothing the paper relies on, and keeps `kappa -> inf` equal to `hard`;
`bias = 0` reproduces the authors' weighting exactly.

Energy: the bias `h(q_mid, v)` takes the start velocity, so the velocity-dependent terms are
explicit and a free body gains energy, per step (base-frame velocities `u`, `w`, inertia `I`)

    dE = dt^2 / 2 (m |w x u|^2 + (w x I w)^T I^-1 (w x I w))     >= 0, second order in dt

(contacts only dissipate; `tests/contact/test_contact_physics.py` checks every step of a
tumbling box against it, and `benchmarks/energy_drift.py` measures the gain of a spinning box and
of a passive, tumbling Go2 against what its contacts remove). The gain grows with the spin rate and
with `dt`. Not corrected: evaluating `h` at the predicted midpoint velocity `(v + v_free) / 2`
would remove most of it, at the price of one more RNEA and back-substitution per step, and in
every derivative.

Penalty (semi-implicit Euler at q, the soft baseline). Force law of a penetrating contact
(`gap < 0`; separated contacts carry nothing), `pen = -gap`, contact velocity `u = [u_t, u_n]`:

    f_n = max(k_e pen - k_d u_n, 0)                   spring-damper that never pulls
    f_t = -min(k_f |u_t|, mu f_n) u_t / |u_t|          regularised Coulomb: viscous, then saturated

Discretised with the spring explicit and everything else at the end-of-step velocity `u+`,
impulses `p` in the contact frames `[t1, t2, n]`:

    p_s,i = dt k_e max(-gap_i, 0)                                    spring (normal), explicit
    c     = J v_f + G p_s                                            contact velocity, springs on
    p_d   = -dt D u+,  u+ = c + G p_d,  i.e.  (I + dt D G) p_d = -dt D c,   D = diag(g_i, g_i, h_i)
    g_i   = min(k_f, mu p_n,i / (dt |u_t,i+|)),  h_i = min(k_d, p_s,i / (dt max(u_n,i+, 0)))
    p_n   = p_s + (p_d)_n >= 0,   p_t = (p_d)_t,   so |p_t,i| = min(dt k_f |u_t,i+|, mu p_n,i)
    v+    = v_f + M^-1 J^T p,   q+ = q (+) dt v+

The secant gains `g_i <= k_f`, `h_i <= k_d` make each contact's viscous law land exactly on
its Coulomb limit (or on zero normal force) while every impulse stays coupled through the
Delassus matrix `G`: a sliding box's corners all get `mu p_n`, and the normal loads shift to
carry the friction's pitching moment (the sliding box pitches only as far as its springs
predict). Clipping a joint solve with `D = diag(k_f, k_f, k_d)` instead would compute the normal
loads against tangential impulses far outside the cone, so some sliding corners would get no
friction and the box would rock.

The gains depend on the solution, so they are found by `PENALTY_ITERATIONS` (static, 8)
reweighted solves, starting frictionless (`g = 0, h = k_d`). Each update puts contact i on its
limit given the others' impulses, with the scalar self-Delassus `G_t,i` (mean tangential
diagonal) and `G_n,i`: the slip without its own friction is `w_t = u_t+ - G_t p_t`, and
`|p_t| = dt g |w_t| / (1 + dt g G_t) = mu p_n` gives

    g_i <- min(k_f, mu p_n / (dt (|w_t| - G_t mu p_n)))
    h_i <- min(k_d, p_s / (dt (w_n - G_n p_s)))       w_n = u_n+ - G_n (p_d)_n likewise

(a denominator <= 0 means the contact sticks, or keeps pushing: the cap `k_f` or `k_d` holds).
Since `p_t = -dt g u_t+` makes `|w_t| = (1 + dt g G_t) |u_t+|`, a fixed point satisfies the
force law exactly whatever `G_t`; a contact with an isotropic, uncoupled `G` block (a sphere)
converges in one update, coupled corners (a sliding box) in a few, well within
`PENALTY_ITERATIONS`.
A final clip into the cone is the safety net for an unconverged reweighting. Norms and
denominators are floored at 1e-9 m/s, so gains and gradients stay finite at zero slip. Each
solve is linearly implicit with gains at most `k_f`, `k_d`, so large gains stay stable on light
legs and stiff multi-contact bodies; the spring is explicit (stable while
`dt sqrt(k_e / m_eff) < 2`). Cost: `PENALTY_ITERATIONS + 1` solves of size `3k`, no
complementarity problem, smooth between the stick/slip switches.

Joint damping `params.joint_damping` (an actuator's D gain, default 0) is integrated implicitly
in all three models, `(M + dt D) v+ = M v + dt (tau - h - D v) + J^T p`, so a PD actuator's
damping can live in the step (stable at any gain, as MuJoCo's implicit damping) while the
controller supplies only `Kp (q* - q)`; `M + dt D` then also enters the Delassus matrix.

All three are pure functions of traced arrays: jit-able, vmap-able, differentiable in forward
and reverse mode. `contact`, `num_sweeps`, `method` and `derivatives` are static;
`derivatives="implicit"` (see `step`) differentiates the impulse solve at its solution, never
through the sweeps; the mass-matrix solves are never differentiated through the Cholesky
factorisation (`dynamics.mass_solve`, both modes).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp

from dynamics import composite_inertia, dense_terms, floating_base_terms, newton_euler
from dynamics import kinematics as _kin
from dynamics.backend import JaxOps
from dynamics.configuration import State, integrate
from dynamics.mass_solve import mass_solve
from dynamics.model import Model

from .checks import bad_state
from .coulomb import DERIVATIVES, Derivatives, Method, solve_impulses
from .foot_contacts import FootContacts, foot_contacts, foot_contacts_at, foot_contacts_from_frames
from .params import StepParams

ContactModel = Literal["hard", "smooth", "penalty"]
CONTACT_MODELS: tuple[ContactModel, ...] = ("hard", "smooth", "penalty")
RigidBodyDerivatives = Literal["autodiff", "jacobian"]
RIGID_BODY_DERIVATIVES: tuple[RigidBodyDerivatives, ...] = ("autodiff", "jacobian")
PENALTY_ITERATIONS = 8  # reweightings of the penalty model's viscous gains (static)
_SAFE_SPEED = 1e-9  # [m/s] floor of the slip speeds in the penalty gains (finite gradients)


@jax.tree_util.register_dataclass
@dataclass
class StepInfo:
    """What happened at the contacts during one step (k contacts).

    impulse (k, 3): contact impulses [N s] in contact frames `[t1, t2, n]`.
    force (k, 3): average contact forces over the step [N], world frame (`frame @ impulse / dt`).
    gap (k,): gaps [m] where the contact was evaluated (midpoint for hard/smooth).
    active (k,): activation weight in [0, 1] (hard and penalty: 0 or 1).
    point (k, 3), normal (k, 3): contact points and terrain normals (world).
    residual (): Coulomb fixed-point residual of the impulse solve [m/s] (0 for penalty).
    sweeps () int32: the prox sweeps the impulse solve ran (0 for penalty).
    bad_state () bool: the incoming state was invalid: NaN or infinity in `q` or `v`, or a base
        quaternion off the unit sphere (zero included; `contact.checks.bad_state`).
    bad_result () bool: the returned state is invalid in the same sense (the step blew up, e.g.
        on a non-finite torque, or passed a bad incoming state on).
    """

    impulse: jax.Array
    force: jax.Array
    gap: jax.Array
    active: jax.Array
    point: jax.Array
    normal: jax.Array
    residual: jax.Array
    sweeps: jax.Array
    bad_state: jax.Array
    bad_result: jax.Array


def generalized_forces(model: Model, tau):
    """Joint torques `tau (nu,)` as generalised forces `(nv,)` (zero on the free-flyer)."""
    tau = jnp.asarray(tau)
    if tau.shape != (model.nu,):
        raise ValueError(
            f"tau must have shape ({model.nu},) (actuated joints of {model.name}), got {tau.shape}"
        )
    if model.nu == model.nv:
        return tau
    return jnp.concatenate([jnp.zeros(model.nv - model.nu, dtype=tau.dtype), tau])


def _rigid_body_terms(
    model: Model, terrain, q, v, rigid_body_derivatives: RigidBodyDerivatives = "autodiff"
):
    """`M (nv, nv)`, `h = RNEA(q, v, 0) (nv,)` and the foot contacts at `q`, `v`: by the dense
    world-frame products of `dynamics.dense_terms` (a few large operations, whose Jacobian is
    cheaper than the per-joint recursions', `benchmarks/bench_step_jacobian.py`), by the
    per-joint recursions for a tree it does not handle. The two agree to rounding
    (`tests/dynamics/test_dense_terms.py`). With
    `rigid_body_derivatives="jacobian"` a floating-base robot's terms come from
    `dynamics.floating_base_terms` with its Jacobian rule (same values)."""
    if rigid_body_derivatives == "jacobian" and floating_base_terms.supports(model):
        mass, bias, jac6, centre = floating_base_terms.frame_terms(
            model, q, v, model.foot_frames, jacobian_rule=True
        )
        return mass, bias, foot_contacts_from_frames(model, terrain, jac6, centre)
    if dense_terms.supports(model):
        rotation, translation = dense_terms.world_placements(model, q)
        mass, bias = dense_terms.mass_and_bias(model, rotation, translation, v)
        return mass, bias, foot_contacts_at(model, terrain, rotation, translation)
    ops = JaxOps(jnp.result_type(q, v))
    kin = _kin.forward_kinematics(ops, model, q)
    mass = composite_inertia.crba(ops, model, kin)
    bias = newton_euler.rnea(ops, model, kin, v, jnp.zeros_like(v))
    return mass, bias, foot_contacts(ops, model, terrain, kin)


def _dynamics_at(
    model: Model, params: StepParams, q, v,
    rigid_body_derivatives: RigidBodyDerivatives = "autodiff",
):  # fmt: skip
    """`M` (with the implicit joint damping), bias `h` and foot contacts at `q`, `v`."""
    mass, bias, contacts = _rigid_body_terms(model, params.terrain, q, v, rigid_body_derivatives)
    # Implicit joint damping D = d diag(0_base, 1_joints): (M + dt D) v+ = M v + dt (tau - h - D v)
    damping = params.joint_damping * jnp.concatenate(
        [jnp.zeros(model.nv - model.nu, v.dtype), jnp.ones(model.nu, v.dtype)]
    )
    mass = mass + params.dt * jnp.diag(damping)
    bias = bias + damping * v
    return mass, bias, contacts


def _free_velocity_and_response(model, mass, bias, tau, jac, v, dt):
    """`v_free = v + dt M^-1 (tau - h) (nv,)` and `M^-1 J^T (nv, 3k)` with one factorisation."""
    rhs = jnp.concatenate([(generalized_forces(model, tau) - bias)[:, None], jac.T], axis=1)
    # `dynamics.mass_solve`'s tangent `M^-1 (dB - dM X)` is the exact derivative of the
    # factorised solve (no iteration to converge), so both derivative modes use it: AD through
    # the Cholesky factorisation is several times dearer in the step's Jacobian
    # (`benchmarks/bench_step_jacobian.py`).
    solved = mass_solve(mass, rhs)
    return v + dt * solved[:, 0], solved[:, 1:]


def _impulses_differentiated_at_the_solution(
    model, mass, bias, tau, jac, v, dt, active, opening, friction, num_sweeps, method, tolerance
):
    """`(impulse (k, 3), v+ (nv,), solve info)` with the implicit derivative of the impulse
    solve written through `M`, `h`, `J` themselves (Le Lidec et al. 2024: `dG` is never formed).

    Primal: as the unrolled branch (`G = J M^-1 J^T`, `c = J v_free`, the sweeps). Tangent: the
    contact velocity the fixed point sees, for contact i with weight `w_i` and unit impulses `p`,

        u_i(p) = (G~ p + c)_i = J_i v+(w p) + (1 - w_i) G_ii p_i + opening_i e_n,
        v+(P)  = v + M^-1 (dt (tau - h) + J^T P),     G_ii p_i = J_i M^-1 J_i^T p_i,

    is differentiated at the solution with `p` held (`coulomb.solve_impulses(velocity_fn=)`):
    mass-matrix solves with 1 + k vectors (`dynamics.mass_solve`, tangent `M^-1 (db - dM x)`)
    instead of the tangents of `M^-1 J^T (nv, 3k)` and `G (3k, 3k)`. `v+` is `v+(w p)`, whose
    tangent again solves with one vector. Same values as the unrolled branch's to rounding."""
    k = active.shape[0]
    nv = model.nv
    generalized = dt * (generalized_forces(model, tau) - bias)
    jac_k = jac.reshape(k, 3, nv)

    def post_velocity(impulses):
        """`v+ (nv,)` for contact impulses `(k, 3)` (contact frames)."""
        return v + mass_solve(mass, generalized + jac.T @ impulses.reshape(3 * k))

    def contact_velocity(p):
        """`u (k, 3) = G~ p + c` for unit-weight impulses `p (k, 3)` (see above)."""
        through_body = (jac @ post_velocity(active[:, None] * p)).reshape(k, 3)
        own = mass_solve(mass, jnp.einsum("kan,ka->nk", jac_k, p))  # (nv, k): M^-1 J_i^T p_i
        self_term = jnp.einsum("kan,nk->ka", jac_k, own)  # G_ii p_i
        return through_body + (1.0 - active)[:, None] * self_term + jnp.zeros_like(p).at[
            :, 2].set(opening)  # fmt: skip

    # the primal Delassus matrix and free contact velocity, for the sweeps only
    mass_h, bias_h, jac_h, v_h, tau_h, opening_h = jax.lax.stop_gradient(
        (mass, bias, jac, v, tau, opening)
    )
    v_free, minv_jt = _free_velocity_and_response(model, mass_h, bias_h, tau_h, jac_h, v_h, dt)
    free_contact_velocity = _free_contact_velocity(jac_h, v_free, opening_h)
    impulse, info = solve_impulses(
        jac_h @ minv_jt, free_contact_velocity, friction, active, num_sweeps, method,
        "implicit", velocity_fn=contact_velocity, tolerance=tolerance,
    )  # fmt: skip
    return impulse, post_velocity(impulse), info


def _info(contacts: FootContacts, impulse, active, residual, sweeps, dt) -> StepInfo:
    """The contact part of `StepInfo`; `step` fills the state flags (false here)."""
    force = jnp.einsum("kab,kb->ka", contacts.frame, impulse) / dt
    unchecked = jnp.zeros((), bool)
    return StepInfo(
        impulse, force, contacts.gap, active, contacts.point, contacts.normal, residual,
        jnp.asarray(sweeps, jnp.int32), bad_state=unchecked, bad_result=unchecked,
    )  # fmt: skip


def activation(contact: ContactModel, params: StepParams, gap):
    """Activation weights `(k,)` of the hard and smooth models (see module docstring)."""
    if contact == "hard":
        return (gap < params.margin).astype(gap.dtype)
    z = params.kappa * gap - params.bias
    # sigmoid(-z) with the exponent clamped as in the authors' code, for finite gradients
    weight = 1.0 / (1.0 + jnp.exp(jnp.clip(z, -100.0, 50.0)))
    # The cut-off is never where the sigmoid is still large: below kappa ~ 1000 the default
    # margin would cut a weight of up to 0.9 (a jump in the model); extend it to the gap where
    # the weight is below e^-30.
    cutoff = jnp.maximum(params.margin, (params.bias + 30.0) / params.kappa)
    return jnp.where(gap < cutoff, weight, 0.0)


def _free_contact_velocity(jac, v_free, opening):
    """`c = J v_free (k, 3)` [m/s], the contacts' velocities without impulses in their frames
    `[t1, t2, n]`, with the hard model's speculative `opening (k,)` added along the normal."""
    return (jac @ v_free).reshape(opening.shape[0], 3).at[:, 2].add(opening)


def _midpoint_contact_terms(model, params, state, contact, rigid_body_derivatives="autodiff"):
    """`M`, `h`, the foot contacts, `J (3k, nv)`, the activation weights `(k,)` and the hard
    model's speculative opening `(k,)` [m/s] at the Moreau midpoint `q (+) v dt / 2`."""
    q_mid = integrate(model, state.q, state.v * (0.5 * params.dt))
    mass, bias, contacts = _dynamics_at(model, params, q_mid, state.v, rigid_body_derivatives)
    jac = contacts.jacobian.reshape(3 * model.nfeet, model.nv)
    active = activation(contact, params, contacts.gap)
    if contact == "hard":  # speculative: a separated contact may close its gap, not more
        opening = jnp.maximum(contacts.gap, 0.0) / params.dt
    else:
        opening = jnp.zeros_like(contacts.gap)
    return mass, bias, contacts, jac, active, opening


def impulse_problem(model: Model, params: StepParams, state: State, tau,
                    contact: ContactModel = "smooth"):  # fmt: skip
    """The impulse solve that `step` (hard or smooth) faces at `state` under joint torques
    `tau (nu,)`: `(G (k, 3, k, 3), c (k, 3), w (k,), mu (k,))`, the Delassus matrix `J M^-1 J^T`
    and free contact velocity `J v_free` [m/s] at the midpoint (contact frames `[t1, t2, n]`),
    the activation weights and the friction coefficients: `contact.coulomb.solve_impulses`'
    inputs, for inspecting or benchmarking the solve."""
    if contact not in ("hard", "smooth"):
        raise ValueError(f"contact must be 'hard' or 'smooth', got {contact!r}")
    k = model.nfeet
    mass, bias, contacts, jac, active, opening = _midpoint_contact_terms(
        model, params, state, contact
    )
    v_free, minv_jt = _free_velocity_and_response(
        model, mass, bias, tau, jac, state.v, params.dt
    )
    free = _free_contact_velocity(jac, v_free, opening)
    friction = jnp.broadcast_to(contacts.friction, (k,))
    return (jac @ minv_jt).reshape(k, 3, k, 3), free, active, friction


def _moreau_step(
    model, params, state, tau, contact, num_sweeps, method, derivatives, rigid_body_derivatives,
    tolerance,
):  # fmt: skip
    q, v = state.q, state.v
    dt = params.dt
    k = model.nfeet
    mass, bias, contacts, jac, active, opening = _midpoint_contact_terms(
        model, params, state, contact, rigid_body_derivatives
    )
    if derivatives == "implicit":
        impulse, v_next, solve_info = _impulses_differentiated_at_the_solution(
            model, mass, bias, tau, jac, v, dt, active, opening, contacts.friction, num_sweeps,
            method, tolerance,
        )  # fmt: skip
    else:
        v_free, minv_jt = _free_velocity_and_response(model, mass, bias, tau, jac, v, dt)
        free_contact_velocity = _free_contact_velocity(jac, v_free, opening)
        impulse, solve_info = solve_impulses(
            jac @ minv_jt, free_contact_velocity, contacts.friction, active, num_sweeps, method,
            derivatives, tolerance=tolerance,
        )  # fmt: skip
        v_next = v_free + minv_jt @ impulse.reshape(3 * k)
    q_next = integrate(model, q, (0.5 * dt) * (v + v_next))
    info = _info(contacts, impulse, active, solve_info["residual"], solve_info["sweeps"], dt)
    return State(q_next, v_next), info


def _penalty_step(model, params, state, tau, rigid_body_derivatives):
    q, v = state.q, state.v
    dt = params.dt
    mass, bias, contacts = _dynamics_at(model, params, q, v, rigid_body_derivatives)
    k = model.nfeet
    jac = contacts.jacobian.reshape(3 * k, model.nv)
    v_free, minv_jt = _free_velocity_and_response(model, mass, bias, tau, jac, v, dt)
    delassus = jac @ minv_jt
    eye = jnp.eye(3 * k, dtype=v.dtype)
    penetrating = contacts.gap < 0.0
    mask = penetrating[:, None].astype(v.dtype)
    spring = dt * params.stiffness * jnp.maximum(-contacts.gap, 0.0)  # (k,) p_s, explicit
    p_spring = jnp.zeros((k, 3), v.dtype).at[:, 2].set(spring).reshape(3 * k)
    c = jac @ v_free + delassus @ p_spring  # contact velocities with the springs applied
    k_f = jnp.asarray(params.friction_viscosity, v.dtype)
    k_d = jnp.asarray(params.damping, v.dtype)
    self_delassus = jnp.diagonal(delassus).reshape(k, 3)
    g_t = 0.5 * (self_delassus[:, 0] + self_delassus[:, 1])  # (k,) scalar tangential G_ii
    g_n = self_delassus[:, 2]

    def viscous(gains):
        """`p_d = -dt D u+`, `u+ = c + G p_d` for `D = diag(gains (k, 3))` (penetrating
        contacts only): `(I + dt D G) p_d = -dt D c`. Returns `(p_d, u+)`, both `(k, 3)`."""
        d = dt * (gains * mask).reshape(3 * k)
        p_damp = -jnp.linalg.solve(eye + d[:, None] * delassus, d * c)
        return p_damp.reshape(k, 3), (c + delassus @ p_damp).reshape(k, 3)

    def reweight(_, gains):
        """Gains that put each contact exactly on its saturation limit given the others'
        impulses (module docstring), capped by the viscous gains `k_f`, `k_d`."""
        p_damp, u = viscous(gains)
        limit = contacts.friction * jnp.maximum(spring + p_damp[:, 2], 0.0)
        w_t = u[:, :2] - g_t[:, None] * p_damp[:, :2]  # slip without the contact's own friction
        slip = jnp.sqrt(jnp.sum(w_t**2, axis=1) + _SAFE_SPEED**2)
        gain_t = jnp.minimum(k_f, limit / (dt * jnp.maximum(slip - g_t * limit, _SAFE_SPEED)))
        w_n = u[:, 2] - g_n * p_damp[:, 2]  # normal velocity without the contact's own damper
        gain_n = jnp.minimum(k_d, spring / (dt * jnp.maximum(w_n - g_n * spring, _SAFE_SPEED)))
        return jnp.stack([gain_t, gain_t, gain_n], axis=1)

    zero = jnp.zeros((k,), v.dtype)
    gains = jnp.stack([zero, zero, jnp.broadcast_to(k_d, (k,))], axis=1)  # frictionless start
    gains = jax.lax.fori_loop(0, PENALTY_ITERATIONS, reweight, gains)
    p_damp, _ = viscous(gains)
    # safety net (active only if the reweighting has not converged): into the cone
    p_n = jnp.where(penetrating, jnp.maximum(spring + p_damp[:, 2], 0.0), 0.0)
    limit = contacts.friction * p_n
    norm_t = jnp.sqrt(jnp.sum(p_damp[:, :2] ** 2, axis=1) + 1e-30)
    p_t = p_damp[:, :2] * jnp.minimum(1.0, limit / norm_t)[:, None]
    impulse = jnp.concatenate([p_t, p_n[:, None]], axis=1)
    v_next = v_free + minv_jt @ impulse.reshape(3 * k)
    q_next = integrate(model, q, dt * v_next)
    info = _info(contacts, impulse, penetrating.astype(q.dtype), jnp.zeros((), q.dtype), 0, dt)
    return State(q_next, v_next), info


def step(
    model: Model,
    params: StepParams,
    state: State,
    tau,
    *,
    contact: ContactModel = "smooth",
    num_sweeps: int = 20,
    method: Method = "gauss_seidel",
    derivatives: Derivatives = "unrolled",
    rigid_body_derivatives: RigidBodyDerivatives = "autodiff",
    tolerance: float | None = None,
):
    """Advance `state` by `params.dt` under joint torques `tau (nu,)`.

    Args:
        model: the robot (`dynamics.load_robot`) or a free body (`dynamics.free_body`).
        params: `StepParams` (terrain, dt, kappa, bias, margin, stiffness, damping, ...), traced.
        state: `State(q (nq,), v (nv,))`.
        tau: joint torques `(nu,)` [N m] (the free-flyer is unactuated).
        contact: "hard", "smooth" or "penalty" (static).
        num_sweeps: prox sweeps of the impulse solver (static; hard and smooth).
        method: "gauss_seidel" or "jacobi" sweeps (static).
        derivatives: how the impulse solve is differentiated (static). "unrolled" (default):
            plain automatic differentiation through every sweep, the derivative of the computed
            iterate. "implicit": at its final iterate by the implicit function theorem
            (`contact.coulomb.solve_impulses`: the derivative of the exact solution, whose
            distance to the iterate is `info.residual`), with the right-hand side written
            through `M`, `h`, `J` so the Delassus matrix's tangent is never formed
            (`_impulses_differentiated_at_the_solution`): cheaper than unrolled for a step's
            `jacfwd` and for a knot's linearisation (`benchmarks/bench_derivatives.py`). Where
            the sweeps have not converged it is not the derivative of what was computed (a long
            rollout's gradient at 20 sweeps departs from finite differences, and FDDP on the
            ANYmal trot stalls at a higher cost), so it is opt-in
            (`trajopt.problem.Problem(derivatives=)` for the solvers and the MPC). The forward
            values are the same either way. In both modes the mass-matrix solves are
            differentiated by `dM X` products (`dynamics.mass_solve`, exact), never through the
            Cholesky factorisation.
        rigid_body_derivatives: how the rigid-body terms (`M`, `h`, foot Jacobians) are
            differentiated (static). "autodiff" (default): every tangent direction through the
            dense terms, cheapest for one direction (`jvp`) and for reverse mode (`grad`).
            "jacobian": a floating-base robot's terms are differentiated by their Jacobian over
            the joint angles, velocities and base-frame gravity, formed once per call
            (`dynamics.floating_base_terms`), cheapest for whole Jacobians (`jacfwd` over a
            knot's state and control, as the trajectory solvers do). Same values and derivatives
            either way (to rounding); other trees always use "autodiff".
        tolerance: None (default): `num_sweeps` sweeps exactly, the paper's model (every
            derivative mode). A positive number [m/s] (static): sweep until the impulse solve's
            residual (`info.residual`) is at most `tolerance`, or `num_sweeps` sweeps have run
            (`info.sweeps`; `contact.coulomb.solve_impulses`), the converged solve the planners
            use. With it, "unrolled" derivatives are forward-mode only; "implicit" ones are then
            the derivative of the computed step.
    Returns:
        `(State, StepInfo)`.

    Bad states are reported, not hidden: a NaN or infinity in `state.q`/`state.v`, or a base
    quaternion that is not of unit norm (a zero quaternion, say), sets `info.bad_state`; a
    returned state that is invalid in the same way sets `info.bad_result`. The step still
    computes (NaN in, NaN out: a traced function cannot raise), so check the flags: after
    `rollout`/`simulate`, `contact.first_bad_step(infos)` is the index of the first step that
    received or produced a bad state (None if none did). Invalid concrete parameters
    (`dt <= 0`, negative friction, ...) raise when `StepParams` or the terrain is built.
    """
    _check_static(contact, derivatives, rigid_body_derivatives)
    if contact == "penalty":
        next_state, info = _penalty_step(model, params, state, tau, rigid_body_derivatives)
    else:
        next_state, info = _moreau_step(
            model, params, state, tau, contact, num_sweeps, method, derivatives,
            rigid_body_derivatives, tolerance,
        )  # fmt: skip
    flags = {"bad_state": bad_state(model, state), "bad_result": bad_state(model, next_state)}
    return next_state, dataclasses.replace(info, **flags)


def _check_static(
    contact: ContactModel,
    derivatives: Derivatives,
    rigid_body_derivatives: RigidBodyDerivatives = "autodiff",
):
    if contact not in CONTACT_MODELS:
        raise ValueError(f"contact must be one of {CONTACT_MODELS}, got {contact!r}")
    if derivatives not in DERIVATIVES:
        raise ValueError(f"derivatives must be one of {DERIVATIVES}, got {derivatives!r}")
    if rigid_body_derivatives not in RIGID_BODY_DERIVATIVES:
        raise ValueError(
            f"rigid_body_derivatives must be one of {RIGID_BODY_DERIVATIVES}, "
            f"got {rigid_body_derivatives!r}"
        )


def make_step(
    contact: ContactModel = "smooth",
    num_sweeps: int = 20,
    method: Method = "gauss_seidel",
    derivatives: Derivatives = "unrolled",
    rigid_body_derivatives: RigidBodyDerivatives = "autodiff",
    tolerance: float | None = None,
):
    """`step` with its static choices bound: `f(model, params, state, tau) -> (state, info)`."""
    _check_static(contact, derivatives, rigid_body_derivatives)
    return functools.partial(
        step, contact=contact, num_sweeps=num_sweeps, method=method, derivatives=derivatives,
        rigid_body_derivatives=rigid_body_derivatives, tolerance=tolerance,
    )  # fmt: skip
