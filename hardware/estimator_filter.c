/* The state estimator's filter steps in C: the leg measurements, then the prediction, the
 * touchdown heights and the Joseph-form correction of `hardware/estimator.py` (its module
 * docstring has the equations; `estimator_core.py` loads this file and says which arrays go
 * where). Every array is float64, row-major, contiguous.
 *
 *   legs:   R (3, 3) base to world, omega (3,) gyro [rad/s] (base), p (4, 3) foot positions
 *           and J (4, 6, nu) leg Jacobians (base frame), qd (nu,), rho (4,) foot radii
 *           -> rel (4, 3) = R r_i, v_leg (4, 3) = -R (omega x r_i + J_lin qd + (J_ang qd) x (r_i - p_i))
 *   filter: x (18,), P (18, 18), ground (4,) updated in place; returns 1 when S is not
 *           positive definite (P is broken; x is then set to NaN), 2 when x or P is not
 *           finite after the update, else 0.
 *   contact: foot forces F (4,) [N] at time t [s] -> weights w (4,), with the hysteresis state
 *           (in_contact (4,) uint8, touchdown_time, liftoff_time (4,) [s]) updated in place
 *           (`ForceContact` of estimator.py).
 *   measure: one sample's inputs (`Sample`) -> their check, then the contact weights, R, the
 *           leg kinematics, the leg measurements and the world acceleration, in one call.
 */
#include <math.h>
#include <string.h>
/* cholesky, negative_cholesky_solve: native/dense_cholesky.c, built before this file;
 * leg_kinematics: hardware/leg_kinematics.c, the same */

#define NFEET 4
#define NX 18
#define NY 28

/* config: position_process, velocity_process, foot_process, foot_position_var,
 * foot_velocity_var, foot_height_var, swing_inflation, touchdown_ground (0 or 1) */
enum { Q_P, Q_V, Q_C, R_P, R_V, R_Z, SWING, TOUCHDOWN, NCONFIG };

/* contact config: contact_on, contact_off, full_contact_force, contact_ramp, contact_rearm */
void estimator_contact(const double *force, double t, const double *cc, unsigned char *in_contact,
                       double *touchdown_time, double *liftoff_time, double *w) {
    for (int i = 0; i < NFEET; ++i) {
        const double f = force[i];
        const int on = in_contact[i] ? f >= cc[1] : f >= cc[0];
        if (on && !in_contact[i] && t - liftoff_time[i] >= cc[4]) touchdown_time[i] = t;
        if (!on && in_contact[i]) liftoff_time[i] = t;
        in_contact[i] = (unsigned char)on;
        double since = t - touchdown_time[i];
        if (!(since > 0.0)) since = 0.0; /* also t - inf: not touched down */
        const double ramp = cc[3] > 0.0 ? fmin(since / cc[3], 1.0) : 1.0;
        const double load = fmin(fmax(f / cc[2], 0.0), 1.0);
        w[i] = on ? fmin(fmax(ramp * load, 0.0), 1.0) : 0.0;
    }
}

void estimator_legs(const double *R, const double *omega, const double *p, const double *J,
                    const double *qd, int nu, const double *rho, double *rel, double *v_leg) {
    const double down[3] = {-R[6], -R[7], -R[8]}; /* world -z in the base frame: -R^T e_z */
    for (int i = 0; i < NFEET; ++i) {
        double off[3], r[3], lin[3] = {0, 0, 0}, ang[3] = {0, 0, 0}, rv[3];
        for (int k = 0; k < 3; ++k) {
            off[k] = rho[i] * down[k];
            r[k] = p[3 * i + k] + off[k];
        }
        const double *Ji = J + (long)i * 6 * nu;
        for (int k = 0; k < 3; ++k)
            for (int j = 0; j < nu; ++j) {
                lin[k] += Ji[k * nu + j] * qd[j];
                ang[k] += Ji[(3 + k) * nu + j] * qd[j];
            }
        rv[0] = omega[1] * r[2] - omega[2] * r[1] + lin[0] + ang[1] * off[2] - ang[2] * off[1];
        rv[1] = omega[2] * r[0] - omega[0] * r[2] + lin[1] + ang[2] * off[0] - ang[0] * off[2];
        rv[2] = omega[0] * r[1] - omega[1] * r[0] + lin[2] + ang[0] * off[1] - ang[1] * off[0];
        for (int k = 0; k < 3; ++k) {
            rel[3 * i + k] = R[3 * k] * r[0] + R[3 * k + 1] * r[1] + R[3 * k + 2] * r[2];
            v_leg[3 * i + k] = -(R[3 * k] * rv[0] + R[3 * k + 1] * rv[1] + R[3 * k + 2] * rv[2]);
        }
    }
}

