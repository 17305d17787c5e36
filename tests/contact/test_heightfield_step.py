"""The contact step through height fields: gradients against central differences on a step edge
and on a slope, and the small-window distance query against the full one.

One height field holds both features (cell `H = 0.02` m, x along the first axis):

    x in [0, 0.5]     a 12 deg slope rising along +x
    x in [0.5, 0.7]   flat at the slope's top height z_top
    x > 0.7           a 6 cm step up (node 35 -> 36: one steep cell) to z_top + 0.06

so one compiled function serves both places (the terrain is a traced argument). Points are
chosen where the gap is smooth: over a triangle's interior, or nearest to the step's nose
(an edge, gap = distance to a line), never on a medial axis or a cell edge.

Central-difference error (step `h`, `f` the function, `eps` = 2.2e-16):

    |D_h f - f'| <= h^2 / 6 max|f'''| + eps_f / h,     eps_f the absolute error of evaluating f

For the gap near the nose `f = |p - c|`, `|f'''| <= 3 / (r - h)^2` along any unit direction
(r = the distance to the nose), so with `h = 1e-5` and `r > 0.03` m the truncation is below
`h^2 / (2 (r - h)^2) < 6e-8`, and `eps_f <= 64 eps |p|` (a few dozen flops on coordinates of
size |p|). On the slope's face the gap is linear in p (truncation 0).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynamics
from contact import StepParams, activation, signed_distance, step, terrain
from contact import terrain_tiles as tt
from dynamics import State, free_body

jax.config.update("jax_enable_x64", True)
EPS = np.finfo(float).eps
jit = functools.partial(jax.jit, compiler_options={"xla_backend_optimization_level": 0})

H = 0.02  # cell size [m]
SLOPE = np.deg2rad(12.0)
RISE = 0.06
RADIUS = 0.05


def _terrain(window=3):
    x = H * np.arange(50)
    z_top = np.tan(SLOPE) * 0.5
    z = np.where(x <= 0.5 + 1e-12, np.tan(SLOPE) * x, z_top) + np.where(x > 0.7 + 1e-12, RISE, 0.0)
    heights = np.repeat(z[:, None], 12, axis=1)
    return terrain.heightfield(heights, 0.0, 0.0, H, friction=0.6, window=window), z_top


NOSE_X = 0.72  # node 36: the top of the step's steep cell


# ----------------------------------------------------------------------------- the gap
def test_gap_gradient_near_the_nose_and_on_the_slope():
    """d gap / d p (reverse mode, and the returned normal) against central differences, with
    the bound of the module docstring: off the step's nose (an edge: curved gap) and over the
    slope's face (linear gap)."""
    hf, z_top = _terrain()
    nose = np.array([NOSE_X, 0.0, z_top + RISE])
    value_and_grad = jit(jax.value_and_grad(lambda p: signed_distance(hf, p)[0]))
    distance = jit(lambda p: signed_distance(hf, p))
    h = 1e-5
    for p, r in (
        (np.array([0.69, 0.11, z_top + RISE + 0.025]), None),  # nearest: the nose (edge)
        (np.array([0.213, 0.107, np.tan(SLOPE) * 0.213 + 0.012]), 0.0),  # the slope's face
    ):
        gap, grad = value_and_grad(jnp.asarray(p))
        _, normal = distance(jnp.asarray(p))
        fd = np.array([(distance(p + h * e)[0] - distance(p - h * e)[0]) / (2 * h)
                       for e in np.eye(3)])  # fmt: skip
        if r is None:  # the nose: gap = distance to the line through it, along y
            to_nose = (p - nose)[[0, 2]]
            r = np.linalg.norm(to_nose)
            np.testing.assert_allclose(gap, r, rtol=1e-12)
            bound = h**2 / (2 * (r - h) ** 2) + 64 * EPS * np.linalg.norm(p) / h
        else:
            np.testing.assert_allclose(normal, [-np.sin(SLOPE), 0.0, np.cos(SLOPE)], atol=1e-12)
            bound = 64 * EPS * np.linalg.norm(p) / h
        np.testing.assert_allclose(grad, normal, atol=1e-12)
        assert np.max(np.abs(fd - np.asarray(grad))) <= bound, (p, fd, grad, bound)
        assert bound < 1e-3  # the check can tell a wrong gradient (|grad| = 1)


