"""Contact impulses with exact Coulomb friction: the paper's fixed-sweep prox solver.

Given, for `k` point contacts, the Delassus matrix `G = J M^-1 J^T (k, 3, k, 3)` and the free
contact velocity `c (k, 3)` (contact velocity the step would reach without contact impulses),
find impulses (percussions) `p (k, 3)` and post-impulse velocities `u = G p + c` such that each
contact obeys Coulomb's law (Signorini + maximal dissipation):

    p_n >= 0,  u_n >= 0,  p_n u_n = 0,      |p_t| <= mu p_n,
    |p_t| < mu p_n  =>  u_t = 0,            u_t != 0  =>  p_t = -mu p_n u_t / |u_t|.

Contact-frame components are ordered `[t1, t2, n]`, the normal LAST, as the columns of
`terrain.contact_frame`. No robot knowledge here: only matrices.

Equivalently (Moreau / Alart-Curnier) `p_i` is a fixed point of

    p_i = proj_K(p_i - R_i u_i),   proj_K the disk projection below,

for any positive diagonal `R_i = diag(r_t, r_t, r_n)`, isotropic in the tangent plane. This is
what the sweeps iterate and what the residual measures.

Step size. The paper's code uses `r = 1 / (1 + sum_j det G_ij)`: a pure number plus a sum of
determinants in kg^-3 (off-diagonal ones of either sign), so the step depends on the units and
on the robot's mass. We use per-contact steps that scale as `1 / G` and come with a descent
guarantee (`gauss_seidel_steps`, `jacobi_steps`). On the Delassus matrices of solo12, go2 and
anymal_c standing on four feet (random approaching `c`), 20 or 50 Gauss-Seidel sweeps leave a
smaller relative error of `p` with these steps than with the paper's, on every robot.
The initialisation `-G_ii^-1 c_i` is the paper's; a full `G_ii^-1` as the *step* would change
the fixed point (it mixes `u_t` into the normal condition) and is not used.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp


def _safe_norm(v):
    """`|v|` over the last axis with a zero (not NaN) gradient at `v = 0`."""
    sq = jnp.sum(v * v, axis=-1)
    positive = sq > 0.0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)


def project_disk_cone(p, mu):
    """The paper's projection of a contact impulse `p = [p_t1, p_t2, p_n] (3,)` onto the cone.

        p_n <= 0             ->  0
        |p_t| > mu p_n       ->  [mu p_n p_t / |p_t|, p_n]     (tangent scaled into the disk)
        otherwise            ->  p

    This is not the Euclidean projection onto the cone: `p_n` is kept and only `p_t` is
    clipped to the disk of radius `mu p_n`. Its fixed points still characterise Coulomb's law
    (see the module docstring). Gradients are finite everywhere (also at `p_t = 0`, `mu = 0`).
    """
    pt, pn = p[..., :2], p[..., 2]
    radius = mu * pn
    norm_t = _safe_norm(pt)
    outside = norm_t > radius
    scale = jnp.where(outside, radius / jnp.where(outside, norm_t, 1.0), 1.0)
    projected = jnp.concatenate([scale[..., None] * pt, pn[..., None]], axis=-1)
    return jnp.where((pn > 0.0)[..., None], projected, jnp.zeros_like(p))


def _lambda_max_sym2(a, b, d):
    """Largest eigenvalue of the symmetric `[[a, b], [b, d]]`."""
    return 0.5 * (a + d) + _safe_norm(jnp.stack([0.5 * (a - d), b], axis=-1))


def _block_norms(blocks):
    """Frobenius norms `|G_ij|_F (k, k)` of the blocks of `blocks (k, 3, k, 3)`."""
    return jnp.sqrt(jnp.sum(blocks * blocks, axis=(1, 3)))


def gauss_seidel_steps(diagonal_blocks):
    """Per-contact, per-direction steps `R_i = diag(r_t, r_t, r_n) (k, 3)` for block Gauss-Seidel.

        r_t = 1 / lambda_max(G_i,tt),   r_n = 1 / G_i,nn

    From `[[A, B], [B^T, C]] <= 2 diag(A, C)` for a PSD matrix, `R_i^-1 >= G_ii / 2`: each block
    update is then a descent step of the contact's subproblem in the frictionless (and, more
    generally, associated) case, so the sweeps converge there, and a decoupled diagonal `G_ii`
    is solved in one update. The step scales as `1 / G` (impulse per velocity): solutions are
    invariant to a change of mass units, unlike the paper's `r = 1 / (1 + sum_j det G_ij)`,
    which adds a pure number to a quantity in kg^-3 (and off-diagonal determinants of either
    sign).
    """
    g = diagonal_blocks
    r_t = 1.0 / _lambda_max_sym2(g[:, 0, 0], 0.5 * (g[:, 0, 1] + g[:, 1, 0]), g[:, 1, 1])
    r_n = 1.0 / g[:, 2, 2]
    return jnp.stack([r_t, r_t, r_n], axis=-1)


def jacobi_steps(coupled_delassus):
    """Per-contact steps `r_i = 1 / sum_j |G~_ij|_F (k, 3)` for the simultaneous (Jacobi) update.

    Block Gershgorin: `diag_i(sum_j |G_ij|_2) I >= G`, so `R^-1 >= G`: the Jacobi update is a
    descent step of the whole (associated) problem. This is the well-founded version of the
    paper's `1 / (1 + sum_j det G_ij)`: a sum over the row of blocks, with a block size that has
    the right units.
    """
    r = 1.0 / jnp.sum(_block_norms(coupled_delassus), axis=1)
    return jnp.broadcast_to(r[:, None], r.shape + (3,))


def coupled_delassus(delassus, active_weight):
    """`G~ (k, 3, k, 3)`: `G~_ij = w_j G_ij` for `j != i`, `G~_ii = G_ii` (the paper's weighting).

    The sigmoid weight `w_j` of contact j scales its influence on the others; a contact's own
    block is unweighted (as in the authors' `prox_loop_soft`), so `p_i` solves contact i's own
    problem and is scaled by `w_i` only at the end.
    """
    k = delassus.shape[0]
    eye = jnp.eye(k, dtype=delassus.dtype)
    weight = eye + (1.0 - eye) * active_weight[None, :]
    return delassus * weight[:, None, :, None]


def natural_residual(impulses, velocity, mu, steps):
    """Fixed-point residual per contact `(k,)` in velocity units [m/s]:

        e_i = | R_i^-1 (p_i - proj_K(p_i - R_i u_i)) |

    Zero iff contact i satisfies Coulomb's law with `(p_i, u_i)`; for a contact that sticks or
    separates it is the velocity error, for a sliding one it also measures how far `p_t` is
    from `-mu p_n u_t / |u_t|`.
    """
    fixed = project_disk_cone(impulses - steps * velocity, mu)
    return _safe_norm((impulses - fixed) / steps)


def _inverse3(m):
    """Inverse of a batch of 3x3 matrices `(..., 3, 3)` by the adjugate (cheap to compile)."""
    cols = [m[..., :, 0], m[..., :, 1], m[..., :, 2]]
    rows = [jnp.cross(cols[1], cols[2]), jnp.cross(cols[2], cols[0]), jnp.cross(cols[0], cols[1])]
    adjugate = jnp.stack(rows, axis=-2)
    det = jnp.sum(cols[0] * rows[0], axis=-1)
    return adjugate / det[..., None, None]


def _as_blocks(delassus, k):
    return jnp.reshape(delassus, (k, 3, k, 3))


Method = Literal["gauss_seidel", "jacobi"]
METHODS: tuple[Method, ...] = ("gauss_seidel", "jacobi")
Derivatives = Literal["implicit", "unrolled"]
DERIVATIVES: tuple[Derivatives, ...] = ("implicit", "unrolled")


# Singular values of the tangent map below this fraction of the largest are treated as zero.
# On the trot knots of ANYmal C, Go2 and Solo12 the smallest relative singular value lies far
# above it. A box sliding on four coplanar corners has an exactly singular map under the hard
# model (the normal impulses are statically indeterminate) and a barely regular one under the
# smooth model, where the weights' small `1 - w` makes the split barely determinate: the sweeps
# never resolve it and its exact derivative is large against the velocity's scale, so it is
# treated as undetermined like the hard model's.
TANGENT_RCOND = 1e-4


def _tangent_solve(linear_map, rhs):
    """Solve `A x = rhs` for the linear map `A = dF/dp` of the fixed-point residual at the solution.

    `A (3k, 3k)` is formed column by column (`jacfwd` of the linear map: 3k small products) and
    applied through its pseudo-inverse (SVD, singular values below `TANGENT_RCOND sigma_max`
    dropped). That is the exact inverse where `A` is regular and the minimum-norm rule where it is
    not: a rank-deficient Delassus matrix (more sticking or normal constraints than the body has
    degrees of freedom, e.g. a box on 4 or 8 corners) leaves the impulse split undetermined but the
    velocity change `M^-1 J^T dp` defined, so the tangent is finite (never NaN) and the resulting
    velocities are exact. The result is linear in `rhs`, so reverse mode comes by transposition.
    """
    shape = rhs.shape
    n = rhs.size
    a = jax.jacfwd(lambda x: jnp.reshape(linear_map(jnp.reshape(x, shape)), (n,)))(
        jnp.zeros((n,), rhs.dtype)
    )
    rcond = jnp.asarray(TANGENT_RCOND, rhs.dtype)
    return jnp.reshape(jnp.linalg.pinv(a, rtol=rcond) @ jnp.reshape(rhs, (n,)), shape)


# Relaxation `theta` of the converged solve's updates, `p_i <- (1 - theta) p_i + theta
# proj_K(p_i - R_i u_i)` (same fixed point). The steps `R_i` sit at the limit of the descent
# guarantee (`R_i^-1 >= G_ii / 2`); `theta < 1` moves each update strictly inside it. With the
# full update (theta = 1) the sweeps can cycle between two iterates where a contact's normal and
# tangential rows are strongly coupled (ANYmal C's trot, with a foot near touchdown).
RELAXATION = 0.8


def _sweeps(method, num_sweeps, coupled, c, mu, steps, p0, relaxation=1.0):
    """`num_sweeps` projected sweeps from `p0 (k, 3)` (see `solve_impulses`), each update
    relaxed by `relaxation` (1: the paper's full update)."""
    k = c.shape[0]

    def relaxed(p, target):
        return target if relaxation == 1.0 else p + relaxation * (target - p)

    def gauss_seidel_update(p, i):
        """Update contact `i` with the latest impulses of the others."""
        u_i = jnp.einsum("ajb,jb->a", coupled[i], p) + c[i]
        target = project_disk_cone(p[i] - steps[i] * u_i, mu[i])
        return p.at[i].set(relaxed(p[i], target)), None

    def jacobi_sweep(p, _):
        u = jnp.einsum("iajb,jb->ia", coupled, p) + c
        return relaxed(p, project_disk_cone(p - steps * u, mu)), None

    if method == "gauss_seidel":  # one flat scan over (sweep, contact): quicker to compile
        order = jnp.tile(jnp.arange(k), num_sweeps)
        p, _ = jax.lax.scan(gauss_seidel_update, p0, order)
    else:
        p, _ = jax.lax.scan(jacobi_sweep, p0, None, length=num_sweeps)
    return p


def _sweeps_to_tolerance(method, max_sweeps, tolerance, coupled, c, mu, steps, p0, relaxation):
    """Sweeps from `p0 (k, 3)`, each update relaxed by `relaxation`, until the largest
    `natural_residual` is at most `tolerance` [m/s], at most `max_sweeps` of them:
    `(p (k, 3), sweeps ())`. The residual is checked before the first sweep and after each
    (`lax.while_loop`: forward-mode differentiable, not reverse-mode; under `vmap` every member
    sweeps until all have stopped, each member's own iterate frozen once it has)."""

    def largest_residual(p):
        velocity = jnp.einsum("iajb,jb->ia", coupled, p) + c
        return jnp.max(natural_residual(p, velocity, mu, steps))

    def unfinished(carry):
        _, sweeps, residual = carry
        return (sweeps < max_sweeps) & (residual > tolerance)

    def sweep(carry):
        p, sweeps, _ = carry
        p = _sweeps(method, 1, coupled, c, mu, steps, p, relaxation)
        return p, sweeps + 1, largest_residual(p)

    start = (p0, jnp.zeros((), jnp.int32), largest_residual(p0))
    p, sweeps, _ = jax.lax.while_loop(unfinished, sweep, start)
    return p, sweeps


def solve_impulses(
    delassus,
    free_velocity,
    mu,
    active_weight=None,
    num_sweeps: int = 20,
    method: Method = "gauss_seidel",
    derivatives: Derivatives = "unrolled",
    velocity_fn=None,
    tolerance: float | None = None,
    relaxation: float = RELAXATION,
):
    """Contact impulses by projected (prox) sweeps: the paper's fixed number, or until the
    fixed point's residual is below a tolerance.

    Args:
        delassus: `G (k, 3, k, 3)` or `(3k, 3k)`, SPD diagonal blocks; contact frames `[t1, t2, n]`.
        free_velocity: `c (k, 3)` or `(3k,)` contact velocity without impulses [m/s].
        mu: `(k,)` (or scalar) friction coefficients.
        active_weight: `w (k,)` in [0, 1]; 1 (default) for the hard model, the sigmoid weights
            `s_j = sigmoid(-kappa g_j)` for the smooth one.
        num_sweeps: static number of sweeps (each visits every contact once); with a
            `tolerance`, the most sweeps.
        method: "gauss_seidel" (contacts updated in turn, latest values) or "jacobi" (all at once).
        derivatives: "unrolled" (default): automatic differentiation through every sweep, the
            derivative of the computed iterate; "implicit": the derivative of the exact solution
            of the fixed point at the returned iterate (implicit function theorem, below).
        velocity_fn: optional, implicit derivatives only: `p (k, 3) -> u (k, 3)`, the contact
            velocity `G~ p + c` written through the quantities `G` and `c` are made of (the
            step's `J (v + M^-1 (dt (tau - h) + J^T (w p)))`). Its value must equal
            `G~ p + c`; the rule then differentiates it instead of `G~` and `c`, whose own
            tangents are never formed (`G` and `c` serve the sweeps and the steps `R` only):
            the right-hand side `dG~ p + dc` costs a few mass-matrix solves with one column
            each instead of the tangents of `M^-1 J^T` and `J M^-1 J^T` (the rule of Le Lidec
            et al.: `dG` is never formed).
        tolerance: None (default): exactly `num_sweeps` sweeps, the paper's unrolled model
            (`lax.scan`: every derivative mode). A positive number [m/s] (static): sweep until
            the residual below (`info["residual"]`) is at most `tolerance`, or `num_sweeps`
            sweeps have run (`lax.while_loop`), each update relaxed by `RELAXATION` (the
            same fixed point; the full update can cycle). With implicit derivatives that is
            the converged solve whose derivative is the computed step's; with unrolled ones it
            differentiates in forward mode only (`jvp`, `jacfwd`).
        relaxation: the converged solve's `theta` in `(0, 1]` (static; default `RELAXATION`);
            the fixed sweeps always take the paper's full update.

    Iteration, with `G~` from `coupled_delassus` and steps `R_i` from `gauss_seidel_steps` /
    `jacobi_steps`:

        p_i <- proj_K(-G_ii^-1 c_i)                                   (initialisation)
        p_i <- proj_K(p_i - R_i (sum_j G~_ij p_j + c_i))              (num_sweeps times)

    Implicit derivatives. The solution is a root of `F(p; G, c, mu, w) = p - proj_K(p - R (G~ p +
    c))`, so `dp = -(dF/dp)^-1 dF/d(G, c, mu, w) [dG, dc, dmu, dw]` (`jax.lax.custom_root`: a
    `custom_jvp`, so `jacfwd`, `jvp`, `vmap` and, by transposition, `grad` all work). Per
    contact this is the textbook mode-wise rule: a separating contact (`proj_K` returns 0) has
    `dp_i = 0`; a sticking one (`proj_K` the identity) keeps `du_i = G~_i dp + dG~_i p + dc_i = 0`;
    a sliding one keeps `du_n = 0` and its tangential impulse on the cone's rim,
    `dp_t = d(mu p_n e)`. The steps `R` do not move the solution of the exact problem, so they are
    held constant. The smooth model's weights `w` enter through `G~` and `w_i p_i` exactly as in
    the sweeps. At a kink (a contact exactly at zero load, or exactly at the cone's rim) the rule
    is the one-sided derivative of the branch `proj_K` takes there. When the sweeps have not
    converged this is the derivative of the exact solution, not of the computed iterate: the
    `residual` below says how far the iterate is from it
    (`tests/contact/test_implicit_derivatives.py` and `benchmarks/bench_derivatives.py` measure
    the gap at the sweep counts the solvers use).

    Returns `(impulses (k, 3), info)` with `impulses_i = w_i p_i` [N s] and `info`:
        "residual" `()`: max over contacts of `natural_residual` [m/s] at the returned `p`
            (with the method's steps `R_i` and the solver's velocity `G~ p + c`),
        "residual_per_contact" `(k,)`,
        "velocity" `(k, 3)`: post-impulse contact velocity `G impulses + c`,
        "sweeps" `()`: the sweeps run (`num_sweeps` without a tolerance).
    Without a tolerance everything is a fixed-length `lax.scan`: jit, vmap, forward- and
    reverse-mode AD work.
    """
    if tolerance is not None and not (tolerance > 0):
        raise ValueError(f"tolerance must be a positive number of m/s or None, got {tolerance!r}")
    if not (0 < relaxation <= 1):
        raise ValueError(f"relaxation must be in (0, 1], got {relaxation!r}")
    if method not in METHODS:
        raise ValueError(f"method must be 'gauss_seidel' or 'jacobi', got {method!r}")
    if derivatives not in DERIVATIVES:
        raise ValueError(f"derivatives must be one of {DERIVATIVES}, got {derivatives!r}")
    c = jnp.asarray(free_velocity)
    k = c.size // 3
    c = jnp.reshape(c, (k, 3))
    g = _as_blocks(jnp.asarray(delassus, dtype=c.dtype), k)
    mu = jnp.broadcast_to(jnp.asarray(mu, dtype=c.dtype), (k,))
    w = jnp.ones((k,), c.dtype) if active_weight is None else jnp.asarray(active_weight, c.dtype)
    w = jnp.broadcast_to(w, (k,))
    gw = coupled_delassus(g, w)
    diagonal = g[jnp.arange(k), :, jnp.arange(k), :]  # (k, 3, 3)
    steps = gauss_seidel_steps(diagonal) if method == "gauss_seidel" else jacobi_steps(gw)

    def velocity(p):
        return jnp.einsum("iajb,jb->ia", gw, p) + c

    def initial(diagonal_blocks, free):
        return project_disk_cone(-jnp.einsum("iab,ib->ia", _inverse3(diagonal_blocks), free), mu)

    if velocity_fn is not None and derivatives != "implicit":
        raise ValueError("velocity_fn is for derivatives='implicit' only")
    def iterate(coupled, free, held_steps, p0):
        """The sweeps from `p0`: `(p, sweeps run)`."""
        if tolerance is None:
            p = _sweeps(method, num_sweeps, coupled, free, mu, held_steps, p0)
            return p, jnp.asarray(num_sweeps, jnp.int32)
        return _sweeps_to_tolerance(
            method, num_sweeps, tolerance, coupled, free, mu, held_steps, p0, relaxation
        )

    if derivatives == "unrolled":
        p, sweeps = iterate(gw, c, steps, initial(diagonal, c))
    else:
        held_steps = jax.lax.stop_gradient(steps)
        differentiated_velocity = velocity if velocity_fn is None else velocity_fn
        if velocity_fn is not None:  # G~ and c serve the sweeps only: no tangents for them
            gw, c = jax.lax.stop_gradient(gw), jax.lax.stop_gradient(c)

        def fixed_point_residual(p):
            return p - project_disk_cone(p - held_steps * differentiated_velocity(p), mu)

        def sweeps_counted(_, p0):  # a float count: custom_root's aux takes a float tangent
            p, count = iterate(gw, c, held_steps, p0)
            return p, count.astype(p.dtype)

        p0 = jax.lax.stop_gradient(initial(diagonal, c))

        p, count = jax.lax.custom_root(
            fixed_point_residual, p0, sweeps_counted, _tangent_solve, has_aux=True
        )
        sweeps = jax.lax.stop_gradient(count).astype(jnp.int32)

    per_contact = natural_residual(p, velocity(p), mu, steps)
    impulses = w[:, None] * p
    info = {
        "residual": jnp.max(per_contact),
        "residual_per_contact": per_contact,
        "velocity": jnp.einsum("iajb,jb->ia", g, impulses) + c,
        "sweeps": sweeps,
    }
    return impulses, info
