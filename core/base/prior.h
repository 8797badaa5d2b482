/* gpserve core: prior densities of positive hyperparameters, and the
 * sigmoid map that keeps a bounded one inside its interval.
 *
 * Every hyperparameter x > 0 (a kernel variance, lengthscale, alpha or
 * period, or the noise variance) is optimised as t = log x. A prior adds
 * log p to the objective (a MAP fit); log p is the density of the quantity
 * the prior is stated on, as GPyTorch's priors are (prior.log_prob of the
 * constrained value, no change-of-variables term):
 *   lognormal(loc, scale)   x:     log x ~ N(loc, scale^2); mode exp(loc - scale^2)
 *   gamma(shape, rate)      x:     rate^shape x^(shape-1) e^(-rate x) / Gamma(shape)
 *   normal(loc, scale)      log x: N(loc, scale^2) on t itself; mode exp(loc)
 *   halfcauchy(scale)       x:     2 / (pi scale (1 + (x/scale)^2))
 *   uniform(low, high)      x:     1 / (high - low) on [low, high]; the fit
 *                                  holds x inside it as a bound does.
 * docs/design/numerics.md, "Priors and bounds". */
#ifndef GP_BASE_PRIOR_H
#define GP_BASE_PRIOR_H

#include "core/base/error.h"

typedef enum gp_prior_type {
    GP_PRIOR_NONE = 0,
    GP_PRIOR_LOGNORMAL,
    GP_PRIOR_GAMMA,
    GP_PRIOR_NORMAL,
    GP_PRIOR_HALFCAUCHY,
    GP_PRIOR_UNIFORM,
    GP_PRIOR_TYPE_COUNT
} gp_prior_type;

/* a, b: lognormal and normal loc, scale; gamma shape, rate; halfcauchy
 * scale (b unused); uniform low, high. */
typedef struct gp_prior {
    gp_prior_type type;
    double a, b;
} gp_prior;

/* "lognormal", ... (NULL for an unknown type) and back (-1 when unknown). */
const char *gp_prior_type_name(gp_prior_type type);
int gp_prior_type_from_name(const char *name);
/* The names of a type's parameters a and b as the API spells them ("loc",
 * "scale"; b's name NULL when it has one). */
void gp_prior_param_names(gp_prior_type type, const char **a, const char **b);

/* GP_EINVAL naming field (or field.scale, ...) unless the parameters are
 * finite and valid: scale, shape, rate > 0; 0 <= low < high (uniform). */
int gp_prior_check(const gp_prior *p, const char *field, gp_error *err);

/* log p at t = log x (see above) and d log p / dt into *dt (may be NULL).
 * -inf outside a uniform prior's interval (and *dt 0). GP_PRIOR_NONE: 0. */
double gp_prior_log_density(const gp_prior *p, double t, double *dt);

/* The interval [lo, hi] (natural units, 0 < lo < hi < inf) a uniform prior
 * implies; 0 for other types (lo = 0, hi = inf). */
int gp_prior_support(const gp_prior *p, double *lo, double *hi);

/* The bounded coordinate t in (lo, hi) (log space, finite, lo < hi) as the
 * optimiser's unconstrained u: t = lo + (hi - lo) / (1 + e^-u), so no step
 * can leave the interval; dt/du = (t - lo)(hi - t) / (hi - lo). */
double gp_bound_to_t(double u, double lo, double hi, double *dt_du);
/* Its inverse; a t on or beyond an end is taken a hair inside (1e-9 of the
 * width), so a start on a bound is a finite u. */
double gp_bound_to_u(double t, double lo, double hi);

#endif
