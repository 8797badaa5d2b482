/* gpserve core: choosing the inducing inputs Z (defined in core/inducing/select.c).
 * Points are point-major (each column one point) in working units. */
#ifndef GP_INDUCING_SELECT_H
#define GP_INDUCING_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/kernel/kernel.h"

/* ---- choosing Z ---- */
typedef enum gp_inducing_selection {
    GP_INDUCING_GREEDY = 0, /* maximum residual variance = pivoted Cholesky of Kff */
    GP_INDUCING_KMEANS,     /* k-means centres (k-means++ seeding, Lloyd) */
    GP_INDUCING_RANDOM      /* distinct training inputs, uniformly without replacement */
} gp_inducing_selection;

/* "greedy" | "kmeans" | "random" -> selection; -1 when unknown. */
int gp_inducing_selection_from_name(const char *name);
const char *gp_inducing_selection_name(gp_inducing_selection s);

/* Choose up to M inducing inputs among the n points X (d x n) into Z (d x M,
 * caller-allocated); *m_out receives how many were chosen.
 *   greedy: deterministic; each step takes the point of largest residual
 *           variance k(x,x) - Q_xx under kernel k (O(n M^2) time, O(n M)
 *           memory) and stops early once that residual is below 1e-12 of
 *           the largest prior variance, which is how it meets duplicate
 *           inputs: a point equal to a chosen one has residual 0 and is
 *           never chosen again (so fewer than M come back when X has fewer
 *           than M distinct points).
 *   random: seeded; distinct input values (duplicated rows count once).
 *   kmeans: seeded k-means++ then Lloyd iterations (at most 100, until no
 *           assignment changes); an emptied cluster is re-seeded at the point
 *           farthest from its centre. Centres, not data points; M is capped at
 *           the number of distinct inputs.
 * k is used by greedy only (may be NULL otherwise). */
int gp_inducing_select(gp_inducing_selection sel, const gp_kernel *k, const double *X, size_t n,
                       size_t d, size_t M, uint64_t seed, double *Z, size_t *m_out,
                       gp_error *err);

#endif
