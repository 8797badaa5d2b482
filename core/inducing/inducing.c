/* The inducing-point machinery shared by sgpr and renyi: see core/inducing/inducing.h.
 * (Selection lives in core/inducing/select.c.) */
#include "core/inducing/inducing.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/linalg/linalg.h"
#include "core/optim/driver.h"
#include "core/optim/optim.h"

/* ---- Kuu ---- */

static void zero_upper(double *L, size_t m)
{
    for (size_t j = 1; j < m; j++)
        memset(L + j * m, 0, j * sizeof *L);
}

int gp_inducing_kuu_factor(const gp_kernel *k, const double *Z, size_t m, double *L,
                           double *jitter, gp_error *err)
{
    gp_kernel_gram(k, Z, m, L, m);
    double mean_diag = 0.0;
    for (size_t i = 0; i < m; i++)
        mean_diag += L[i * m + i];
    double jit = GP_INDUCING_JITTER * (mean_diag / (double)m);
    for (size_t i = 0; i < m; i++)
        L[i * m + i] += jit;
    gp_chol_info info;
    int rc = gp_cholesky_jitter(L, m, m, &info, err);
    if (rc)
        return rc;
    zero_upper(L, m);
    *jitter = jit + info.jitter;
    return GP_OK;
}

/* ---- gradients ---- */

/* The Kuf part: from the caller's kernel values, or from values computed here. */
static int contract_uf(const gp_kernel *k, const double *X, size_t n, const double *Z, size_t m,
                       const double *Kuf, const double *Wuf, double *grad, double *gz,
                       gp_error *err)
{
    double *K = NULL;
    if (Kuf == NULL) {
        size_t mn = 0;
        int rc = gp_checked_size(m, n, &mn, err);
        if (rc)
            return rc;
        if ((K = gp_alloc_doubles(mn, err)) == NULL)
            return GP_ENOMEM;
        gp_kernel_cross(k, Z, m, X, n, K, m);
        Kuf = K;
    }
    int rc = gp_kernel_cross_grad_contract_known(k, X, n, Z, m, Kuf, m, Wuf, m, grad, gz, err);
    free(K);
    return rc;
}

int gp_inducing_contract_kuu(const gp_kernel *k, const double *Z, size_t m, const double *Wuu,
                             double wdiag, double n, const double *x, double *grad, double *gz,
                             gp_error *err)
{
    size_t np = gp_kernel_n_params(k), d = k->input_dim;
    double *g2 = gp_alloc_doubles(np, err), *W = gp_alloc_doubles(m * m, err);
    double *gz2 = gz ? gp_alloc_doubles(d * m, err) : NULL;
    int rc = g2 && W && (gz == NULL || gz2) ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        /* The jitter is GP_INDUCING_JITTER * mean_i k(z_i, z_i): its share of
         * dF is tr(Wuu) GP_INDUCING_JITTER / m * sum_i dk(z_i, z_i), i.e. a
         * multiple of the identity added to Wuu. */
        double tr = 0.0;
        for (size_t i = 0; i < m; i++)
            tr += Wuu[i * m + i];
        memcpy(W, Wuu, m * m * sizeof *W);
        for (size_t i = 0; i < m; i++)
            W[i * m + i] += GP_INDUCING_JITTER * tr / (double)m;
        rc = gp_kernel_cross_grad_contract(k, Z, m, Z, m, W, m, g2, gz2, err);
    }
    if (rc == GP_OK) {
        for (size_t p = 0; p < np; p++)
            grad[p] += g2[p];
        for (size_t i = 0; gz && i < d * m; i++)
            gz[i] += 2.0 * gz2[i]; /* both arguments of k(Z_i, Z_j) move */
        /* Stationary: k(x, x) is the same for every x, so one point serves. */
        gp_kernel_eval_grad(k, x, x, 1, g2);
        for (size_t p = 0; p < np; p++)
            grad[p] += wdiag * n * g2[p];
    }
    free(g2);
    free(W);
    free(gz2);
    return rc;
}

