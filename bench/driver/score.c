/* See score.h. */
#include "bench/driver/score.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/scores.h"
#include "core/base/error.h"
#include "core/likelihood/likelihood.h"
#include "core/model/mixture.h"

#define P_CLIP 1e-15
#define DEFAULT_COVER_Z 1.95

static json_t *number(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* Every output of one prediction: 8 m x p blocks (p = the model's outputs,
 * a softmax model's classes) and the components (m x K). */
typedef struct pred_buf {
    double *block;
    gp_prediction out;
} pred_buf;

static int predict_all(const gp_model *model, const gp_dataset *test, pred_buf *b,
                       gp_error *err)
{
    size_t m = test->n, K = gp_model_components(model), kk = K > 1 ? K : 0;
    size_t mp = m * (model->n_outputs > 1 ? model->n_outputs : 1);
    memset(b, 0, sizeof *b);
    b->block = calloc(8 * mp + 2 * m * kk + 1, sizeof(double));
    if (b->block == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    double **v[] = {&b->out.mean,           &b->out.variance,        &b->out.latent_mean,
                    &b->out.latent_variance, &b->out.obs_mean,        &b->out.obs_variance,
                    &b->out.rate_mean,       &b->out.rate_variance};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        *v[i] = b->block + i * mp;
    if (kk) {
        b->out.component_mean = b->block + 8 * mp;
        b->out.component_variance = b->block + 8 * mp + m * kk;
    }
    gp_predict_request req = {.X = test->X, .m = m, .d = test->d, .include_noise = 1,
                              .components = K > 1};
    return gp_model_predict(model, &req, &b->out, err);
}

typedef struct scored {
    double p, y;
} scored;

static int cmp_scored(const void *a, const void *b)
{
    double x = ((const scored *)a)->p, z = ((const scored *)b)->p;
    return (x > z) - (x < z);
}

double gpb_auc(const double *p, const double *y, size_t n)
{
    scored *s = malloc((n + 1) * sizeof *s);
    if (s == NULL)
        return NAN;
    for (size_t i = 0; i < n; i++)
        s[i] = (scored){p[i], y[i]};
    qsort(s, n, sizeof *s, cmp_scored);
    double rank_sum = 0.0, n1 = 0.0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && s[j + 1].p == s[i].p)
            j++;
        double rank = 0.5 * (double)(i + j) + 1.0;
        for (size_t t = i; t <= j; t++)
            if (s[t].y == 1.0) {
                rank_sum += rank;
                n1 += 1.0;
            }
        i = j + 1;
    }
    free(s);
    double n0 = (double)n - n1;
    if (n1 == 0.0 || n0 == 0.0)
        return NAN;
    return (rank_sum - n1 * (n1 + 1.0) / 2.0) / (n1 * n0);
}

static void binary_scores(const double *p, const double *y, size_t n, json_t *rec)
{
    double correct = 0.0, ll = 0.0;
    for (size_t i = 0; i < n; i++) {
        double pc = fmin(fmax(p[i], P_CLIP), 1.0 - P_CLIP);
        correct += (p[i] >= 0.5) == (y[i] == 1.0);
        ll += y[i] == 1.0 ? log(pc) : log(1.0 - pc);
    }
    json_object_set_new(rec, "accuracy", number(100.0 * correct / (double)n));
    json_object_set_new(rec, "auc", number(100.0 * gpb_auc(p, y, n)));
    json_object_set_new(rec, "log_loss", number(-ll / (double)n));
}

/* Softmax: prob is m x C column-major (column c = class c), labels y in
 * 0..C-1. Accuracy: the argmax class (the lowest on a tie); log loss: the
 * true class's probability clipped to [1e-15, 1]. */
static void multiclass_scores(const double *prob, size_t C, const double *y, size_t m,
                              json_t *rec)
{
    double correct = 0.0, ll = 0.0;
    for (size_t i = 0; i < m; i++) {
        size_t best = 0;
        for (size_t c = 1; c < C; c++)
            best = prob[c * m + i] > prob[best * m + i] ? c : best;
        correct += (double)best == y[i];
        size_t t = y[i] >= 0.0 && y[i] < (double)C ? (size_t)y[i] : 0;
        double p = y[i] == (double)t ? prob[t * m + i] : 0.0; /* a label C never saw: p 0 */
        ll += log(fmin(fmax(p, P_CLIP), 1.0));
    }
    json_object_set_new(rec, "accuracy", number(100.0 * correct / (double)m));
    json_object_set_new(rec, "log_loss", number(-ll / (double)m));
    json_object_set_new(rec, "classes", json_integer((json_int_t)C));
}

static int count_scores(const gp_model *model, const pred_buf *b, const gp_dataset *test,
                        json_t *rec, gp_error *err)
{
    size_t n = test->n, K = gp_model_components(model);
    double se = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = test->y[i] - b->out.obs_mean[i];
        se += e * e;
    }
    json_object_set_new(rec, "rmse", number(sqrt(se / (double)n)));
    gp_quadrature q;
    double *logp = malloc((n + 1) * sizeof *logp);
    int rc = logp == NULL ? gp_error_set(err, GP_ENOMEM, NULL, "out of memory")
                          : gp_quadrature_init(&q, GP_LIK_QUADRATURE_POINTS, err);
    if (rc == GP_OK) {
        gp_lik lik = {model->likelihood, 0.0};
        const double *mu = K > 1 ? b->out.component_mean : b->out.latent_mean;
        const double *var = K > 1 ? b->out.component_variance : b->out.latent_variance;
        gp_lik_log_predictive(&lik, &q, mu, var, n, K, test->y, logp);
        double s = 0.0;
        for (size_t i = 0; i < n; i++)
            s += logp[i];
        json_object_set_new(rec, "test_ll", number(s / (double)n));
    }
    free(logp);
    return rc;
}

