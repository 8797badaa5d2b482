/* The impl of a coregionalised sgpr or svgp model and what its files share:
 * core/coreg/sparse_impl.h. */
#include "core/coreg/sparse_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"

/* none.Z of every coregionalised impl: an address no inducing posterior's
 * Z can hold (theirs are NULL or their own allocation). */
static double impl_mark;

void gp_coreg_sparse_impl_mark(gp_coreg_sparse_impl *im)
{
    im->none.Z = &impl_mark;
}

int gp_coreg_sparse_impl_is(const void *impl)
{
    return impl != NULL && ((const gp_inducing_post *)impl)->Z == &impl_mark;
}

void gp_coreg_sparse_free(void *impl)
{
    gp_coreg_sparse_impl *im = impl;
    if (im == NULL)
        return;
    for (size_t q = 0; im->Zp && q < im->cp.q; q++)
        gp_kernel_points_free(im->Zp[q]);
    free(im->Zp);
    gp_coreg_params_free(&im->cp);
    free(im->Z);
    free(im->Lf);
    free(im->A);
    gp_coreg_sparse_post_free(&im->post);
    free(im);
}

int gp_coreg_sparse_impl_prepare(gp_coreg_sparse_impl *im, gp_error *err)
{
    size_t q = im->cp.q, m = im->m;
    im->Lf = gp_alloc_doubles(q * m * m, err);
    im->Zp = calloc(q, sizeof *im->Zp);
    if (!im->Lf || !im->Zp)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_coreg_sparse_at at = gp_coreg_sparse_impl_at(im);
    int rc = gp_coreg_sparse_kuu(&at, im->Lf, err);
    for (size_t l = 0; rc == GP_OK && l < q; l++)
        rc = gp_kernel_points_new(im->cp.kernels[l], im->Z, m, &im->Zp[l], err);
    return rc;
}

size_t gp_coreg_sparse_per_q(const gp_coreg_params *cp)
{
    return cp->rank + (cp->learn_kappa ? cp->p : 0);
}

void gp_coreg_sparse_build_A(const gp_coreg_params *cp, double *A)
{
    size_t p = cp->p, R = cp->rank, per_q = gp_coreg_sparse_per_q(cp);
    memset(A, 0, p * cp->q * per_q * sizeof *A);
    for (size_t q = 0; q < cp->q; q++) {
        for (size_t r = 0; r < R; r++)
            for (size_t j = 0; j < p; j++)
                A[j + (q * per_q + r) * p] = cp->W[q * p * R + r * p + j];
        for (size_t j = 0; cp->learn_kappa && j < p; j++)
            A[j + (q * per_q + R + j) * p] = sqrt(cp->kappa[q * p + j]);
    }
}

void gp_coreg_sparse_chain(const gp_coreg_params *cp, const double *gk, const double *gA,
                           const double *gs, double *gB, double *g)
{
    size_t p = cp->p, R = cp->rank, per_q = gp_coreg_sparse_per_q(cp);
    size_t o = gp_coreg_params_w_offset(cp);
    memset(gB, 0, cp->q * p * p * sizeof *gB);
    gp_coreg_params_chain(cp, gk, gB, gs, g); /* kernels and noises; W and kappa below */
    for (size_t q = 0; q < cp->q; q++)
        for (size_t r = 0; r < R; r++)
            for (size_t j = 0; j < p; j++)
                g[o + q * p * R + r * p + j] = gA[j + (q * per_q + r) * p];
    o += cp->q * p * R;
    /* A = sqrt(kappa) = exp(x / 2): dF/dx = dF/dA sqrt(kappa) / 2 */
    for (size_t q = 0; cp->learn_kappa && q < cp->q; q++)
        for (size_t j = 0; j < p; j++)
            g[o + q * p + j] = 0.5 * gA[j + (q * per_q + R + j) * p] * sqrt(cp->kappa[q * p + j]);
}

gp_coreg_sparse_at gp_coreg_sparse_impl_at(const gp_coreg_sparse_impl *im)
{
    gp_coreg_sparse_at at = {im->cp.p, im->cp.q, im->per_q,
                             (const gp_kernel *const *)im->cp.kernels, im->A, im->cp.noise,
                             im->Z, im->m};
    return at;
}
