/* gpserve core: the optimiser under a fit's priors and bounds.
 *
 * A method maps its optimiser's coordinates to the spec's entries (a kernel
 * parameter, the noise as gp_noise_param holds it, or something of its own
 * such as inducing inputs) and calls gp_hyper_minimize (or, for the layout
 * most methods share, gp_hyper_minimize_free) instead of gp_driver_minimize:
 * priors add -log p to the objective with its gradient (a MAP fit), and
 * bounded coordinates are optimised through the logistic map of
 * core/base/prior.h, so no step leaves them. A stepwise optimiser of its own
 * (Adam) uses gp_hyper_walk. With nothing stated it is gp_driver_minimize,
 * bit for bit. docs/design/numerics.md, "Priors and bounds". */
#ifndef GP_MODEL_HYPERFIT_H
#define GP_MODEL_HYPERFIT_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/kernel/kernel.h"
#include "core/model/hyperspec.h"
#include "core/optim/driver.h"

/* An optimiser coordinate that is the noise (gp_noise_param's x), or none of
 * the spec's entries. Other coordinates name a kernel flat index. */
#define GP_HYPER_NOISE ((size_t)-1)
#define GP_HYPER_OTHER ((size_t)-2)

/* How a method's optimiser coordinates map to the spec (gp_hyper_minimize).
 * noise_floor: the floor of gp_noise_param (s = floor + e^x) when a
 * coordinate is GP_HYPER_NOISE. */
typedef struct gp_hyper_coords {
    const size_t *coord; /* n entries: kernel flat index, GP_HYPER_NOISE or GP_HYPER_OTHER */
    size_t n;
    double noise_floor;
} gp_hyper_coords;

/* gp_driver_minimize of fn from x through the spec: x (n = c->n entries, in
 * the method's coordinates) is the start on entry and the optimum on success;
 * res->f is the minimised objective including -log prior. Refuses
 * (GP_EUNSUPPORTED naming the entry) a prior or bound on a parameter the
 * method neither optimises nor holds. s NULL or stating nothing: exactly
 * gp_driver_minimize. */
int gp_hyper_minimize(const gp_hyper_spec *s, const gp_hyper_coords *c, const gp_kernel *k,
                      gp_objective_fn fn, void *ctx, double *x, const gp_driver_options *opt,
                      gp_driver_result *res, gp_error *err);

/* gp_hyper_minimize for the layout most methods share: x = (kernel
 * parameters free_idx[0 .. n_free), the noise when learned (s = floor +
 * e^x), then dim - n_free - learned coordinates of the method's own). s NULL:
 * gp_driver_minimize. */
int gp_hyper_minimize_free(const gp_hyper_spec *s, const gp_kernel *k, const size_t *free_idx,
                           size_t n_free, int noise_learned, double noise_floor,
                           gp_objective_fn fn, void *ctx, double *x, size_t dim,
                           const gp_driver_options *opt, gp_driver_result *res, gp_error *err);

/* The MAP objective the optimiser minimises, in the method's coordinates:
 * fn(x) - log p(x) and its gradient into g (may be NULL); NAN on a refusal
 * (err says why). For checks against finite differences and reports. */
double gp_hyper_eval(const gp_hyper_spec *s, const gp_hyper_coords *c, const gp_kernel *k,
                     gp_objective_fn fn, void *ctx, const double *x, double *g, gp_error *err);

/* A stepwise optimiser (Adam) under the spec: gp_hyper_walk_prior adds
 * -d log p / dx to g (x, g in the method's coordinates; g may be NULL) and
 * returns log p; gp_hyper_walk_project puts x back inside its bounds after
 * a step (projected gradient steps). *out is NULL when s states nothing,
 * and both then do nothing. Refuses as gp_hyper_minimize does. */
typedef struct gp_hyper_walk gp_hyper_walk;
int gp_hyper_walk_new(const gp_hyper_spec *s, const gp_hyper_coords *c, const gp_kernel *k,
                      gp_hyper_walk **out, gp_error *err);
double gp_hyper_walk_prior(const gp_hyper_walk *w, const double *x, double *g);
void gp_hyper_walk_project(const gp_hyper_walk *w, double *x);
void gp_hyper_walk_free(gp_hyper_walk *w);

#endif
