/* The random-feature predictive a point at a time (core/features/rff_points.h):
 * every point's features, mean and whitened norm come from arithmetic of its
 * own in an order fixed by d and R, so a point gets the same bits alone or
 * among others of a call (docs/design/numerics.md, "Determinism"). */
#include "core/features/rff_points.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/fastmath.h"
#include "core/linalg/linalg.h"

/* Largest 2R the lanes solve takes: measured against gp_solve_lower_columns
 * on 1000 columns (AVX-512 clone), 0.60-0.73x at 32, 0.74-0.90x at 64,
 * about level at 96, 1.5x at 200 (the 32 columns of a row no longer stay in L1). */
#define SMALL_FACTOR 64

/* F column i = sqrt(a2/R) [cos z; sin z], z = Omega x_i by gp_dot_columns
 * (each z_r gp_dot's bits, whatever b). The trigonometric map takes all R b
 * phases in one call (gp_sincos_scaled computes every element on its own, in
 * blocks of 64: a call per point would pad each point's R to 64). */
void gp_rff_features_columns(const double *Xs, size_t ldx, size_t b, size_t d,
                             const double *omega, size_t R, double amplitude2, double *work,
                             double *F)
{
    double *OT = work, *XT = OT + R * d; /* Omega^T (d x R), the points (d x b) */
    double *Z = XT + b * d, *S = Z + R * b; /* the phases, then cosines; sines */
    for (size_t r = 0; r < R; r++)
        for (size_t k = 0; k < d; k++)
            OT[r * d + k] = omega[k * R + r];
    for (size_t i = 0; i < b; i++)
        for (size_t k = 0; k < d; k++)
            XT[i * d + k] = Xs[k * ldx + i];
    size_t m = 2 * R;
    gp_dot_columns(OT, d, R, XT, d, b, d, Z, R);
    gp_sincos_scaled(Z, S, R * b, sqrt(amplitude2 / (double)R));
    for (size_t i = 0; i < b; i++) {
        memcpy(F + i * m, Z + i * R, R * sizeof *F);
        memcpy(F + i * m + R, S + i * R, R * sizeof *F);
    }
}

void gp_rff_moments_columns(double *F, size_t m, size_t b, const double *L, const double *alpha,
                            double *mean, double *sumsq)
{
    gp_dot_columns(F, m, b, alpha, m, 1, m, mean, b);
    /* Many points of a small factor: the lanes solve (the same bits; 2-3x
     * fewer instructions at m = 32); its scratch missing, the other. */
    double *work = b >= 32 && m <= SMALL_FACTOR ? malloc(GP_SOLVE_LANES_WORK(m) * sizeof *work)
                                                : NULL;
    if (work)
        gp_solve_lower_columns_lanes(L, m, m, F, b, m, work);
    else
        gp_solve_lower_columns(L, m, m, F, b, m);
    free(work);
    for (size_t i = 0; i < b; i++)
        sumsq[i] = gp_dot(F + i * m, F + i * m, m);
}
