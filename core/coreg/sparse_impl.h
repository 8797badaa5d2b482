/* gpserve core: the impl of a coregionalised sgpr or svgp model
 * (core/coreg/sparse_fit.h, sparse_predict.h) and the mixing matrix A of
 * its latent functions (core/coreg/sparse.h). */
#ifndef GP_COREG_SPARSE_IMPL_H
#define GP_COREG_SPARSE_IMPL_H

#include "core/coreg/params.h"
#include "core/coreg/sparse.h"
#include "core/inducing/inducing.h"

typedef struct gp_coreg_sparse_impl {
    /* Unused but for none.Z, the mark gp_coreg_sparse_impl_is reads
     * (gp_coreg_sparse_impl_mark): sgpr's and svgp's other impl is a
     * gp_inducing_post, so both begin alike. */
    gp_inducing_post none;
    gp_coreg_params cp;
    size_t m, d, per_q, K; /* inducing points, input width, latents per kernel, L m */
    double *Z;             /* d x m */
    double *Lf;            /* q blocks m x m: chol(Kuu_q + jitter) */
    double *A;             /* p x L */
    gp_coreg_sparse_post post;
    gp_kernel_points **Zp; /* q: Z prepared for each latent kernel */
} gp_coreg_sparse_impl;

/* 1 when a model's impl (sgpr's or svgp's) is a gp_coreg_sparse_impl
 * rather than a gp_inducing_post: none.Z is a marker no posterior holds. */
int gp_coreg_sparse_impl_is(const void *impl);
/* gp_method.free_impl of such an impl. */
void gp_coreg_sparse_free(void *impl);
/* Mark a new (zeroed) impl as this module's. */
void gp_coreg_sparse_impl_mark(gp_coreg_sparse_impl *im);
/* Latents per kernel: the R columns of W_q, and p more with kappa. */
size_t gp_coreg_sparse_per_q(const gp_coreg_params *cp);
/* A (p x q per_q) from W and kappa. */
void gp_coreg_sparse_build_A(const gp_coreg_params *cp, double *A);
/* The optimiser's gradient of cp's packing (gp_coreg_params_dim entries)
 * from dF/dA, dF/dtheta_q and dF/ds (gB: q p p scratch). */
void gp_coreg_sparse_chain(const gp_coreg_params *cp, const double *gk, const double *gA,
                           const double *gs, double *gB, double *g);
/* Z prepared for the kernels and the Kuu factors, after a fit or import. */
int gp_coreg_sparse_impl_prepare(gp_coreg_sparse_impl *im, gp_error *err);
/* The at of the impl's parameters. */
gp_coreg_sparse_at gp_coreg_sparse_impl_at(const gp_coreg_sparse_impl *im);

#endif
