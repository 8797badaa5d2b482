/* The random-feature GP that learns online: see core/methods/rfgp/rfgp.h and
 * docs/methods/kernel-jit-online.md ("As implemented in gpserve").
 *
 * Units: point inputs and every output are standardised with statistics of
 * the warm-up buffer (fixed from then on, so an update never rescales the
 * model); distributional inputs are taken as given. The kernel (widths, s0)
 * and the noise s are in working units; predictions go back per output.
 *
 * The folder, each file using only those listed before it: model.c (the
 * state, predict, sample); update.c (rows into the posterior: Givens updates
 * or a re-factorisation); config.c (the request's options, method_info);
 * context.c (what the end of the warm-up works on); ml.c (the marginal
 * likelihood); select.c (the end of the warm-up: widths, features, the batch
 * fit); persist.c (export, import); this file (the warm-up buffer, fit and
 * observe, the LML for tests, the descriptor). embed.c: the random features
 * of points and distributions; internal.h: the types they share. */
#include "core/methods/rfgp/rfgp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/linalg/linalg.h"
#include "core/methods/rfgp/config.h"
#include "core/methods/rfgp/context.h"
#include "core/methods/rfgp/embed.h"
#include "core/methods/rfgp/ml.h"
#include "core/methods/rfgp/model.h"
#include "core/methods/rfgp/persist.h"
#include "core/methods/rfgp/select.h"
#include "core/methods/rfgp/update.h"
#include "core/model/method.h"

static const gp_kernel_type rfgp_kernels[] = {GP_KERNEL_RBF};

static const gp_option_spec rfgp_options[] = {
    {"input", GP_OPTION_OBJECT, 0, NULL, 0, 0, gp_input_spec_schema,
     "what one input is: absent, points of the data's columns; {\"kind\": \"point\", \"dim\": "
     "d}; {\"kind\": \"gaussian\", \"dim\": d, \"covariance\": \"diag\"|\"full\"} (rows: mean, "
     "then variances or the covariance); {\"kind\": \"samples\", \"dim\": d, \"samples\": S}; "
     "{\"kind\": \"messages\", \"messages\": [\"normal\", \"beta\", \"gamma\"...]} (each "
     "moment-matched to a Gaussian, docs/methods/kernel-jit-online.md §6). A model created "
     "without rows takes its dimension from here"},
    {"outputs", GP_OPTION_INT, 1, NULL, 1, 1000, NULL,
     "p, the outputs (columns of y): a model created without rows takes it from here; with "
     "rows it must match them"},
    {"features", GP_OPTION_INT, 800, NULL, 1, 16384, NULL,
     "D, the random features the regression sees (KJIT: 800); the factor of the D x D "
     "precision is the model's memory and an update's cost, O(D^2)"},
    {"inner_features", GP_OPTION_INT, 400, NULL, 1, 16384, NULL,
     "D_in, the inner (embedding) features of distributional inputs (KJIT: 400)"},
    {"warmup", GP_OPTION_INT, 300, NULL, 0, 1000000, NULL,
     "n0, the rows buffered before the widths are chosen and the model can predict (KJIT: "
     "300); 0 only with width_selection fixed"},
    {"width_selection", GP_OPTION_ENUM, 0, "median", 0, 0, "median|loocv|ml|fixed",
     "how the widths are chosen at the end of the warm-up: median heuristics (§4: inner "
     "widths^2 = the average input variance per dimension, the median distance for points; "
     "outer gamma^2 = median_factor x the median squared distance of the embeddings), "
     "closed-form leave-one-out over median factors x noise ratios, type-II marginal "
     "likelihood (L-BFGS, analytic gradients), or fixed: the kernel's lengthscales and "
     "outer_width as given"},
    {"median_factor", GP_OPTION_NUMBER, 0.5, NULL, 1e-6, 1e6, NULL,
     "medf: the outer width gamma^2 is medf times the median squared distance between "
     "embeddings (KJIT: 0.5)"},
    {"outer_width", GP_OPTION_NUMBER, 0, NULL, 0, 1e150, NULL,
     "gamma, the width of the outer Gaussian kernel on embeddings, for width_selection fixed "
     "with distributional inputs (required there; 0: not given)"},
    {"forgetting", GP_OPTION_NUMBER, 1, NULL, 1e-6, 1, NULL,
     "lambda in (0, 1]: every row first scales the precision and b by lambda (P <- lambda P + "
     "psi psi^T / s), so old rows fade; 1 never forgets (KJIT)"},
    {"refactor_batch", GP_OPTION_NUMBER, 0, NULL, 0, 1e9, "auto",
     "rows per update from which a batch re-factorises the precision (dsyrk + Cholesky, "
     "O(D^2 k + D^3)) instead of k rank-one updates (O(k D^2)); 0 or \"auto\": the crossover "
     "measured on the reference machine, D / 3"},
    {"gate_threshold", GP_OPTION_NUMBER, 0, "relative", -1e300, 1e300, "relative",
     "tau, the gate: a prediction asks for the true answer where log var_y >= tau for some "
     "output (original units; §2). A number is an absolute tau; \"relative\" (the default) "
     "sets tau_j = log(noise_j) + log(1 + gate_kappa) per output"},
    {"gate_kappa", GP_OPTION_NUMBER, 1, NULL, 1e-9, 1e300, NULL,
     "kappa of the relative gate: ask where the latent variance reaches kappa times the "
     "noise (§8.13: 1 matches KJIT's hand-set -8.5 at noise 1e-4)"},
    {"max_iterations", GP_OPTION_INT, 100, NULL, 0, 100000, NULL,
     "L-BFGS iterations of width_selection ml"},
    {"tolerance", GP_OPTION_NUMBER, 1e-9, NULL, 1e-16, 1, NULL,
     "ml: stop when the relative change of the marginal likelihood falls below this"},
};

