/* The converged impulse solve of contact/coulomb.py (`solve_impulses(tolerance=)`, Gauss-Seidel)
 * for NF point contacts, as a CasADi external function: the generated knot functions call it
 * between the contact problem and the step's completion (trajopt/casadi_knots.py), since a loop
 * that runs until a tolerance has no symbolic (SX) form.
 *
 * Compiled with NF defined (trajopt/generated_code.py prepends `#define NF k`); the function is
 * `impulse_solve_<NF>`, with CasADi's external-function interface (`_n_in`, `_sparsity_in`,
 * `_work`, ...).
 *
 * inputs   delassus G (3NF, 3NF) dense column-major, contact frames [t1, t2, n] per contact;
 *          c (3NF) free contact velocity [m/s]; w (NF) activation weights;
 *          settings (4): mu, tolerance [m/s], most sweeps, relaxation theta
 * outputs  p (3NF) unit-weight impulses [N s] (the impulses are w_i p_i); steps R (3NF);
 *          residual: max_i |R_i^-1 (p_i - proj_K(p_i - R_i u_i))| [m/s]; sweeps run
 *
 * With G~_ij = w_j G_ij (j != i), G~_ii = G_ii, u_i = sum_j G~_ij p_j + c_i:
 *     R_i = diag(r_t, r_t, r_n),  r_t = 1 / lambda_max(G_ii,tt),  r_n = 1 / G_ii,nn
 *     p_i <- proj_K(-G_ii^-1 c_i)                                   (start)
 *     p_i <- p_i + theta (proj_K(p_i - R_i u_i) - p_i),  i = 1..NF   (one sweep)
 * until the residual is at most the tolerance (checked at the start and after each sweep) or
 * the most sweeps have run. proj_K keeps p_n and scales p_t into the disk |p_t| <= mu p_n
 * (p_n <= 0: zero). The same operations, in the same order, as the JAX solve.
 */
#include <math.h>

#ifndef NF
#error "define NF, the number of contacts"
#endif

#define K3 (3 * NF)
#define PASTE(a, b) a##b
#define NAME(a, b) PASTE(a, b)
#define SOLVE NAME(impulse_solve_, NF)

typedef long long casadi_int;

/* CasADi sparsity patterns: [rows, columns, column offsets (columns + 1), row indices] */
static casadi_int sp_delassus[2 + K3 + 1 + K3 * K3];
static casadi_int sp_contact[2 + 1 + 1 + K3];
static casadi_int sp_weights[2 + 1 + 1 + NF];
static casadi_int sp_settings[2 + 1 + 1 + 4];
static casadi_int sp_scalar[2 + 1 + 1 + 1];

static void dense(casadi_int *sp, int rows, int cols) {
    sp[0] = rows;
    sp[1] = cols;
    for (int j = 0; j <= cols; ++j) sp[2 + j] = (casadi_int)j * rows;
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i) sp[3 + cols + j * rows + i] = i;
}

static void patterns(void) {
    dense(sp_delassus, K3, K3);
    dense(sp_contact, K3, 1);
    dense(sp_weights, NF, 1);
    dense(sp_settings, 4, 1);
    dense(sp_scalar, 1, 1);
}

casadi_int NAME(SOLVE, _n_in)(void) { return 4; }
casadi_int NAME(SOLVE, _n_out)(void) { return 4; }

const casadi_int *NAME(SOLVE, _sparsity_in)(casadi_int i) {
    patterns();
    switch (i) {
        case 0: return sp_delassus;
        case 1: return sp_contact;
        case 2: return sp_weights;
        case 3: return sp_settings;
        default: return 0;
    }
}

const casadi_int *NAME(SOLVE, _sparsity_out)(casadi_int i) {
    patterns();
    switch (i) {
        case 0: case 1: return sp_contact;
        case 2: case 3: return sp_scalar;
        default: return 0;
    }
}

int NAME(SOLVE, _work)(casadi_int *sz_arg, casadi_int *sz_res, casadi_int *sz_iw,
                       casadi_int *sz_w) {
    *sz_arg = 4;
    *sz_res = 4;
    *sz_iw = 0;
    *sz_w = 0;
    return 0;
}

static double safe_norm2(double a, double b) { return sqrt(a * a + b * b); }

/* contact/coulomb.py project_disk_cone */
static void project(const double *p, double mu, double *out) {
    const double pn = p[2], radius = mu * pn, norm_t = safe_norm2(p[0], p[1]);
    if (!(pn > 0.0)) {
        out[0] = out[1] = out[2] = 0.0;
        return;
    }
    const double scale = norm_t > radius ? radius / norm_t : 1.0;
    out[0] = scale * p[0];
    out[1] = scale * p[1];
    out[2] = pn;
}

