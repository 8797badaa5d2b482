/* See validation_metrics.h. */
#include "core/model/validation_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/likelihood/likelihood.h"
#include "core/linalg/linalg.h"
#include "core/model/mixture.h"

#define P_CLIP 1e-15
#define LOG_2PI 1.8378770664093454836

const double gp_validation_levels[GP_VALIDATION_LEVELS] = {0.1, 0.2, 0.3, 0.4,  0.5, 0.6,
                                                           0.7, 0.8, 0.9, 0.95, 0.99};

int gp_validation_level_index(double a)
{
    for (int i = 0; i < GP_VALIDATION_LEVELS; i++)
        if (fabs(gp_validation_levels[i] - a) < 1e-12)
            return i;
    return -1;
}

size_t gp_validation_scored_outputs(const gp_model *model)
{
    if (model->likelihood == GP_LIK_SOFTMAX)
        return 1;
    return model->n_outputs > 1 ? model->n_outputs : 1;
}

/* The quantile levels of the intervals: level l's ends at 2l and 2l + 1. */
static void interval_ends(double *q)
{
    for (size_t l = 0; l < GP_VALIDATION_LEVELS; l++) {
        q[2 * l] = 0.5 * (1.0 - gp_validation_levels[l]);
        q[2 * l + 1] = 0.5 * (1.0 + gp_validation_levels[l]);
    }
}

#define N_ENDS (2 * GP_VALIDATION_LEVELS)

/* One prediction's buffers, all in one block. */
typedef struct pred {
    double *block, *logp;
    gp_prediction out;
    size_t K; /* mixture components asked (0: none) */
} pred;

static int predict_held_out(const gp_model *model, const double *X, const double *noise, size_t m,
                            size_t d, pred *p, gp_error *err)
{
    memset(p, 0, sizeof *p);
    size_t P = model->n_outputs > 1 ? model->n_outputs : 1;
    size_t K = gp_model_components(model);
    int mixture = K > 1 && P == 1 && model->likelihood != GP_LIK_SOFTMAX;
    /* counts' coverage comes from their CDF at y (count_coverage), not quantiles */
    int quantiles = model->likelihood == GP_LIK_GAUSSIAN;
    size_t mp = 0, total = 0;
    int rc = gp_checked_size(m, P * (8 + (quantiles ? N_ENDS : 0)) + 1 + (mixture ? 2 * K : 0),
                             &total, err);
    if (rc)
        return rc;
    mp = m * P;
    if ((p->block = gp_alloc_doubles(total + 1, err)) == NULL)
        return GP_ENOMEM;
    double *b = p->block;
    double **f[] = {&p->out.mean,     &p->out.variance,     &p->out.latent_mean,
                    &p->out.latent_variance, &p->out.obs_mean, &p->out.obs_variance,
                    &p->out.rate_mean, &p->out.rate_variance};
    for (size_t i = 0; i < 8; i++, b += mp)
        *f[i] = b;
    if (model->likelihood == GP_LIK_GAUSSIAN) /* those fields are for the other likelihoods */
        p->out.latent_mean = p->out.latent_variance = p->out.obs_mean = p->out.obs_variance =
            p->out.rate_mean = p->out.rate_variance = NULL;
    double levels[N_ENDS];
    interval_ends(levels);
    if (quantiles) {
        p->out.quantiles = b;
        b += mp * N_ENDS;
    }
    p->logp = b;
    b += m;
    if (mixture) {
        p->K = K;
        p->out.component_mean = b;
        p->out.component_variance = b + m * K;
    }
    gp_predict_request req = {.X = X, .m = m, .d = d, .include_noise = 1, .noise = noise,
                              .quantiles = quantiles ? levels : NULL,
                              .n_quantiles = quantiles ? N_ENDS : 0, .components = mixture};
    return gp_model_predict(model, &req, &p->out, err);
}

/* The coverage of each level: y inside [lo, hi] of its quantiles (q: m x
 * N_ENDS of one output). */
static void coverage(const double *q, const double *y, size_t m, gp_validation_metrics *o)
{
    for (size_t l = 0; l < GP_VALIDATION_LEVELS; l++) {
        const double *lo = q + 2 * l * m, *hi = q + (2 * l + 1) * m;
        double in = 0.0, n = 0.0;
        for (size_t i = 0; i < m; i++) {
            if (isnan(y[i]))
                continue;
            n += 1.0;
            in += y[i] >= lo[i] && y[i] <= hi[i];
        }
        o->coverage[l] = n > 0.0 ? in / n : NAN;
    }
}

/* rmse of mean against y, skipping NaN targets; *n the rows scored. */
static double rmse(const double *mean, const double *y, size_t m, size_t *n)
{
    double se = 0.0;
    *n = 0;
    for (size_t i = 0; i < m; i++) {
        if (isnan(y[i]))
            continue;
        double e = y[i] - mean[i];
        se += e * e;
        (*n)++;
    }
    return *n ? sqrt(se / (double)*n) : NAN;
}