#define N_OPTIONS (sizeof rfgp_options / sizeof rfgp_options[0])

/* ---- the rows of fit and observe ---- */

static void commit(gp_model *model, rfgp_impl *im, staged *st)
{
    const rfgp_cfg *c = &im->c;
    gp_kernel *k = model->kernel;
    k->log_variance = log(st->s0);
    for (size_t j = 0; j < k->n_lengthscale; j++)
        k->log_lengthscale[j] = log(st->m.widths[j]);
    model->noise_variance = st->noise;
    if (!c->two_stage) {
        memcpy(model->x_mean, st->m.x_mean, c->dk * sizeof *model->x_mean);
        memcpy(model->x_scale, st->m.x_scale, c->dk * sizeof *model->x_scale);
    }
    if (c->p == 1) { /* the common statistics, as the other one-output models report them */
        model->y_mean = st->m.y_mean[0];
        model->y_scale = st->m.y_scale[0];
    }
    model->diag.objective = st->objective;
    model->diag.iterations = st->iterations;
    model->diag.evaluations = st->evaluations;
    model->diag.converged = 1;
    model->diag.jitter = st->jitter;
    if (st->beta) /* the mean, held from here on */
        memcpy(model->mean_coef, st->beta,
               gp_mean_n_coef(model->mean_type, model->input_dim) * sizeof *st->beta);
    free(st->beta);
    rfgp_map_free(&im->map);
    rfgp_post_free(&im->post);
    im->map = st->m;
    im->post = st->q;
    memset(st, 0, sizeof *st);
    im->online = 1;
    free(im->buf_x);
    free(im->buf_y);
    im->buf_x = im->buf_y = NULL;
    im->n_buf = 0;
    rfgp_set_thresholds(model, im);
}

/* The rows after the warm-up's end in the call that ended it, with a mean:
 * gp_model_observe subtracted the mean at the coefficients before (0), so
 * they are made the residual y - y_scale h(x_w)^T beta here, at the
 * coefficients and the standardisation just fitted (one output; X n x d with
 * leading dimension k, as fit and observe pass it). */
static double *residual_after_warmup(const gp_model *model, const staged *st, const double *X,
                                     const double *Y, size_t k, gp_error *err)
{
    double *R = gp_alloc_doubles(k, err);
    if (R == NULL)
        return NULL;
    memcpy(R, Y, k * sizeof *R);
    gp_mean_add_original(model->mean_type, st->beta, X, k, model->input_dim, st->m.x_mean,
                         st->m.x_scale, -st->m.y_scale[0], R);
    return R;
}

