/* FDDP's Gauss-Newton model and Riccati recursion in C (trajopt/compiled_riccati.py loads it).
 *
 * Every array is float64, row-major and contiguous, as NumPy hands it over.
 *
 * gauss_newton: each knot's quadratic cost model from its weighted residuals r (nr) and their
 * Jacobians R_x (nr, nx), R_u (nr, nu):
 *
 *     l_x = R_x^T r,  l_u = R_u^T r,  l_xx = R_x^T R_x,  l_uu = R_u^T R_u,  l_ux = R_u^T R_x
 *
 * riccati: the backward pass over T knots from V_x = R_T^T r_T, V_xx = R_T^T R_T (the terminal
 * residuals), with the defects f (T + 1, nx) of multiple shooting:
 *
 *     v = V_x + V_xx f_{t+1}
 *     Q_x = l_x + A^T v,   Q_u = l_u + B^T v
 *     Q_xx = l_xx + A^T V_xx A,   Q_uu = l_uu + B^T V_xx B + mu 1,   Q_ux = l_ux + B^T V_xx A
 *     k = -Q_uu^-1 Q_u,   K = -Q_uu^-1 Q_ux          (Cholesky factor of Q_uu)
 *     V_x = Q_x + K^T Q_uu k + K^T Q_u + Q_ux^T k
 *     V_xx = Q_xx + K^T Q_uu K + K^T Q_ux + Q_ux^T K      (symmetric: its upper triangle formed)
 *     dV1 += k^T Q_u,   dV2 += k^T Q_uu k
 *
 * It returns 1, -1 when out of memory, or 0 at the first knot whose Q_uu has a pivot that is not positive and finite
 * (not positive definite: the caller raises mu); k and K are then incomplete.
 *
 * A's rows that are zero, its columns past the last nonzero one (the knot state's previous
 * control: the next state does not depend on it) and the zero entries of A and B are skipped:
 * exact, the products they would add are zeros.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
/* add_scaled, cholesky and negative_cholesky_solve: native/dense_cholesky.c, built before this
 * file (`c_kernels.load(after=)`) */

/* s (n, n) := its upper triangle mirrored into the lower one. */
static void mirror_upper(double *s, int n) {
    for (int a = 0; a < n; ++a)
        for (int b = 0; b < a; ++b) s[a * n + b] = s[b * n + a];
}

void gauss_newton(int T, int nx, int nu, int nr, const double *r, const double *Rx,
                  const double *Ru, double *lx, double *lu, double *lxx, double *luu,
                  double *lux) {
    memset(lx, 0, sizeof(double) * T * nx);
    memset(lu, 0, sizeof(double) * T * nu);
    memset(lxx, 0, sizeof(double) * T * nx * nx);
    memset(luu, 0, sizeof(double) * T * nu * nu);
    memset(lux, 0, sizeof(double) * T * nu * nx);
    for (int t = 0; t < T; ++t) {
        const double *r_t = r + (size_t)t * nr;
        const double *Rx_t = Rx + (size_t)t * nr * nx;
        const double *Ru_t = Ru + (size_t)t * nr * nu;
        double *lx_t = lx + (size_t)t * nx, *lu_t = lu + (size_t)t * nu;
        double *lxx_t = lxx + (size_t)t * nx * nx, *luu_t = luu + (size_t)t * nu * nu;
        double *lux_t = lux + (size_t)t * nu * nx;
        for (int i = 0; i < nr; ++i) {
            const double *rx = Rx_t + (size_t)i * nx, *ru = Ru_t + (size_t)i * nu;
            add_scaled(lx_t, r_t[i], rx, nx);
            add_scaled(lu_t, r_t[i], ru, nu);
            for (int a = 0; a < nx; ++a) /* the upper triangles; mirrored below */
                if (rx[a] != 0.0) add_scaled(lxx_t + (size_t)a * nx + a, rx[a], rx + a, nx - a);
            for (int a = 0; a < nu; ++a)
                if (ru[a] != 0.0) {
                    add_scaled(luu_t + (size_t)a * nu + a, ru[a], ru + a, nu - a);
                    add_scaled(lux_t + (size_t)a * nx, ru[a], rx, nx);
                }
        }
        mirror_upper(lxx_t, nx);
        mirror_upper(luu_t, nu);
    }
}

