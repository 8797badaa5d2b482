/* gpserve core: the parameters of a coregionalised model, shared by the
 * methods that take options.coregionalization (exact, sgpr, svgp;
 * docs/design/multioutput.md).
 *
 * - gp_coreg_spec: the option's value parsed and checked (what does not
 *   need p at request time, the rest at fit time).
 * - gp_coreg_params: the Q latent kernels (variance held at 1), W_q,
 *   kappa_q, the per-output noises and standardisation; their flat packing
 *   into an optimiser vector, B_q, persistence (state arrays "coreg_*") and
 *   the read-only gp_coreg_view of gp_model.coreg.
 * - the observed entries of y (NaN = missing) and their checks. */
#ifndef GP_COREG_PARAMS_H
#define GP_COREG_PARAMS_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/base/state.h"
#include "core/base/value.h"
#include "core/kernel/kernel.h"
#include "core/model/model.h"

typedef enum gp_coreg_solver {
    GP_COREG_SOLVER_AUTO = 0,
    GP_COREG_SOLVER_KRONECKER,
    GP_COREG_SOLVER_GENERAL
} gp_coreg_solver;

typedef struct gp_coreg_spec {
    gp_coreg_type type;     /* GP_COREG_NONE: the option was not given */
    size_t rank;            /* columns of each W_q (default 1) */
    size_t latents;         /* Q (ICM: 1; LMC default 2) */
    int kappa;              /* learn the diagonal part (default 1) */
    gp_coreg_solver solver; /* exact only */
} gp_coreg_spec;

/* The option's JSON Schema (the descriptor's choices text), without and
 * with the member `solver` (exact's). */
extern const char gp_coreg_option_schema[];
extern const char gp_coreg_option_schema_solver[];
/* The descriptor's help text of the option. */
extern const char gp_coreg_option_help[];

/* Parse the OBJECT value v (NULL: not given, type NONE) under `field`
 * ("options.coregionalization"), naming a bad member
 * ("options.coregionalization.rank"). solver_allowed: the method takes
 * `solver` (exact). What needs p is checked by gp_coreg_spec_check_outputs. */
int gp_coreg_spec_parse(const gp_value *v, const char *field, int solver_allowed,
                        gp_coreg_spec *out, gp_error *err);
/* A check_option for a method whose only OBJECT option is this one. */
int gp_coreg_check_option(const char *name, const gp_value *v, size_t d, const char *field,
                          gp_error *err);
/* The same for exact, whose option also takes `solver`. */
int gp_coreg_check_option_solver(const char *name, const gp_value *v, size_t d,
                                 const char *field, gp_error *err);
/* At fit time, with p outputs: rank <= p, p <= GP_COREG_MAX_OUTPUTS. */
int gp_coreg_spec_check_outputs(const gp_coreg_spec *s, size_t p, gp_error *err);
/* The request's spec (type NONE without the option); checks with p. */
int gp_coreg_spec_from_request(const gp_fit_request *req, int solver_allowed,
                               gp_coreg_spec *out, gp_error *err);

/* ---- observed entries ---- */

/* The observed entries of y (n x p column-major, NaN missing) in row order
 * (row i's outputs j ascending, then row i + 1): entry a is (row[a],
 * out[a]); M of them. */
typedef struct gp_coreg_entries {
    size_t M;
    size_t *row, *out;
} gp_coreg_entries;

int gp_coreg_entries_build(const double *y, size_t n, size_t p, gp_coreg_entries *e,
                           gp_error *err);
void gp_coreg_entries_free(gp_coreg_entries *e);
/* 1 when every output is observed at every row (isotopic). */
int gp_coreg_entries_isotopic(const gp_coreg_entries *e, size_t n, size_t p);

/* Checks of the coregionalised targets y (n x p, NaN missing), rows named
 * from row `shift`: an infinite value ("y[i][j]"), a row with no observed
 * output ("y[i]"), and, when whole is set (a fit), an output never observed
 * ("y", naming the output) and an output whose spread float64 cannot hold. */
int gp_coreg_check_targets(const double *y, size_t n, size_t p, int whole, int standardize,
                           long shift, gp_error *err);

/* ---- the parameters ---- */

typedef struct gp_coreg_params {
    gp_coreg_type type;
    size_t p, q, rank;
    int learn_kappa, learn_noise;
    gp_kernel **kernels;  /* q copies of the request's kernel (owned) */
    double *W;            /* q blocks p x rank */
    double *kappa;        /* p x q (zero when not learned) */
    double *noise;        /* p, working units */
    double *noise_floor;  /* p: s = floor + e^x, as gp_noise_param */
    double *y_mean, *y_scale; /* p */
    double *B;            /* q blocks p x p: gp_coreg_params_update_B */
    /* the optimiser's kernel coordinates: latent l's free flat indices */
    size_t *kfree;        /* q * n_kparams */
    size_t *n_kfree;      /* q */
    size_t n_kparams;     /* flat parameters of one kernel copy */
} gp_coreg_params;

/* Allocate for the spec and p outputs from the request's kernel: Q copies
 * with variance held at 1 (each leaf of a leaf or product kernel) and
 * lengthscales scaled by 2^(l - (Q-1)/2) (latent l), the starting W, kappa,
 * and noise (the request's, else 1 per output). held: the kernel's free
 * mask with the request's held entries (gp_hyper_free_mask, may be NULL). */
int gp_coreg_params_init(gp_coreg_params *cp, const gp_coreg_spec *spec, size_t p,
                         const gp_kernel *kernel, const gp_fit_request *req, gp_error *err);
void gp_coreg_params_free(gp_coreg_params *cp);
/* The optimiser vector's length and its parts: every latent's free kernel
 * parameters, then W (raw), then log kappa (when learned), then the
 * noises' x (when learned). */
size_t gp_coreg_params_dim(const gp_coreg_params *cp);
size_t gp_coreg_params_w_offset(const gp_coreg_params *cp);
void gp_coreg_params_pack(const gp_coreg_params *cp, double *x);
/* Unpack x into the kernels, W, kappa, noise, and B. */
void gp_coreg_params_unpack(gp_coreg_params *cp, const double *x);
void gp_coreg_params_update_B(gp_coreg_params *cp);
/* The chain rule of the packing: g (dim) from the gradient with respect
 * to each latent's kernel parameters gk (q x n_kparams), B_q (q p x p,
 * symmetric: dL/dB_q[i,j] for the pair, counted once per ordered pair) and
 * d/d noise_j (gs, p, natural units). */
void gp_coreg_params_chain(const gp_coreg_params *cp, const double *gk, const double *gB,
                           const double *gs, double *g);

/* Per-output standardisation of the observed entries (standardize 0:
 * mean 0, scale 1) into cp->y_mean, y_scale; the working targets of the
 * entries into yw (M). */
void gp_coreg_standardise(gp_coreg_params *cp, const double *y, size_t n,
                          const gp_coreg_entries *e, int standardize, double *yw);

/* State arrays "coreg_*" (type, sizes, kernels' flat parameters, W,
 * kappa, noise, standardisation) and their inverse: import rebuilds the Q
 * kernels as copies of `kernel` (the model's) with the stored parameters. */
int gp_coreg_params_export(const gp_coreg_params *cp, gp_state *st, gp_error *err);
int gp_coreg_params_import(gp_coreg_params *cp, const gp_state *st, const gp_kernel *kernel,
                           gp_error *err);
/* Point view at the arrays (n_observed, kronecker: the caller's). */
void gp_coreg_params_view(const gp_coreg_params *cp, gp_coreg_view *v);

#endif