static double mean_logp(const double *logp, const double *y, size_t m)
{
    double s = 0.0, n = 0.0;
    for (size_t i = 0; i < m; i++)
        if (!isnan(y[i])) {
            s += logp[i];
            n += 1.0;
        }
    return n > 0.0 ? s / n : NAN;
}

static void gaussian_scores(const gp_model *model, pred *p, const double *y, size_t m,
                            gp_validation_metrics *out)
{
    size_t P = model->n_outputs > 1 ? model->n_outputs : 1;
    for (size_t j = 0; j < P; j++) {
        gp_validation_metrics *o = &out[j];
        const double *yj = y + j * m, *mu = p->out.mean + j * m, *v = p->out.variance + j * m;
        o->rmse = rmse(mu, yj, m, &o->n);
        if (p->K)
            gp_mixture_log_density(p->out.component_mean, p->out.component_variance, m, p->K, yj,
                                   p->logp);
        else
            for (size_t i = 0; i < m; i++) {
                double vi = v[i] > 0.0 ? v[i] : 1e-300, e = yj[i] - mu[i];
                p->logp[i] = -0.5 * (LOG_2PI + log(vi) + e * e / vi);
            }
        o->nlpd = -mean_logp(p->logp, yj, m);
        coverage(p->out.quantiles + j * m * N_ENDS, yj, m, o);
    }
}

/* The coverage of counts: y lies in the central interval [q(lo), q(hi)] of
 * level a (lo, hi = (1 -+ a) / 2, q the smallest count whose CDF reaches the
 * level, as predict's quantiles) exactly when F(y) >= lo and F(y - 1) < hi:
 * two CDF evaluations a point for every level, where searching each of the
 * 22 ends cost pls's particle mixtures ten times its fit. */
static int count_coverage(const gp_model *model, const gp_lik *lik, const double *mu,
                          const double *var, size_t K, const double *y, size_t m,
                          gp_validation_metrics *o, gp_error *err)
{
    double *F = gp_alloc_doubles(4 * m + 1, err);
    if (F == NULL)
        return GP_ENOMEM;
    double *below = F + m, *c = F + 2 * m, *cb = F + 3 * m;
    for (size_t i = 0; i < m; i++) {
        c[i] = isnan(y[i]) ? -1.0 : y[i];
        cb[i] = c[i] - 1.0;
    }
    gp_lik_count_cdf(lik, &model->quadrature, mu, var, m, K, c, F);
    gp_lik_count_cdf(lik, &model->quadrature, mu, var, m, K, cb, below);
    for (size_t l = 0; l < GP_VALIDATION_LEVELS; l++) {
        double a = gp_validation_levels[l], lo = 0.5 * (1.0 - a), hi = 0.5 * (1.0 + a);
        double in = 0.0, n = 0.0;
        for (size_t i = 0; i < m; i++) {
            if (isnan(y[i]))
                continue;
            n += 1.0;
            in += F[i] >= lo && below[i] < hi;
        }
        o->coverage[l] = n > 0.0 ? in / n : NAN;
    }
    free(F);
    return GP_OK;
}

static int count_scores(const gp_model *model, pred *p, const double *y, size_t m,
                        gp_validation_metrics *o, gp_error *err)
{
    gp_quadrature q;
    int rc = gp_quadrature_init(&q, GP_LIK_QUADRATURE_POINTS, err);
    if (rc)
        return rc;
    gp_lik lik = {model->likelihood, 0.0};
    size_t K = p->K ? p->K : 1;
    const double *mu = p->K ? p->out.component_mean : p->out.latent_mean;
    const double *var = p->K ? p->out.component_variance : p->out.latent_variance;
    gp_lik_log_predictive(&lik, &q, mu, var, m, K, y, p->logp);
    o->rmse = rmse(p->out.obs_mean, y, m, &o->n);
    o->nlpd = -mean_logp(p->logp, y, m);
    return count_coverage(model, &lik, mu, var, K, y, m, o, err);
}

/* One row into the reliability table: predicted probability p of an event,
 * hit whether it happened. */
static void reliability_add(gp_reliability *rel, double p, int hit)
{
    if (rel == NULL)
        return;
    int b = (int)floor(p * GP_RELIABILITY_BINS);
    b = b < 0 ? 0 : b >= GP_RELIABILITY_BINS ? GP_RELIABILITY_BINS - 1 : b;
    rel->count[b] += 1.0;
    rel->sum_p[b] += p;
    rel->sum_y[b] += hit;
}

