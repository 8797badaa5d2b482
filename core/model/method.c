/* Helpers for method authors (core/model/method.h): option values, data
 * checks, model shells and standardisation, method_info, noise
 * parameterisation, packed factors in a state, Gaussian joint draws. */
#include "core/model/method.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "core/base/rng.h"
#include "core/linalg/linalg.h"
#include "core/model/rows_passes.h"


static const gp_option_value *find_value(const gp_fit_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_options; i++)
        if (strcmp(req->options[i].name, name) == 0)
            return &req->options[i];
    return NULL;
}

double gp_option_number(const gp_method *m, const gp_fit_request *req, const char *name)
{
    const gp_option_value *v = find_value(req, name);
    if (v)
        return v->number;
    const gp_option_spec *s = gp_method_option_spec(m, name);
    return s ? s->default_number : NAN;
}

const char *gp_option_string(const gp_method *m, const gp_fit_request *req, const char *name)
{
    const gp_option_value *v = find_value(req, name);
    if (v && v->string)
        return v->string;
    const gp_option_spec *s = gp_method_option_spec(m, name);
    return s ? s->default_string : NULL;
}

size_t gp_fit_point_cap(const gp_fit_request *req)
{
    return req->max_train_points ? req->max_train_points : GP_DEFAULT_MAX_TRAIN_POINTS;
}

const gp_value *gp_option_object(const gp_fit_request *req, const char *name)
{
    const gp_option_value *v = find_value(req, name);
    return v ? v->object : NULL;
}

int gp_fit_coregionalised(const gp_method *m, const gp_fit_request *req)
{
    return m->coregionalization && gp_option_object(req, "coregionalization") != NULL;
}

void gp_y_field(char *field, size_t len, size_t bad, size_t n, size_t p)
{
    if (p > 1)
        snprintf(field, len, "y[%zu][%zu]", bad % n, bad / n);
    else
        snprintf(field, len, "y[%zu]", bad);
}

/* Whether v, standardised, is a number the model can work with. */
static int working_ok(double v, double limit)
{
    return isfinite(v) && fabs(v) <= limit;
}

static int refuse_working(gp_error *err, const char *field, double value, double working)
{
    if (!isfinite(working))
        return gp_error_set(err, GP_EDATA, field,
                            "%s = %.17g overflows float64 once standardised by the model's "
                            "training data",
                            field, value);
    return gp_error_set(err, GP_EDATA, field,
                        "%s = %.17g lies %.3g standard deviations from the model's training "
                        "data once standardised: beyond %g, float64 arithmetic on it is not "
                        "safe",
                        field, value, fabs(working), GP_WORKING_LIMIT);
}

/* Column j of X (n rows) standardised by (mu, scale) within limit. */
static int check_column(const double *c, size_t n, double mu, double scale, double limit,
                        size_t *bad)
{
    for (size_t i = 0; i < n; i++)
        if (!working_ok((c[i] - mu) / scale, limit)) {
            *bad = i;
            return 0;
        }
    return 1;
}

int gp_check_standardised_points(const double *X, size_t ld, size_t k, size_t d,
                                 const double *mean, const double *scale, double limit,
                                 long shift, gp_error *err)
{
    size_t bad = 0;
    for (size_t j = 0; j < d; j++) {
        const double *c = X + j * ld;
        if (check_column(c, k, mean[j], scale[j], limit, &bad))
            continue;
        char field[GP_ERROR_FIELD_LEN] = "X";
        long row = (long)bad + shift;
        if (row >= 0)
            snprintf(field, sizeof field, "X[%ld][%zu]", row, j);
        return refuse_working(err, field, c[bad], (c[bad] - mean[j]) / scale[j]);
    }
    return GP_OK;
}

int gp_check_working_points(const gp_model *model, const double *X, size_t k, double limit,
                            gp_error *err)
{
    return gp_check_standardised_points(X, k, k, model->input_dim, model->x_mean,
                                        model->x_scale, limit, 0, err);
}

