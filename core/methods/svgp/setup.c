/* Method "svgp": what an in-memory fit (fit.c) and a fit over rows read in
 * chunks (rows.c) share: a fit's buffers, its settings, the start of its
 * kernel and q, the fitted posterior and the report. */
#include "core/methods/svgp/setup.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/svgp/classes.h"
#include "core/methods/svgp/elbo.h"
#include "core/methods/svgp/internal.h"

void svgp_fit_free(svgp_fit *f)
{
    free(f->Z);
    free(f->mq);
    free(f->Lq);
    free(f->free_idx);
    free(f->theta);
    free(f->gtheta);
    free(f->gz);
    free(f->gmean);
    free(f->gchol);
    free(f->save);
    free(f->H);
    free(f->beta);
    free(f->off);
    free(f->gbeta);
    svgp_work_free(&f->w);
    svgp_natgrad_buf_free(&f->nb);
    gp_softmax_mc_free(&f->mc);
}

/* Buffers for M inducing points and f->C latents; q starts at the prior N(0, I). */
int svgp_fit_alloc(svgp_fit *f, size_t M, size_t cap, gp_error *err)
{
    size_t d = f->d, np = gp_kernel_n_params(f->k), C = f->C, mm = M * M * C;
    f->n_kp = np;
    f->Z = gp_alloc_doubles(d * M, err);
    f->mq = gp_alloc_doubles(M * C, err);
    f->Lq = gp_alloc_doubles(mm, err);
    f->free_idx = malloc((np + 1) * sizeof *f->free_idx);
    f->theta = gp_alloc_doubles(np + 1, err);
    f->gtheta = gp_alloc_doubles(np + 1, err);
    f->gz = gp_alloc_doubles(d * M, err);
    f->gmean = gp_alloc_doubles(M * C, err);
    f->gchol = gp_alloc_doubles(mm, err);
    f->save = gp_alloc_doubles(2 * mm + 2 * M * C, err);
    unsigned char *mask = malloc(np + 1);
    int ok = f->Z && f->mq && f->Lq && f->free_idx && f->theta && f->gtheta && f->gz &&
             f->gmean && f->gchol && f->save && mask;
    if (ok)
        ok = svgp_work_alloc_latents(&f->w, M, cap, C, err) == GP_OK &&
             svgp_natgrad_buf_alloc(&f->nb, M, err) == GP_OK;
    if (!ok) {
        free(mask);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    gp_kernel_get_params(f->k, f->theta);
    gp_hyper_free_mask(f->k, f->hyper, mask);
    for (size_t i = 0; i < np; i++)
        if (mask[i])
            f->free_idx[f->n_free++] = i;
    free(mask);
    return GP_OK;
}

/* Every latent's q = N(0, I) over the m inducing points chosen (the blocks
 * are laid out for the m chosen, which may be fewer than allocated). */
void svgp_q_prior(svgp_fit *f)
{
    size_t m = f->m;
    memset(f->mq, 0, m * f->C * sizeof *f->mq);
    memset(f->Lq, 0, m * m * f->C * sizeof *f->Lq);
    for (size_t c = 0; c < f->C; c++)
        for (size_t i = 0; i < m; i++)
            f->Lq[c * m * m + i + i * m] = 1.0;
}

void svgp_settings_read(const gp_fit_request *req, const gp_model *model, svgp_settings *st)
{
    const gp_method *me = model->method;
    st->budget = (int)gp_option_number(me, req, "max_iterations");
    st->tolerance = gp_option_number(me, req, "tolerance");
    st->batch = (size_t)gp_option_number(me, req, "batch_size");
    if (st->batch > req->n)
        st->batch = req->n;
    st->epochs = (int)gp_option_number(me, req, "epochs");
    st->lr = gp_option_number(me, req, "learning_rate");
    st->natgrad_step = gp_option_number(me, req, "natgrad_step");
    st->offset = -(double)req->n * log(model->y_scale);
}

/* The fitted posterior (mt = m, C = Lq Lq^T; a softmax fit's C classes side
 * by side, classes.h) from f after the bound's last evaluation left chol(Kuu)
 * in f->w.L. */
int svgp_post_build(const svgp_fit *f, gp_inducing_post *im, gp_error *err)
{
    int rc;
    size_t m = f->m;
    if ((rc = gp_inducing_post_alloc(im, m, f->d, err)) != GP_OK)
        return rc;
    if (f->C > 1 && (rc = svgp_classes_widen(im, f->C, err)) != GP_OK)
        return rc;
    memcpy(im->Z, f->Z, f->d * m * sizeof *f->Z);
    memcpy(im->L, f->w.L, m * m * sizeof *f->w.L);
    memcpy(im->mt, f->mq, m * f->C * sizeof *f->mq);
    for (size_t c = 0; c < f->C; c++) {
        double *S = im->C + c * m * m;
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)m, 1.0,
                    f->Lq + c * m * m, (blasint)m, 0.0, S, (blasint)m);
        gp_symmetrize_from_lower(S, m, m);
    }
    im->jitter = f->w.jitter;
    return gp_inducing_post_prepare(im, f->k, err);
}

