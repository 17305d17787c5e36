"""Array backends: the rigid-body algorithms are written once against this small interface.

The algorithms in `kinematics.py`, `newton_euler.py`, `composite_inertia.py`,
`articulated_body.py`, `centroidal.py` and the configuration manifold's `integrate` /
`difference` (`configuration.py`) only use:

- `+`, `-`, `*` by a scalar, `.T`, integer and slice indexing of vectors `x[i]`, `x[a:b]`;
- the functions of an `Ops` object below (matrix products, stacking, trig, norms, `where`,
  elementwise `maximum`/`minimum`/`abs`, small solves).

Two implementations exist: `JaxOps` (jax.numpy arrays, jit/vmap/grad-able) and `CasadiOps`
(CasADi `SX` symbols, for the IPOPT backend). Vectors are 1-D `(n,)` arrays in JAX and `(n, 1)`
column matrices in CasADi; the algorithms never depend on that difference.

Numeric model constants (placements, inertias) arrive as NumPy arrays or JAX arrays; each
backend converts them with `const`.
"""

from __future__ import annotations

import casadi as ca
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np


class JaxOps:
    """jax.numpy implementation. `dtype` fixes the dtype of created constants and zeros."""

    name = "jax"

    def __init__(self, dtype=jnp.float64):
        self.dtype = jnp.dtype(dtype)

    def const(self, x):
        return jnp.asarray(x, dtype=self.dtype)

    def zeros(self, *shape):
        return jnp.zeros(shape, dtype=self.dtype)

    def eye(self, n):
        return jnp.eye(n, dtype=self.dtype)

    def vec(self, items):
        """Stack scalars into a vector `(n,)`."""
        return jnp.stack([jnp.asarray(x, dtype=self.dtype) for x in items])

    def vcat(self, blocks):
        """Concatenate vectors (or row blocks of matrices) vertically."""
        return jnp.concatenate(blocks, axis=0)

    def hcat(self, blocks):
        """Concatenate column blocks: each block is `(m,)` (one column) or `(m, k)`."""
        return jnp.concatenate([b[:, None] if b.ndim == 1 else b for b in blocks], axis=1)

    def mat(self, rows):
        """Build a matrix from a list of rows of scalars."""
        return jnp.stack([self.vec(r) for r in rows])

    def block(self, rows):
        """Block matrix from a list of lists of 2-D blocks."""
        return jnp.block(rows)

    def col(self, x):
        """A vector as an `(n, 1)` column block (for `hcat`/`block`)."""
        return x[:, None] if x.ndim == 1 else x

    def mm(self, a, b):
        return a @ b

    def diag(self, x):
        return jnp.diag(x)

    def dot(self, a, b):
        return jnp.dot(a, b)

    def cross(self, a, b):
        return jnp.cross(a, b)

    def outer(self, a, b):
        return jnp.outer(a, b)

    def sin(self, x):
        return jnp.sin(x)

    def cos(self, x):
        return jnp.cos(x)

    def sqrt(self, x):
        return jnp.sqrt(x)

    def atan2(self, y, x):
        return jnp.arctan2(y, x)

    def acos(self, x):
        return jnp.arccos(x)

    def sumsq(self, x):
        """`sum_i x_i^2` of a vector."""
        return jnp.sum(x * x, axis=-1)

    def norm(self, x):
        """The Euclidean norm of a vector."""
        return jnp.linalg.norm(x)

    def maximum(self, a, b):
        """Elementwise `max(a, b)`."""
        return jnp.maximum(a, b)

    def minimum(self, a, b):
        """Elementwise `min(a, b)`."""
        return jnp.minimum(a, b)

    def abs(self, x):
        return jnp.abs(x)

    def sum(self, x):
        """`sum_i x_i` of a vector."""
        return jnp.sum(x)

    def where(self, condition, a, b):
        """`a` where `condition` holds, else `b` (elementwise, both evaluated)."""
        return jnp.where(condition, a, b)

    def inv(self, a):
        return jnp.linalg.inv(a)

    def solve_spd(self, a, b):
        """Solve `a x = b` for a symmetric positive definite `a` (Cholesky)."""
        return jsl.cho_solve(jsl.cho_factor(a), b)


class CasadiOps:
    """CasADi `SX` implementation. Vectors are `(n, 1)` columns."""

    name = "casadi"

    def const(self, x):
        if isinstance(x, ca.SX | ca.MX | ca.DM):
            return x
        x = np.asarray(x, dtype=float)
        return ca.DM(x) if x.ndim > 0 else float(x)

    def zeros(self, *shape):
        if len(shape) == 1:
            return ca.SX.zeros(shape[0], 1)
        return ca.SX.zeros(*shape)

    def eye(self, n):
        return ca.SX.eye(n)

    def vec(self, items):
        return ca.vertcat(*items)

    def vcat(self, blocks):
        return ca.vertcat(*blocks)

    def hcat(self, blocks):
        return ca.horzcat(*blocks)

    def mat(self, rows):
        return ca.vertcat(*[ca.horzcat(*r) for r in rows])

    def block(self, rows):
        return ca.blockcat(rows)

    def col(self, x):
        return x

    def mm(self, a, b):
        return ca.mtimes(a, b)

    def diag(self, x):
        return ca.diag(x)

    def dot(self, a, b):
        return ca.dot(a, b)

    def cross(self, a, b):
        return ca.cross(a, b)

    def outer(self, a, b):
        return ca.mtimes(a, ca.transpose(b))

    def sin(self, x):
        return ca.sin(x)

    def cos(self, x):
        return ca.cos(x)

    def sqrt(self, x):
        return ca.sqrt(x)

    def atan2(self, y, x):
        return ca.atan2(y, x)

    def acos(self, x):
        return ca.acos(x)

    def sumsq(self, x):
        return ca.sumsqr(x)

    def norm(self, x):
        return ca.norm_2(x)

    def maximum(self, a, b):
        return ca.fmax(a, b)

    def minimum(self, a, b):
        return ca.fmin(a, b)

    def abs(self, x):
        return ca.fabs(x)

    def sum(self, x):
        return ca.sum1(x)

    def where(self, condition, a, b):
        return ca.if_else(condition, a, b)

    def inv(self, a):
        # Only used for the 6x6 articulated inertia of a free-flyer root in ABA; a
        # symbolic QR (CasADi's SX `solve`) keeps the expression graph small and exact.
        return ca.solve(a, ca.SX.eye(a.shape[0]))

    def solve_spd(self, a, b):
        return ca.solve(a, b)