int gp_check_working_targets(const gp_model *model, const double *Y, size_t k, double limit,
                             gp_error *err)
{
    size_t bad = 0;
    if (check_column(Y, k, model->y_mean, model->y_scale, limit, &bad))
        return GP_OK;
    char field[GP_ERROR_FIELD_LEN];
    snprintf(field, sizeof field, "y[%zu]", bad);
    return refuse_working(err, field, Y[bad], (Y[bad] - model->y_mean) / model->y_scale);
}

int gp_check_working_values(const double *W, size_t k, size_t p, size_t ld, long shift,
                            gp_error *err)
{
    for (size_t j = 0; j < p; j++)
        for (size_t i = 0; i < k; i++) {
            double w = W[j * ld + i];
            if (working_ok(w, GP_WORKING_LIMIT))
                continue;
            char field[GP_ERROR_FIELD_LEN] = "y";
            long row = (long)i + shift;
            if (row >= 0 && p > 1)
                snprintf(field, sizeof field, "y[%ld][%zu]", row, j);
            else if (row >= 0)
                snprintf(field, sizeof field, "y[%ld]", row);
            if (!isfinite(w))
                return gp_error_set(err, GP_EDATA, field,
                                    "%s overflows float64 once standardised", field);
            return gp_error_set(err, GP_EDATA, field,
                                "%s lies %.3g standard deviations from the data once "
                                "standardised: beyond %g, float64 arithmetic on it is not safe",
                                field, fabs(w), GP_WORKING_LIMIT);
        }
    return GP_OK;
}

/* The value of column c (n rows, statistics mu and scale) furthest out. */
static size_t furthest(const double *c, size_t n, double mu)
{
    size_t bad = 0;
    for (size_t i = 1; i < n; i++)
        if (fabs(c[i] - mu) > fabs(c[bad] - mu))
            bad = i;
    return bad;
}

int gp_check_standardisable(const double *A, size_t n, size_t cols, size_t ld, int standardize,
                            int is_y, long shift, gp_error *err)
{
    for (size_t j = 0; j < cols; j++) {
        const double *c = A + j * ld;
        double mu = 0.0, scale = 1.0;
        if (standardize)
            gp_column_stats(c, n, 1, &mu, &scale);
        size_t bad = 0;
        /* the scale itself within the limit too: a prediction's variance in
         * original units is a working variance times scale^2 */
        if (scale <= GP_WORKING_LIMIT && check_column(c, n, mu, scale, GP_WORKING_LIMIT, &bad))
            continue;
        if (scale > GP_WORKING_LIMIT)
            bad = furthest(c, n, mu);
        char field[GP_ERROR_FIELD_LEN];
        long row = (long)bad + shift;
        snprintf(field, sizeof field, "%s", is_y ? "y" : "X");
        if (row >= 0 && (!is_y || cols > 1))
            snprintf(field, sizeof field, "%s[%ld][%zu]", is_y ? "y" : "X", row, j);
        else if (row >= 0)
            snprintf(field, sizeof field, "y[%ld]", row);
        return gp_error_set(err, GP_EDATA, field,
                            "%s = %.17g: %s, so the model could not stay finite (values "
                            "must lie within %g standard deviations of their column's mean, "
                            "and its standard deviation below %g)",
                            field, c[bad],
                            standardize ? "the column's spread is beyond float64's reach"
                                        : "too large for float64 arithmetic unstandardised",
                            GP_WORKING_LIMIT, GP_WORKING_LIMIT);
    }
    return GP_OK;
}