static void binary_scores(const pred *p, const double *y, size_t m, gp_validation_metrics *o,
                          gp_reliability *rel)
{
    double correct = 0.0, ll = 0.0;
    for (size_t i = 0; i < m; i++) {
        double pi = p->out.obs_mean[i], pc = fmin(fmax(pi, P_CLIP), 1.0 - P_CLIP);
        correct += (pi >= 0.5) == (y[i] == 1.0);
        ll += y[i] == 1.0 ? log(pc) : log(1.0 - pc);
        reliability_add(rel, pi, y[i] == 1.0);
    }
    o->n = m;
    o->accuracy = m ? correct / (double)m : NAN;
    o->nlpd = m ? -ll / (double)m : NAN;
}

/* prob: m x C (column c = class c); labels y in 0..C-1 (a label beyond the
 * model's classes has probability 0, clipped). */
static void class_scores(const pred *p, size_t C, const double *y, size_t m,
                         gp_validation_metrics *o, gp_reliability *rel)
{
    const double *prob = p->out.obs_mean;
    double correct = 0.0, ll = 0.0;
    for (size_t i = 0; i < m; i++) {
        size_t best = 0;
        for (size_t c = 1; c < C; c++)
            best = prob[c * m + i] > prob[best * m + i] ? c : best;
        correct += (double)best == y[i];
        /* the top-label table: the chosen class's probability against its hits */
        reliability_add(rel, prob[best * m + i], (double)best == y[i]);
        size_t t = y[i] >= 0.0 && y[i] < (double)C ? (size_t)y[i] : 0;
        double pt = y[i] == (double)t ? prob[t * m + i] : 0.0;
        ll += log(fmin(fmax(pt, P_CLIP), 1.0));
    }
    o->n = m;
    o->accuracy = m ? correct / (double)m : NAN;
    o->nlpd = m ? -ll / (double)m : NAN;
}

static void metrics_blank(gp_validation_metrics *o)
{
    o->n = 0;
    o->rmse = o->nlpd = o->accuracy = NAN;
    for (size_t l = 0; l < GP_VALIDATION_LEVELS; l++)
        o->coverage[l] = NAN;
}

int gp_validation_score(const gp_model *model, const double *X, const double *y,
                        const double *noise, size_t m, size_t d, gp_validation_metrics *out,
                        gp_reliability *rel, gp_error *err)
{
    size_t S = gp_validation_scored_outputs(model);
    for (size_t j = 0; j < S; j++)
        metrics_blank(&out[j]);
    if (m == 0)
        return GP_OK;
    pred p;
    int rc = predict_held_out(model, X, noise, m, d, &p, err);
    if (rc == GP_OK) {
        switch (model->likelihood) {
        case GP_LIK_GAUSSIAN:
            gaussian_scores(model, &p, y, m, out);
            break;
        case GP_LIK_BERNOULLI:
            binary_scores(&p, y, m, out, rel);
            break;
        case GP_LIK_SOFTMAX:
            class_scores(&p, model->n_outputs, y, m, out, rel);
            break;
        default:
            rc = count_scores(model, &p, y, m, out, err);
        }
    }
    free(p.block);
    return rc;
}

/* ---- summaries over fits or outputs ---- */

/* Field k of a metrics record (0 rmse, 1 nlpd, 2 accuracy, 3.. coverage). */
#define N_FIELDS (3 + GP_VALIDATION_LEVELS)
static double *field(gp_validation_metrics *o, size_t k)
{
    return k == 0 ? &o->rmse : k == 1 ? &o->nlpd : k == 2 ? &o->accuracy : &o->coverage[k - 3];
}

static double field_value(const gp_validation_metrics *o, size_t k)
{
    return k == 0 ? o->rmse : k == 1 ? o->nlpd : k == 2 ? o->accuracy : o->coverage[k - 3];
}

void gp_validation_metrics_mean(const gp_validation_metrics *v, size_t n, size_t stride,
                                gp_validation_metrics *mean)
{
    metrics_blank(mean);
    for (size_t i = 0; i < n; i++)
        mean->n += v[i * stride].n;
    for (size_t k = 0; k < N_FIELDS; k++) {
        double s = 0.0, c = 0.0;
        for (size_t i = 0; i < n; i++) {
            double x = field_value(&v[i * stride], k);
            if (isfinite(x)) {
                s += x;
                c += 1.0;
            }
        }
        *field(mean, k) = c > 0.0 ? s / c : NAN;
    }
}

void gp_validation_metrics_sd(const gp_validation_metrics *v, size_t n, size_t stride,
                              const gp_validation_metrics *mean, gp_validation_metrics *sd)
{
    metrics_blank(sd);
    sd->n = mean->n;
    for (size_t k = 0; k < N_FIELDS; k++) {
        double mu = field_value(mean, k), s = 0.0, c = 0.0;
        for (size_t i = 0; i < n; i++) {
            double x = field_value(&v[i * stride], k);
            if (isfinite(x)) {
                s += (x - mu) * (x - mu);
                c += 1.0;
            }
        }
        *field(sd, k) = c > 1.0 ? sqrt(s / (c - 1.0)) : c == 1.0 ? 0.0 : NAN;
    }
}
