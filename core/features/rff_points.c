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

/* fma() inline in the AVX-512 and AVX2 clones (a libm call in the default) */
#define RFF_FMA_CLONES GP_CLONES

/* Z (R x b, a point's R phases contiguous) = Omega x_i for each point:
 * z_r = fma over k = 0 .. d-1 in order, the R phases of a point side by side
 * in the vector lanes (Omega's column k is contiguous). A point's bits depend
 * on its own x only; no reduction of partial sums, so a small d costs d fma
 * per phase (gp_dot_columns's 8 partial sums cost 2x at d = 8). */
RFF_FMA_CLONES
static void phases(const double *Xs, size_t ldx, size_t b, size_t d, const double *omega,
                   size_t R, double *Z)
{
    for (size_t i = 0; i < b; i++) {
        double *z = Z + i * R;
        for (size_t r = 0; r < R; r++)
            z[r] = 0.0;
        for (size_t k = 0; k < d; k++) {
            double x = Xs[k * ldx + i];
            const double *o = omega + k * R;
            for (size_t r = 0; r < R; r++)
                z[r] = fma(o[r], x, z[r]);
        }
    }
}

/* F column i = sqrt(a2/R) [cos z; sin z]. The trigonometric map takes all
 * R b phases in one call (gp_sincos_scaled computes every element on its
 * own, in blocks of 64: a call per point would pad each point's R to 64). */
void gp_rff_features_columns(const double *Xs, size_t ldx, size_t b, size_t d,
                             const double *omega, size_t R, double amplitude2, double *work,
                             double *F)
{
    double *Z = work, *S = Z + R * b; /* the phases, then cosines; sines */
    size_t m = 2 * R;
    phases(Xs, ldx, b, d, omega, R, Z);
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
