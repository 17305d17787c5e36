"""The converged impulse solve in C (`trajopt/engine/impulse_solve.c`, the generated knots'
external) against JAX's (`contact.coulomb.solve_impulses(tolerance=)`), which
`tests/contact/test_converged_impulses.py` checks against Coulomb's law: the same iteration, so
the same sweeps and the same impulses to rounding.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from contact import coulomb
from native import c_library
from trajopt.engine import generated_code

jax.config.update("jax_enable_x64", True)

pytestmark = pytest.mark.skipif(
    not c_library.compiler_available(),
    reason=f"no C compiler ({c_library.compiler()!r}) for the generated code",
)

MU = 0.8


def _case(seed, k):
    rng = np.random.default_rng(seed)
    jac = rng.normal(size=(3 * k, 12))
    root = rng.normal(size=(12, 12))
    g = jac @ np.linalg.solve(root @ root.T + 12 * np.eye(12), jac.T)
    c = np.column_stack([rng.normal(0, 0.5, k), rng.normal(0, 0.5, k), rng.uniform(-1, 0.3, k)])
    w = rng.uniform(0.0, 1.0, k)
    w[0] = 1.0
    return g, c, w


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("seed", range(4))
def test_the_c_solve_is_the_jax_solve(k, seed):
    g, c, w = _case(seed, k)
    tolerance, most = 1e-8, 500
    solve = generated_code.impulse_solve_function(k)
    p, steps, residual, sweeps = (np.asarray(x).reshape(-1) for x in
                                  solve(g, c.reshape(-1), w,
                                        [MU, tolerance, most, coulomb.RELAXATION]))  # fmt: skip
    impulses, info = coulomb.solve_impulses(
        jnp.asarray(g), jnp.asarray(c), MU, jnp.asarray(w), most, tolerance=tolerance
    )
    unit = np.asarray(impulses) / w[:, None]
    assert int(sweeps[0]) == int(info["sweeps"])
    assert residual[0] <= tolerance
    np.testing.assert_allclose(residual[0], float(info["residual"]), rtol=1e-6, atol=1e-14)
    scale = np.abs(unit).max()
    np.testing.assert_allclose(p.reshape(k, 3), unit, rtol=0, atol=1e-12 * scale)
    diagonal = g.reshape(k, 3, k, 3)[np.arange(k), :, np.arange(k), :]
    np.testing.assert_allclose(steps.reshape(k, 3), coulomb.gauss_seidel_steps(diagonal),
                               rtol=1e-14)  # fmt: skip


def test_the_c_solve_stops_at_the_most_sweeps_and_says_so():
    g, c, w = _case(0, 4)
    solve = generated_code.impulse_solve_function(4)
    _, _, residual, sweeps = solve(g, c.reshape(-1), w, [MU, 1e-30, 3, coulomb.RELAXATION])
    assert int(sweeps) == 3
    assert float(residual) > 1e-30


def test_a_bad_contact_count_is_refused_by_name():
    with pytest.raises(ValueError, match="contacts"):
        generated_code.impulse_solve_unit(0, "/tmp")