/* The buffers of one sample (`estimator_core.SampleBuffers` lays out the same struct). */
typedef struct {
    int nu, njoints, nfeet;
    const double *joints, *feet, *foot_radius; /* the tree (leg_kinematics.c), rho (4,) */
    double *work;                              /* 12 per joint */
    const double *quat, *gyro, *specific_force, *q, *qd, *force; /* xyzw, base frame */
    const double *contact_config;              /* estimator_contact's cc (5,) */
    unsigned char *in_contact;
    double *touchdown_time, *liftoff_time, *weights;
    double *rotation, *positions, *jacobians, *rel, *v_leg, *acceleration;
    double *last_q, *last_imu; /* (nu,), (6,): the joints and [gyro, specific force] before */
    int *flags; /* [has_last (in), q_same, imu_same (out)] */
} Sample;

enum { MEASURED, BAD_QUAT, BAD_GYRO, BAD_ACC, BAD_Q, BAD_QD, BAD_FORCE, STALE };

static int all_finite(const double *a, int n) {
    for (int i = 0; i < n; ++i)
        if (!isfinite(a[i])) return 0;
    return 1;
}

/* One sample at time t [s] (last_t: the last sample's, NaN before the first). Returns MEASURED,
 * or the first non-finite input (BAD_QUAT also for |quat| < 0.5; BAD_FORCE only with
 * use_force), or STALE for t <= last_t: then nothing changed. Otherwise: with use_force the
 * contact weights (estimator_contact); flags[1] = the joints bit-identical to the last
 * sample's, flags[2] = the IMU's too (with flags[0] = 1: there is a last sample), the last
 * saved; R (normalised quat); with own_kinematics the foot positions and Jacobians
 * (leg_kinematics, base at the origin), else they are the caller's; rel, v_leg
 * (estimator_legs); a = R f - gravity e_z. */
int estimator_measure(Sample *s, double t, double last_t, int use_force, int own_kinematics,
                      double gravity) {
    const int nu = s->nu;
    const double *u = s->quat;
    if (!all_finite(u, 4)) return BAD_QUAT;
    if (!all_finite(s->gyro, 3)) return BAD_GYRO;
    if (!all_finite(s->specific_force, 3)) return BAD_ACC;
    if (!all_finite(s->q, nu)) return BAD_Q;
    if (!all_finite(s->qd, nu)) return BAD_QD;
    if (use_force && !all_finite(s->force, NFEET)) return BAD_FORCE;
    const double n2 = u[0] * u[0] + u[1] * u[1] + u[2] * u[2] + u[3] * u[3];
    if (n2 < 0.25) return BAD_QUAT;
    if (t <= last_t) return STALE;
    if (use_force)
        estimator_contact(s->force, t, s->contact_config, s->in_contact, s->touchdown_time,
                          s->liftoff_time, s->weights);
    int q_same = s->flags[0], imu_same = s->flags[0];
    for (int j = 0; j < nu; ++j) q_same = q_same && s->q[j] == s->last_q[j];
    for (int k = 0; k < 3; ++k)
        imu_same = imu_same && s->gyro[k] == s->last_imu[k] &&
                   s->specific_force[k] == s->last_imu[3 + k];
    s->flags[1] = q_same, s->flags[2] = imu_same, s->flags[0] = 1;
    memcpy(s->last_q, s->q, sizeof(double) * (size_t)nu);
    memcpy(s->last_imu, s->gyro, sizeof(double) * 3);
    memcpy(s->last_imu + 3, s->specific_force, sizeof(double) * 3);
    const double norm = sqrt(n2), x = u[0] / norm, y = u[1] / norm, z = u[2] / norm,
                 w = u[3] / norm;
    double *R = s->rotation;
    R[0] = 1 - 2 * (y * y + z * z), R[1] = 2 * (x * y - z * w), R[2] = 2 * (x * z + y * w);
    R[3] = 2 * (x * y + z * w), R[4] = 1 - 2 * (x * x + z * z), R[5] = 2 * (y * z - x * w);
    R[6] = 2 * (x * z - y * w), R[7] = 2 * (y * z + x * w), R[8] = 1 - 2 * (x * x + y * y);
    if (own_kinematics)
        leg_kinematics(s->njoints, s->joints, s->nfeet, s->feet, nu, s->q, s->work, s->positions,
                       s->jacobians);
    estimator_legs(R, s->gyro, s->positions, s->jacobians, s->qd, nu, s->foot_radius, s->rel,
                   s->v_leg);
    for (int k = 0; k < 3; ++k) {
        const double *f = s->specific_force;
        s->acceleration[k] = R[3 * k] * f[0] + R[3 * k + 1] * f[1] + R[3 * k + 2] * f[2];
    }
    s->acceleration[2] -= gravity;
    return MEASURED;
}

