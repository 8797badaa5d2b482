/* The gradient in x of the whitened inducing-point posterior: see
 * core/inducing/post_grad.h. */
#include "core/inducing/post_grad.h"

#include <stdlib.h>
#include <string.h>

#include "core/kernel/kernel_dx.h"
#include "core/linalg/linalg.h"

/* The weights of the kernel row's gradients (W: mean's, then var's, M
 * each) from a, ca = C a and the clamps of the two variance terms; a and ca
 * are overwritten. */
static void gradient_weights(const gp_inducing_post *p, double *a, double *ca, int prior_on,
                             int post_on, double *W)
{
    size_t m = p->m;
    memcpy(W, p->mt, m * sizeof *W);
    gp_solve_lower_trans_vector(p->L, m, m, W);
    for (size_t i = 0; i < m; i++)
        a[i] = (post_on ? ca[i] : 0.0) - (prior_on ? a[i] : 0.0);
    gp_solve_lower_trans_vector(p->L, m, m, a);
    for (size_t i = 0; i < m; i++)
        W[m + i] = 2.0 * p->scale * a[i];
}

/* dmean and dvar from the weights W (2M); G (2d) is scratch. */
static int contract(const gp_model *model, const gp_inducing_post *p, const double *P,
                    const double *W, int prior_on, double *G, double *dmean, double *dvar,
                    gp_error *err)
{
    size_t d = p->d;
    int rc = gp_kernel_cross_dx_contract(model->kernel, P, p->Z, p->m, W, p->m, 2, G, err);
    if (rc == GP_OK && dvar)
        rc = gp_kernel_diag_dx(model->kernel, P, NULL, dvar, err);
    for (size_t j = 0; rc == GP_OK && j < d; j++) {
        if (dmean)
            dmean[j] = G[j];
        if (dvar)
            dvar[j] = (prior_on ? p->scale * dvar[j] : 0.0) + G[d + j];
    }
    return rc;
}

int gp_inducing_predict_grad(const gp_model *model, const gp_inducing_post *p, const double *P,
                             double *mean, double *var, double *dmean, double *dvar,
                             gp_error *err)
{
    size_t m = p->m, count = 0;
    /* a, ca (M each), W (2M), G (2d) in one buffer */
    int rc = gp_checked_size(m + p->d, 4, &count, err);
    double *a = rc ? NULL : gp_alloc_doubles(count, err);
    if (a == NULL)
        return rc ? rc : GP_ENOMEM;
    double *ca = a + m, *W = a + 2 * m, *G = a + 4 * m;
    /* a as predict_block forms it (the same kernel row and solve) */
    gp_kernel_cross_points(model->kernel, p->Zp, P, 1, a, m);
    gp_solve_lower_columns(p->L, m, m, a, 1, m);
    double prior = gp_kernel_diag(model->kernel, P) - gp_dot(a, a, m);
    for (size_t j = 0; j < m; j++) /* C is stored full and symmetric */
        ca[j] = gp_dot(p->C + j * m, a, m);
    double post = gp_dot(a, ca, m);
    int prior_on = prior > 0.0, post_on = post > 0.0;
    *mean = gp_dot(a, p->mt, m);
    *var = p->scale * ((prior_on ? prior : 0.0) + (post_on ? post : 0.0));
    if (dmean || dvar) {
        gradient_weights(p, a, ca, prior_on, post_on, W);
        rc = contract(model, p, P, W, prior_on, G, dmean, dvar, err);
    }
    free(a);
    return rc;
}

int gp_inducing_method_predict_grad(const gp_model *model, const double *P, double *mean,
                                    double *var, double *dmean, double *dvar, gp_error *err)
{
    return gp_inducing_predict_grad(model, (const gp_inducing_post *)model->impl, P, mean, var,
                                    dmean, dvar, err);
}