# ----------------------------------------------------------------------------- one step
@pytest.fixture(scope="module")
def ball():
    return free_body.sphere(mass=1.0, radius=RADIUS)


def _step_function(model, params):
    """`f(x, q0) -> [q_next (-) q0, v_next] (12,)` of one smooth step from `State(q0 (+) dq,
    v)`, `x = [dq (6), v (6)]`: the step's Jacobian with respect to the state, on the manifold."""

    def f(x, q0):
        s = State(dynamics.integrate(model, q0, x[:6]), x[6:])
        nxt, _ = step(model, params, s, jnp.zeros(0), contact="smooth")
        return jnp.concatenate([dynamics.difference(model, q0, nxt.q), nxt.v])

    return f


def _ball_q(centre):
    return jnp.concatenate([jnp.asarray(centre), jnp.array([0.0, 0.0, 0.0, 1.0])])


def test_step_jacobian_on_the_nose_and_on_the_slope(ball):
    """A 5 cm ball 1 mm into the ground, sliding at 0.3 m/s: on the step's nose (contact
    normal along the diagonal to the edge) and on the slope (normal tilted 12 deg). Forward-mode
    `d x_next / d x` against central differences (one vmapped evaluation of the 2 x 12 points).

    Bound: the step's shortest length scale is the activation width `L = 1 / kappa` (3.3e-4 m
    at kappa = 3000; the nose's curvature radius, the ball's 5 cm, is longer), so the
    truncation is at most about `(h / L)^2 / 6` of the Jacobian's scale; the round-off is
    `eps_f / h` with `eps_f` the evaluation error of the step, allowed 100 eps for the fixed
    prox sweeps' accumulated rounding. With `h = 1e-6`: `1.5e-6 + 2.2e-8` of `max|J|` (~20),
    far below a wrong entry (O(1))."""
    hf, z_top = _terrain()
    params = StepParams(terrain=hf)
    f = _step_function(ball, params)
    nose = np.array([NOSE_X, 0.0, z_top + RISE])
    diagonal = np.array([-0.6, 0.0, 0.8])
    places = {
        # centre off the nose along the diagonal, 1 mm penetrating; sliding along y
        "nose": (nose + (RADIUS - 1e-3) * diagonal + [0, 0.11, 0], [0.0, 0.3, 0.0]),
        # centre above the slope's face, along its normal; sliding across the slope
        "slope": (np.array([0.21, 0.1, np.tan(SLOPE) * 0.21])
                  + (RADIUS - 1e-3) * np.array([-np.sin(SLOPE), 0, np.cos(SLOPE)]),
                  [0.0, 0.3, 0.0]),
    }  # fmt: skip
    h = 1e-6
    n = 12
    tolerance = (h * params.kappa) ** 2 / 6 + 100 * EPS / h
    values = jit(jax.vmap(f, in_axes=(0, None)))
    jacobian = jit(jax.jacfwd(f))
    for name, (centre, v) in places.items():
        q0 = _ball_q(centre)
        x0 = jnp.concatenate([jnp.zeros(6), jnp.array(v), jnp.zeros(3)])
        points = jnp.concatenate([x0[None] + h * jnp.eye(n), x0[None] - h * jnp.eye(n)])
        out = values(points, q0)
        j_fd = np.asarray((out[:n] - out[n:]) / (2 * h)).T
        j_ad = np.asarray(jacobian(x0, q0))
        scale = np.abs(j_ad).max()
        assert np.abs(j_ad - j_fd).max() <= tolerance * scale, (name, np.abs(j_ad - j_fd).max())
        # the contact acts along that place's normal: inelastic, the normal velocity after the
        # step does not depend on the incoming one (d u_n+ / d u_n = 1 without contact)
        normal = diagonal if name == "nose" else np.array([-np.sin(SLOPE), 0, np.cos(SLOPE)])
        assert abs(normal @ j_ad[6:9, 6:9] @ normal) < 1e-2, name
        np.testing.assert_allclose(signed_distance(hf, jnp.asarray(centre))[0], RADIUS - 1e-3)


