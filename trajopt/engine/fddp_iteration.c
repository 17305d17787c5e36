/* One FDDP iteration in one call, for derivatives="compiled" (trajopt/compiled_iteration.py
 * loads it; trajopt/fddp_step.py is the same iteration in Python, on any knot backend).
 *
 * Built after riccati.c and substep_elimination.c, in one library: it calls their
 * gauss_newton, riccati and eliminate_knot, and the CasADi-generated knot functions of
 * trajopt/casadi_knots.py through the pointers it is handed (the generated library's own
 * symbols, with CasADi's calling convention: column-major dense outputs).
 *
 * 1. Linearise every knot t < T at (x_t, u_t): `substeps` contact substeps, each
 *    substep_forward (the step and its solution), substep_derivative (its partial Jacobians)
 *    and eliminate_knot (v+ and the impulses eliminated: the substep's Jacobians over its
 *    input tangent e = (dq, dv, du)), chained through the earlier substeps,
 *
 *        J_knot = J_s [J_{s-1}; 0 | I_nu] ... ,   forces = mean_s forces_s,
 *        taus_j = total_{s*, j} with s* = argmax_s |total_{s, j}| (the first on ties),
 *
 *    then the knot's weighted residuals (knot_costs) and their Jacobians by the chain rule
 *    through the forces and torques,
 *
 *        R_x = [r_q | r_v] + r_f dforces/dx + r_tau dtaus/dx  (then r_up),
 *        R_u = r_u + r_f dforces/du + r_tau dtaus/du,
 *
 *    and the terminal residuals (terminal_costs).
 * 2. The Gauss-Newton model (gauss_newton), then for mu, 10 mu, ... below mu_max: the Riccati
 *    pass (riccati; a Q_uu that is not positive definite raises mu), and the line search over
 *    the step lengths `alphas` in order: FDDP's forward pass (knot_forward, knot by knot from
 *    x0), the trial's term costs (knot_cost_values, terminal_cost_values), its defects
 *    (1 - alpha) f (f_0 = 0), accepted at the first finite merit
 *        cost + merit_weight sum_t |f_t|_1 < merit_old;
 *    a search with none accepted raises mu. Before each Riccati pass, a deadline past (in
 *    CLOCK_MONOTONIC seconds, Python's time.perf_counter) ends the iteration.
 *
 * The report's seconds split the iteration into the linearisation, the backward passes (the
 * model and the Riccati passes) and the line search, and, within the linearisation, the time in
 * the generated substep and cost functions and in eliminate_knot.
 *
 * Returns 1 (a step accepted), 0 (none, up to mu_max), 2 (the deadline passed first), -1 (out
 * of memory), -2 (a knot's contact map is not provably regular: the caller's pseudo-inverse
 * path linearises it), -3 (a generated function failed). Row-major float64 arrays throughout.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*generated_fn)(const double **arg, double **res, long long *iw, double *w, int mem);
typedef int (*generated_work)(long long *sz_arg, long long *sz_res, long long *sz_iw,
                              long long *sz_w);

enum { FORWARD, DERIVATIVE, KNOT_FORWARD, COSTS, TERMINAL, COST_VALUES, TERMINAL_VALUES,
       GENERATED };
enum { REPORT_INDEX, REPORT_MU, REPORT_DV1, REPORT_DV2, REPORT_KMAX, REPORT_FIRST,
       REPORT_FIRST_DV1, REPORT_FIRST_KMAX, REPORT_FIRST_MU, REPORT_FIRST_DV2, REPORT_COST,
       REPORT_LINEARIZE, REPORT_BACKWARD, REPORT_LINE_SEARCH, REPORT_TRIALS, REPORT_PASSES,
       REPORT_ROLLOUTS, REPORT_GENERATED, REPORT_ELIMINATION, REPORT_SIZE };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* out (r, c) row-major := in (r, c) column-major */
static void from_columns(const double *in, double *out, int r, int c) {
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < c; ++j) out[i * c + j] = in[j * r + i];
}

/* out (r, c) += a (r, m) b (m, c) */
static void add_product(const double *a, const double *b, double *out, int r, int m, int c) {
    for (int i = 0; i < r; ++i)
        for (int l = 0; l < m; ++l) {
            double w = a[i * m + l];
            if (w != 0.0) add_scaled(out + (size_t)i * c, w, b + (size_t)l * c, c);
        }
}