int gp_check_training_data(const gp_fit_request *req, gp_error *err)
{
    size_t p = req->n_outputs ? req->n_outputs : 1;
    int points = req->input.kind == GP_INPUT_POINT;
    if (req->n == 0 || req->X == NULL || req->y == NULL)
        return gp_error_set(err, GP_EDATA, "X", "training data is empty");
    /* the width of non-point rows and d > 0: gp_model_fit's shape check, first */
    size_t count = 0, ycount = 0, bad = 0;
    int rc = gp_checked_size(req->n, req->d, &count, err);
    if (rc == GP_OK)
        rc = gp_checked_size(req->n, p, &ycount, err);
    if (rc)
        return rc;
    if (!points && (rc = gp_input_check(&req->input, req->X, req->n, "X", err)) != GP_OK)
        return rc;
    if (points && !gp_all_finite(req->X, count, &bad)) {
        char field[GP_ERROR_FIELD_LEN];
        snprintf(field, sizeof field, "X[%zu][%zu]", bad % req->n, bad / req->n);
        return gp_error_set(err, GP_EDATA, field, "%s is not a finite number", field);
    }
    /* A coregionalised fit's y may miss entries (NaN): gp_model_fit checks
     * it per output (gp_coreg_check_targets, core/coreg, which calls this
     * file: the check is there so that no circle forms). The option reaches
     * here only on a method that takes it: gp_model_fit validates the
     * options first (gp_fit_coregionalised). */
    int coreg = gp_option_object(req, "coregionalization") != NULL;
    if (!coreg && !gp_all_finite(req->y, ycount, &bad)) {
        char field[GP_ERROR_FIELD_LEN];
        gp_y_field(field, sizeof field, bad, req->n, p);
        return gp_error_set(err, GP_EDATA, field, "%s is not a finite number", field);
    }
    if (points && (rc = gp_check_standardisable(req->X, req->n, req->d, req->n,
                                                req->standardize, 0, 0, err)) != GP_OK)
        return rc;
    /* labels (0/1, counts) are never standardised */
    int std_y = req->standardize && req->likelihood == GP_LIK_GAUSSIAN;
    if (!coreg &&
        (rc = gp_check_standardisable(req->y, req->n, p, req->n, std_y, 1, 0, err)) != GP_OK)
        return rc;
    return gp_check_fit_settings(req, err);
}

/* ---- the model's memory and standardisation (declared in model.h) ---- */

/* The mean and standard deviation of a column whose plain sums overflow
 * (values near the largest double): computed on the column divided by its
 * largest magnitude, so both are found wherever they are representable
 * (the deviation of {1e308, -1e308} is not, and comes out Inf). */
static void scaled_stats(const double *c, size_t n, double *mean, double *sd)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s = fmax(s, fabs(c[i]));
    double m = 0.0, ss = 0.0;
    for (size_t i = 0; i < n; i++)
        m += c[i] / s;
    m /= (double)n;
    for (size_t i = 0; i < n; i++)
        ss += (c[i] / s - m) * (c[i] / s - m);
    *mean = s * m;
    *sd = s * sqrt(ss / (double)n);
}

void gp_column_stats(const double *X, size_t n, size_t d, double *mean, double *scale)
{
    for (size_t j = 0; j < d; j++) {
        const double *c = X + j * n;
        double m = 0.0;
        for (size_t i = 0; i < n; i++)
            m += c[i];
        m = n > 0 ? m / (double)n : 0.0;
        double ss = 0.0;
        for (size_t i = 0; i < n; i++)
            ss += (c[i] - m) * (c[i] - m);
        double sd = n > 0 ? sqrt(ss / (double)n) : 0.0;
        if (n > 0 && !(isfinite(m) && isfinite(ss))) /* only then: other columns keep their bits */
            scaled_stats(c, n, &m, &sd);
        mean[j] = m;
        /* A constant column gets scale 1: it passes through instead of dividing by 0. */
        scale[j] = sd > 0.0 && isfinite(sd) ? sd : 1.0;
    }
}

void gp_model_free(gp_model *model)
{
    if (model == NULL)
        return;
    if (model->impl && model->method && model->method->ops->free_impl)
        model->method->ops->free_impl(model->impl);
    gp_kernel_free(model->kernel);
    gp_softmax_mc_free(&model->softmax_draws);
    gp_hyper_spec_free(model->hyper);
    free(model->mean_coef);
    free(model->x_mean);
    free(model->x_scale);
    free(model);
}