/* Rows 0 .. k of X (leading dimension ldx) and Y (ldy), original units: into
 * the warm-up buffer while it fills, then (after its end, in the same call)
 * into the posterior. All or nothing. */
static int take_rows(gp_model *model, const double *X, size_t ldx, const double *Y, size_t ldy,
                     size_t k, const gp_fit_request *req, gp_error *err)
{
    rfgp_impl *im = model->impl;
    const rfgp_cfg *c = &im->c;
    size_t take = 0;
    int ended = 0;
    staged st;
    if (!im->online) {
        take = c->warmup - im->n_buf < k ? c->warmup - im->n_buf : k;
        for (size_t j = 0; take > 0 && j < c->width; j++)
            memcpy(im->buf_x + j * c->warmup + im->n_buf, X + j * ldx, take * sizeof *X);
        for (size_t q = 0; take > 0 && q < c->p; q++)
            memcpy(im->buf_y + q * c->warmup + im->n_buf, Y + q * ldy, take * sizeof *Y);
        im->n_buf += take;
        if (im->n_buf < c->warmup) {
            model->n_train += take;
            return GP_OK;
        }
        /* the buffer holds earlier calls' rows, then this call's first `take` */
        int rc = rfgp_warmup_end(model, im, req, -(long)(im->n_buf - take), &st, err);
        if (rc) {
            im->n_buf -= take;
            return rc;
        }
        ended = 1;
    }
    fmap *m = ended ? &st.m : &im->map;
    post *q = ended ? &st.q : &im->post;
    double noise = ended ? st.noise : model->noise_variance;
    double s0 = ended ? st.s0 : exp(model->kernel->log_variance), jitter = model->diag.jitter;
    double *R = NULL;
    int rc = GP_OK;
    if (ended && st.beta && k > take) {
        if ((R = residual_after_warmup(model, &st, X, Y, k, err)) == NULL)
            rc = GP_ENOMEM;
        Y = R;
        ldy = k;
    }
    if (rc == GP_OK)
        rc = rfgp_apply_rows(c, &model->input, m, q, noise, s0, X, ldx, Y, ldy, take, k - take,
                             0, ended ? &st.jitter : &jitter, err);
    free(R);
    if (rc) {
        if (ended) {
            rfgp_staged_free(&st);
            im->n_buf -= take;
        }
        return rc;
    }
    if (ended)
        commit(model, im, &st);
    else
        model->diag.jitter = jitter;
    model->n_train += k;
    return GP_OK;
}

/* ---- fit and observe ---- */

static int rfgp_fit_body(const gp_method *m, const gp_fit_request *req, gp_model **out,
                         gp_error *err)
{
    *out = NULL;
    if (gp_cancel_requested(&req->cancel))
        return gp_error_set(err, GP_ECANCELLED, NULL, "fit cancelled");
    rfgp_cfg c;
    gp_model *model = NULL;
    int rc = rfgp_read_cfg(m, req, &c, err);
    if (rc == GP_OK)
        rc = gp_model_new(m, req, &model, err);
    if (rc)
        return rc;
    /* statistics come from the warm-up buffer when it is full */
    model->n_train = 0;
    model->n_outputs = c.p;
    for (size_t j = 0; j < model->input_dim; j++) {
        model->x_mean[j] = 0.0;
        model->x_scale[j] = 1.0;
    }
    model->y_mean = 0.0;
    model->y_scale = 1.0;
    model->noise_variance = req->noise_given ? req->noise_variance : DEFAULT_NOISE;
    rfgp_impl *im = NULL;
    rc = rfgp_impl_new(&c, &im, err);
    model->impl = im;
    if (rc == GP_OK)
        rc = take_rows(model, req->X, req->n, req->y, req->n, req->n, req, err);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    rfgp_set_info(model);
    *out = model;
    return GP_OK;
}

static int rfgp_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    gp_blas_serial_begin(); /* results independent of the BLAS thread count */
    int rc = rfgp_fit_body(m, req, out, err);
    gp_blas_serial_end();
    return rc;
}