int riccati(int T, int nx, int nu, int nrT, const double *A, const double *B, const double *lx,
            const double *lu, const double *lxx, const double *luu, const double *lux,
            const double *rT, const double *RT, const double *defects, double mu, double *k,
            double *K, double *dV) {
    const int m = 1 + nx; /* the gains' columns: [k | K] */
    const size_t sizes[] = {nx, nx, nx * nx, nx * nx, nx * nx, nx * nx, nx * nu, nu * nu,
                            nu * nu, nu * m, nu * nx, nu * m, nu, nx};
    size_t total = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) total += sizes[i];
    double *work = malloc(sizeof(double) * total);
    if (!work) return -1;
    double *Vx = work, *v = Vx + nx, *Vxx = v + nx, *Qxx = Vxx + nx * nx, *VA = Qxx + nx * nx;
    double *Vnew = VA + nx * nx, *VB = Vnew + nx * nx, *Quu = VB + nx * nu, *L = Quu + nu * nu;
    double *QuuG = L + nu * nu; /* Q_uu [k | K] (nu, m) */
    double *Qux = QuuG + nu * m, *G = Qux + nu * nx, *Qu = G + nu * m, *Qx = Qu + nu;
    double dV1 = 0.0, dV2 = 0.0;
    int ok = 1;

    memset(Vx, 0, sizeof(double) * nx);
    memset(Vxx, 0, sizeof(double) * nx * nx);
    for (int i = 0; i < nrT; ++i) {
        const double *row = RT + (size_t)i * nx;
        add_scaled(Vx, rT[i], row, nx);
        for (int a = 0; a < nx; ++a)
            if (row[a] != 0.0) add_scaled(Vxx + (size_t)a * nx, row[a], row, nx);
    }
    for (int t = T - 1; t >= 0; --t) {
        const double *A_t = A + (size_t)t * nx * nx, *B_t = B + (size_t)t * nx * nu;
        const double *f = defects + (size_t)(t + 1) * nx;
        /* v = V_x + V_xx f */
        memcpy(v, Vx, sizeof(double) * nx);
        for (int i = 0; i < nx; ++i) {
            double s = 0.0;
            for (int j = 0; j < nx; ++j) s += Vxx[i * nx + j] * f[j];
            v[i] += s;
        }
        /* Q_x, Q_u */
        memcpy(Qx, lx + (size_t)t * nx, sizeof(double) * nx);
        memcpy(Qu, lu + (size_t)t * nu, sizeof(double) * nu);
        for (int l = 0; l < nx; ++l) {
            add_scaled(Qx, v[l], A_t + (size_t)l * nx, nx);
            add_scaled(Qu, v[l], B_t + (size_t)l * nu, nu);
        }
        /* VA = V_xx A (A's zero rows skipped; its columns from nc on are zero), VB = V_xx B */
        int nc = 0;
        for (int l = 0; l < nx; ++l)
            for (int j = nx - 1; j >= nc; --j)
                if (A_t[l * nx + j] != 0.0) {
                    nc = j + 1;
                    break;
                }
        memset(VA, 0, sizeof(double) * nx * nx);
        memset(VB, 0, sizeof(double) * nx * nu);
        for (int l = 0; l < nx; ++l) {
            const double *a_row = A_t + (size_t)l * nx, *b_row = B_t + (size_t)l * nu;
            int a_zero = 1, b_zero = 1;
            for (int j = 0; j < nc && a_zero; ++j) a_zero = a_row[j] == 0.0;
            for (int j = 0; j < nu && b_zero; ++j) b_zero = b_row[j] == 0.0;
            for (int i = 0; i < nx; ++i) {
                double w = Vxx[i * nx + l];
                if (!a_zero) add_scaled(VA + (size_t)i * nx, w, a_row, nc);
                if (!b_zero) add_scaled(VB + (size_t)i * nu, w, b_row, nu);
            }
        }
        /* Q_xx = l_xx + A^T VA, Q_uu = l_uu + B^T VB + mu, Q_ux = l_ux + B^T VA */
        memcpy(Qxx, lxx + (size_t)t * nx * nx, sizeof(double) * nx * nx);
        memcpy(Quu, luu + (size_t)t * nu * nu, sizeof(double) * nu * nu);
        memcpy(Qux, lux + (size_t)t * nu * nx, sizeof(double) * nu * nx);
        for (int l = 0; l < nx; ++l) {
            const double *va = VA + (size_t)l * nx, *vb = VB + (size_t)l * nu;
            for (int a = 0; a < nc; ++a) {
                double w = A_t[l * nx + a];
                if (w != 0.0) add_scaled(Qxx + (size_t)a * nx + a, w, va + a, nc - a); /* upper */
            }
            for (int a = 0; a < nu; ++a) {
                double w = B_t[l * nu + a];
                if (w != 0.0) {
                    add_scaled(Quu + (size_t)a * nu, w, vb, nu);
                    add_scaled(Qux + (size_t)a * nx, w, va, nc);
                }
            }
        }
        for (int a = 0; a < nu; ++a) Quu[a * nu + a] += mu;
        if (!cholesky(Quu, L, nu)) {
            ok = 0;
            break;
        }
        /* [k | K] = -Q_uu^-1 [Q_u | Q_ux] */
        for (int a = 0; a < nu; ++a) {
            G[a * m] = Qu[a];
            memcpy(G + (size_t)a * m + 1, Qux + (size_t)a * nx, sizeof(double) * nx);
        }
        negative_cholesky_solve(L, G, nu, m);
        double *k_t = k + (size_t)t * nu, *K_t = K + (size_t)t * nu * nx;
        for (int a = 0; a < nu; ++a) {
            k_t[a] = G[a * m];
            memcpy(K_t + (size_t)a * nx, G + (size_t)a * m + 1, sizeof(double) * nx);
        }
        /* Q_uu [k | K] */
        memset(QuuG, 0, sizeof(double) * nu * m);
        for (int a = 0; a < nu; ++a)
            for (int c = 0; c < nu; ++c) add_scaled(QuuG + (size_t)a * m, Quu[a * nu + c],
                                                    G + (size_t)c * m, m);
        for (int a = 0; a < nu; ++a) {
            dV1 += k_t[a] * Qu[a];
            dV2 += k_t[a] * QuuG[a * m];
        }
        /* V_x = Q_x + K^T Q_uu k + K^T Q_u + Q_ux^T k */
        memcpy(Vx, Qx, sizeof(double) * nx);
        for (int c = 0; c < nu; ++c) {
            add_scaled(Vx, QuuG[c * m] + Qu[c], K_t + (size_t)c * nx, nx);
            add_scaled(Vx, k_t[c], Qux + (size_t)c * nx, nx);
        }
        /* V_xx = Q_xx + K^T (Q_uu K + Q_ux) + Q_ux^T K: its upper triangle, mirrored (Q_xx's
         * upper triangle is all that is formed) */
        memcpy(Vnew, Qxx, sizeof(double) * nx * nx);
        for (int c = 0; c < nu; ++c) {
            const double *Kc = K_t + (size_t)c * nx, *Qc = Qux + (size_t)c * nx;
            const double *QK = QuuG + (size_t)c * m + 1;
            for (int a = 0; a < nx; ++a) {
                double *row = Vnew + (size_t)a * nx;
                double wk = Kc[a], wq = Qc[a];
                for (int b = a; b < nx; ++b) row[b] += wk * (QK[b] + Qc[b]) + wq * Kc[b];
            }
        }
        memcpy(Vxx, Vnew, sizeof(double) * nx * nx);
        mirror_upper(Vxx, nx);
    }
    dV[0] = dV1;
    dV[1] = dV2;
    free(work);
    return ok;
}
