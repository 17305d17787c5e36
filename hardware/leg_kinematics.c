/* Foot positions and Jacobians of a floating-base tree with the base at the origin in the
 * identity orientation: the arithmetic of `hardware.leg_kinematics` (`CompiledLegKinematics`
 * packs the tree and says where each number goes). Every array is float64, row-major.
 *
 * The tree, `njoints` records of JOINT_SIZE numbers (joint 0 the free flyer), topologically
 * ordered (a parent before its children):
 *   type (0 free flyer, 1 revolute, 2 prismatic), parent (-1 for the root), index of the
 *   joint's coordinate in q and of its column in J (-1 for the free flyer), axis (3), and
 *   its placement in the parent joint, R (3, 3) and p (3,).
 * The feet, `nfeet` records of FOOT_SIZE: the parent joint and the frame's position in it (3).
 *
 *   o_M_i = o_M_parent * jointPlacement_i * M_J(q_i),  M_J = (Rot(axis, q_i), 0) revolute,
 *                                                             (I, axis q_i) prismatic
 *   p_f = o_p_j + o_R_j p_frame
 *   J (6, nu), LOCAL_WORLD_ALIGNED at the foot frame, the column of an ancestor joint k:
 *     revolute   [w x (p_f - o_p_k); w],  w = o_R_k axis
 *     prismatic  [o_R_k axis; 0]
 * Out: p (nfeet, 3), J (nfeet, 6, nu); `work` holds 12 numbers per joint.
 */
#include <math.h>
#include <string.h>

#define JOINT_SIZE 19
#define FOOT_SIZE 4
enum { FREE_FLYER, REVOLUTE, PRISMATIC };

/* Rot(axis, angle) (Rodrigues), the x, y and z axes written out as `dynamics.spatial` does */
static void axis_rotation(const double *a, double angle, double *r) {
    const double c = cos(angle), s = sin(angle);
    if (a[0] == 1.0 && a[1] == 0.0 && a[2] == 0.0) {
        const double m[9] = {1, 0, 0, 0, c, -s, 0, s, c};
        memcpy(r, m, sizeof m);
    } else if (a[0] == 0.0 && a[1] == 1.0 && a[2] == 0.0) {
        const double m[9] = {c, 0, s, 0, 1, 0, -s, 0, c};
        memcpy(r, m, sizeof m);
    } else if (a[0] == 0.0 && a[1] == 0.0 && a[2] == 1.0) {
        const double m[9] = {c, -s, 0, s, c, 0, 0, 0, 1};
        memcpy(r, m, sizeof m);
    } else {
        const double x = a[0], y = a[1], z = a[2], t = 1.0 - c;
        const double m[9] = {c + x * x * t,     x * y * t - z * s, x * z * t + y * s,
                             y * x * t + z * s, c + y * y * t,     y * z * t - x * s,
                             z * x * t - y * s, z * y * t + x * s, c + z * z * t};
        memcpy(r, m, sizeof m);
    }
}

static void mat_mul(const double *a, const double *b, double *out) { /* (3,3) (3,3) */
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            out[3 * i + j] = a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j];
}

static void mat_vec(const double *a, const double *v, double *out) { /* (3,3) (3,) */
    for (int i = 0; i < 3; ++i) out[i] = a[3 * i] * v[0] + a[3 * i + 1] * v[1] + a[3 * i + 2] * v[2];
}

void leg_kinematics(int njoints, const double *joints, int nfeet, const double *feet, int nu,
                    const double *q, double *work, double *p, double *J) {
    double *rot = work, *pos = work + 9 * njoints; /* o_R_i (9 each), o_p_i (3 each) */
    for (int i = 0; i < njoints; ++i) {
        const double *rec = joints + (long)i * JOINT_SIZE;
        const int type = (int)rec[0], parent = (int)rec[1], qi = (int)rec[2];
        const double *axis = rec + 4, *fixed_r = rec + 7, *fixed_p = rec + 16;
        double local_r[9], local_p[3], joint_r[9];
        memcpy(local_p, fixed_p, sizeof local_p);
        if (type == REVOLUTE) {
            axis_rotation(axis, q[qi], joint_r);
            mat_mul(fixed_r, joint_r, local_r);
        } else {
            memcpy(local_r, fixed_r, sizeof local_r);
            if (type == PRISMATIC) {
                double shift[3];
                mat_vec(fixed_r, axis, shift);
                for (int k = 0; k < 3; ++k) local_p[k] += shift[k] * q[qi];
            }
        }
        if (parent < 0) {
            memcpy(rot + 9 * i, local_r, sizeof local_r);
            memcpy(pos + 3 * i, local_p, sizeof local_p);
        } else {
            mat_mul(rot + 9 * parent, local_r, rot + 9 * i);
            mat_vec(rot + 9 * parent, local_p, pos + 3 * i);
            for (int k = 0; k < 3; ++k) pos[3 * i + k] += pos[3 * parent + k];
        }
    }
    memset(J, 0, sizeof(double) * (size_t)nfeet * 6 * (size_t)nu);
    for (int f = 0; f < nfeet; ++f) {
        const double *rec = feet + (long)f * FOOT_SIZE;
        const int joint = (int)rec[0];
        double *pf = p + 3 * f, *jf = J + (long)f * 6 * nu;
        mat_vec(rot + 9 * joint, rec + 1, pf);
        for (int k = 0; k < 3; ++k) pf[k] += pos[3 * joint + k];
        for (int k = joint; k >= 0; k = (int)joints[(long)k * JOINT_SIZE + 1]) {
            const double *jr = joints + (long)k * JOINT_SIZE;
            const int type = (int)jr[0], col = (int)jr[3];
            if (type == FREE_FLYER) continue;
            double w[3];
            mat_vec(rot + 9 * k, jr + 4, w);
            if (type == PRISMATIC) {
                for (int r = 0; r < 3; ++r) jf[r * nu + col] = w[r];
                continue;
            }
            const double d[3] = {pf[0] - pos[3 * k], pf[1] - pos[3 * k + 1], pf[2] - pos[3 * k + 2]};
            jf[0 * nu + col] = w[1] * d[2] - w[2] * d[1];
            jf[1 * nu + col] = w[2] * d[0] - w[0] * d[2];
            jf[2 * nu + col] = w[0] * d[1] - w[1] * d[0];
            for (int r = 0; r < 3; ++r) jf[(3 + r) * nu + col] = w[r];
        }
    }
}