int gp_inducing_contract(const gp_kernel *k, const double *X, size_t n, const double *Z,
                         size_t m, const double *Kuf, const double *Wuf, const double *Wuu,
                         double wdiag, double *grad, double *gz, gp_error *err)
{
    int rc = contract_uf(k, X, n, Z, m, Kuf, Wuf, grad, gz, err);
    if (rc == GP_OK)
        rc = gp_inducing_contract_kuu(k, Z, m, Wuu, wdiag, (double)n, X, grad, gz, err);
    return rc;
}

/* ---- the fitted posterior ---- */

int gp_inducing_post_alloc(gp_inducing_post *p, size_t m, size_t d, gp_error *err)
{
    memset(p, 0, sizeof *p);
    size_t mm = 0, md = 0;
    int rc = gp_checked_size(m, m, &mm, err);
    if (rc == GP_OK)
        rc = gp_checked_size(m, d, &md, err);
    if (rc)
        return rc;
    p->m = m;
    p->d = d;
    p->latents = 1;
    p->scale = 1.0;
    p->Z = gp_alloc_doubles(md, err);
    p->L = gp_alloc_doubles(mm, err);
    p->C = gp_alloc_doubles(mm, err);
    p->mt = gp_alloc_doubles(m, err);
    if (!p->Z || !p->L || !p->C || !p->mt) {
        gp_inducing_post_free(p);
        return GP_ENOMEM;
    }
    return GP_OK;
}

void gp_inducing_post_free(gp_inducing_post *p)
{
    if (p == NULL)
        return;
    free(p->Z);
    free(p->L);
    free(p->C);
    free(p->mt);
    gp_kernel_points_free(p->Zp);
    memset(p, 0, sizeof *p);
}

int gp_inducing_post_prepare(gp_inducing_post *p, const gp_kernel *k, gp_error *err)
{
    gp_kernel_points_free(p->Zp);
    p->Zp = NULL;
    return gp_kernel_points_new(k, p->Z, p->m, &p->Zp, err);
}

/* ---- predict ---- */

/* ca[0..m) such that a . ca = a^T C a for symmetric C (lower triangle read):
 * ca_j = C_jj a_j + 2 sum_{i>j} C_ij a_i, column by column with short dots
 * in a fixed order (gp_dot), so that a point's variance is the same bits
 * whatever other points share its call (dynamic batching; dsymm's results
 * depend on how many columns it is given). */
static void quad_form_lower(const double *C, size_t m, const double *a, double *ca)
{
    for (size_t j = 0; j < m; j++) {
        const double *col = C + j * m;
        double off = j + 1 < m ? gp_dot(col + j + 1, a + j + 1, m - j - 1) : 0.0;
        ca[j] = col[j] * a[j] + 2.0 * off;
    }
}

/* The latents of a posterior (a zeroed count is one). */
static size_t post_latents(const gp_inducing_post *p)
{
    return p->latents > 1 ? p->latents : 1;
}

/* Latent mean and variance (working units) of b points P (d x b), latent l's
 * at l stride in mean and var; Aw (m x b) gets A^T w = L^-1 K_uf, shared by
 * the latents; ca (m) is scratch. Every point's arithmetic is its own, in a
 * fixed order (the kernel row, gp_solve_lower_columns, gp_dot), so the
 * methods on this path are batch_invariant (core/model/method.h). */
/* One latent's mean and variance at a point from its a = L^-1 k(Z, x) and
 * prior variance k(x, x) - a.a; ca (m) is scratch. */
static inline void point_moments(const double *C, const double *mt, size_t m, const double *a,
                                 double prior, double *ca, double *mean, double *var)
{
    quad_form_lower(C, m, a, ca);
    double post = gp_dot(a, ca, m);
    *mean = gp_dot(a, mt, m);
    *var = (prior > 0.0 ? prior : 0.0) + (post > 0.0 ? post : 0.0);
}

