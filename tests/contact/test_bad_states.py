"""Bad inputs are reported, not silently turned into NaN.

- Concrete invalid parameters raise `ValueError` naming the argument at construction
  (`StepParams`, the terrain constructors); traced values (jit, vmap, grad, pytree maps) pass.
- `StepInfo.bad_state` flags a NaN/inf or non-unit-quaternion incoming state and
  `StepInfo.bad_result` a bad returned one, in all three contact models; `first_bad_step`
  finds the first flagged step of a rollout.

A free sphere (one contact, nv = 6) keeps the compiles small.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import contact
from dynamics import State, free_body

SPHERE = free_body.sphere()
RADIUS = 0.1


def _resting():
    """The sphere touching flat ground, at rest: `q = [0, 0, r, 0, 0, 0, 1]`."""
    q = jnp.array([0.0, 0.0, RADIUS, 0.0, 0.0, 0.0, 1.0])
    return State(q, jnp.zeros(6))


# ----------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: contact.StepParams(dt=-0.001), "StepParams: dt must be > 0, got -0.001"),
        (lambda: contact.StepParams(dt=0.0), "StepParams: dt must be > 0"),
        (lambda: contact.StepParams(dt=float("nan")), "StepParams: dt must be > 0, got nan"),
        (lambda: contact.StepParams(kappa=0.0), "StepParams: kappa must be > 0"),
        (lambda: contact.StepParams(stiffness=-1.0), "StepParams: stiffness must be >= 0"),
        (lambda: contact.StepParams(damping=-1.0), "StepParams: damping must be >= 0"),
        (lambda: contact.StepParams(joint_damping=-0.5), "StepParams: joint_damping must be"),
        (lambda: contact.StepParams(friction_viscosity=-1.0), "friction_viscosity must be"),
        # a batch is checked entry by entry
        (lambda: contact.StepParams(dt=np.array([0.002, -0.002])), "StepParams: dt must be > 0"),
        (lambda: contact.StepParams().replace(dt=-1.0), "StepParams: dt must be > 0"),
        (lambda: contact.flat(friction=-0.3), "flat: friction must be >= 0, got -0.3"),
        (lambda: contact.incline(0.1, friction=-0.3), "incline: friction must be >= 0"),
        (lambda: contact.plane([0, 0, 1], friction=-1.0), "plane: friction must be >= 0"),
        (lambda: contact.steps(0.1, 0.3, 1.0, friction=-1.0), "steps: friction must be >= 0"),
        (lambda: contact.steps(0.1, 0.0, 1.0), "steps: step_length must be > 0"),
        (lambda: contact.heightfield(np.zeros((3, 3)), 0, 0, 0.0), "cell_size must be > 0"),
        (
            lambda: contact.terrain_from_dict(
                {"kind": "plane", "normal": [0, 0, 1], "height": 0.0, "friction": -1.0}
            ),
            "plane: friction must be >= 0",
        ),
        (
            lambda: contact.StepParams(
                terrain=contact.Plane(jnp.array([0.0, 0, 1]), jnp.zeros(()), -jnp.ones(()))
            ),
            "StepParams: terrain friction must be >= 0",
        ),
    ],
)
def test_invalid_concrete_parameters_raise_naming_the_argument(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()


def test_valid_and_boundary_parameters_are_accepted():
    contact.StepParams(dt=1e-4, stiffness=0.0, damping=0.0, joint_damping=0.0)
    contact.flat(friction=0.0)  # frictionless ground is valid
    contact.StepParams(dt=jnp.array([0.001, 0.002]))  # a concrete batch
    # replace checks only what it changes: a tangent direction (dt = 0) can be built
    direction = jax.tree.map(jnp.zeros_like, contact.StepParams()).replace(kappa=300.0)
    assert float(direction.dt) == 0.0 and direction.kappa == 300.0


def test_traced_parameters_pass_through_jit_vmap_grad_and_tree_maps():
    state = _resting()
    tau = jnp.zeros(0)

    def height_after(dt, friction):
        params = contact.StepParams(terrain=contact.flat(friction=friction), dt=dt)
        return contact.step(SPHERE, params, state, tau, contact="penalty")[0].q[2]

    # traced (jit, vmap, grad) values are never checked, even invalid ones
    assert np.isfinite(float(jax.jit(height_after)(0.002, 0.5)))
    heights = jax.jit(jax.vmap(height_after))(jnp.array([0.001, 0.002]), jnp.array([0.3, 0.9]))
    assert heights.shape == (2,)
    assert np.isfinite(float(jax.jit(jax.grad(height_after))(0.002, 0.5)))
    # pytree maps rebuild StepParams without validating: zeros, negatives, cotangents
    params = contact.StepParams()
    zeros = jax.tree.map(jnp.zeros_like, params)
    assert float(zeros.dt) == 0.0 and float(zeros.terrain.friction) == 0.0
    negated = jax.tree.map(lambda x: -x, params)
    assert float(negated.kappa) < 0
    grads = jax.grad(lambda p: -p.dt - p.kappa - p.terrain.friction)(params)
    assert float(grads.dt) == -1.0 and float(grads.terrain.friction) == -1.0


def test_the_training_environments_randomised_params_build():
    """The environment's domain randomisation builds `StepParams` per environment inside
    `vmap` (traced friction and damping); the batch comes out with its sampled values."""
    from learning.env import EnvConfig, make_env

    env = make_env(EnvConfig(robot="solo12"))
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    states = jax.vmap(env.reset)(keys)
    step_params = jax.vmap(env.step_params)(states.params)
    friction = np.asarray(step_params.terrain.friction)
    assert friction.shape == (4,) and np.all(friction > 0) and np.unique(friction).size == 4


# ----------------------------------------------------------------------------- state flags
def _corrupt(kind):
    state = _resting()
    q, v = state.q, state.v
    if kind == "nan_q":
        q = q.at[0].set(jnp.nan)
    elif kind == "inf_v":
        v = v.at[4].set(jnp.inf)
    elif kind == "zero_quaternion":
        q = q.at[3:7].set(0.0)
    elif kind == "long_quaternion":  # finite, but not a rotation (|quat| = 2)
        q = q.at[3:7].set(jnp.array([0.0, 0.0, 0.0, 2.0]))
    return State(q, v)


@pytest.mark.parametrize("model", contact.CONTACT_MODELS)
def test_step_flags_bad_incoming_and_returned_states(model):
    params = contact.StepParams()
    step = jax.jit(lambda s, tau: contact.step(SPHERE, params, s, tau, contact=model)[1])
    tau = jnp.zeros(0)
    good = step(_resting(), tau)
    assert not bool(good.bad_state) and not bool(good.bad_result)
    for kind in ("nan_q", "inf_v", "zero_quaternion", "long_quaternion"):
        info = step(_corrupt(kind), tau)
        assert bool(info.bad_state), kind
    # a zero quaternion is finite, yet the step cannot return a rotation from it
    assert bool(step(_corrupt("zero_quaternion"), tau).bad_result)


def test_first_bad_step_finds_the_step_that_went_bad():
    """The sphere drops 5 cm; its velocity is corrupted (NaN) just before step 3: steps 0-2
    are clean, step 3 and every later one receive a bad state."""
    params = contact.StepParams()

    def body(s, k):
        s = State(s.q, jnp.where(k == 3, s.v * jnp.nan, s.v))
        return contact.step(SPHERE, params, s, jnp.zeros(0), contact="hard")

    start = State(_resting().q.at[2].add(0.05), jnp.zeros(6))
    _, infos = jax.lax.scan(body, start, jnp.arange(8))
    assert contact.first_bad_step(infos) == 3
    np.testing.assert_array_equal(np.asarray(infos.bad_state), [0, 0, 0, 1, 1, 1, 1, 1])
    _, clean = jax.lax.scan(body, start, jnp.arange(8) + 10)  # never corrupted
    assert contact.first_bad_step(clean) is None


def test_first_bad_step_after_rollout_and_simulate():
    """`rollout` from a finite state whose speed overflows: step 0 receives a good state and
    returns an infinite one (`bad_result` only). `simulate` from a zero quaternion: step 0
    receives a bad state. Batched infos must be split by the caller."""
    params = contact.StepParams()
    fast = State(_resting().q.at[2].add(1.0), jnp.full(6, 1e308))
    _, (states, infos) = contact.rollout(SPHERE, params, fast, jnp.zeros((3, 0)), contact="hard")
    assert contact.first_bad_step(infos) == 0
    assert not bool(infos.bad_state[0]) and bool(infos.bad_result[0])
    assert not np.all(np.isfinite(np.asarray(states.q[0])))
    with pytest.raises(ValueError, match="one rollout"):
        contact.first_bad_step(jax.tree.map(lambda x: jnp.stack([x, x]), infos))

    _, (_, infos) = contact.simulate(
        SPHERE, params, _corrupt("zero_quaternion"), lambda s: jnp.zeros(0), 3, contact="hard"
    )
    assert contact.first_bad_step(infos) == 0
    assert bool(np.all(np.asarray(infos.bad_state)))


# ----------------------------------------------------------------------------- closed loop
class _NaNPlanner:
    """The duck type `run_mpc` drives (`controllers.mpc.MPC`'s interface): stands, then from
    `t >= bad_from` plans NaN joint targets (a diverged planner)."""

    def __init__(self, model, dt, bad_from):
        self.model, self.dt, self.bad_from = model, dt, bad_from
        self.command = np.zeros(3)
        self.mode = "plan"
        self.stats = type("Stats", (), {"summary": staticmethod(lambda: {"median_s": 0.0})})

    def set_command(self, *command):
        self.command = np.asarray(command, dtype=float)

    def commanded_velocity(self):
        return self.command.copy()

    def targets(self, t):
        stand = np.asarray(self.model.q_standing)[7:]
        return stand * np.nan if t >= self.bad_from - 1e-9 else stand

    def reset(self, state, t):
        return self.targets(t)

    def update(self, state, t):
        return self.targets(t)

    def targets_at(self, t):
        return self.targets(t)


def test_mpc_closed_loop_stops_on_the_simulators_flag():
    """`run_mpc` checks the step's bad-state flags each control period: a planner that turns
    NaN at t = 0.06 s stops the run there with FloatingPointError naming that time, and the
    same planner without the NaN runs to the end."""
    from controllers.closed_loop import run_mpc
    from dynamics import load_robot

    model = load_robot("solo12")
    with pytest.raises(FloatingPointError, match=r"bad state .* t = 0\.06 s"):
        run_mpc(_NaNPlanner(model, 0.02, bad_from=0.06), 0.2, sim_dt=0.01, progress=False)
    result = run_mpc(_NaNPlanner(model, 0.02, bad_from=1e9), 0.2, sim_dt=0.01, progress=False)
    assert len(result.t) == 10 and np.all(np.isfinite(result.q))
