"""`learning.policy.average_policies`: K students as one wide MLP whose action is
the mean of theirs, checked against the members evaluated one by one, in float64, through the
NumPy export and ONNX, and for its errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learning.policy import (
    Normalizer,
    Policy,
    average_policies,
    load_policy,
    observation_size,
    save_policy,
)


def _students(k, clock=True, dtype=jnp.float32, hidden=(16, 16)):
    """K random policies (full-scale last layers, so the actions are not tiny) sharing one
    normaliser fitted on random data, as behaviour cloning on one dataset leaves them."""
    n = observation_size(12, clock)
    rng = np.random.default_rng(3)
    norm = Normalizer.create(n, dtype).update(jnp.asarray(rng.normal(size=(200, n)) * 2 + 1))
    return [
        Policy.create(jax.random.key(s), 12, hidden, dtype=dtype, final_scale=1.0, clock=clock)
        .with_normalizer(norm)
        for s in range(k)
    ]


def _observations(n, count=64, seed=0):
    return jnp.asarray(np.random.default_rng(seed).normal(size=(count, n)) * 3, jnp.float32)


@pytest.mark.parametrize("k", [2, 3])
def test_the_average_is_the_mean_of_the_members(k):
    members = _students(k)
    average = average_policies(members)
    assert average.mlp.width_size == k * 16 and average.mlp.depth == 2 and average.clock
    obs = _observations(members[0].mlp.in_size)
    expected = np.mean([np.asarray(jax.vmap(m)(obs)) for m in members], axis=0)
    got = np.asarray(jax.vmap(average)(obs))
    assert np.abs(expected).max() > 0.3  # the members say something
    np.testing.assert_allclose(got, expected, atol=2e-6)
    # not just close to one member: the members disagree far more than the tolerance
    assert np.abs(np.asarray(jax.vmap(members[0])(obs)) - expected).max() > 1e-2


def test_the_average_is_exact_in_float64_and_survives_save_and_load(tmp_path):
    with jax.enable_x64(True):
        members = _students(3, dtype=jnp.float64, hidden=(8, 8, 8))
        average = average_policies(members)
        obs = _observations(members[0].mlp.in_size).astype(jnp.float64)
        expected = np.mean([np.asarray(jax.vmap(m)(obs)) for m in members], axis=0)
        np.testing.assert_allclose(np.asarray(jax.vmap(average)(obs)), expected, atol=1e-13)
        save_policy(average, str(tmp_path / "average.eqx"))
        loaded = load_policy(str(tmp_path / "average.eqx"))
        np.testing.assert_array_equal(jax.vmap(loaded)(obs), jax.vmap(average)(obs))


def test_the_average_exports_to_numpy_and_onnx(tmp_path):
    pytest.importorskip("onnxruntime")
    from learning.policy_export import (
        export_policy,
        load_numpy_policy,
        load_onnx_policy,
    )

    members = _students(3)
    average = average_policies(members)
    export_policy(average, tmp_path / "export", robot="go2", gait_period=0.4)
    obs = _observations(members[0].mlp.in_size, count=16, seed=1)
    expected = np.mean([np.asarray(jax.vmap(m)(obs)) for m in members], axis=0)
    runner = load_numpy_policy(tmp_path / "export")
    np.testing.assert_allclose(np.stack([runner(np.asarray(o, float)) for o in obs]), expected,
                               atol=2e-6)  # fmt: skip
    onnx_policy = load_onnx_policy(tmp_path / "export")
    np.testing.assert_allclose(onnx_policy(np.asarray(obs)), expected, atol=2e-6)


def test_one_member_is_itself():
    (only,) = _students(1)
    assert average_policies([only]) is only


def test_bad_members_are_named():
    members = _students(2)
    with pytest.raises(ValueError, match="empty"):
        average_policies([])
    with pytest.raises(TypeError, match=r"policies\[1\]"):
        average_policies([members[0], "a policy"])
    wider = _students(1, hidden=(32, 32))[0]
    with pytest.raises(ValueError, match=r"policies\[1\] has \(inputs, outputs, width, depth\)"):
        average_policies([members[0], wider])
    refit = members[1].with_normalizer(members[1].normalizer.update(jnp.ones((5, 51))))
    with pytest.raises(ValueError, match=r"policies\[1\]'s normaliser mean differs"):
        average_policies([members[0], refit])
