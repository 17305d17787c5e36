/* One contact substep's Jacobians over its input tangent e (n), for N knots: the elimination of
 * v+ and the impulses from the partial Jacobians the generated code returns
 * (trajopt/compiled_knots.py states the system; substep_jacobians there is the NumPy reference).
 *
 * Per knot, with M' (nv, nv) SPD, J (3k, nv), the weights w (k), the projection's Jacobian
 * blocks D_i (3, 3), the steps R (3k), the impulses p (3k):
 *
 *     [X1 | M'^-1 J^T] = M'^-1 [Phi1_e | J^T]                       (LU, partial pivoting)
 *     G~ = J M'^-1 J^T, off-diagonal blocks' columns scaled by w_j
 *     A  = I - D + D R G~
 *     B  = D R (U_e - J X1 - (1 - w_i) (M'^-1 J_i^T)^T Phi3_i,e)
 *     dp = -A^-1 B                 where 3k |A|_1 |A^-1|_1 < 1 / rcond (then pinv(A) = A^-1)
 *     dv = -X1 + M'^-1 J^T (w dp),   dq = Q_e + Q_v dv
 *     dforces_i = frame (w_i dp_i + p_i dw_i,e) / dt,   dtotal = Tau_e - damping dv[nv - nu:]
 *
 * eliminate_knot does one knot (trajopt/fddp_iteration.c calls it), substep_elimination N.
 * A knot whose A fails the bound (or is singular) is flagged irregular[knot] = 1 and left for
 * the caller (the pseudo-inverse, in NumPy); its outputs are then not written.
 * Arrays are float64, row-major, contiguous, with the knot as the leading axis. The products
 * skip the exact zeros of J and Q_v (a foot's rows see only the base and its leg; Q_v is
 * nearly diagonal): exact, they would add zeros.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline void axpy(double *restrict y, double a, const double *restrict x, int n) {
    for (int j = 0; j < n; ++j) y[j] += a * x[j];
}

/* LU with partial pivoting of a (n, n) in place; piv (n). 0 if exactly singular. */
static int lu(double *a, int *piv, int n) {
    for (int c = 0; c < n; ++c) {
        int best = c;
        for (int i = c + 1; i < n; ++i)
            if (fabs(a[i * n + c]) > fabs(a[best * n + c])) best = i;
        piv[c] = best;
        if (a[best * n + c] == 0.0) return 0;
        if (best != c)
            for (int j = 0; j < n; ++j) {
                double t = a[c * n + j];
                a[c * n + j] = a[best * n + j];
                a[best * n + j] = t;
            }
        for (int i = c + 1; i < n; ++i) {
            double f = a[i * n + c] / a[c * n + c];
            a[i * n + c] = f;
            for (int j = c + 1; j < n; ++j) a[i * n + j] -= f * a[c * n + j];
        }
    }
    return 1;
}

/* Solve (LU) X = B for B (n, m) in place. */
static void lu_solve(const double *a, const int *piv, double *b, int n, int m) {
    for (int c = 0; c < n; ++c)
        if (piv[c] != c)
            for (int j = 0; j < m; ++j) {
                double t = b[c * m + j];
                b[c * m + j] = b[piv[c] * m + j];
                b[piv[c] * m + j] = t;
            }
    for (int i = 0; i < n; ++i)
        for (int c = 0; c < i; ++c) axpy(b + (size_t)i * m, -a[i * n + c], b + (size_t)c * m, m);
    for (int i = n - 1; i >= 0; --i) {
        for (int c = i + 1; c < n; ++c) axpy(b + (size_t)i * m, -a[i * n + c], b + (size_t)c * m, m);
        for (int j = 0; j < m; ++j) b[i * m + j] /= a[i * n + i];
    }
}

static double norm_1(const double *a, int n) { /* the largest column sum of |a| */
    double best = 0.0;
    for (int j = 0; j < n; ++j) {
        double s = 0.0;
        for (int i = 0; i < n; ++i) s += fabs(a[i * n + j]);
        if (!(s <= best)) best = s; /* NaN propagates */
    }
    return best;
}

/* Doubles of work space eliminate_knot needs; its pivots need max(nv, 3k) ints. */
size_t elimination_work_size(int nv, int k, int n) {
    const int k3 = 3 * k, m = n + k3;
    return (size_t)nv * nv + (size_t)nv * m + 3 * (size_t)k3 * k3 + 2 * (size_t)k3 * n
           + (size_t)(nv > 3 ? nv : 3) * n + k3;
}

