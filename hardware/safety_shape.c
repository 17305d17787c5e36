/* The safety layer's shaping of a command in C: the clips, the soft start's blend, the target
 * rate limit and the torque limit of `SafetyLayer._shape` (hardware/safety.py, whose
 * docstrings give each rule), in the same order and the same arithmetic (built with
 * -ffp-contract=off: no fused multiply-adds, so the results are NumPy's to the bit).
 * `safety_kernel.py` loads it. Arrays are float64 (masks uint8), `nu` joints each:
 *
 *   command (5, nu): q*, qd*, Kp, Kd, tau_ff as the controller sent them
 *   limits (6, nu):  lower, upper (position, with the margin), velocity limit, max Kp,
 *                    max Kd, torque limit
 *   last_q (nu,):    the last output's q*;  max_step (nu,): the largest |q* - last_q| now
 *   q, qd (nu,):     the measured joints;  q_start (nu,): the soft start's first pose
 *   blend:           the soft start's progress s (clipped to [0, 1] here), or < 0 outside it
 *   out (5, nu):     the shaped command;  masks (NMASKS, nu): the joints each rule moved
 *
 * Returns a bit per mask that has a joint set (bit k: mask k), 0 when nothing was changed.
 */
#include <math.h>

enum { POSITION_CLIPPED, VELOCITY_CLIPPED, GAIN_CLIPPED, FEEDFORWARD_CLIPPED, RATE_LIMITED,
       TORQUE_LIMITED, POSITION_CLIPPED_AFTER, NMASKS };

static double clip(double x, double lo, double hi) {
    /* np.minimum(np.maximum(x, lo), hi), NaN kept */
    double y = x < lo ? lo : x;
    if (x != x) y = x;
    return y > hi ? hi : y;
}

int safety_shape(int nu, const double *command, const double *limits, const double *last_q,
                 const double *max_step, const double *q, const double *qd,
                 const double *q_start, double blend, double *out, unsigned char *masks) {
    const double *lower = limits, *upper = limits + nu, *vlim = limits + 2 * nu;
    const double *max_kp = limits + 3 * nu, *max_kd = limits + 4 * nu, *tlim = limits + 5 * nu;
    double *qt = out, *qdt = out + nu, *kp = out + 2 * nu, *kd = out + 3 * nu, *tau = out + 4 * nu;
    double w = 0.0, s = blend;
    if (blend >= 0.0) {
        s = s < 0.0 ? 0.0 : (s > 1.0 ? 1.0 : s);
        w = s * s * (3.0 - 2.0 * s);
    }
    int bits = 0;
    for (int k = 0; k < NMASKS * nu; ++k) masks[k] = 0;
    for (int j = 0; j < nu; ++j) {
        const double cq = command[j], cqd = command[nu + j], ckp = command[2 * nu + j];
        const double ckd = command[3 * nu + j], ctau = command[4 * nu + j];
        unsigned char *m = masks + j;
        qt[j] = clip(cq, lower[j], upper[j]);
        m[POSITION_CLIPPED * nu] = qt[j] != cq;
        qdt[j] = clip(cqd, -vlim[j], vlim[j]);
        m[VELOCITY_CLIPPED * nu] = qdt[j] != cqd;
        kp[j] = clip(ckp, 0.0, max_kp[j]);
        kd[j] = clip(ckd, 0.0, max_kd[j]);
        m[GAIN_CLIPPED * nu] = (kp[j] != ckp) | (kd[j] != ckd);
        tau[j] = clip(ctau, -tlim[j], tlim[j]);
        m[FEEDFORWARD_CLIPPED * nu] = tau[j] != ctau;
        if (blend >= 0.0) {
            qt[j] = q_start[j] + w * (qt[j] - q_start[j]);
            qdt[j] = w * qdt[j];
            tau[j] = w * tau[j];
        }
        const double wanted_step = qt[j] - last_q[j];
        const double step = clip(wanted_step, -max_step[j], max_step[j]);
        m[RATE_LIMITED * nu] = fabs(step - wanted_step) > 1e-12;
        qt[j] = last_q[j] + step;
        const double torque = kp[j] * (qt[j] - q[j]) + kd[j] * (qdt[j] - qd[j]) + tau[j];
        const int over = fabs(torque) > tlim[j] * (1 + 1e-9);
        m[TORQUE_LIMITED * nu] = over;
        if (over && kp[j] > 0.0) {
            const double rest = kd[j] * (qdt[j] - qd[j]) + tau[j];
            const double wanted = clip(torque, -tlim[j], tlim[j]);
            qt[j] = q[j] + (wanted - rest) / kp[j];
        }
        const double inside = clip(qt[j], lower[j], upper[j]);
        m[POSITION_CLIPPED_AFTER * nu] = inside != qt[j];
        qt[j] = inside;
        for (int k = 0; k < NMASKS; ++k)
            if (m[k * nu]) bits |= 1 << k;
    }
    return bits;
}