static void predict_block(const gp_kernel *k, const gp_inducing_post *p, const double *P,
                          size_t b, double *Aw, double *ca, double *mean, double *var,
                          size_t stride)
{
    size_t m = p->m, nl = post_latents(p);
    gp_kernel_cross_points(k, p->Zp, P, b, Aw, m);
    gp_solve_lower_columns(p->L, m, m, Aw, b, m);
    for (size_t j = 0; j < b; j++) {
        const double *a = Aw + j * m;
        double prior = gp_kernel_diag(k, P + j * p->d) - gp_dot(a, a, m);
        if (nl == 1) { /* the common case, kept apart so that it stays as lean as it was */
            point_moments(p->C, p->mt, m, a, prior, ca, mean + j, var + j);
            continue;
        }
        for (size_t l = 0; l < nl; l++)
            point_moments(p->C + l * m * m, p->mt + l * m, m, a, prior, ca, mean + l * stride + j,
                          var + l * stride + j);
    }
}

/* The latent covariance (working units) of the m points P from their Aw
 * and CAw = C Aw (M x m, CAw overwritten) into S (m x m, full):
 * (K** - Aw^T Aw) + Aw^T C Aw, one gemm: Aw^T (C Aw - Aw). */
static void covariance_from(const gp_kernel *k, size_t M, const double *P, size_t m,
                            const double *Aw, double *CAw, double *S)
{
    gp_kernel_gram(k, P, m, S, m);
    for (size_t i = 0; i < M * m; i++)
        CAw[i] -= Aw[i];
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)m, (blasint)m, (blasint)M, 1.0,
                Aw, (blasint)M, CAw, (blasint)M, 1.0, S, (blasint)m);
    gp_symmetrize_average(S, m, m); /* against rounding in the gemm */
}

/* Latent covariance (working units) of the m points P (d x m) into S (m x m,
 * full), means into mean. Aw, CAw (p->m x m) are scratch. */
static void latent_covariance(const gp_kernel *k, const gp_inducing_post *p, const double *P,
                              size_t m, double *Aw, double *CAw, double *S, double *mean)
{
    size_t M = p->m;
    gp_kernel_cross_points(k, p->Zp, P, m, Aw, M);
    gp_trsm_lower(p->L, M, M, 0, Aw, m, M);
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)M, (blasint)m, 1.0, Aw, (blasint)M, p->mt, 1,
                0.0, mean, 1);
    cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, (blasint)M, (blasint)m, 1.0, p->C,
                (blasint)M, Aw, (blasint)M, 0.0, CAw, (blasint)M);
    covariance_from(k, M, P, m, Aw, CAw, S);
}

static double observed(const gp_model *model, double scale, double v, int include_noise,
                       size_t *clamped)
{
    if (include_noise)
        v += model->noise_variance;
    if (v < 0.0) {
        v = 0.0;
        (*clamped)++;
    }
    return scale * v * model->y_scale * model->y_scale;
}

/* Mean and variance of every point block by block; with full_covariance
 * the blocks' Aw and C Aw are kept for all the points and give the
 * covariance, whose diagonal is the variance. The mean and variance are the
 * same numbers with or without the covariance (the core derives a
 * non-Gaussian model's observation quantities from them). */
static int predict_blocks(const gp_model *model, const gp_inducing_post *p, const double *P,
                          const gp_predict_request *req, gp_prediction *out, gp_error *err)
{
    size_t M = p->m, m = req->m, block = gp_predict_block_rows(2 * M, m), nb = 0;
    int full = req->full_covariance;
    int rc = gp_checked_size(M, full ? m : block, &nb, err);
    double *Aw = rc ? NULL : gp_alloc_doubles(nb, err);
    double *CAw = rc ? NULL : gp_alloc_doubles(full ? nb : M, err);
    if (Aw == NULL || CAw == NULL) {
        free(Aw);
        free(CAw);
        return rc ? rc : GP_ENOMEM;
    }
    size_t nl = post_latents(p);
    for (size_t start = 0; start < m; start += block) {
        size_t b = m - start < block ? m - start : block, off = full ? start * M : 0;
        predict_block(model->kernel, p, P + start * p->d, b, Aw + off, CAw, out->mean + start,
                      out->variance + start, m);
    }
    for (size_t l = 0; full && l < nl; l++) { /* C Aw for every point, then the covariance */
        cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, (blasint)M, (blasint)m, 1.0,
                    p->C + l * M * M, (blasint)M, Aw, (blasint)M, 0.0, CAw, (blasint)M);
        covariance_from(model->kernel, M, P, m, Aw, CAw, out->covariance + l * m * m);
    }
    free(Aw);
    free(CAw);
    for (size_t j = 0; j < m * nl; j++)
        out->variance[j] =
            observed(model, p->scale, out->variance[j], req->include_noise, &out->clamped);
    for (size_t l = 0; full && l < nl; l++) { /* the diagonal is the variance */
        double *S = out->covariance + l * m * m, s = p->scale * model->y_scale * model->y_scale;
        for (size_t i = 0; i < m * m; i++)
            S[i] *= s;
        for (size_t j = 0; j < m; j++)
            S[j * m + j] = out->variance[l * m + j];
    }
    return GP_OK;
}

