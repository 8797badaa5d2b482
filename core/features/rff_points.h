/* gpserve core: the random-feature predictive a point at a time, for the
 * prediction paths of ssgp and msrfr (core/features/rff.h has the batch
 * feature map and the LML the fits use). */
#ifndef GP_FEATURES_RFF_POINTS_H
#define GP_FEATURES_RFF_POINTS_H

#include <stddef.h>

/* The bits of a point's results do not depend on the other points, their number,
 * the point's position, the threads or the CPU's vector width. Features F
 * (2R x b, column i the point i, leading dimension 2R) of the b points Xs
 * (b x d, leading dimension ldx, already divided by the lengthscales);
 * work: 2 R b doubles of scratch. Equal to gp_rff_features's transposed
 * to rounding (the products' order differs: here an fma chain over the d
 * inputs). */
void gp_rff_features_columns(const double *Xs, size_t ldx, size_t b, size_t d,
                             const double *omega, size_t R, double amplitude2, double *work,
                             double *F);
/* From those features (m = 2R) and the posterior's factor L (m x m lower)
 * and weights alpha (m): mean[i] = F_i . alpha, then F_i <- L^{-1} F_i (in
 * place) and sumsq[i] = |L^{-1} F_i|^2, the latent variance over the noise. */
void gp_rff_moments_columns(double *F, size_t m, size_t b, const double *L, const double *alpha,
                            double *mean, double *sumsq);

#endif