int gp_check_fit_settings(const gp_fit_request *req, gp_error *err)
{
    size_t kdim = req->input.kind == GP_INPUT_POINT ? req->d : gp_input_point_dim(&req->input);
    if (req->kernel == NULL)
        return gp_error_set(err, GP_EINVAL, "kernel", "no kernel given");
    if (req->kernel->input_dim != kdim)
        return gp_error_set(err, GP_EDATA, "kernel",
                            "kernel expects %zu input dimensions; the inputs have %zu",
                            req->kernel->input_dim, kdim);
    /* With known per-point noise a fixed homoscedastic part may be 0: the
     * rows' own noise (and the jitter policy) keep the covariance factorisable. */
    int zero_ok = req->noise_per_point && req->noise_fixed;
    if (req->noise_given && !(isfinite(req->noise_variance) &&
                              (req->noise_variance > 0.0 || (zero_ok && req->noise_variance == 0.0))))
        return gp_error_set(err, GP_EINVAL, "noise.variance",
                            zero_ok ? "noise variance must be a finite number >= 0"
                                    : "noise variance must be a positive finite number");
    if (req->noise_per_point && req->likelihood != GP_LIK_GAUSSIAN)
        return gp_error_set(err, GP_EUNSUPPORTED, "noise.per_point",
                            "noise.per_point: known noise variances are for the gaussian "
                            "likelihood only");
    int rc = gp_check_noise_values(req->noise_per_point, req->n, "noise.per_point", err);
    if (rc == GP_OK)
        rc = gp_hyper_spec_check(req->hyper, req->kernel, req->noise_given, req->noise_variance,
                                 err);
    return rc;
}

/* The standardising statistics over rows read in chunks, every process of a
 * sharded fit agreeing on a failure or a cancel (core/model/rows_passes.h). */
static int rows_column_stats(gp_model *model, const gp_fit_request *req, gp_error *err)
{
    gp_rows_sync s;
    int rc = gp_rows_sync_init(&s, req->rows, req, err);
    if (rc == GP_OK)
        rc = gp_rows_column_stats(&s, model->x_mean, model->x_scale, &model->y_mean,
                                  &model->y_scale, err);
    gp_rows_sync_free(&s);
    return rc;
}

gp_model *gp_model_alloc(const gp_method *m, size_t n, size_t d, gp_error *err)
{
    gp_model *model = calloc(1, sizeof *model);
    if (model == NULL) {
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory allocating a model");
        return NULL;
    }
    model->method = m;
    model->n_train = n;
    model->input_dim = d;
    model->n_outputs = 1;
    gp_input_spec_points(&model->input, d);
    model->x_mean = gp_alloc_doubles(d, err);
    model->x_scale = gp_alloc_doubles(d, err);
    model->diag.objective_name = m->objective_name;
    if (model->x_mean == NULL || model->x_scale == NULL) {
        gp_model_free(model);
        return NULL;
    }
    return model;
}