int gp_inducing_predict_points(const gp_model *model, const gp_inducing_post *p,
                               const double *P, const gp_predict_request *req,
                               gp_prediction *out, gp_error *err)
{
    int rc = predict_blocks(model, p, P, req, out, err);
    if (rc == GP_OK)
        for (size_t j = 0; j < req->m * post_latents(p); j++)
            out->mean[j] = out->mean[j] * model->y_scale + model->y_mean;
    return rc;
}

int gp_inducing_predict(const gp_model *model, const gp_inducing_post *p,
                        const gp_predict_request *req, gp_prediction *out, gp_error *err)
{
    double *P;
    int rc = gp_model_points(model, req->X, req->m, &P, err);
    if (rc)
        return rc;
    rc = gp_inducing_predict_points(model, p, P, req, out, err);
    free(P);
    return rc;
}

/* ---- sample ---- */

int gp_inducing_sample_points(const gp_model *model, const gp_inducing_post *p,
                              const double *P, const gp_sample_request *req, double *samples,
                              gp_error *err)
{
    size_t m = req->m, Mm, mm;
    double *Aw = NULL, *CAw = NULL, *C = NULL, *mean = NULL;
    int rc = gp_checked_size(p->m, m, &Mm, err);
    if (rc == GP_OK)
        rc = gp_checked_size(m, m, &mm, err);
    if (rc == GP_OK &&
        (!(Aw = gp_alloc_doubles(Mm, err)) || !(CAw = gp_alloc_doubles(Mm, err)) ||
         !(C = gp_alloc_doubles(mm, err)) || !(mean = gp_alloc_doubles(m, err))))
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        latent_covariance(model->kernel, p, P, m, Aw, CAw, C, mean);
        /* the scale multiplies the noise too: it is added here, not by the draws */
        for (size_t i = 0; p->scale != 1.0 && i < m * m; i++)
            C[i] *= p->scale;
        for (size_t j = 0; req->include_noise && j < m; j++)
            C[j * m + j] += p->scale * model->noise_variance;
        gp_sample_request latent = *req;
        latent.include_noise = 0;
        rc = gp_model_gaussian_draws(model, &latent, mean, C, samples, err);
    }
    free(Aw);
    free(CAw);
    free(C);
    free(mean);
    return rc;
}

/* Joint draws (docs/methods/renyi-gp.md §3.2) from the latent covariance
 * (gp_model_gaussian_draws). */
int gp_inducing_sample(const gp_model *model, const gp_inducing_post *p,
                       const gp_sample_request *req, double *samples, gp_error *err)
{
    double *P;
    int rc = gp_model_points(model, req->X, req->m, &P, err);
    if (rc)
        return rc;
    rc = gp_inducing_sample_points(model, p, P, req, samples, err);
    free(P);
    return rc;
}

int gp_inducing_method_predict(const gp_model *model, const gp_predict_request *req,
                               gp_prediction *out, gp_error *err)
{
    return gp_inducing_predict(model, (const gp_inducing_post *)model->impl, req, out, err);
}

int gp_inducing_method_sample(const gp_model *model, const gp_sample_request *req,
                              double *samples, gp_error *err)
{
    return gp_inducing_sample(model, (const gp_inducing_post *)model->impl, req, samples, err);
}

/* ---- export / import ---- */

