/* Dense Cholesky factorisation and solve of small symmetric positive definite systems, shared
 * by the C kernels that need one (the solver's Riccati recursion, the state estimator's
 * filter): a unit that includes them is built with this file's text first
 * (`native.c_library.build_joined`), so it is part of the library's hash.
 *
 *   cholesky(S, L, n):                 S = L L^T, L lower, row-major (n, n); 0 if a pivot is
 *                                      not positive and finite (S not positive definite), else 1
 *   negative_cholesky_solve(L, G, n, m): G (n, m) <- -S^-1 G, in place
 *   add_scaled(y, a, x, n):            y += a x
 */
#include <math.h>
#include <string.h>

static inline void add_scaled(double *restrict y, double a, const double *restrict x, int n) {
    for (int j = 0; j < n; ++j) y[j] += a * x[j];
}

/* Cholesky factor L (lower, row-major, n x n) of the symmetric S; 0 if a pivot is not
 * positive and finite. */
static int cholesky(const double *S, double *L, int n) {
    memset(L, 0, sizeof(double) * n * n);
    for (int j = 0; j < n; ++j) {
        double d = S[j * n + j];
        for (int c = 0; c < j; ++c) d -= L[j * n + c] * L[j * n + c];
        if (!(d > 0.0) || !isfinite(d)) return 0;
        double ljj = sqrt(d);
        L[j * n + j] = ljj;
        for (int i = j + 1; i < n; ++i) {
            double s = S[i * n + j];
            for (int c = 0; c < j; ++c) s -= L[i * n + c] * L[j * n + c];
            L[i * n + j] = s / ljj;
        }
    }
    return 1;
}

/* X (n, m) = -S^-1 G for S = L L^T, G (n, m), in place in G. */
static void negative_cholesky_solve(const double *L, double *G, int n, int m) {
    for (int i = 0; i < n; ++i) { /* L Y = G */
        double *gi = G + (size_t)i * m;
        for (int c = 0; c < i; ++c) add_scaled(gi, -L[i * n + c], G + (size_t)c * m, m);
        for (int j = 0; j < m; ++j) gi[j] /= L[i * n + i];
    }
    for (int i = n - 1; i >= 0; --i) { /* L^T X = Y */
        double *gi = G + (size_t)i * m;
        for (int c = i + 1; c < n; ++c) add_scaled(gi, -L[c * n + i], G + (size_t)c * m, m);
        for (int j = 0; j < m; ++j) gi[j] /= L[i * n + i];
    }
    for (int j = 0; j < n * m; ++j) G[j] = -G[j];
}
