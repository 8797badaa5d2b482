/* Method "ssgp": the fitted state its files share (core/methods/ssgp/). */
#ifndef GP_METHODS_SSGP_INTERNAL_H
#define GP_METHODS_SSGP_INTERNAL_H

#include "core/methods/ssgp/ssgp.h"

#include "core/base/rng.h"
#include "core/features/rff.h"
#include "core/features/sample.h"
#include "core/linalg/linalg.h"
#include "core/methods/ssgp/auto.h"
#include "core/model/method.h"
#include "core/optim/driver.h"
#include "core/optim/optim.h"

/* Stream indices of the fit's seed (gp_rng_derive): frequencies use the seed
 * itself through gp_frequencies_draw. */
#define SAMPLE_NOISE_STREAM 1
#define LOG_2PI 1.8378770664093454836

typedef struct ssgp_impl {
    size_t R, d, m;       /* d = dimensions the kernel sees; m = 2R */
    size_t *dims;         /* d input columns (owned) */
    double *omega;        /* R x d */
    double *inv_ls;       /* d */
    double amplitude2;    /* kernel variance */
    double *L;            /* m x m lower Cholesky factor of A (upper zeroed) */
    double *alpha;        /* m */
    double *phi_y;        /* m: Phi^T y, which observe adds the new rows' terms to */
    double y_sq;          /* y^T y (working units): the LML after observe; NAN if unknown */
    /* Known per-point noise (gp_model.per_point_noise): every row enters
     * A, phi_y and y_sq weighted by sqrt(d_i), d_i = s / (s + r_i)
     * (gp_rff_lml_noise), and log_d = sum log d_i is the LML's extra term
     * (0 without). */
    double log_d;
    gp_freq_sampler sampler;
} ssgp_impl;

#endif