int gp_inducing_post_export(const gp_inducing_post *p, gp_state *st, gp_error *err)
{
    size_t m = p->m, packed = m * (m + 1) / 2;
    double *Cp = gp_alloc_doubles(packed, err);
    if (Cp == NULL)
        return GP_ENOMEM;
    gp_pack_lower(p->C, m, m, Cp);
    int rc = gp_state_put_owned(st, "cov_white_packed", packed, 1, Cp, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "Z", p->d, m, p->Z, err);
    if (rc == GP_OK)
        rc = gp_state_put_cholesky(st, "chol_kuu_packed", p->L, m, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "mean_white", m, 1, p->mt, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "jitter", p->jitter, err);
    return rc;
}

static int import_arrays(const gp_state *st, gp_inducing_post *p, gp_error *err)
{
    size_t m = p->m, d = p->d;
    const double *Z, *mt, *Cp;
    int rc = gp_state_get(st, "Z", d, m, &Z, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "mean_white", m, 1, &mt, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "cov_white_packed", m * (m + 1) / 2, 1, &Cp, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "jitter", &p->jitter, err);
    if (rc == GP_OK)
        rc = gp_state_get_cholesky(st, "chol_kuu_packed", m, p->L, err);
    if (rc)
        return rc;
    size_t bad;
    if (!gp_all_finite(Z, d * m, &bad) || !gp_all_finite(mt, m, &bad) ||
        !gp_all_finite(Cp, m * (m + 1) / 2, &bad) || !isfinite(p->jitter))
        return gp_error_set(err, GP_EDATA, "state",
                            "the inducing-point posterior holds a non-finite number");
    memcpy(p->Z, Z, d * m * sizeof *Z);
    memcpy(p->mt, mt, m * sizeof *mt);
    gp_unpack_lower(Cp, m, p->C, m);
    gp_symmetrize_from_lower(p->C, m, m);
    return GP_OK;
}

int gp_inducing_post_import(const gp_model *model, const gp_state *st, gp_inducing_post *p,
                            gp_error *err)
{
    const gp_named_array *z = gp_state_find(st, "Z");
    size_t d = model->input_dim;
    if (z == NULL || z->rows != d || z->cols == 0)
        return gp_error_set(err, GP_EDATA, "Z", "the state has no %zu x M array Z", d);
    int rc = gp_inducing_post_alloc(p, z->cols, d, err);
    if (rc == GP_OK)
        rc = import_arrays(st, p, err);
    if (rc == GP_OK)
        rc = gp_inducing_post_prepare(p, model->kernel, err);
    if (rc)
        gp_inducing_post_free(p);
    return rc;
}

int gp_inducing_method_export(const gp_model *model, gp_state *st, gp_error *err)
{
    return gp_inducing_post_export((const gp_inducing_post *)model->impl, st, err);
}

void gp_inducing_method_free(void *impl)
{
    gp_inducing_post *p = impl;
    if (p == NULL)
        return;
    gp_inducing_post_free(p);
    free(p);
}