/* Row j of C (28 x 18) as at most two (column, value) entries. */
static int c_row(int j, int *col, double *val) {
    if (j < 12) { /* p - c_i */
        int i = j / 3, k = j % 3;
        col[0] = k, val[0] = 1.0, col[1] = 6 + 3 * i + k, val[1] = -1.0;
        return 2;
    }
    if (j < 24) { /* v */
        col[0] = 3 + (j - 12) % 3, val[0] = 1.0;
        return 1;
    }
    col[0] = 8 + 3 * (j - 24), val[0] = 1.0; /* c_i,z */
    return 1;
}

static void predict(double dt, const double *acc, const double *inflation, const double *cfg,
                    double *x, double *P) {
    for (int k = 0; k < 3; ++k) {
        x[k] += dt * x[3 + k] + 0.5 * dt * dt * acc[k];
        x[3 + k] += dt * acc[k];
    }
    /* P <- A P A^T, A = I + dt (p += v): rows 0..2 += dt rows 3..5, then the same on columns */
    for (int k = 0; k < 3; ++k)
        for (int m = 0; m < NX; ++m) P[k * NX + m] += dt * P[(3 + k) * NX + m];
    for (int m = 0; m < NX; ++m)
        for (int k = 0; k < 3; ++k) P[m * NX + k] += dt * P[m * NX + 3 + k];
    for (int k = 0; k < 3; ++k) {
        P[k * NX + k] += dt * cfg[Q_P];
        P[(3 + k) * NX + 3 + k] += dt * cfg[Q_V];
    }
    for (int i = 0; i < NFEET; ++i)
        for (int k = 0; k < 3; ++k) P[(6 + 3 * i + k) * (NX + 1)] += dt * cfg[Q_C] * inflation[i];
}