/* out (h, n) := X (h, n) [S (ns, n); 0 | I_{n - ns}] = X[:, :ns] S + [0 | X[:, ns:]]: a
 * substep's Jacobian over the knot's tangent from its Jacobian over its own input tangent,
 * whose state part S the earlier substeps give and whose control part is the knot's. */
static void chain_substep(const double *X, const double *S, double *out, int h, int ns, int n) {
    memset(out, 0, sizeof(double) * (size_t)h * n);
    for (int i = 0; i < h; ++i) {
        double *row = out + (size_t)i * n;
        const double *x = X + (size_t)i * n;
        for (int l = 0; l < ns; ++l)
            if (x[l] != 0.0) add_scaled(row, x[l], S + (size_t)l * n, n);
        for (int j = ns; j < n; ++j) row[j] += x[j];
    }
}

typedef struct {
    generated_fn fn[GENERATED];
    long long *iw;
    double *w;
    const double **arg; /* a function's sz_arg input slots and sz_res output slots: those past */
    double **res;       /* its own inputs and outputs serve the functions it calls (MX graphs) */
} generated;

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* the generated function `which` on `n_arg` inputs and `n_res` outputs */
static int call(const generated *g, int which, const double **arg, int n_arg, double **res,
                int n_res) {
    for (int i = 0; i < n_arg; ++i) g->arg[i] = arg[i];
    for (int i = 0; i < n_res; ++i) g->res[i] = res[i];
    return g->fn[which](g->arg, g->res, g->iw, g->w, 0) == 0;
}

typedef struct {
    double **slot;
    size_t count;
} piece;