/* One knot's elimination (the arrays are that knot's); 1 if done, 0 if its A is irregular
 * (then state, forces and total are not written). */
int eliminate_knot(int nv, int nu, int k, int n, double dt, double damping, double rcond,
                   const double *M_t, const double *J_t, const double *w_t, const double *D_t,
                   const double *R_t, const double *phi1, const double *phi3, const double *ue,
                   const double *qe, const double *qv, const double *we, const double *taue,
                   const double *p_t, const double *frame, double *state_t, double *forces_t,
                   double *total_t, double *work, int *piv) {
    const int k3 = 3 * k, m = n + k3;
    double *lu_m = work, *rhs = lu_m + nv * nv, *delassus = rhs + nv * m;
    double *a = delassus + k3 * k3, *a_inv = a + k3 * k3, *b = a_inv + k3 * k3;
    double *dp = b + k3 * n, *dv_tmp = dp + k3 * n, *w3 = dv_tmp + (nv > 3 ? nv : 3) * n;
    for (int i = 0; i < k3; ++i) w3[i] = w_t[i / 3];

    /* [X1 | M'^-1 J^T] */
    memcpy(lu_m, M_t, sizeof(double) * nv * nv);
    for (int i = 0; i < nv; ++i) {
        memcpy(rhs + (size_t)i * m, phi1 + (size_t)i * n, sizeof(double) * n);
        for (int c = 0; c < k3; ++c) rhs[i * m + n + c] = J_t[c * nv + i];
    }
    if (!lu(lu_m, piv, nv)) return 0;
    lu_solve(lu_m, piv, rhs, nv, m);
    /* G~ = J M'^-1 J^T with the off-diagonal blocks' columns weighted */
    memset(delassus, 0, sizeof(double) * k3 * k3);
    for (int i = 0; i < k3; ++i)
        for (int l = 0; l < nv; ++l)
            if (J_t[i * nv + l] != 0.0) /* a foot's rows: the base's and its leg's columns */
                axpy(delassus + (size_t)i * k3, J_t[i * nv + l], rhs + (size_t)l * m + n, k3);
    for (int i = 0; i < k3; ++i)
        for (int j = 0; j < k3; ++j)
            if (i / 3 != j / 3) delassus[i * k3 + j] *= w3[j];
    /* A = I - D + D R G~ (D block diagonal) */
    memset(a, 0, sizeof(double) * k3 * k3);
    for (int i = 0; i < k3; ++i) {
        int c = i / 3;
        a[i * k3 + i] = 1.0;
        for (int r = 0; r < 3; ++r) {
            double d = D_t[i * 3 + r];
            a[i * k3 + 3 * c + r] -= d;
            axpy(a + (size_t)i * k3, d * R_t[3 * c + r], delassus + (size_t)(3 * c + r) * k3, k3);
        }
    }
    /* b_u = U_e - J X1 - (1 - w_i) (M'^-1 J_i^T)^T Phi3_i,e, then B = D R b_u */
    double *b_u = dp; /* dp's space holds b_u until B is formed */
    memcpy(b_u, ue, sizeof(double) * k3 * n);
    for (int i = 0; i < k3; ++i) {
        double *row = b_u + (size_t)i * n;
        for (int l = 0; l < nv; ++l)
            if (J_t[i * nv + l] != 0.0) axpy(row, -J_t[i * nv + l], rhs + (size_t)l * m, n);
        double scale = -(1.0 - w3[i]);
        if (scale != 0.0) {
            const double *phi3_i = phi3 + (size_t)(i / 3) * nv * n;
            for (int l = 0; l < nv; ++l)
                axpy(row, scale * rhs[l * m + n + i], phi3_i + (size_t)l * n, n);
        }
    }
    memset(b, 0, sizeof(double) * k3 * n);
    for (int i = 0; i < k3; ++i) {
        int c = i / 3;
        for (int r = 0; r < 3; ++r)
            axpy(b + (size_t)i * n, D_t[i * 3 + r] * R_t[3 * c + r],
                 b_u + (size_t)(3 * c + r) * n, n);
    }
    /* dp = -A^-1 B where the inverse is the pseudo-inverse */
    double a_norm = norm_1(a, k3);
    memset(a_inv, 0, sizeof(double) * k3 * k3);
    for (int i = 0; i < k3; ++i) a_inv[i * k3 + i] = 1.0;
    if (!lu(a, piv, k3)) return 0;
    lu_solve(a, piv, a_inv, k3, k3);
    double bound = k3 * a_norm * norm_1(a_inv, k3);
    if (!(isfinite(bound) && bound < 1.0 / rcond)) return 0;
    memset(dp, 0, sizeof(double) * k3 * n);
    for (int i = 0; i < k3; ++i)
        for (int c = 0; c < k3; ++c) axpy(dp + (size_t)i * n, -a_inv[i * k3 + c],
                                          b + (size_t)c * n, n);
    /* dv = -X1 + M'^-1 J^T (w dp), dq = Q_e + Q_v dv */
    double *dq = state_t, *dv = state_t + (size_t)nv * n;
    for (int i = 0; i < nv; ++i) {
        double *row = dv + (size_t)i * n;
        const double *x1 = rhs + (size_t)i * m;
        for (int j = 0; j < n; ++j) row[j] = -x1[j];
        for (int c = 0; c < k3; ++c) axpy(row, x1[n + c] * w3[c], dp + (size_t)c * n, n);
    }
    memcpy(dq, qe, sizeof(double) * nv * n);
    for (int i = 0; i < nv; ++i)
        for (int l = 0; l < nv; ++l)
            if (qv[i * nv + l] != 0.0) /* Q_v: dt, rotated on the base, on the diagonal */
                axpy(dq + (size_t)i * n, qv[i * nv + l], dv + (size_t)l * n, n);
    /* forces: frame (w dp + p dw) / dt per contact */
    for (int c = 0; c < k; ++c) {
        double *rows = dv_tmp; /* the contact's impulse tangent (3, n) */
        for (int r = 0; r < 3; ++r) {
            int i = 3 * c + r;
            for (int j = 0; j < n; ++j)
                rows[r * n + j] = w3[i] * dp[i * n + j] + p_t[i] * we[c * n + j];
        }
        for (int r = 0; r < 3; ++r) {
            double *out = forces_t + (size_t)(3 * c + r) * n;
            memset(out, 0, sizeof(double) * n);
            for (int s = 0; s < 3; ++s) axpy(out, frame[r * 3 + s] / dt, rows + s * n, n);
        }
    }
    /* total torque: Tau_e - damping dv[nv - nu:] */
    for (int i = 0; i < nu; ++i) {
        const double *dv_row = dv + (size_t)(nv - nu + i) * n;
        for (int j = 0; j < n; ++j) total_t[i * n + j] = taue[i * n + j] - damping * dv_row[j];
    }
    return 1;
}

