/* gpserve core: Thompson draws from random-feature posteriors (see thompson.h). */
#include "core/bo/thompson.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "core/base/rng.h"
#include "core/kernel/kernel_spectral.h"
#include "core/linalg/linalg.h"

#define TWO_PI 6.283185307179586477
/* A model whose noise is fixed at 0 still gets a positive definite A. */
#define NOISE_FLOOR 1e-10

struct gp_bo_thompson {
    size_t D, R;
    double *omega;      /* R x D column-major, already divided by the lengthscales */
    double *phase;      /* R */
    double *post_mean;  /* R: A^-1 Phi^T y_w */
    double *L;          /* R x R: the factor of A */
    double *w;          /* R: the current draw */
    double *x_mean, *x_scale; /* D each */
    double amp, y_mean, y_scale, noise;
    gp_mean_type mean_type;
    double *beta;       /* gp_mean_n_coef entries or NULL */
    uint64_t seed;
};

void gp_bo_thompson_free(gp_bo_thompson *t)
{
    if (t == NULL)
        return;
    free(t->omega);
    free(t->phase);
    free(t->post_mean);
    free(t->L);
    free(t->w);
    free(t->x_mean);
    free(t->x_scale);
    free(t->beta);
    free(t);
}

/* The kernel must be one rbf or Matern leaf on every dimension. */
static int check_kernel(const gp_model *m, gp_spectral *spec, gp_error *err)
{
    const gp_kernel *k = m->kernel;
    if (k == NULL || gp_kernel_spectral(k->type, spec, NULL) != GP_OK ||
        (k->active_dims != NULL && k->n_active != m->input_dim) ||
        (k->n_lengthscale != 1 && k->n_lengthscale != m->input_dim))
        return gp_error_set(err, GP_EUNSUPPORTED, "acquisition.type",
                            "thompson draws need one rbf or matern kernel on every parameter");
    if (k->active_dims != NULL)
        for (size_t j = 0; j < k->n_active; j++)
            if (k->active_dims[j] != j)
                return gp_error_set(err, GP_EUNSUPPORTED, "acquisition.type",
                                    "thompson draws need a kernel on every parameter in order");
    if (m->n_outputs > 1 || m->likelihood != GP_LIK_GAUSSIAN)
        return gp_error_set(err, GP_EUNSUPPORTED, "acquisition.type",
                            "thompson draws need a single-output Gaussian model");
    return GP_OK;
}

static double *doubles(size_t rows, size_t cols, gp_error *err)
{
    size_t count;
    if (gp_checked_size(rows, cols, &count, err) != GP_OK)
        return NULL;
    return gp_alloc_doubles(count > 0 ? count : 1, err);
}

static int alloc_draw(gp_bo_thompson *t, const gp_model *m, gp_error *err)
{
    size_t D = t->D, R = t->R;
    t->omega = doubles(R, D, err);
    t->phase = doubles(R, 1, err);
    t->post_mean = doubles(R, 1, err);
    t->L = doubles(R, R, err);
    t->w = doubles(R, 1, err);
    t->x_mean = doubles(D, 1, err);
    t->x_scale = doubles(D, 1, err);
    size_t p = gp_mean_n_coef(m->mean_type, D);
    t->beta = p > 0 ? doubles(p, 1, err) : NULL;
    if (!t->omega || !t->phase || !t->post_mean || !t->L || !t->w || !t->x_mean || !t->x_scale ||
        (p > 0 && !t->beta))
        return GP_ENOMEM;
    memcpy(t->x_mean, m->x_mean, D * sizeof *t->x_mean);
    memcpy(t->x_scale, m->x_scale, D * sizeof *t->x_scale);
    if (p > 0)
        memcpy(t->beta, m->mean_coef, p * sizeof *t->beta);
    return GP_OK;
}

/* Frequencies of unit lengthscale, divided by the model's lengthscales. */
static void draw_features(gp_bo_thompson *t, const gp_model *m, const gp_spectral *spec)
{
    gp_rng rng;
    gp_rng_derive(&rng, t->seed, 0);
    gp_spectral_sample(spec, t->D, t->R, &rng, t->omega);
    for (size_t j = 0; j < t->D; j++) {
        double l = exp(m->kernel->log_lengthscale[m->kernel->n_lengthscale == 1 ? 0 : j]);
        for (size_t r = 0; r < t->R; r++)
            t->omega[r + t->R * j] /= l;
    }
    for (size_t r = 0; r < t->R; r++)
        t->phase[r] = TWO_PI * gp_rng_uniform(&rng);
}

static void working_point(const gp_bo_thompson *t, const double *u, double *xw)
{
    for (size_t j = 0; j < t->D; j++)
        xw[j] = (u[j] - t->x_mean[j]) / t->x_scale[j];
}

/* Phi (n x R) and the working targets y_w (n) of the observations. */
static void feature_rows(const gp_bo_thompson *t, const double *X, const double *y, size_t n,
                         double *Phi, double *yw)
{
    double xw[GP_BO_THOMPSON_MAX_DIM];
    for (size_t i = 0; i < n; i++) {
        working_point(t, X + i * t->D, xw);
        for (size_t r = 0; r < t->R; r++) {
            double a = t->phase[r];
            for (size_t j = 0; j < t->D; j++)
                a += t->omega[r + t->R * j] * xw[j];
            Phi[i + n * r] = t->amp * cos(a);
        }
        yw[i] = (y[i] - t->y_mean) / t->y_scale - gp_mean_at(t->mean_type, t->beta, xw, t->D);
    }
}