int estimator_filter(double dt, const double *acc, const double *rel, const double *v_leg,
                     const double *w, const unsigned char *down, const unsigned char *was_down,
                     const double *cfg, double *x, double *P, double *ground,
                     double *innovation, double *nis, double *foot_nis) {
    double inflation[NFEET], r[NY], pct[NX * NY], s[NY * NY], l[NY * NY], rhs[NY * (NX + 1)];
    double kt[NY * NX], sie[NY], ikc[NX * NX], tmp[NX * NX], pn[NX * NX];
    for (int i = 0; i < NFEET; ++i) inflation[i] = 1.0 + (1.0 - w[i]) * cfg[SWING];
    predict(dt, acc, inflation, cfg, x, P);
    if (cfg[TOUCHDOWN] != 0.0)
        for (int i = 0; i < NFEET; ++i)
            if (down[i] && !was_down[i]) ground[i] = x[8 + 3 * i];
    for (int i = 0; i < NFEET; ++i) {
        for (int k = 0; k < 3; ++k) {
            const double y_p = -rel[3 * i + k];
            const double y_v = (1.0 - w[i]) * x[3 + k] + w[i] * v_leg[3 * i + k];
            innovation[3 * i + k] = y_p - (x[k] - x[6 + 3 * i + k]);
            innovation[12 + 3 * i + k] = y_v - x[3 + k];
            r[3 * i + k] = cfg[R_P];
            r[12 + 3 * i + k] = cfg[R_V] * inflation[i];
        }
        const double y_z = w[i] * ground[i] + (1.0 - w[i]) * (x[2] + rel[3 * i + 2]);
        innovation[24 + i] = y_z - x[8 + 3 * i];
        r[24 + i] = cfg[R_Z] * inflation[i];
    }
    /* pct = P C^T (18 x 28), s = C P C^T + diag(r) */
    int col[2];
    double val[2];
    for (int j = 0; j < NY; ++j) {
        int n = c_row(j, col, val);
        for (int m = 0; m < NX; ++m) {
            double v = 0.0;
            for (int e = 0; e < n; ++e) v += val[e] * P[m * NX + col[e]];
            pct[m * NY + j] = v;
        }
    }
    for (int j = 0; j < NY; ++j) {
        int n = c_row(j, col, val);
        for (int l = 0; l < NY; ++l) {
            double v = 0.0;
            for (int e = 0; e < n; ++e) v += val[e] * pct[col[e] * NY + l];
            s[j * NY + l] = v;
        }
        s[j * NY + j] += r[j];
    }
    if (!cholesky(s, l, NY)) {
        for (int m = 0; m < NX; ++m) x[m] = NAN;
        *nis = NAN;
        for (int i = 0; i < NFEET; ++i) foot_nis[i] = NAN;
        return 1;
    }
    /* -S^-1 [C P, e] (28 x 19): the gain's transpose kt = S^-1 C P, and sie = S^-1 e */
    for (int j = 0; j < NY; ++j) {
        for (int m = 0; m < NX; ++m) rhs[j * (NX + 1) + m] = pct[m * NY + j];
        rhs[j * (NX + 1) + NX] = innovation[j];
    }
    negative_cholesky_solve(l, rhs, NY, NX + 1);
    double total = 0.0;
    for (int j = 0; j < NY; ++j) {
        for (int m = 0; m < NX; ++m) kt[j * NX + m] = -rhs[j * (NX + 1) + m];
        sie[j] = -rhs[j * (NX + 1) + NX];
        total += innovation[j] * sie[j];
    }
    *nis = total;
    for (int m = 0; m < NX; ++m) {
        double v = 0.0;
        for (int j = 0; j < NY; ++j) v += kt[j * NX + m] * innovation[j];
        x[m] += v;
    }
    /* ikc = I - K C */
    for (int m = 0; m < NX * NX; ++m) ikc[m] = 0.0;
    for (int m = 0; m < NX; ++m) ikc[m * NX + m] = 1.0;
    for (int j = 0; j < NY; ++j) {
        int n = c_row(j, col, val);
        for (int m = 0; m < NX; ++m)
            for (int e = 0; e < n; ++e) ikc[m * NX + col[e]] -= kt[j * NX + m] * val[e];
    }
    /* pn = ikc P ikc^T + K diag(r) K^T, symmetrised; each row built as a sum of scaled rows
     * (each entry's terms added in the order of the dot products they form) */
    double ikct[NX * NX];
    for (int a = 0; a < NX; ++a)
        for (int b = 0; b < NX; ++b) ikct[b * NX + a] = ikc[a * NX + b];
    for (int a = 0; a < NX; ++a) {
        double *ta = tmp + a * NX, *pa = pn + a * NX;
        memset(ta, 0, sizeof(double) * NX);
        for (int c = 0; c < NX; ++c) add_scaled(ta, ikc[a * NX + c], P + c * NX, NX);
        memset(pa, 0, sizeof(double) * NX);
        for (int c = 0; c < NX; ++c) add_scaled(pa, ta[c], ikct + c * NX, NX);
        for (int j = 0; j < NY; ++j) add_scaled(pa, kt[j * NX + a] * r[j], kt + j * NX, NX);
    }
    for (int a = 0; a < NX; ++a)
        for (int b = 0; b < NX; ++b) P[a * NX + b] = 0.5 * (pn[a * NX + b] + pn[b * NX + a]);
    /* each foot's own 7 rows: e_i^T S_ii^-1 e_i */
    for (int i = 0; i < NFEET; ++i) {
        const int rows[7] = {3 * i, 3 * i + 1, 3 * i + 2, 12 + 3 * i, 13 + 3 * i, 14 + 3 * i,
                             24 + i};
        double block[49], factor[49], e[7], sol[7];
        for (int a = 0; a < 7; ++a) {
            e[a] = sol[a] = innovation[rows[a]];
            for (int b = 0; b < 7; ++b) block[a * 7 + b] = s[rows[a] * NY + rows[b]];
        }
        if (!cholesky(block, factor, 7)) {
            foot_nis[i] = NAN;
            continue;
        }
        negative_cholesky_solve(factor, sol, 7, 1);
        double v = 0.0;
        for (int a = 0; a < 7; ++a) v -= e[a] * sol[a];
        foot_nis[i] = v;
    }
    return all_finite(x, NX) && all_finite(P, NX * NX) ? 0 : 2;
}