int gp_inducing_method_import(gp_model *model, const gp_state *st, gp_error *err)
{
    gp_inducing_post *p = calloc(1, sizeof *p);
    if (p == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = gp_inducing_post_import(model, st, p, err);
    if (rc) {
        free(p);
        return rc;
    }
    model->impl = p;
    return GP_OK;
}

/* ---- the fit: the objective over (free kernel parameters, noise, Z) ---- */

typedef struct inducing_problem {
    gp_kernel *k;
    const gp_noise_param *np;
    double *Z;
    size_t m, d;
    const gp_inducing_fit_spec *spec;
    size_t n_kparams, n_free;
    size_t *free_idx;
    double *theta, *grad, *gz;
} inducing_problem;

static size_t problem_dim(const inducing_problem *dr)
{
    return dr->n_free + (dr->np->learned ? 1 : 0) + (dr->spec->optimize_z ? dr->m * dr->d : 0);
}

static double problem_noise(const inducing_problem *dr, const double *x)
{
    return gp_noise_param_value(dr->np, dr->np->learned ? x[dr->n_free] : 0.0);
}

static void problem_apply(inducing_problem *dr, const double *x)
{
    for (size_t i = 0; i < dr->n_free; i++)
        dr->theta[dr->free_idx[i]] = x[i];
    gp_kernel_set_params(dr->k, dr->theta);
    if (dr->spec->optimize_z)
        memcpy(dr->Z, x + dr->n_free + (dr->np->learned ? 1 : 0), dr->m * dr->d * sizeof *dr->Z);
}

/* -F and its gradient over the free parameters; +inf where F fails. */
static double problem_objective(void *ctx, const double *x, double *g)
{
    inducing_problem *dr = ctx;
    problem_apply(dr, x);
    double s2 = problem_noise(dr, x), f;
    if (!isfinite(s2))
        return INFINITY;
    int optz = dr->spec->optimize_z;
    if (dr->spec->fn(dr->spec->ctx, dr->k, s2, dr->Z, dr->m, &f, dr->grad, optz ? dr->gz : NULL))
        return INFINITY;
    if (!isfinite(f))
        return INFINITY;
    for (size_t i = 0; i < dr->n_free; i++)
        g[i] = -dr->grad[dr->free_idx[i]];
    size_t off = dr->n_free;
    if (dr->np->learned)
        g[off++] = -gp_noise_param_grad(dr->np, s2, dr->grad[dr->n_kparams]);
    for (size_t i = 0; optz && i < dr->m * dr->d; i++)
        g[off + i] = -dr->gz[i];
    return -f;
}

static void problem_free(inducing_problem *dr)
{
    free(dr->free_idx);
    free(dr->theta);
    free(dr->grad);
    free(dr->gz);
}

static int problem_init(inducing_problem *dr, gp_kernel *k, const gp_noise_param *np, double *Z,
                        size_t m, const gp_inducing_fit_spec *spec, const gp_hyper_spec *hs,
                        gp_error *err)
{
    memset(dr, 0, sizeof *dr);
    dr->k = k;
    dr->np = np;
    dr->Z = Z;
    dr->m = m;
    dr->d = k->input_dim;
    dr->spec = spec;
    dr->n_kparams = gp_kernel_n_params(k);
    unsigned char *mask = malloc(dr->n_kparams + 1);
    dr->free_idx = malloc((dr->n_kparams + 1) * sizeof *dr->free_idx);
    dr->theta = gp_alloc_doubles(dr->n_kparams + 1, err);
    dr->grad = gp_alloc_doubles(dr->n_kparams + 1, err);
    dr->gz = gp_alloc_doubles(m * dr->d, err);
    if (!mask || !dr->free_idx || !dr->theta || !dr->grad || !dr->gz) {
        free(mask);
        problem_free(dr);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    gp_kernel_get_params(k, dr->theta);
    gp_hyper_free_mask(k, hs, mask);
    for (size_t i = 0; i < dr->n_kparams; i++)
        if (mask[i])
            dr->free_idx[dr->n_free++] = i;
    free(mask);
    return GP_OK;
}

static void problem_start(const inducing_problem *dr, double *x)
{
    for (size_t i = 0; i < dr->n_free; i++)
        x[i] = dr->theta[dr->free_idx[i]];
    size_t off = dr->n_free;
    if (dr->np->learned)
        x[off++] = gp_noise_param_x0(dr->np);
    if (dr->spec->optimize_z)
        memcpy(x + off, dr->Z, dr->m * dr->d * sizeof *x);
}

int gp_inducing_optimise(gp_kernel *k, const gp_noise_param *np, double *s2, double *Z, size_t m,
                         const gp_fit_request *req, const gp_inducing_fit_spec *spec,
                         gp_diagnostics *diag, gp_error *err)
{
    inducing_problem dr;
    int rc = problem_init(&dr, k, np, Z, m, spec, req ? req->hyper : NULL, err);
    if (rc)
        return rc;
    size_t dim = problem_dim(&dr);
    double *x = gp_alloc_doubles(dim ? dim : 1, err);
    if (x == NULL) {
        problem_free(&dr);
        return GP_ENOMEM;
    }
    problem_start(&dr, x);
    if (dim == 0) {
        *s2 = np->start;
        diag->converged = 1;
        if (spec->result_f)
            *spec->result_f = -problem_objective(&dr, x, x);
    } else {
        gp_driver_options opt;
        gp_driver_default_options(&opt);
        opt.max_iterations = spec->max_iterations;
        opt.tolerance = spec->tolerance;
        if (req) {
            opt.progress = req->progress;
            opt.progress_ctx = req->progress_ctx;
            opt.cancel = &req->cancel;
        }
        opt.iteration_base = spec->iteration_base;
        opt.max_total = spec->max_total;
        opt.objective_offset = spec->objective_offset;
        gp_driver_result res;
        rc = gp_hyper_minimize_free(req ? req->hyper : NULL, dr.k, dr.free_idx, dr.n_free,
                                    np->learned, np->floor, problem_objective, &dr, x, dim, &opt,
                                    &res, err);
        diag->iterations += res.iterations;
        diag->evaluations += res.evaluations;
        diag->converged = res.converged;
        if (rc == GP_ENOTPD)
            gp_error_set(err, GP_ENOTPD, NULL,
                         "the bound cannot be evaluated at the starting point");
        if (rc == GP_OK) {
            problem_apply(&dr, x); /* the best point: kernel and Z */
            *s2 = problem_noise(&dr, x);
            if (spec->result_f)
                *spec->result_f = -res.f;
        }
    }
    free(x);
    problem_free(&dr);
    return rc;
}

/* ---- selection rounds ---- */

/* The fitted state of one round, to go back to when the next does worse. */
typedef struct round_state {
    double *theta, *Z;
    double s2, f;
    size_t m;
} round_state;

static void round_save(round_state *rs, const gp_kernel *k, double s2, const double *Z, size_t m,
                       size_t d, double f)
{
    gp_kernel_get_params(k, rs->theta);
    memcpy(rs->Z, Z, m * d * sizeof *Z);
    rs->s2 = s2;
    rs->m = m;
    rs->f = f;
}

int gp_inducing_fit(gp_kernel *k, const gp_noise_param *np, double *s2,
                    gp_inducing_selection sel, size_t M, int rounds, const double *X, size_t n,
                    double *Z, size_t *m, const gp_fit_request *req, gp_inducing_fit_spec *spec,
                    gp_diagnostics *diag, gp_error *err)
{
    size_t d = k->input_dim;
    if (sel != GP_INDUCING_GREEDY || spec->optimize_z)
        rounds = 0;
    double f = -INFINITY, *saved_f = spec->result_f;
    spec->result_f = &f;
    /* Progress continues from earlier fits of the same request (diag counts them). */
    spec->iteration_base = diag->iterations;
    int total = diag->iterations + spec->max_iterations * (rounds + 1);
    if (spec->max_total < total)
        spec->max_total = total;
    round_state best = {gp_alloc_doubles(gp_kernel_n_params(k), err),
                        gp_alloc_doubles(d * M, err), 0.0, -INFINITY, 0};
    int rc = best.theta && best.Z ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        rc = gp_inducing_select(sel, k, X, n, d, M, req->seed, Z, m, err);
    if (rc == GP_OK)
        rc = gp_inducing_optimise(k, np, s2, Z, *m, req, spec, diag, err);
    gp_noise_param warm = *np;
    for (int r = 1; rc == GP_OK && r <= rounds; r++) {
        round_save(&best, k, *s2, Z, *m, d, f);
        spec->iteration_base = diag->iterations;
        warm.start = *s2; /* continue from the fitted noise */
        rc = gp_inducing_select(sel, k, X, n, d, M, req->seed, Z, m, err);
        if (rc == GP_OK)
            rc = gp_inducing_optimise(k, &warm, s2, Z, *m, req, spec, diag, err);
        if (rc == GP_OK && !(f > best.f + 1e-9 * fabs(best.f)))
            break; /* no better: the previous round stands */
    }
    if (rc == GP_OK && rounds > 0 && !(f > best.f)) {
        gp_kernel_set_params(k, best.theta);
        memcpy(Z, best.Z, best.m * d * sizeof *Z);
        *s2 = best.s2;
        *m = best.m;
        f = best.f;
    }
    if (saved_f)
        *saved_f = f;
    spec->result_f = saved_f;
    free(best.theta);
    free(best.Z);
    return rc;
}