int fddp_iteration(const int *dims, const double *numbers, const uintptr_t *functions,
                   const double *x0, const double *xs, const double *us, const double *defects,
                   const double *refs, const double *sqrt_w, const double *w,
                   const double *sqrt_wT, const double *wT, const double *alphas,
                   double *xs_new, double *us_new, double *forces_new, double *taus_new,
                   double *terms_new, double *k, double *K, double *residuals, double *report,
                   double *trials) {
    /* dims: T, substeps, nq, nv, nu, feet, reference row size, running terms, terminal terms,
     * running residuals, terminal residuals, step lengths, trials recorded at most */
    const int T = dims[0], S = dims[1], nq = dims[2], nv = dims[3], nu = dims[4], nf = dims[5];
    const int nrow = dims[6], nterms = dims[7], ntermsT = dims[8], nr = dims[9], nrT = dims[10];
    const int nalpha = dims[11], max_trials = dims[12];
    /* numbers: dt, damping, rcond, merit_old, mu, mu_max, deadline, merit_weight, frame (3, 3) */
    const double dt = numbers[0], damping = numbers[1], rcond = numbers[2];
    const double merit_old = numbers[3], mu_max = numbers[5], deadline = numbers[6];
    const double merit_weight = numbers[7], *frame = numbers + 8;
    double mu = numbers[4];
    const int k3 = 3 * nf, n = 2 * nv + nu, nx = n, nxq = nq + nv + nu;
    const double started = now();
    generated g;
    long long most_iw = 1, most_w = 1, most_arg = 16, most_res = 16;
    for (int i = 0; i < GENERATED; ++i) {
        long long sz_arg, sz_res, sz_iw, sz_w;
        g.fn[i] = (generated_fn)functions[2 * i];
        if (((generated_work)functions[2 * i + 1])(&sz_arg, &sz_res, &sz_iw, &sz_w)) return -3;
        if (sz_iw > most_iw) most_iw = sz_iw;
        if (sz_w > most_w) most_w = sz_w;
        if (sz_arg > most_arg) most_arg = sz_arg;
        if (sz_res > most_res) most_res = sz_res;
    }
    /* the generated derivative's outputs, column-major (c_*) and row-major */
    double *c_mass, *c_jac, *c_w, *c_D, *c_phi1, *c_phi3, *c_ue, *c_we, *c_qe, *c_qv, *c_taue;
    double *mass, *jac, *D, *phi1, *phi3, *ue, *we, *qe, *qv, *taue;
    /* the substep's solution (substep_forward's outputs) */
    double *q, *v, *q_next, *v_next, *p, *steps, *s_, *forces, *total_s, *residual_s;
    /* per substep: the state's, forces' and torque's Jacobians, and the torque */
    double *subs, *totals, *chain, *chained, *forces_jac, *forces_sum, *forces_mean, *taus;
    double *taus_jac, *c_costs, *costs, *Re, *terminal, *K_cols, *term_sum, *elimination, *out;
    double *A, *B, *r, *Rx, *Ru, *rT, *RT, *lx, *lu, *lxx, *luu, *lux;
    const size_t per_substep = (size_t)(2 * nv + k3 + nu) * n;
    const size_t n_costs = (size_t)nr * (1 + 2 * nv + 2 * nu + k3 + nu);
    const piece plan[] = {
        {&A, (size_t)T * nx * nx}, {&B, (size_t)T * nx * nu}, {&r, (size_t)T * nr},
        {&Rx, (size_t)T * nr * nx}, {&Ru, (size_t)T * nr * nu}, {&rT, nrT},
        {&RT, (size_t)nrT * nx}, {&lx, (size_t)T * nx}, {&lu, (size_t)T * nu},
        {&lxx, (size_t)T * nx * nx}, {&luu, (size_t)T * nu * nu}, {&lux, (size_t)T * nu * nx},
        {&c_mass, (size_t)nv * nv}, {&c_jac, (size_t)k3 * nv}, {&c_w, nf}, {&c_D, (size_t)k3 * 3},
        {&c_phi1, (size_t)nv * n}, {&c_phi3, (size_t)nf * nv * n}, {&c_ue, (size_t)k3 * n},
        {&c_we, (size_t)nf * n}, {&c_qe, (size_t)nv * n}, {&c_qv, (size_t)nv * nv},
        {&c_taue, (size_t)nu * n}, {&mass, (size_t)nv * nv}, {&jac, (size_t)k3 * nv},
        {&D, (size_t)k3 * 3}, {&phi1, (size_t)nv * n}, {&phi3, (size_t)nf * nv * n},
        {&ue, (size_t)k3 * n}, {&we, (size_t)nf * n}, {&qe, (size_t)nv * n},
        {&qv, (size_t)nv * nv}, {&taue, (size_t)nu * n}, {&q, nq}, {&v, nv}, {&q_next, nq},
        {&v_next, nv}, {&p, k3}, {&steps, k3}, {&s_, (size_t)nf * nv}, {&forces, k3},
        {&total_s, nu}, {&residual_s, 1}, {&subs, per_substep * S}, {&totals, (size_t)S * nu},
        {&chain, (size_t)n * n}, {&chained, (size_t)n * n}, {&forces_jac, (size_t)k3 * n},
        {&forces_sum, k3}, {&forces_mean, k3}, {&taus, nu}, {&taus_jac, (size_t)nu * n},
        {&c_costs, n_costs}, {&costs, n_costs}, {&Re, (size_t)nr * n},
        {&terminal, (size_t)nrT * (1 + nx)}, {&K_cols, (size_t)T * nu * nx},
        {&term_sum, (size_t)nterms + ntermsT + 1}, {&out, (size_t)2 * nxq + k3 + 2 * nu + 1},
        {&elimination, elimination_work_size(nv, nf, n)}, {&g.w, (size_t)most_w},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof(plan) / sizeof(plan[0]); ++i) total += plan[i].count;
    double *work = malloc(sizeof(double) * total);
    int *piv = malloc(sizeof(int) * (nv > k3 ? nv : k3));
    g.iw = malloc(sizeof(long long) * most_iw);
    g.arg = malloc(sizeof(double *) * most_arg);
    g.res = malloc(sizeof(double *) * most_res);
    int status = 0;
    if (!work || !piv || !g.iw || !g.arg || !g.res) {
        status = -1;
        goto done;
    }
    double *cursor = work;
    for (size_t i = 0; i < sizeof(plan) / sizeof(plan[0]); ++i) {
        *plan[i].slot = cursor;
        cursor += plan[i].count;
    }
    memset(report, 0, sizeof(double) * REPORT_SIZE);

    /* 1. the linearisation */
    memset(A, 0, sizeof(double) * (size_t)T * nx * nx);
    memset(B, 0, sizeof(double) * (size_t)T * nx * nu);
    for (int t = 0; t < T; ++t) {
        const double *x_t = xs + (size_t)t * nxq, *u_t = us + (size_t)t * nu;
        memcpy(q, x_t, sizeof(double) * nq);
        memcpy(v, x_t + nq, sizeof(double) * nv);
        memset(forces_sum, 0, sizeof(double) * k3);
        memset(forces_jac, 0, sizeof(double) * (size_t)k3 * n);
        double residual = 0.0;
        for (int s = 0; s < S; ++s) {
            const double *args_f[] = {q, v, u_t};
            double *res_f[] = {q_next, v_next, p, steps, s_, forces, total_s, residual_s};
            const double *args_d[] = {q, v, u_t, v_next, p, s_, steps, q_next};
            double *res_d[] = {c_mass, c_jac, c_w, c_D, c_phi1, c_phi3, c_ue, c_we, c_qe, c_qv,
                               c_taue};
            double mark = now();
            if (!call(&g, FORWARD, args_f, COUNT(args_f), res_f, COUNT(res_f))
                || !call(&g, DERIVATIVE, args_d, COUNT(args_d), res_d, COUNT(res_d))) {
                status = -3;
                goto done;
            }
            report[REPORT_GENERATED] += now() - mark;
            from_columns(c_mass, mass, nv, nv);
            from_columns(c_jac, jac, k3, nv);
            from_columns(c_D, D, k3, 3);
            from_columns(c_phi1, phi1, nv, n);
            from_columns(c_phi3, phi3, nf * nv, n);
            from_columns(c_ue, ue, k3, n);
            from_columns(c_we, we, nf, n);
            from_columns(c_qe, qe, nv, n);
            from_columns(c_qv, qv, nv, nv);
            from_columns(c_taue, taue, nu, n);
            double *state = subs + per_substep * s, *fjac = state + (size_t)2 * nv * n;
            double *tjac = fjac + (size_t)k3 * n;
            mark = now();
            int regular = eliminate_knot(nv, nu, nf, n, dt, damping, rcond, mass, jac, c_w, D,
                                         steps, phi1, phi3, ue, qe, qv, we, taue, p, frame,
                                         state, fjac, tjac, elimination, piv);
            report[REPORT_ELIMINATION] += now() - mark;
            if (!regular) {
                status = -2;
                goto done;
            }
            if (s > 0) { /* chained through the earlier substeps of the knot */
                double *parts[] = {fjac, tjac, state};
                const int heights[] = {k3, nu, 2 * nv};
                for (int i = 0; i < 3; ++i) {
                    chain_substep(parts[i], chain, chained, heights[i], 2 * nv, n);
                    memcpy(parts[i], chained, sizeof(double) * (size_t)heights[i] * n);
                }
            }
            for (int i = 0; i < k3; ++i) forces_sum[i] += forces[i];
            for (size_t i = 0; i < (size_t)k3 * n; ++i) forces_jac[i] += fjac[i];
            memcpy(totals + (size_t)s * nu, total_s, sizeof(double) * nu);
            residual = s == 0 ? residual_s[0] : fmax(residual, residual_s[0]);
            /* the next substep's input tangent over the knot's: [state; 0 | I_nu] */
            memcpy(chain, state, sizeof(double) * (size_t)2 * nv * n);
            memset(chain + (size_t)2 * nv * n, 0, sizeof(double) * (size_t)nu * n);
            for (int i = 0; i < nu; ++i) chain[(size_t)(2 * nv + i) * n + 2 * nv + i] = 1.0;
            memcpy(q, q_next, sizeof(double) * nq);
            memcpy(v, v_next, sizeof(double) * nv);
        }
        residuals[t] = residual;
        /* A and B from the chained state Jacobian; the next u_prev is u */
        double *A_t = A + (size_t)t * nx * nx, *B_t = B + (size_t)t * nx * nu;
        for (int i = 0; i < 2 * nv; ++i) {
            memcpy(A_t + (size_t)i * nx, chain + (size_t)i * n, sizeof(double) * 2 * nv);
            memcpy(B_t + (size_t)i * nu, chain + (size_t)i * n + 2 * nv, sizeof(double) * nu);
        }
        for (int i = 0; i < nu; ++i) B_t[(size_t)(2 * nv + i) * nu + i] = 1.0;
        /* forces: the substeps' mean; torques: per joint the substep of largest magnitude */
        for (int i = 0; i < k3; ++i) forces_mean[i] = forces_sum[i] / S;
        for (size_t i = 0; i < (size_t)k3 * n; ++i) forces_jac[i] /= S;
        for (int j = 0; j < nu; ++j) {
            int peak = 0;
            for (int s = 1; s < S; ++s)
                if (fabs(totals[(size_t)s * nu + j]) > fabs(totals[(size_t)peak * nu + j]))
                    peak = s;
            taus[j] = totals[(size_t)peak * nu + j];
            memcpy(taus_jac + (size_t)j * n,
                   subs + per_substep * peak + (size_t)(2 * nv + k3 + j) * n, sizeof(double) * n);
        }
        /* the knot's weighted residuals, chained through the forces and torques */
        const double *args_c[] = {x_t, u_t, forces_mean, taus, refs + (size_t)t * nrow, sqrt_w};
        double *c_rq = c_costs + nr, *c_rv = c_rq + (size_t)nr * nv;
        double *c_rup = c_rv + (size_t)nr * nv, *c_ru = c_rup + (size_t)nr * nu;
        double *c_rf = c_ru + (size_t)nr * nu, *c_rtau = c_rf + (size_t)nr * k3;
        double *res_c[] = {r + (size_t)t * nr, c_rq, c_rv, c_rup, c_ru, c_rf, c_rtau};
        double mark = now();
        if (!call(&g, COSTS, args_c, COUNT(args_c), res_c, COUNT(res_c))) {
            status = -3;
            goto done;
        }
        report[REPORT_GENERATED] += now() - mark;
        double *rq = costs, *rv = rq + (size_t)nr * nv, *rup = rv + (size_t)nr * nv;
        double *ru = rup + (size_t)nr * nu, *rf = ru + (size_t)nr * nu;
        double *rtau = rf + (size_t)nr * k3;
        from_columns(c_rq, rq, nr, nv);
        from_columns(c_rv, rv, nr, nv);
        from_columns(c_rup, rup, nr, nu);
        from_columns(c_ru, ru, nr, nu);
        from_columns(c_rf, rf, nr, k3);
        from_columns(c_rtau, rtau, nr, nu);
        /* Re (nr, n) = [r_q | r_v | r_u] + r_f dforces/de + r_tau dtaus/de */
        for (int i = 0; i < nr; ++i) {
            double *row = Re + (size_t)i * n;
            memcpy(row, rq + (size_t)i * nv, sizeof(double) * nv);
            memcpy(row + nv, rv + (size_t)i * nv, sizeof(double) * nv);
            memcpy(row + 2 * nv, ru + (size_t)i * nu, sizeof(double) * nu);
        }
        add_product(rf, forces_jac, Re, nr, k3, n);
        add_product(rtau, taus_jac, Re, nr, nu, n);
        double *Rx_t = Rx + (size_t)t * nr * nx, *Ru_t = Ru + (size_t)t * nr * nu;
        for (int i = 0; i < nr; ++i) {
            memcpy(Rx_t + (size_t)i * nx, Re + (size_t)i * n, sizeof(double) * 2 * nv);
            memcpy(Rx_t + (size_t)i * nx + 2 * nv, rup + (size_t)i * nu, sizeof(double) * nu);
            memcpy(Ru_t + (size_t)i * nu, Re + (size_t)i * n + 2 * nv, sizeof(double) * nu);
        }
    }
    if (nrT > 0) {
        const double *args_t[] = {xs + (size_t)T * nxq, refs + (size_t)T * nrow, sqrt_wT};
        double *res_t[] = {rT, terminal};
        if (!call(&g, TERMINAL, args_t, COUNT(args_t), res_t, COUNT(res_t))) {
            status = -3;
            goto done;
        }
        from_columns(terminal, RT, nrT, nx);
    }
    double tic = now();
    report[REPORT_LINEARIZE] = tic - started;

    /* 2. the model, then the Riccati passes and line searches from mu up */
    gauss_newton(T, nx, nu, nr, r, Rx, Ru, lx, lu, lxx, luu, lux);
    report[REPORT_BACKWARD] += now() - tic;
    int n_trials = 0;
    report[REPORT_INDEX] = -1;
    while (mu < mu_max) {
        if (now() > deadline) {
            status = 2;
            break;
        }
        tic = now();
        double dV[2];
        int ok = riccati(T, nx, nu, nrT, A, B, lx, lu, lxx, luu, lux, rT, RT, defects, mu, k, K,
                         dV);
        report[REPORT_BACKWARD] += now() - tic;
        report[REPORT_PASSES] += 1;
        if (ok < 0) {
            status = -1;
            goto done;
        }
        if (!ok) {
            mu *= 10.0;
            continue;
        }
        double k_max = 0.0;
        for (size_t i = 0; i < (size_t)T * nu; ++i) k_max = fmax(k_max, fabs(k[i]));
        if (!report[REPORT_FIRST]) {
            report[REPORT_FIRST] = 1;
            report[REPORT_FIRST_DV1] = fabs(dV[0]);
            report[REPORT_FIRST_KMAX] = k_max;
            report[REPORT_FIRST_MU] = mu;
            report[REPORT_FIRST_DV2] = dV[1];
        }
        report[REPORT_DV1] = dV[0];
        report[REPORT_DV2] = dV[1];
        report[REPORT_KMAX] = k_max;
        tic = now();
        for (int t = 0; t < T; ++t) /* each K_t as a column-major (nu, nx) input, once a pass */
            for (int i = 0; i < nu; ++i)
                for (int j = 0; j < nx; ++j)
                    K_cols[((size_t)t * nx + j) * nu + i] = K[((size_t)t * nu + i) * nx + j];
        int accepted = -1;
        double last_merit = 0.0;
        for (int a = 0; a < nalpha && accepted < 0; ++a) {
            const double alpha = alphas[a];
            report[REPORT_ROLLOUTS] += 1;
            double *reached = out, *trial_forces, *trial_taus;
            memcpy(xs_new, x0, sizeof(double) * nxq);
            for (int t = 0; t < T; ++t) {
                trial_forces = forces_new + (size_t)t * k3;
                trial_taus = taus_new + (size_t)t * nu;
                const double *args_k[] = {xs_new + (size_t)t * nxq, xs + (size_t)t * nxq,
                                          us + (size_t)t * nu, k + (size_t)t * nu,
                                          K_cols + (size_t)t * nx * nu,
                                          defects + (size_t)(t + 1) * nx, &alpha};
                double *res_k[] = {xs_new + (size_t)(t + 1) * nxq, us_new + (size_t)t * nu,
                                   reached, trial_forces, trial_taus};
                if (!call(&g, KNOT_FORWARD, args_k, COUNT(args_k), res_k, COUNT(res_k))) {
                    status = -3;
                    goto done;
                }
            }
            memset(term_sum, 0, sizeof(double) * (nterms + ntermsT));
            for (int t = 0; t < T && nterms > 0; ++t) {
                const double *args_v[] = {xs_new + (size_t)t * nxq, us_new + (size_t)t * nu,
                                          forces_new + (size_t)t * k3, taus_new + (size_t)t * nu,
                                          refs + (size_t)t * nrow, w};
                double *res_v[] = {out};
                if (!call(&g, COST_VALUES, args_v, COUNT(args_v), res_v, COUNT(res_v))) {
                    status = -3;
                    goto done;
                }
                for (int i = 0; i < nterms; ++i) term_sum[i] += out[i];
            }
            if (ntermsT > 0) {
                const double *args_v[] = {xs_new + (size_t)T * nxq, refs + (size_t)T * nrow, wT};
                double *res_v[] = {term_sum + nterms};
                if (!call(&g, TERMINAL_VALUES, args_v, COUNT(args_v), res_v, COUNT(res_v))) {
                    status = -3;
                    goto done;
                }
            }
            double cost = 0.0, gaps = 0.0;
            for (int i = 0; i < nterms + ntermsT; ++i) cost += term_sum[i];
            for (size_t i = nx; i < (size_t)(T + 1) * nx; ++i)
                gaps += fabs((1.0 - alpha) * defects[i]);
            last_merit = cost + merit_weight * gaps;
            if (isfinite(cost) && isfinite(gaps) && last_merit < merit_old) {
                accepted = a;
                report[REPORT_COST] = cost;
                memcpy(terms_new, term_sum, sizeof(double) * (nterms + ntermsT));
            }
        }
        report[REPORT_LINE_SEARCH] += now() - tic;
        if (accepted >= 0) {
            report[REPORT_INDEX] = accepted;
            status = 1;
            break;
        }
        if (n_trials < max_trials) { /* the rejected search's smallest step */
            trials[2 * n_trials] = mu;
            trials[2 * n_trials + 1] = last_merit - merit_old;
        }
        ++n_trials;
        mu *= 10.0;
    }
    report[REPORT_MU] = mu;
    report[REPORT_TRIALS] = n_trials < max_trials ? n_trials : max_trials;
done:
    free(work);
    free(piv);
    free(g.iw);
    free(g.arg);
    free(g.res);
    return status;
}
