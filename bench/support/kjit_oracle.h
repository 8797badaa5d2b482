/* Benchmark support: the oracle of KJIT's Experiment 1 (docs/methods/
 * kernel-jit-online.md §5): the binary logistic factor f(p | z) =
 * delta(p - sigma(z)) with incoming m_{z->f} = N(z; m, v) and m_{p->f} =
 * Beta(p; a, b). Integrating p out leaves the tilted density of z
 *
 *     t(z) = N(z; m, v) sigma(z)^(a-1) (1 - sigma(z))^(b-1),
 *
 * and the regression target is its projection onto the Gaussians
 * (proj[t], moment matching, §1): the mean and variance of t, and log Z.
 *
 * The note's oracle is importance sampling (§1, 500,000 samples); this one
 * is deterministic quadrature, accurate to ~1e-13 relative on the moments:
 * the mode of log t by safeguarded Newton (log t is strictly concave for
 * a, b >= 1: its second derivative is at most -1/v), the range where t is
 * above e^-80 of its peak, then adaptive Gauss-Legendre (16 points on a
 * panel against 16 on each half, bisecting until they agree to 1e-14 of the
 * Laplace estimate of the integral). tests/unit/test_kjit_oracle.c checks it
 * against a brute-force grid integral and exact identities.
 *
 * Also the measure of Experiment 1: the KL divergence between two Gaussians
 * given by mean and log variance. */
#ifndef GP_BENCH_KJIT_ORACLE_H
#define GP_BENCH_KJIT_ORACLE_H

#include <stddef.h>

#include "core/base/error.h"

#define GP_KJIT_GL_POINTS 16

/* The quadrature rule (Gauss-Legendre nodes and weights on [-1, 1]), computed
 * once by gp_kjit_oracle_init and owned by the caller. */
typedef struct gp_kjit_oracle {
    double node[GP_KJIT_GL_POINTS];
    double weight[GP_KJIT_GL_POINTS];
    size_t evaluations; /* of log t, summed over calls (for the bench's notes) */
} gp_kjit_oracle;

typedef struct gp_kjit_moments {
    double log_z; /* log of the integral of t (N(z; m, v) normalised) */
    double mean, var;
    double mode; /* of t */
} gp_kjit_moments;

void gp_kjit_oracle_init(gp_kjit_oracle *o);

/* The projected tilted distribution for N(z; m, v) and Beta(a, b): v > 0,
 * a >= 1, b >= 1 (log-concave t), all finite; GP_EINVAL otherwise, GP_EINTERNAL
 * if the quadrature does not settle (not seen). */
int gp_kjit_logistic_tilted(gp_kjit_oracle *o, double m, double v, double a, double b,
                            gp_kjit_moments *out, gp_error *err);

/* log t(z) + log Z up to the constant -log sqrt(2 pi v): the log integrand,
 * -(z - m)^2 / (2v) + (a - 1) log sigma(z) + (b - 1) log(1 - sigma(z)). */
double gp_kjit_log_integrand(double z, double m, double v, double a, double b);

/* log sigma(z) without overflow or cancellation. */
double gp_kjit_log_sigmoid(double z);

/* KL[N(m1, exp(lv1)) || N(m2, exp(lv2))], accurate for nearly equal
 * arguments (no cancellation of log(v2/v1) + v1/v2 - 1). */
double gp_kjit_gauss_kl(double m1, double lv1, double m2, double lv2);

#endif