static int rfgp_observe_body(gp_model *model, const double *X, const double *Y, size_t k,
                             gp_error *err)
{
    int rc = take_rows(model, X, k, Y, k, k, NULL, err);
    if (rc == GP_OK)
        rfgp_set_info(model);
    return rc;
}

static int rfgp_observe(gp_model *model, const double *X, const double *Y, size_t k,
                        gp_error *err)
{
    gp_blas_serial_begin(); /* results independent of the BLAS thread count */
    int rc = rfgp_observe_body(model, X, Y, k, err);
    gp_blas_serial_end();
    return rc;
}

/* ---- the marginal likelihood for tests (rfgp.h) ---- */

static int primal_lml_body(const gp_fit_request *req, const double *x, double *lml, double *g,
                       gp_error *err)
{
    rfgp_cfg c;
    gp_model *model = NULL;
    int rc = rfgp_read_cfg(&gp_method_rfgp, req, &c, err);
    c.warmup = req->n;
    if (rc == GP_OK)
        rc = gp_model_new(&gp_method_rfgp, req, &model, err);
    if (rc)
        return rc;
    model->n_outputs = c.p;
    model->noise_variance = req->noise_given ? req->noise_variance : DEFAULT_NOISE;
    rfgp_impl *im = NULL;
    staged st;
    sel_ctx s;
    ml_prob m;
    memset(&m, 0, sizeof m);
    memset(&s, 0, sizeof s);
    memset(&st, 0, sizeof st);
    rc = rfgp_impl_new(&c, &im, err);
    model->impl = im;
    if (rc == GP_OK) {
        for (size_t j = 0; j < c.width; j++)
            memcpy(im->buf_x + j * c.warmup, req->X + j * req->n, req->n * sizeof *req->X);
        for (size_t q = 0; q < c.p; q++)
            memcpy(im->buf_y + q * c.warmup, req->y + q * req->n, req->n * sizeof *req->y);
        im->n_buf = req->n;
        rc = rfgp_sel_prepare(model, im, NULL, 0, &st, &s, err);
    }
    if (rc == GP_OK)
        rc = rfgp_ml_init(&m, &s, err);
    if (rc == GP_OK) {
        size_t dk = c.dk, i = dk;
        for (size_t k = 0; k < dk; k++)
            m.w[k] = exp(x[k]);
        m.gamma = c.two_stage ? exp(x[i++]) : 1.0;
        m.s0 = exp(x[i++]);
        m.noise = exp(x[i]);
        double gg, gs0, gn;
        rc = rfgp_ml_eval(&m, lml, g != NULL, &gg, &gs0, &gn, err);
        if (rc == GP_OK && g) {
            memcpy(g, m.gw, dk * sizeof *g);
            i = dk;
            if (c.two_stage)
                g[i++] = gg;
            g[i++] = gs0;
            g[i] = gn;
        }
    }
    if (m.s)
        rfgp_ml_free(&m);
    rfgp_sel_release(&s);
    rfgp_staged_free(&st);
    gp_model_free(model);
    return rc;
}

int gp_rfgp_primal_lml(const gp_fit_request *req, const double *x, double *lml, double *g,
                       gp_error *err)
{
    gp_blas_serial_begin();
    int rc = primal_lml_body(req, x, lml, g, err);
    gp_blas_serial_end();
    return rc;
}

/* ---- the online interface and the options ---- */

static void rfgp_online_status(const gp_model *model, gp_online_status *st)
{
    const rfgp_impl *im = model->impl;
    st->n = model->n_train;
    st->warmup = !im->online;
    st->warmup_target = im->c.warmup;
    st->has_threshold = im->online;
    st->threshold = im->online ? im->threshold : NULL;
    st->kappa = im->c.gate_absolute ? NAN : im->c.kappa;
    st->always_asks = im->online && im->always_asks;
}