int gp_model_new(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    gp_model *model = gp_model_alloc(m, req->n, req->d, err);
    if (model == NULL)
        return err ? err->code : GP_ENOMEM;
    int rc = gp_kernel_copy(&model->kernel, req->kernel, err);
    if (rc == GP_OK && req->hyper) /* the spec stays with the model (rfgp's later selections) */
        rc = gp_hyper_spec_copy(&model->hyper, req->hyper, err);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    model->standardize = req->standardize ? 1 : 0;
    model->likelihood = req->likelihood;
    model->n_outputs = req->n_outputs ? req->n_outputs : 1;
    if (req->input.kind != GP_INPUT_POINT)
        model->input = req->input;
    /* The common statistics standardise points and one output; a method of
     * other inputs or several outputs keeps its own (these stay 0 and 1). */
    if (model->standardize && req->rows) {
        rc = rows_column_stats(model, req, err);
        if (rc) {
            gp_model_free(model);
            return rc;
        }
    } else if (model->standardize && req->n > 0 && req->input.kind == GP_INPUT_POINT &&
               model->n_outputs == 1) {
        gp_column_stats(req->X, req->n, req->d, model->x_mean, model->x_scale);
        gp_column_stats(req->y, req->n, 1, &model->y_mean, &model->y_scale);
    } else {
        for (size_t k = 0; k < req->d; k++) {
            model->x_mean[k] = 0.0;
            model->x_scale[k] = 1.0;
        }
        model->y_mean = 0.0;
        model->y_scale = 1.0;
    }
    model->noise_variance = req->noise_variance;
    model->per_point_noise = req->noise_per_point != NULL;
    size_t p = gp_mean_n_coef(req->mean, req->d);
    if (p && (model->mean_coef = gp_alloc_doubles(p, err)) == NULL) {
        gp_model_free(model);
        return GP_ENOMEM;
    }
    for (size_t j = 0; j < p; j++)
        model->mean_coef[j] = 0.0;
    model->mean_type = p ? req->mean : GP_MEAN_ZERO;
    if (req->likelihood != GP_LIK_GAUSSIAN) {
        /* Labels keep their meaning (0/1, counts): the latent f is in natural
         * units, and there is no noise variance. */
        model->y_mean = 0.0;
        model->y_scale = 1.0;
        model->noise_variance = 0.0;
    }
    *out = model;
    return GP_OK;
}

int gp_model_points(const gp_model *model, const double *X, size_t n, double **out,
                    gp_error *err)
{
    size_t d = model->input_dim, count;
    int rc = gp_checked_size(n, d, &count, err);
    if (rc)
        return rc;
    double *P = gp_alloc_doubles(count, err);
    if (P == NULL)
        return GP_ENOMEM;
    gp_model_standardize_points(model, X, n, P);
    *out = P;
    return GP_OK;
}

void gp_model_standardize_points(const gp_model *model, const double *X, size_t n, double *out)
{
    size_t d = model->input_dim;
    for (size_t k = 0; k < d; k++) {
        const double *col = X + k * n;
        double mu = model->x_mean[k], scale = model->x_scale[k];
        for (size_t i = 0; i < n; i++)
            out[i * d + k] = (col[i] - mu) / scale;
    }
}

static gp_info_item *info_slot(gp_model *model, const char *key)
{
    gp_diagnostics *dg = &model->diag;
    for (size_t i = 0; i < dg->n_info; i++)
        if (strcmp(dg->info[i].key, key) == 0)
            return &dg->info[i];
    if (dg->n_info == GP_MODEL_INFO_MAX)
        return NULL;
    dg->info[dg->n_info].key = key;
    return &dg->info[dg->n_info++];
}

void gp_model_info_number(gp_model *model, const char *key, double value)
{
    gp_info_item *it = info_slot(model, key);
    if (it) {
        it->string = NULL;
        it->number = value;
    }
}

void gp_model_info_string(gp_model *model, const char *key, const char *value)
{
    gp_info_item *it = info_slot(model, key);
    if (it) {
        it->string = value;
        it->number = 0;
    }
}

int gp_state_put_cholesky_ld(gp_state *st, const char *name, const double *L, size_t n,
                             size_t lda, gp_error *err)
{
    size_t packed_len = n * (n + 1) / 2;
    double *packed = gp_alloc_doubles(packed_len, err);
    if (packed == NULL)
        return GP_ENOMEM;
    gp_pack_lower(L, n, lda, packed);
    return gp_state_put_owned(st, name, packed_len, 1, packed, err);
}

int gp_state_put_cholesky(gp_state *st, const char *name, const double *L, size_t n,
                          gp_error *err)
{
    return gp_state_put_cholesky_ld(st, name, L, n, n, err);
}

int gp_state_get_cholesky(const gp_state *st, const char *name, size_t n, double *L,
                          gp_error *err)
{
    const double *packed;
    int rc = gp_state_get(st, name, n * (n + 1) / 2, 1, &packed, err);
    if (rc)
        return rc;
    gp_unpack_lower(packed, n, L, n);
    for (size_t i = 0; i < n; i++)
        if (!(L[i * n + i] > 0.0) || !isfinite(L[i * n + i]))
            return gp_error_set(err, GP_EDATA, name, "corrupt Cholesky factor");
    return GP_OK;
}