# ----------------------------------------------------------------------------- cheap window
def test_small_window_equals_the_full_one_where_both_are_exact():
    """The 3 x 3-cell window (`window=1`) against the 7 x 7 one on random points of a tiled
    terrain (stairs, blocks, rough; 5 cm cells): equal gap and normal (to rounding) wherever
    the small one is exact, `|gap| < 1 cell`; elsewhere never nearer than the full one (it
    searches a subset of the triangles), so a contact beyond the activation cut-off stays
    beyond it: the activations agree everywhere when the cut-off is below one cell."""
    layout = tt.TileLayout(kinds=("stairs_up", "blocks", "rough"), num_levels=2, tile_size=1.5,
                           cell_size=0.05, border=0.25)  # fmt: skip
    full = tt.tile_terrain(layout, seed=2)
    small = tt.tile_terrain(layout, seed=2, window=1)
    rng = np.random.default_rng(0)
    xy = rng.uniform(0.0, 3.5, (3000, 2))
    ground = np.asarray(jax.vmap(terrain.height, in_axes=(None, 0, 0))(full, xy[:, 0], xy[:, 1]))
    points = jnp.asarray(np.column_stack([xy, ground + rng.uniform(-0.08, 0.15, 3000)]))
    query = jit(jax.vmap(signed_distance, in_axes=(None, 0)))
    gap3, n3 = (np.asarray(a) for a in query(full, points))
    gap1, n1 = (np.asarray(a) for a in query(small, points))
    near = np.abs(gap1) < layout.cell_size
    assert 1000 < near.sum() < 3000  # both regimes are sampled
    np.testing.assert_allclose(gap1[near], gap3[near], atol=1e-14)
    np.testing.assert_allclose(n1[near], n3[near], atol=1e-14)
    assert np.all(np.abs(gap1) >= np.abs(gap3) - 1e-14)
    assert np.all(np.sign(gap1) == np.sign(gap3))
    params = StepParams()
    cutoff = max(params.margin, (params.bias + 30.0) / params.kappa)
    assert cutoff < layout.cell_size
    for contact in ("hard", "smooth"):
        np.testing.assert_array_equal(activation(contact, params, jnp.asarray(gap1)),
                                      activation(contact, params, jnp.asarray(gap3)))  # fmt: skip


@pytest.mark.slow
def test_small_window_gives_the_same_steps(ball):
    """Twenty smooth steps of a ball rolling off the step's nose onto the flat, with the
    3 x 3-cell window and with the 7 x 7 one: the same states. The small window is exact for
    gaps below one cell (2 cm; its edge is at least a cell away), which reaches the activation
    cut-off `max(margin, (bias + 30) / kappa) = 2 cm`; beyond it no contact acts in either."""
    states = []
    for window in (1, 3):
        hf, z_top = _terrain(window)
        params = StepParams(terrain=hf)
        nose = np.array([NOSE_X, 0.0, z_top + RISE])
        s = State(_ball_q(nose + RADIUS * np.array([-0.6, 0.0, 0.8]) + [0, 0.1, 0]),
                  jnp.array([-0.5, 0.1, 0.0, 0.0, 0.0, 0.0]))  # fmt: skip
        run = jit(lambda s, p: jax.lax.scan(
            lambda x, _: (step(ball, p, x, jnp.zeros(0), contact="smooth")[0], x.q), s, None,
            length=20)[1])  # fmt: skip
        states.append(np.asarray(run(s, params)))
    np.testing.assert_allclose(states[0], states[1], atol=1e-13)
    assert np.ptp(states[0][:, 2]) > 1e-3  # it moved down off the nose
