"""The base-frame terms leg by leg and the Jacobian rule built on them (`dynamics.leg_terms`).

Against the dense terms (`floating_base_terms.base_frame_terms`, which
`tests/dynamics/test_floating_base_terms.py` checks against Pinocchio) and against the generic rule
(`jacfwd` of the dense terms): values, `jacfwd`, `jvp`, `grad` and nested `vmap`, to 1e-12, for
every robot at random configurations, velocities and base-frame gravities; feet in the robot's
order (ANYmal C lists them in another order than its legs) and two frames per leg. Trees the
decomposition does not fit fall back to the generic rule.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynamics
from dynamics import floating_base_terms, free_body, leg_terms


def _relative(ours, ref):
    ours, ref = np.asarray(ours), np.asarray(ref)
    return float(np.max(np.abs(ours - ref) / (1.0 + np.abs(ref))))


def _close(ours, ref, tol=1e-12):
    ours, ref = jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        assert _relative(a, b) < tol


def _points(model, count, seed):
    """`count` random `(q_j, v, g_B)`, joint angles around the standing pose."""
    rng = np.random.default_rng(seed)
    nj = model.nv - 6
    q = np.asarray(model.q_standing)[7:] + 0.6 * rng.normal(size=(count, nj))
    v = rng.normal(size=(count, model.nv)) * 2.0
    g = rng.normal(size=(count, 3)) * 5.0
    return jnp.asarray(q), jnp.asarray(v), jnp.asarray(g)


def _frames_on_link(model, legs, position):
    """The first frame of the joint at chain `position` of every leg."""
    return tuple(model.frame_parents.index(int(j)) for j in legs.joints[:, position])


def _frame_sets(model):
    """The feet, and the feet with a second frame on each leg (reversed, so frames interleave)."""
    feet = tuple(model.foot_frames)
    legs = leg_terms.legs(model, feet)
    return {"feet": feet, "feet and thighs": (feet + _frames_on_link(model, legs, 1))[::-1]}


def test_legs_of_the_quadrupeds():
    for name in ("go2", "anymal_c", "solo12"):
        model = dynamics.load_robot(name)
        legs = leg_terms.legs(model, model.foot_frames)
        assert legs is not None and legs.joints.shape == (4, 3)
        assert sorted(legs.dofs.ravel()) == list(range(6, model.nv))
        assert legs.frame_link == (2,)
        # every requested frame hangs on its leg's last joint
        feet = legs.frames.ravel()[legs.frame_order]
        assert tuple(feet) == tuple(model.foot_frames)
    anymal = dynamics.load_robot("anymal_c")
    assert leg_terms.legs(anymal, anymal.foot_frames).frame_order.tolist() != [0, 1, 2, 3]


def test_trees_without_legs_fall_back():
    go2 = dynamics.load_robot("go2")
    base_frame = go2.frame_parents.index(0)  # a frame on the base: no leg holds it
    assert leg_terms.legs(go2, go2.foot_frames + (base_frame,)) is None
    assert leg_terms.legs(go2, go2.foot_frames[:3]) is None  # a leg without a frame
    assert leg_terms.legs(go2, ()) is None
    box = free_body.box()
    assert leg_terms.legs(box, ()) is None
    # chains of unequal length: the last leg's foot joint hung on the first leg's knee
    parents = list(go2.parents)
    parents[12] = 3
    assert leg_terms.legs(go2.replace(parents=tuple(parents)), go2.foot_frames) is None
    # the fallback is the generic rule, and it still differentiates
    frames = go2.foot_frames + (base_frame,)
    rule, dense = _rules(go2, frames)
    q, v, g = (x[0] for x in _points(go2, 1, 0))
    jacobian = jax.jacfwd(lambda f, *x: f(*x), argnums=(1, 2, 3))
    _close(jax.jit(jacobian, static_argnums=0)(rule, q, v, g),
           jax.jit(jacobian, static_argnums=0)(dense, q, v, g))  # fmt: skip


@pytest.mark.parametrize("robot", ["go2", "anymal_c", "solo12"])
def test_values_equal_the_dense_terms(robot):
    model = dynamics.load_robot(robot)
    q, v, g = _points(model, 5, 1)
    for frames in _frame_sets(model).values():
        legs = leg_terms.legs(model, frames)
        assert legs is not None
        ours = jax.jit(jax.vmap(functools.partial(leg_terms.base_frame_terms, model, legs)))
        ref = jax.jit(jax.vmap(functools.partial(floating_base_terms.base_frame_terms, model,
                                                 frames)))  # fmt: skip
        _close(ours(q, v, g), ref(q, v, g))


def _rules(model, frames):
    return (
        floating_base_terms.with_jacobian_rule(model, frames),
        floating_base_terms.with_jacobian_rule(model, frames, per_leg=False),
    )


def _pushed(terms, which, points, tangents):
    """`vmap` over points of `jvp` along `tangents` of all inputs, or of the angles or the
    speeds alone (the others symbolic zeros in the rule)."""

    def push(q, v, g, dq, dv, dg):
        if which == "angles":
            return jax.jvp(lambda a: terms(a, v, g), (q,), (dq,))
        if which == "speeds":
            return jax.jvp(lambda b, c: terms(q, b, c), (v, g), (dv, dg))
        return jax.jvp(terms, (q, v, g), (dq, dv, dg))

    return jax.jit(jax.vmap(push))(*points, *tangents)


@pytest.mark.parametrize(
    "robot, frame_set",
    [  # Go2 in the fast suite (two frames per leg: `test_rule_with_symbolic_zero_tangents`)
        ("go2", "feet"),
        pytest.param("anymal_c", "feet and thighs", marks=pytest.mark.slow),
        pytest.param("solo12", "feet", marks=pytest.mark.slow),
    ],
)
def test_rule_equals_the_generic_rule_under_jacfwd_and_jvp(robot, frame_set):
    """Both rules batched over points: `vmap` of `jacfwd` and of `jvp` along random tangents."""
    model = dynamics.load_robot(robot)
    frames = _frame_sets(model)[frame_set]
    points = _points(model, 3, 2)
    rng = np.random.default_rng(3)
    tangents = tuple(jnp.asarray(rng.normal(size=x.shape)) for x in points)
    legs_rule, generic = _rules(model, frames)

    def jacobian(terms):
        return jax.jit(jax.vmap(jax.jacfwd(terms, argnums=(0, 1, 2))))(*points)

    _close(jacobian(legs_rule), jacobian(generic))
    _close(_pushed(legs_rule, "all", points, tangents), _pushed(generic, "all", points, tangents))


def test_rule_with_symbolic_zero_tangents():
    """Along the angles alone and the speeds alone (Go2, two frames per leg)."""
    model = dynamics.load_robot("go2")
    frames = _frame_sets(model)["feet and thighs"]
    points = _points(model, 2, 6)
    rng = np.random.default_rng(7)
    tangents = tuple(jnp.asarray(rng.normal(size=x.shape)) for x in points)
    legs_rule, generic = _rules(model, frames)
    for which in ("angles", "speeds"):
        ours = _pushed(legs_rule, which, points, tangents)
        _close(ours, _pushed(generic, which, points, tangents))


@pytest.mark.slow  # ~13 s of compilation; the rule's jacfwd and jvp tests stay fast
def test_rule_under_nested_vmap_and_grad():
    """`vmap` of `vmap` of `jacfwd` (the batched trajectory solver's layout) and reverse mode
    (`grad`, by transposing the linear tangent), Go2."""
    model = dynamics.load_robot("go2")
    q, v, g = (x.reshape((2, 2) + x.shape[1:]) for x in _points(model, 4, 4))
    legs_rule, generic = _rules(model, tuple(model.foot_frames))

    def nested(terms):
        return jax.jit(jax.vmap(jax.vmap(jax.jacfwd(terms, argnums=(0, 1, 2)))))(q, v, g)

    _close(nested(legs_rule), nested(generic))
    weights = [jnp.asarray(np.random.default_rng(i).normal(size=s.shape)) for i, s in
               enumerate(jax.eval_shape(generic, q[0, 0], v[0, 0], g[0, 0]))]  # fmt: skip

    def gradient(terms):
        def f(q, v, g):
            return sum(jnp.sum(w * jnp.sin(t)) for w, t in zip(weights, terms(q, v, g)))

        return jax.jit(jax.grad(f, argnums=(0, 1, 2)))(q[0, 0], v[0, 0], g[0, 0])

    ref = gradient(generic)
    _close(gradient(legs_rule), ref)
    assert all(np.max(np.abs(np.asarray(r))) > 1e-3 for r in ref)  # a missing term would show


def _breadth_first(model):
    """`model` (Go2) with its joints listed depth by depth (all hips, then all thighs, ...):
    the legs' velocity coordinates interleave."""
    depth = [len(model.supports(j)) for j in range(model.njoints)]
    order = sorted(range(model.njoints), key=lambda j: (depth[j], j))  # old index per new
    new = {old: i for i, old in enumerate(order)}
    idx_v = np.asarray(model.idx_v)[order]
    idx_q = np.asarray(model.idx_q)[order]
    dofs = np.concatenate([np.arange(6), idx_v[1:]])
    coords = np.concatenate([np.arange(7), idx_q[1:]])
    per_joint = ("joint_rotation", "joint_translation", "body_mass", "body_com", "body_inertia")
    pick = {name: np.asarray(getattr(model, name))[order] for name in per_joint}
    return model.replace(
        joint_names=tuple(model.joint_names[j] for j in order),
        parents=tuple(-1 if model.parents[j] < 0 else new[model.parents[j]] for j in order),
        joint_types=tuple(model.joint_types[j] for j in order),
        joint_axes=tuple(model.joint_axes[j] for j in order),
        idx_q=(0,) + tuple(range(7, model.nq)),
        idx_v=(0,) + tuple(range(6, model.nv)),
        frame_parents=tuple(-1 if p < 0 else new[p] for p in model.frame_parents),
        armature=np.asarray(model.armature)[dofs],
        q_standing=np.asarray(model.q_standing)[coords],
        lower_position_limit=np.asarray(model.lower_position_limit)[coords],
        upper_position_limit=np.asarray(model.upper_position_limit)[coords],
        velocity_limit=np.asarray(model.velocity_limit)[dofs],
        effort_limit=np.asarray(model.effort_limit)[dofs],
        **pick,
    )


def test_legs_with_interleaved_coordinates():
    """A tree listed depth by depth (each leg's coordinates scattered over `q` and `v`): the
    same legs, and the rule equals the generic rule."""
    model = _breadth_first(dynamics.load_robot("go2"))
    frames = tuple(model.foot_frames)
    legs = leg_terms.legs(model, frames)
    assert legs is not None and legs.dofs[0].tolist() == [6, 10, 14]
    assert legs.coords[0].tolist() == [0, 4, 8]
    points = _points(model, 2, 8)
    legs_rule, generic = _rules(model, frames)

    def jacobian(terms):
        return jax.jit(jax.vmap(jax.jacfwd(terms, argnums=(0, 1, 2))))(*points)

    _close(jax.jit(jax.vmap(legs_rule))(*points), jax.jit(jax.vmap(generic))(*points))
    _close(jacobian(legs_rule), jacobian(generic))


def test_frame_terms_use_the_legs_and_match_plain_autodiff():
    """`frame_terms(..., jacobian_rule=True)` (the per-leg rule for Go2's feet) against plain AD
    of the dense terms along the configuration manifold, over `q (+) dq` and `v`."""
    model = dynamics.load_robot("go2")
    assert leg_terms.legs(model, model.foot_frames) is not None
    rng = np.random.default_rng(5)
    step = jnp.asarray(rng.normal(size=model.nv))
    q = dynamics.integrate(model, jnp.asarray(model.q_standing), step)
    v = jnp.asarray(rng.normal(size=model.nv))

    def terms(rule):
        def f(dq, v):
            return floating_base_terms.frame_terms(
                model, dynamics.integrate(model, q, dq), v, model.foot_frames, jacobian_rule=rule
            )

        return jax.jit(jax.jacfwd(f, argnums=(0, 1)))(jnp.zeros(model.nv), v)

    _close(terms(True), terms(False), tol=1e-10)