static double target_power(const double *y, size_t n)
{
    double v = 0.0;
    for (size_t i = 0; i < n; i++)
        v += y[i] * y[i];
    v /= (double)n;
    return v > 0.0 ? v : 1.0;
}

int gp_check_noise_values(const double *r, size_t n, const char *field, gp_error *err)
{
    for (size_t i = 0; r && i < n; i++)
        if (!(isfinite(r[i]) && r[i] >= 0.0)) {
            char name[GP_ERROR_FIELD_LEN];
            snprintf(name, sizeof name, "%s[%zu]", field, i);
            return gp_error_set(err, GP_EDATA, name,
                                "%s: a noise variance must be a finite number >= 0", name);
        }
    return GP_OK;
}

void gp_model_working_noise(const gp_model *model, const double *r, size_t n, double *out)
{
    double s = model->y_scale * model->y_scale;
    for (size_t i = 0; i < n; i++)
        out[i] = r[i] / s;
}

double *gp_model_working_noise_alloc(const gp_model *model, const double *r, size_t n, int *rc,
                                     gp_error *err)
{
    *rc = GP_OK;
    if (r == NULL)
        return NULL;
    double *out = gp_alloc_doubles(n ? n : 1, err);
    if (out == NULL)
        *rc = GP_ENOMEM;
    else
        gp_model_working_noise(model, r, n, out);
    return out;
}

void gp_noise_param_init(gp_noise_param *np, const gp_fit_request *req, const double *y,
                         size_t n)
{
    gp_noise_param_init_power(np, req, target_power(y, n));
}

void gp_noise_param_init_power(gp_noise_param *np, const gp_fit_request *req, double power)
{
    np->learned = !req->noise_fixed;
    np->floor = GP_NOISE_FLOOR_REL * power;
    np->start = req->noise_given ? req->noise_variance : power;
}

double gp_noise_param_x0(const gp_noise_param *np)
{
    double excess = np->start - np->floor;
    return log(excess > np->floor ? excess : np->floor);
}

double gp_noise_param_value(const gp_noise_param *np, double x)
{
    return np->learned ? np->floor + exp(x) : np->start;
}

double gp_noise_param_grad(const gp_noise_param *np, double s, double dlog_s)
{
    return dlog_s * (s - np->floor) / s;
}

void gp_model_leaf_inputs(const gp_model *model, const size_t *dims, size_t d,
                          const double *inv_ls, const double *X, size_t ldx, size_t start,
                          size_t b, double *out)
{
    for (size_t j = 0; j < d; j++) {
        size_t c = dims[j];
        double mu = model->x_mean[c], sc = model->x_scale[c];
        const double *col = X + c * ldx + start;
        double *o = out + j * b;
        if (inv_ls == NULL) {
            for (size_t i = 0; i < b; i++)
                o[i] = (col[i] - mu) / sc;
        } else {
            double il = inv_ls[j];
            for (size_t i = 0; i < b; i++)
                o[i] = (col[i] - mu) / sc * il;
        }
    }
}

void gp_model_working_targets(const gp_model *model, const double *y, size_t n, double *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (y[i] - model->y_mean) / model->y_scale;
}

size_t gp_predict_block_rows(size_t width, size_t m)
{
    size_t b = ((size_t)4 << 20) / (width ? width : 1);
    if (b < 1)
        b = 1;
    return b < m ? b : m;
}

/* The accepted leaf types as "a, b or c" into list. */
static void kernel_list(const gp_method *m, char *list, size_t size)
{
    size_t len = 0;
    list[0] = '\0';
    for (size_t i = 0; i < m->n_kernels && len < size; i++) {
        const char *sep = i == 0 ? "" : i + 1 == m->n_kernels ? " or " : ", ";
        int w = snprintf(list + len, size - len, "%s%s", sep, gp_kernel_type_name(m->kernels[i]));
        len += w > 0 ? (size_t)w : 0;
    }
}