/* The mixture scores (score.h) from K components (m x K, fitted units) and
 * the moment-matched mean and variance. */
static int mixture_scores(const pred_buf *b, size_t K, const gp_dataset *test, double z,
                          double y_sd, json_t *rec, gp_error *err)
{
    size_t m = test->n;
    const double *cm = K > 1 ? b->out.component_mean : b->out.mean;
    const double *cv = K > 1 ? b->out.component_variance : b->out.variance;
    double *logp = malloc((m + 1) * sizeof *logp);
    if (logp == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_mixture_log_density(cm, cv, m, K, test->y, logp);
    double se = 0.0, lp = 0.0, in = 0.0;
    for (size_t i = 0; i < m; i++) {
        double e = test->y[i] - b->out.mean[i];
        se += e * e;
        lp += logp[i];
        in += fabs(e) < z * sqrt(b->out.variance[i]);
    }
    free(logp);
    json_object_set_new(rec, "rmse", number(y_sd * sqrt(se / (double)m)));
    json_object_set_new(rec, "nlpd", number(-lp / (double)m + log(y_sd)));
    json_object_set_new(rec, "nlpd_joint",
                        number(-gp_mixture_joint_log_density(cm, cv, m, K, test->y)));
    json_object_set_new(rec, "coverage", number(in / (double)m));
    json_object_set_new(rec, "clamped", json_integer((json_int_t)b->out.clamped));
    return GP_OK;
}

int gpb_score(const gp_model *model, const gp_dataset *test, const json_t *spec, double y_sd,
              json_t *rec, gp_error *err)
{
    if (model->likelihood == GP_LIK_GAUSSIAN && !json_is_true(json_object_get(spec, "mixture"))) {
        gp_test_scores s;
        int rc = gp_test_scores_compute(model, test, &s, err);
        if (rc == GP_OK) {
            json_object_set_new(rec, "rmse", number(s.rmse));
            json_object_set_new(rec, "nlpd", number(s.nlpd));
            json_object_set_new(rec, "clamped", json_integer((json_int_t)s.clamped));
        }
        return rc;
    }
    pred_buf b;
    int rc = predict_all(model, test, &b, err);
    if (rc == GP_OK && model->likelihood == GP_LIK_GAUSSIAN) {
        const json_t *z = json_object_get(spec, "coverage_z");
        rc = mixture_scores(&b, gp_model_components(model), test,
                            json_is_number(z) ? json_number_value(z) : DEFAULT_COVER_Z, y_sd, rec,
                            err);
    } else if (rc == GP_OK && model->likelihood == GP_LIK_BERNOULLI) {
        binary_scores(b.out.obs_mean, test->y, test->n, rec);
    } else if (rc == GP_OK && model->likelihood == GP_LIK_SOFTMAX) {
        multiclass_scores(b.out.obs_mean, model->n_outputs, test->y, test->n, rec);
    } else if (rc == GP_OK) {
        rc = count_scores(model, &b, test, rec, err);
    }
    free(b.block);
    return rc;
}