/* A = Phi^T Phi + s I factorised into L, post_mean = A^-1 Phi^T y_w. */
static int weight_posterior(gp_bo_thompson *t, const double *X, const double *y, size_t n,
                            gp_error *err)
{
    size_t R = t->R;
    double *Phi = doubles(n > 0 ? n : 1, R, err), *yw = doubles(n > 0 ? n : 1, 1, err);
    if (Phi == NULL || yw == NULL) {
        free(Phi);
        free(yw);
        return GP_ENOMEM;
    }
    feature_rows(t, X, y, n, Phi, yw);
    memset(t->L, 0, R * R * sizeof *t->L);
    if (n > 0) {
        cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (int)R, (int)n, 1.0, Phi, (int)n, 0.0,
                    t->L, (int)R);
        cblas_dgemv(CblasColMajor, CblasTrans, (int)n, (int)R, 1.0, Phi, (int)n, yw, 1, 0.0,
                    t->post_mean, 1);
    } else {
        memset(t->post_mean, 0, R * sizeof *t->post_mean);
    }
    for (size_t r = 0; r < R; r++)
        t->L[r + R * r] += t->noise;
    free(Phi);
    free(yw);
    gp_chol_info info;
    int rc = gp_cholesky_jitter(t->L, R, R, &info, err);
    if (rc != GP_OK)
        return rc;
    gp_zero_upper(t->L, R, R);
    gp_chol_solve(t->L, R, R, t->post_mean, 1, R);
    return GP_OK;
}

int gp_bo_thompson_new(const gp_model *model, const double *X, const double *y, size_t n,
                       size_t R, uint64_t seed, gp_bo_thompson **out, gp_error *err)
{
    *out = NULL;
    gp_spectral spec;
    int rc = check_kernel(model, &spec, err);
    if (rc != GP_OK)
        return rc;
    if (model->input_dim == 0 || model->input_dim > GP_BO_THOMPSON_MAX_DIM)
        return gp_error_set(err, GP_EINVAL, "parameters", "thompson draws take 1 to %d columns",
                            GP_BO_THOMPSON_MAX_DIM);
    gp_bo_thompson *t = calloc(1, sizeof *t);
    if (t == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "no memory for a thompson draw");
    t->D = model->input_dim;
    t->R = R > 0 ? R : GP_BO_THOMPSON_FEATURES;
    t->seed = seed;
    t->amp = sqrt(2.0 * exp(model->kernel->log_variance) / (double)t->R);
    t->y_mean = model->y_mean;
    t->y_scale = model->y_scale;
    t->noise = fmax(model->noise_variance, NOISE_FLOOR);
    t->mean_type = model->mean_type;
    rc = alloc_draw(t, model, err);
    if (rc == GP_OK) {
        draw_features(t, model, &spec);
        rc = weight_posterior(t, X, y, n, err);
    }
    if (rc != GP_OK) {
        gp_bo_thompson_free(t);
        return rc == GP_ENOMEM ? gp_error_set(err, rc, NULL, "no memory for a thompson draw") : rc;
    }
    gp_bo_thompson_draw(t, 0);
    *out = t;
    return GP_OK;
}

void gp_bo_thompson_draw(gp_bo_thompson *t, uint64_t k)
{
    gp_rng rng;
    gp_rng_derive(&rng, t->seed, k + 1); /* stream 0 drew the features */
    gp_rng_normal_fill(&rng, t->w, t->R);
    gp_trsm_lower(t->L, t->R, t->R, 1, t->w, 1, t->R);
    double sd = sqrt(t->noise);
    for (size_t r = 0; r < t->R; r++)
        t->w[r] = t->post_mean[r] + sd * t->w[r];
}

double gp_bo_thompson_value(const gp_bo_thompson *t, const double *u, double *grad)
{
    double xw[GP_BO_THOMPSON_MAX_DIM];
    working_point(t, u, xw);
    double f = gp_mean_at(t->mean_type, t->beta, xw, t->D);
    if (grad != NULL)
        for (size_t j = 0; j < t->D; j++) /* d h^T beta / d x_w: the linear mean's slopes */
            grad[j] = t->mean_type == GP_MEAN_LINEAR ? t->beta[1 + j] : 0.0;
    for (size_t r = 0; r < t->R; r++) {
        double a = t->phase[r];
        for (size_t j = 0; j < t->D; j++)
            a += t->omega[r + t->R * j] * xw[j];
        f += t->amp * t->w[r] * cos(a);
        if (grad != NULL) {
            double s = -t->amp * t->w[r] * sin(a);
            for (size_t j = 0; j < t->D; j++)
                grad[j] += s * t->omega[r + t->R * j];
        }
    }
    if (grad != NULL)
        for (size_t j = 0; j < t->D; j++)
            grad[j] *= t->y_scale / t->x_scale[j];
    return t->y_mean + t->y_scale * f;
}