int gp_method_check_kernel(const gp_method *m, const gp_kernel *k, gp_error *err)
{
    if (gp_method_accepts_kernel_type(m, k->type)) {
        for (size_t i = 0; i < k->n_terms; i++) {
            int rc = gp_method_check_kernel(m, k->terms[i], err);
            if (rc)
                return rc;
        }
        return GP_OK;
    }
    if (m->kernels == NULL)
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.type",
                            "method '%s' does not accept a '%s' kernel", m->name,
                            gp_kernel_type_name(k->type));
    char list[128];
    kernel_list(m, list, sizeof list);
    return gp_error_set(err, GP_EUNSUPPORTED, "kernel.type", "method '%s' needs a %s%s kernel",
                        m->name, m->composite_kernels ? "" : "single ", list);
}

int gp_model_gaussian_draws(const gp_model *model, const gp_sample_request *req,
                            const double *mean, double *S, double *samples, gp_error *err)
{
    size_t m = req->m, n = req->n_samples;
    for (size_t j = 0; j < m; j++) /* a point too far out for float64: named, not factored */
        if (!isfinite(mean[j]) || !gp_all_finite(S + j * m + j, m - j, NULL)) {
            char field[GP_ERROR_FIELD_LEN];
            snprintf(field, sizeof field, "X[%zu]", j);
            return gp_error_set(err, GP_EDATA, field,
                                "the posterior at %s is not a finite number: the point lies "
                                "too far from the training data for float64 arithmetic",
                                field);
        }
    if (req->include_noise)
        for (size_t j = 0; j < m; j++)
            S[j * m + j] += model->noise_variance;
    int rc = gp_cholesky_jitter(S, m, m, NULL, err);
    if (rc)
        return rc;
    gp_rng rng;
    gp_rng_seed(&rng, req->seed);
    gp_rng_normal_fill(&rng, samples, m * n);
    cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m,
                (blasint)n, 1.0, S, (blasint)m, samples, (blasint)m);
    for (size_t s = 0; s < n; s++)
        for (size_t j = 0; j < m; j++)
            samples[s * m + j] = (mean[j] + samples[s * m + j]) * model->y_scale + model->y_mean;
    return GP_OK;
}

double *gp_model_mean_basis(const gp_model *model, const double *P, size_t n, gp_error *err)
{
    size_t p = gp_mean_n_coef(model->mean_type, model->input_dim), count = 0;
    if (gp_checked_size(n, p ? p : 1, &count, err))
        return NULL;
    double *H = gp_alloc_doubles(count, err);
    if (H)
        gp_mean_basis(model->mean_type, P, model->input_dim, n, H);
    return H;
}

int gp_model_mean_residual_ols(gp_model *model, const double *X, size_t n, double *yw,
                               gp_error *err)
{
    size_t p = gp_mean_n_coef(model->mean_type, model->input_dim);
    if (p == 0)
        return GP_OK;
    double *P = NULL, *H = NULL, *G = gp_alloc_doubles(p * p, err);
    int rc = G ? gp_model_points(model, X, n, &P, err) : GP_ENOMEM;
    if (rc == GP_OK && (H = gp_model_mean_basis(model, P, n, err)) == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)p, (blasint)n, 1.0, H,
                    (blasint)n, 0.0, G, (blasint)p);
        cblas_dgemv(CblasColMajor, CblasTrans, (blasint)n, (blasint)p, 1.0, H, (blasint)n, yw, 1,
                    0.0, model->mean_coef, 1);
        rc = gp_mean_solve_normal(G, model->mean_coef, p, err);
    }
    if (rc == GP_OK)
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)p, -1.0, H, (blasint)n,
                    model->mean_coef, 1, 1.0, yw, 1);
    free(G);
    free(P);
    free(H);
    return rc;
}