/* G (column-major) entry (row a of contact i, column b of contact j), weighted as G~ */
static double coupled(const double *g, const double *w, int i, int a, int j, int b) {
    const double entry = g[(3 * j + b) * K3 + 3 * i + a];
    return i == j ? entry : w[j] * entry;
}

static void contact_velocity(const double *g, const double *c, const double *w, const double *p,
                             int i, double *u) {
    for (int a = 0; a < 3; ++a) {
        double sum = c[3 * i + a];
        for (int j = 0; j < NF; ++j)
            for (int b = 0; b < 3; ++b) sum += coupled(g, w, i, a, j, b) * p[3 * j + b];
        u[a] = sum;
    }
}

static double largest_residual(const double *g, const double *c, const double *w,
                               const double *p, const double *steps, double mu) {
    double largest = 0.0;
    for (int i = 0; i < NF; ++i) {
        double u[3], trial[3], fixed[3], e = 0.0;
        contact_velocity(g, c, w, p, i, u);
        for (int a = 0; a < 3; ++a) trial[a] = p[3 * i + a] - steps[3 * i + a] * u[a];
        project(trial, mu, fixed);
        for (int a = 0; a < 3; ++a) {
            const double d = (p[3 * i + a] - fixed[a]) / steps[3 * i + a];
            e += d * d;
        }
        e = sqrt(e);
        if (e > largest || isnan(e)) largest = e;
    }
    return largest;
}

int SOLVE(const double **arg, double **res, casadi_int *iw, double *w_, int mem) {
    (void)iw;
    (void)w_;
    (void)mem;
    const double *g = arg[0], *c = arg[1], *w = arg[2], *settings = arg[3];
    const double mu = settings[0], tolerance = settings[1], relaxation = settings[3];
    const int most = (int)settings[2];
    double p[K3], steps[K3];
    for (int i = 0; i < NF; ++i) {
        double m[9]; /* G_ii, row-major */
        for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) m[3 * a + b] = coupled(g, w, i, a, i, b);
        const double a_ = m[0], b_ = 0.5 * (m[1] + m[3]), d_ = m[4];
        const double lam = 0.5 * (a_ + d_) + safe_norm2(0.5 * (a_ - d_), b_);
        steps[3 * i] = steps[3 * i + 1] = 1.0 / lam;
        steps[3 * i + 2] = 1.0 / m[8];
        /* -G_ii^-1 c_i by the adjugate (rows: cross products of the columns) */
        const double col[3][3] = {{m[0], m[3], m[6]}, {m[1], m[4], m[7]}, {m[2], m[5], m[8]}};
        double adj[3][3];
        for (int r = 0; r < 3; ++r) {
            const double *x = col[(r + 1) % 3], *y = col[(r + 2) % 3];
            adj[r][0] = x[1] * y[2] - x[2] * y[1];
            adj[r][1] = x[2] * y[0] - x[0] * y[2];
            adj[r][2] = x[0] * y[1] - x[1] * y[0];
        }
        const double det = col[0][0] * adj[0][0] + col[0][1] * adj[0][1] + col[0][2] * adj[0][2];
        double start[3];
        for (int r = 0; r < 3; ++r)
            start[r] = -(adj[r][0] * c[3 * i] + adj[r][1] * c[3 * i + 1] + adj[r][2] * c[3 * i + 2])
                       / det;
        project(start, mu, p + 3 * i);
    }
    double residual = largest_residual(g, c, w, p, steps, mu);
    int sweeps = 0;
    while (sweeps < most && residual > tolerance) {
        for (int i = 0; i < NF; ++i) {
            double u[3], trial[3], target[3];
            contact_velocity(g, c, w, p, i, u);
            for (int a = 0; a < 3; ++a) trial[a] = p[3 * i + a] - steps[3 * i + a] * u[a];
            project(trial, mu, target);
            for (int a = 0; a < 3; ++a) p[3 * i + a] += relaxation * (target[a] - p[3 * i + a]);
        }
        ++sweeps;
        residual = largest_residual(g, c, w, p, steps, mu);
    }
    for (int i = 0; i < K3; ++i) {
        if (res[0]) res[0][i] = p[i];
        if (res[1]) res[1][i] = steps[i];
    }
    if (res[2]) res[2][0] = residual;
    if (res[3]) res[3][0] = (double)sweeps;
    return 0;
}