int substep_elimination(int N, int nv, int nu, int k, int n, double dt, double damping,
                        double rcond, const double *mass, const double *jac, const double *w,
                        const double *D, const double *steps, const double *phi1_e,
                        const double *phi3_e, const double *u_e, const double *q_e,
                        const double *q_v, const double *w_e, const double *tau_e,
                        const double *p, const double *frame, double *state, double *forces,
                        double *total, int *irregular) {
    const int k3 = 3 * k;
    double *work = malloc(sizeof(double) * elimination_work_size(nv, k, n));
    int *piv = malloc(sizeof(int) * (nv > k3 ? nv : k3));
    if (!work || !piv) {
        free(work);
        free(piv);
        return -1;
    }
    for (int t = 0; t < N; ++t)
        irregular[t] = !eliminate_knot(
            nv, nu, k, n, dt, damping, rcond, mass + (size_t)t * nv * nv,
            jac + (size_t)t * k3 * nv, w + (size_t)t * k, D + (size_t)t * k3 * 3,
            steps + (size_t)t * k3, phi1_e + (size_t)t * nv * n, phi3_e + (size_t)t * k * nv * n,
            u_e + (size_t)t * k3 * n, q_e + (size_t)t * nv * n, q_v + (size_t)t * nv * nv,
            w_e + (size_t)t * k * n, tau_e + (size_t)t * nu * n, p + (size_t)t * k3, frame,
            state + (size_t)t * 2 * nv * n, forces + (size_t)t * k3 * n,
            total + (size_t)t * nu * n, work, piv);
    free(work);
    free(piv);
    return 0;
}