void svgp_report(gp_model *model, const svgp_fit *f, int lbfgs, const svgp_settings *st,
                 const gp_svgp_terms *t, const char *selection)
{
    model->diag.objective = t->elbo + st->offset;
    model->diag.jitter = f->w.jitter;
    model->noise_variance = f->lik.type == GP_LIK_GAUSSIAN ? f->lik.noise : 0.0;
    gp_model_info_number(model, "inducing", (double)f->m);
    gp_model_info_string(model, "inducing_selection", selection);
    gp_model_info_number(model, "optimize_inducing", f->optimize_z ? 1.0 : 0.0);
    gp_model_info_string(model, "optimizer", lbfgs ? "lbfgs" : "adam");
    gp_model_info_number(model, "expected_log_lik", t->expected_log_lik + st->offset);
    gp_model_info_number(model, "kl", t->kl);
    if (f->lik.type == GP_LIK_BERNOULLI)
        gp_model_info_number(model, "quadrature_points", (double)f->quad.n);
    if (!lbfgs) {
        gp_model_info_number(model, "epochs", (double)st->epochs);
        gp_model_info_number(model, "batch_size", (double)st->batch);
    }
}

/* The lengthscales' share of a pair's scaled squared distance. */
static double scaled_r2(const gp_kernel *k, const double *a, const double *b)
{
    double r2 = 0.0;
    for (size_t t = 0; t < k->n_active; t++) {
        size_t j = k->active_dims ? k->active_dims[t] : t;
        double l = exp(k->log_lengthscale[k->n_lengthscale > 1 ? t : 0]);
        r2 += (a[j] - b[j]) * (a[j] - b[j]) / (l * l);
    }
    return r2;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Initial lengthscales too short for the data: on standardised inputs in d
 * dimensions a pair is about 2d apart in squared distance, so the default
 * lengthscale 1 makes k(x, x') ~ exp(-d) between almost every pair once d is
 * a few tens (sonar, spam): q(u) then only sees the prior, every gradient is
 * exp(-d) small and L-BFGS stops at once at ELBO ~ N log 1/2. When the
 * median scaled squared distance over (up to 200 evenly spaced) points
 * exceeds SVGP_R2_MAX, every free lengthscale is multiplied by the one factor
 * that brings the median to 1 (the median heuristic). Returns the factor (1:
 * unchanged). */
#define SVGP_R2_MAX 8.0

/* A lengthscale held singly: the caller said what it is, so the rescue
 * leaves every lengthscale as given (a single-leaf kernel: its lengthscales
 * are entries 1 .. n_lengthscale). A prior or a bound does not stop it: the
 * rescue moves the start, and a start outside a bound is put on it. */
static int lengthscales_held(const gp_kernel *k, const gp_hyper_spec *hs)
{
    for (size_t j = 0; hs && j < k->n_lengthscale; j++)
        if (hs->entry[1 + j].fixed)
            return 1;
    return 0;
}

/* The rescued starts inside their bounds. */
static void starts_within_bounds(gp_kernel *k, const gp_hyper_spec *hs)
{
    for (size_t j = 0; hs && j < k->n_lengthscale; j++) {
        double lo, hi;
        gp_hyper_entry_bounds(&hs->entry[1 + j], &lo, &hi);
        if (lo > 0.0 && k->log_lengthscale[j] < log(lo))
            k->log_lengthscale[j] = log(lo);
        if (hi < INFINITY && k->log_lengthscale[j] > log(hi))
            k->log_lengthscale[j] = log(hi);
    }
}
double svgp_rescue_lengthscales(gp_kernel *k, const gp_hyper_spec *hs, const double *X, size_t n,
                                size_t d)
{
    if (k->n_lengthscale == 0 || (k->fixed & GP_FIX_LENGTHSCALE) || n < 2 ||
        lengthscales_held(k, hs))
        return 1.0;
    size_t s = n < 200 ? n : 200, pairs = s * (s - 1) / 2, c = 0;
    double *r2 = malloc(pairs * sizeof *r2);
    if (r2 == NULL)
        return 1.0;
    for (size_t a = 0; a < s; a++)
        for (size_t b = a + 1; b < s; b++)
            r2[c++] = scaled_r2(k, X + (a * n / s) * d, X + (b * n / s) * d);
    qsort(r2, pairs, sizeof *r2, cmp_double);
    double med = r2[pairs / 2], factor = 1.0;
    free(r2);
    if (med > SVGP_R2_MAX && isfinite(med)) {
        factor = sqrt(med);
        for (size_t j = 0; j < k->n_lengthscale; j++)
            k->log_lengthscale[j] += log(factor);
        starts_within_bounds(k, hs);
    }
    return factor;
}

