/* gpserve core: what the caller knows about a fit's hyperparameters (priors,
 * bounds, single parameters held) and the warnings of a fit that ends on a
 * bound. The objective wrapper through which every method that fits them
 * runs its optimiser is core/model/hyperfit.h.
 *
 * A spec has one entry per kernel parameter, in the kernel's flat order
 * (gp_kernel_get_params: log variance, log lengthscales, ...), and one more,
 * last, for the noise variance. Values (bounds, priors' supports) are in the
 * model's working units, as the kernel's are.
 *
 * A method maps its optimiser's coordinates to entries (a kernel parameter,
 * the noise as gp_noise_param holds it, or something else such as inducing
 * inputs) and calls gp_hyper_minimize instead of gp_driver_minimize: priors
 * add -log p to the objective with its gradient (a MAP fit), and bounded
 * coordinates are optimised through the logistic map of core/base/prior.h,
 * so no step leaves them. With nothing stated it is gp_driver_minimize, bit
 * for bit. docs/design/numerics.md, "Priors and bounds". */
#ifndef GP_MODEL_HYPERSPEC_H
#define GP_MODEL_HYPERSPEC_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/base/prior.h"
#include "core/base/state.h"
#include "core/kernel/kernel.h"

typedef struct gp_hyper_entry {
    gp_prior prior;
    double lo, hi; /* bounds in natural units; 0 and +inf: none */
    int fixed;     /* held at its start, beside the kernel's group bits */
    int preset;    /* the prior is the "default" preset's (a fit-time fact, not stored) */
} gp_hyper_entry;

typedef struct gp_hyper_spec {
    size_t n_kernel;       /* kernel parameters; entry[n_kernel] is the noise */
    gp_hyper_entry *entry; /* n_kernel + 1, owned */
    int preset;            /* 1: the priors are the "default" preset */
} gp_hyper_spec;

/* A spec for kernel k with nothing stated (caller: gp_hyper_spec_free). */
int gp_hyper_spec_new(gp_hyper_spec **out, const gp_kernel *k, gp_error *err);
int gp_hyper_spec_copy(gp_hyper_spec **out, const gp_hyper_spec *s, gp_error *err);
void gp_hyper_spec_free(gp_hyper_spec *s);
/* 1 when some entry has a prior or a bound (fixed entries alone do not
 * change the objective). */
int gp_hyper_shapes_objective(const gp_hyper_spec *s);
/* 1 when entry i has a prior or a bound. */
int gp_hyper_entry_stated(const gp_hyper_entry *e);
/* The bounds of entry i in natural units: its own intersected with a
 * uniform prior's support (0, +inf when none). */
void gp_hyper_entry_bounds(const gp_hyper_entry *e, double *lo, double *hi);

/* The "default" preset (BoTorch's, Hvarfner et al. 2024, moved from the
 * unit cube to standardised units): every lengthscale of a leaf seeing d
 * dimensions lognormal(sqrt 2 + log(12 d)/2, sqrt 3), every leaf's variance
 * gamma(2, 0.15) (BoTorch's and GPyTorch's classic outputscale prior), and
 * the noise lognormal(-4, 1); entries with a prior of their own keep it. */
void gp_hyper_default_priors(gp_hyper_spec *s, const gp_kernel *k);

/* GP_EINVAL naming the field ("kernel.bounds.lengthscale", "noise") unless
 * every start of k (and the noise, when given) lies within its bounds and
 * the spec matches k's parameter count. */
int gp_hyper_spec_check(const gp_hyper_spec *s, const gp_kernel *k, int noise_given,
                        double noise, gp_error *err);

/* free[i] = 1 when kernel parameter i is optimised: gp_kernel_free_mask with
 * the spec's fixed entries held too (s may be NULL). */
void gp_hyper_free_mask(const gp_kernel *k, const gp_hyper_spec *s, unsigned char *free_mask);

/* log p of the kernel's parameters and of the noise (noise < 0: not counted)
 * under the spec's priors; 0 without priors. */
double gp_hyper_log_prior(const gp_hyper_spec *s, const gp_kernel *k, double noise);

/* The entry name of kernel parameter i ("lengthscale[2]", "terms[1].variance")
 * or "noise" for i = n_kernel. */
void gp_hyper_entry_name(const gp_kernel *k, size_t i, char *buf, size_t len);

/* ---- warnings of a fit ---- */
#define GP_FIT_WARNINGS_MAX 8
typedef enum gp_warning_code { GP_WARN_AT_BOUND = 1, GP_WARN_AT_NOISE_FLOOR } gp_warning_code;
typedef struct gp_fit_warning {
    gp_warning_code code;
    size_t entry;  /* the spec entry (n_kernel: the noise) */
    int upper;     /* 1: the upper bound, 0: the lower */
    double value;  /* the fitted value, natural working units */
    double limit;  /* the bound it sits on */
} gp_fit_warning;
typedef struct gp_fit_warnings {
    gp_fit_warning w[GP_FIT_WARNINGS_MAX];
    size_t n;
} gp_fit_warnings;

/* Within this distance of a bound in log space (relative to the bounded
 * interval's log width, and never more than 1e-3) a fitted value is on it. */
#define GP_HYPER_BOUND_TOL 1e-4
/* A learned noise below this multiple of its floor sits on the floor. */
#define GP_HYPER_FLOOR_TOL 1.5

/* Fill w with the bounds the fitted kernel and noise sit on; noise < 0:
 * no noise (other likelihoods); noise_floor <= 0: no floor check. */
void gp_hyper_find_warnings(const gp_hyper_spec *s, const gp_kernel *k, double noise,
                            double noise_floor, int noise_learned, gp_fit_warnings *w);
/* "at_bound" / "at_noise_floor". */
const char *gp_warning_code_name(gp_warning_code code);

/* The spec as named arrays (written only when s is not NULL) and back
 * (NULL when the state has none: a model fitted before priors). */
int gp_hyper_export(const gp_hyper_spec *s, gp_state *st, gp_error *err);
int gp_hyper_import(const gp_state *st, const gp_kernel *k, gp_hyper_spec **out, gp_error *err);

#endif