static int rfgp_check_option(const char *name, const gp_value *v, size_t d, const char *field,
                             gp_error *err)
{
    if (strcmp(name, "input") != 0)
        return gp_error_set(err, GP_EINVAL, field, "unknown option");
    gp_input_spec spec;
    int rc = gp_input_spec_parse(v, field, &spec, err);
    if (rc == GP_OK && spec.kind == GP_INPUT_POINT && spec.dim != 0 && d != 0 && spec.dim != d) {
        char f[GP_ERROR_FIELD_LEN];
        snprintf(f, sizeof f, "%s.dim", field);
        rc = gp_error_set(err, GP_EDATA, f, "%s is %zu but X has %zu columns", f, spec.dim, d);
    }
    return rc;
}

static const gp_method_ops rfgp_ops = {
    .fit = rfgp_fit,
    .predict = rfgp_predict,
    .sample = rfgp_sample,
    .export_impl = rfgp_export,
    .import_impl = rfgp_import,
    .free_impl = rfgp_impl_free,
    .check_option = rfgp_check_option,
    .observe = rfgp_observe,
    .online_status = rfgp_online_status,
    .batch_invariant = 1, /* predict: per-point maps (gp_embed.per_point), the packed invariant solve */
};

static const gp_info_spec rfgp_info[] = {
    {"state", GP_INFO_STRING, "\"warmup\" while the first rows are buffered, then \"online\""},
    {"features", GP_INFO_NUMBER, "D, the random features of the regression"},
    {"inner_features", GP_INFO_NUMBER, "D_in, the inner features (distributional inputs)"},
    {"width_selection", GP_INFO_STRING, "how the widths were (or will be) chosen"},
    {"warmup", GP_INFO_NUMBER, "n0, the rows of the warm-up"},
    {"gate", GP_INFO_STRING, "\"relative\" or \"absolute\": how the gate's threshold is set"},
    {"outer_width", GP_INFO_NUMBER,
     "gamma, the chosen width of the Gaussian kernel on embeddings (distributional inputs)"},
    {"noise", GP_INFO_NUMBER, "the noise variance s in working units"},
    {"prior_variance", GP_INFO_NUMBER, "s0, the weights' prior variance (the kernel's variance)"},
    {"refactorisations", GP_INFO_NUMBER,
     "batches applied by re-factorising the precision (the warm-up's included)"},
    {"rank_one_updates", GP_INFO_NUMBER, "rows applied by a rank-one (Givens) update"},
    {"refactor_batch", GP_INFO_NUMBER,
     "the batch size from which an update re-factorises (auto: D / 3)"},
    {"always_asks", GP_INFO_STRING,
     "\"true\" when an absolute gate_threshold is at or below the log noise of an output, so "
     "every prediction asks (§8.2)"},
};

/* rfgp cannot predict before `warmup` rows: a warm-up of about half the
 * rows ends inside the fit, and the rest go through the online update as an
 * observe of them would. */
static const gp_option_setting rfgp_quick[] = {
    {"max_iterations", 8}, {"warmup", 20}, {"features", 64}};

const gp_method gp_method_rfgp = {
    .name = "rfgp",
    .summary = "Random-feature GP that learns online (KJIT): Bayesian linear regression on "
               "random Fourier features of points, or two-stage features of distributions "
               "(Gaussians, samples, EP messages); O(D^2) Givens updates per observation, an "
               "uncertainty gate, several outputs sharing one factor",
    .objective_name = "log_marginal_likelihood",
    .options = rfgp_options,
    .n_options = N_OPTIONS,
    .kernels = rfgp_kernels,
    .n_kernels = sizeof rfgp_kernels / sizeof rfgp_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "max_iterations",
    .restarts_option = NULL,
    .info = rfgp_info,
    .n_info = sizeof rfgp_info / sizeof rfgp_info[0],
    .multi_output = 1,
    .starts_empty = 1,
    .input_kinds = (1u << GP_INPUT_GAUSSIAN) | (1u << GP_INPUT_SAMPLES) | (1u << GP_INPUT_MESSAGES),
    .gate = 1,
    .quick = rfgp_quick,
    .n_quick = sizeof rfgp_quick / sizeof rfgp_quick[0],
    .hyper_priors = 1,
    .mean_functions = 1, /* one output, point inputs: least squares on the warm-up, then held */
    .ops = &rfgp_ops,
};
