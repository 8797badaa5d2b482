/* The option, the observed entries and the parameters of a coregionalised
 * model: core/coreg/params.h. */
#include "core/coreg/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"
#include "core/model/method.h"

/* ---- the option ---- */

#define COREG_SCHEMA_MEMBERS                                                                   \
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"type\"], "         \
    "\"properties\": {\"type\": {\"type\": \"string\", \"enum\": [\"icm\", \"lmc\"]}, "             \
    "\"rank\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 16}, "                        \
    "\"latents\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 8}, "                      \
    "\"kappa\": {\"type\": \"boolean\"}"

const char gp_coreg_option_schema[] = COREG_SCHEMA_MEMBERS "}}";

const char gp_coreg_option_schema_solver[] =
    COREG_SCHEMA_MEMBERS ", \"solver\": {\"type\": \"string\", "
                         "\"enum\": [\"auto\", \"kronecker\", \"general\"]}}}";

const char gp_coreg_option_help[] =
    "several outputs modelled jointly (docs/design/multioutput.md): {\"type\": \"icm\" | "
    "\"lmc\", \"rank\": R (1 .. p, default 1), \"latents\": Q (lmc only, 1 .. 8, default 2), "
    "\"kappa\": learn each output's own share (default true)}; y rows of p values, null for "
    "a missing one";

static int member_int(const gp_value *m, const char *field, const char *name, size_t lo,
                      size_t hi, size_t *out, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    snprintf(f, sizeof f, "%s.%s", field, name);
    if (m->type != GP_VALUE_NUMBER || m->number != floor(m->number) || m->number < (double)lo ||
        m->number > (double)hi)
        return gp_error_set(err, GP_EINVAL, f, "%s must be an integer in [%zu, %zu]", f, lo, hi);
    *out = (size_t)m->number;
    return GP_OK;
}

static int member_type(const gp_value *v, const char *field, gp_coreg_spec *s, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    snprintf(f, sizeof f, "%s.type", field);
    const gp_value *t = gp_value_get(v, "type");
    if (t == NULL)
        return gp_error_set(err, GP_EINVAL, f, "%s is required: \"icm\" or \"lmc\"", f);
    if (t->type == GP_VALUE_STRING && strcmp(t->string, "icm") == 0)
        s->type = GP_COREG_ICM;
    else if (t->type == GP_VALUE_STRING && strcmp(t->string, "lmc") == 0)
        s->type = GP_COREG_LMC;
    else
        return gp_error_set(err, GP_EINVAL, f, "%s must be \"icm\" or \"lmc\"", f);
    return GP_OK;
}

static int member_solver(const gp_value *m, const char *f, gp_coreg_spec *s, gp_error *err)
{
    static const char *names[] = {"auto", "kronecker", "general"};
    for (int i = 0; m->type == GP_VALUE_STRING && i < 3; i++)
        if (strcmp(m->string, names[i]) == 0) {
            s->solver = (gp_coreg_solver)i;
            return GP_OK;
        }
    return gp_error_set(err, GP_EINVAL, f, "%s must be \"auto\", \"kronecker\" or \"general\"",
                        f);
}

/* One member other than type. */
static int parse_member(const char *key, const gp_value *m, const char *field,
                        int solver_allowed, gp_coreg_spec *s, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    snprintf(f, sizeof f, "%s.%s", field, key);
    if (strcmp(key, "type") == 0)
        return GP_OK;
    if (strcmp(key, "rank") == 0)
        return member_int(m, field, key, 1, GP_COREG_MAX_OUTPUTS, &s->rank, err);
    if (strcmp(key, "latents") == 0) {
        if (s->type != GP_COREG_LMC)
            return gp_error_set(err, GP_EINVAL, f,
                                "%s is for \"lmc\" (icm has one latent kernel)", f);
        return member_int(m, field, key, 1, GP_COREG_MAX_LATENTS, &s->latents, err);
    }
    if (strcmp(key, "kappa") == 0) {
        if (m->type != GP_VALUE_BOOL)
            return gp_error_set(err, GP_EINVAL, f, "%s must be true or false", f);
        s->kappa = m->number != 0.0;
        return GP_OK;
    }
    if (strcmp(key, "solver") == 0 && solver_allowed)
        return member_solver(m, f, s, err);
    return gp_error_set(err, GP_EINVAL, f, "%s: unknown member (type, rank, latents, kappa%s)",
                        f, solver_allowed ? ", solver" : "");
}

int gp_coreg_spec_parse(const gp_value *v, const char *field, int solver_allowed,
                        gp_coreg_spec *out, gp_error *err)
{
    memset(out, 0, sizeof *out);
    out->rank = 1;
    out->latents = 1;
    out->kappa = 1;
    if (v == NULL)
        return GP_OK;
    if (v->type != GP_VALUE_OBJECT)
        return gp_error_set(err, GP_EINVAL, field, "%s must be an object", field);
    int rc = member_type(v, field, out, err);
    if (rc == GP_OK && out->type == GP_COREG_LMC)
        out->latents = 2;
    for (size_t i = 0; rc == GP_OK && i < v->n; i++)
        rc = parse_member(v->keys[i], &v->items[i], field, solver_allowed, out, err);
    if (rc)
        out->type = GP_COREG_NONE;
    return rc;
}

static int check_option(const char *name, const gp_value *v, const char *field,
                        int solver_allowed, gp_error *err)
{
    if (strcmp(name, "coregionalization") != 0)
        return gp_error_set(err, GP_EINVAL, field, "unknown option");
    gp_coreg_spec s;
    return gp_coreg_spec_parse(v, field, solver_allowed, &s, err);
}

int gp_coreg_check_option(const char *name, const gp_value *v, size_t d, const char *field,
                          gp_error *err)
{
    (void)d;
    return check_option(name, v, field, 0, err);
}

int gp_coreg_check_option_solver(const char *name, const gp_value *v, size_t d,
                                 const char *field, gp_error *err)
{
    (void)d;
    return check_option(name, v, field, 1, err);
}

int gp_coreg_spec_check_outputs(const gp_coreg_spec *s, size_t p, gp_error *err)
{
    if (p > GP_COREG_MAX_OUTPUTS)
        return gp_error_set(err, GP_EDATA, "y",
                            "y: %zu outputs; a coregionalised model takes at most %d", p,
                            GP_COREG_MAX_OUTPUTS);
    if (s->rank > p)
        return gp_error_set(err, GP_EINVAL, "options.coregionalization.rank",
                            "options.coregionalization.rank: %zu is above the %zu outputs",
                            s->rank, p);
    return GP_OK;
}

int gp_coreg_spec_from_request(const gp_fit_request *req, int solver_allowed,
                               gp_coreg_spec *out, gp_error *err)
{
    const gp_value *v = gp_option_object(req, "coregionalization");
    int rc = gp_coreg_spec_parse(v, "options.coregionalization", solver_allowed, out, err);
    if (rc == GP_OK && out->type != GP_COREG_NONE)
        rc = gp_coreg_spec_check_outputs(out, req->n_outputs ? req->n_outputs : 1, err);
    return rc;
}

/* ---- observed entries ---- */

void gp_coreg_entries_free(gp_coreg_entries *e)
{
    free(e->row);
    free(e->out);
    e->row = e->out = NULL;
    e->M = 0;
}

int gp_coreg_entries_build(const double *y, size_t n, size_t p, gp_coreg_entries *e,
                           gp_error *err)
{
    size_t M = 0;
    for (size_t i = 0; i < n * p; i++)
        M += !isnan(y[i]);
    e->M = M;
    e->row = malloc((M ? M : 1) * sizeof *e->row);
    e->out = malloc((M ? M : 1) * sizeof *e->out);
    if (e->row == NULL || e->out == NULL) {
        gp_coreg_entries_free(e);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    size_t a = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < p; j++)
            if (!isnan(y[j * n + i])) {
                e->row[a] = i;
                e->out[a++] = j;
            }
    return GP_OK;
}

int gp_coreg_entries_isotopic(const gp_coreg_entries *e, size_t n, size_t p)
{
    return e->M == n * p;
}

/* Output j's observed values, packed into buf (n); their count. */
static size_t observed_column(const double *y, size_t n, size_t j, double *buf)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(y[j * n + i]))
            buf[c++] = y[j * n + i];
    return c;
}

static int check_rows(const double *y, size_t n, size_t p, long shift, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    for (size_t i = 0; i < n; i++) {
        size_t seen = 0;
        for (size_t j = 0; j < p; j++) {
            double v = y[j * n + i];
            if (isinf(v)) {
                snprintf(f, sizeof f, "y[%ld][%zu]", (long)i + shift, j);
                return gp_error_set(err, GP_EDATA, f, "%s is not a finite number", f);
            }
            seen += !isnan(v);
        }
        if (seen == 0) {
            snprintf(f, sizeof f, "y[%ld]", (long)i + shift);
            return gp_error_set(err, GP_EDATA, f,
                                "%s: every output of the row is missing (null); give at least "
                                "one value or leave the row out",
                                f);
        }
    }
    return GP_OK;
}

int gp_coreg_check_targets(const double *y, size_t n, size_t p, int whole, int standardize,
                           long shift, gp_error *err)
{
    int rc = check_rows(y, n, p, shift, err);
    if (rc || !whole)
        return rc;
    double *buf = gp_alloc_doubles(n ? n : 1, err);
    if (buf == NULL)
        return GP_ENOMEM;
    for (size_t j = 0; rc == GP_OK && j < p; j++) {
        size_t c = observed_column(y, n, j, buf);
        if (c == 0)
            rc = gp_error_set(err, GP_EDATA, "y",
                              "y: output %zu is never observed (every value of it is null)", j);
        else
            rc = gp_check_standardisable(buf, c, 1, c, standardize, 1, -1, err);
    }
    free(buf);
    return rc;
}

/* ---- the parameters ---- */

/* Variance held at 1 where W carries the scale: a leaf's, and every leaf's
 * of a product (their product is one scale); a sum's terms keep their
 * relative variances (the overall scale is then shared with W, a flat
 * direction the optimiser tolerates). */
static void hold_variance(gp_kernel *k)
{
    if (k->type == GP_KERNEL_SUM)
        return;
    if (k->type == GP_KERNEL_PRODUCT) {
        for (size_t t = 0; t < k->n_terms; t++)
            if (k->terms[t]->type != GP_KERNEL_SUM)
                hold_variance(k->terms[t]);
        return;
    }
    k->log_variance = 0.0;
    k->fixed |= GP_FIX_VARIANCE;
}

static void shift_lengthscales(gp_kernel *k, double shift)
{
    for (size_t t = 0; t < k->n_terms; t++)
        shift_lengthscales(k->terms[t], shift);
    for (size_t i = 0; i < k->n_lengthscale; i++)
        if (!(k->fixed & GP_FIX_LENGTHSCALE))
            k->log_lengthscale[i] += shift;
}

/* W_q's start: every output's share sum_r W_q[j,r]^2 = 0.5 / Q (with kappa
 * 0.5 / Q, each output's signal variance starts at 1, the standardised
 * targets' variance). Column r weighs 1 / (r + 1) and alternates its sign
 * from column 1 on, so columns differ (symmetric columns would get equal
 * gradients and never part) and the outputs start positively correlated. */
static void start_W(gp_coreg_params *cp)
{
    size_t p = cp->p, R = cp->rank;
    double norm = 0.0;
    for (size_t r = 0; r < R; r++)
        norm += 1.0 / (double)((r + 1) * (r + 1));
    double c = sqrt(0.5 / ((double)cp->q * norm));
    if (!cp->learn_kappa) /* W alone carries the signal */
        c *= sqrt(2.0);
    for (size_t l = 0; l < cp->q; l++)
        for (size_t r = 0; r < R; r++)
            for (size_t j = 0; j < p; j++) {
                double sign = r == 0 || (j + r) % 2 == 0 ? 1.0 : -1.0;
                cp->W[l * p * R + r * p + j] = sign * c / (double)(r + 1);
            }
}

static int alloc_arrays(gp_coreg_params *cp, gp_error *err)
{
    size_t p = cp->p, q = cp->q;
    cp->kernels = calloc(q, sizeof *cp->kernels);
    cp->kfree = malloc((q * cp->n_kparams + 1) * sizeof *cp->kfree);
    cp->n_kfree = calloc(q, sizeof *cp->n_kfree);
    cp->W = gp_alloc_doubles(q * p * cp->rank, err);
    cp->kappa = gp_alloc_doubles(p * q, err);
    cp->noise = gp_alloc_doubles(p, err);
    cp->noise_floor = gp_alloc_doubles(p, err);
    cp->y_mean = gp_alloc_doubles(p, err);
    cp->y_scale = gp_alloc_doubles(p, err);
    cp->B = gp_alloc_doubles(q * p * p, err);
    if (!cp->kernels || !cp->kfree || !cp->n_kfree || !cp->W || !cp->kappa || !cp->noise ||
        !cp->noise_floor || !cp->y_mean || !cp->y_scale || !cp->B)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t j = 0; j < p; j++) {
        cp->y_mean[j] = 0.0;
        cp->y_scale[j] = 1.0;
        cp->noise[j] = 1.0;
        cp->noise_floor[j] = GP_NOISE_FLOOR_REL;
    }
    return GP_OK;
}

/* Latent l's kernel copy and its free coordinates (held parameters of the
 * request's spec stay held in every copy). */
static int init_kernel(gp_coreg_params *cp, size_t l, const gp_kernel *kernel,
                       const gp_hyper_spec *hyper, gp_error *err)
{
    int rc = gp_kernel_copy(&cp->kernels[l], kernel, err);
    if (rc)
        return rc;
    hold_variance(cp->kernels[l]);
    shift_lengthscales(cp->kernels[l], ((double)l - 0.5 * (double)(cp->q - 1)) * log(2.0));
    unsigned char *mask = malloc(cp->n_kparams + 1);
    if (mask == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_hyper_free_mask(cp->kernels[l], hyper, mask);
    for (size_t i = 0; i < cp->n_kparams; i++)
        if (mask[i])
            cp->kfree[l * cp->n_kparams + cp->n_kfree[l]++] = i;
    free(mask);
    return GP_OK;
}

int gp_coreg_params_init(gp_coreg_params *cp, const gp_coreg_spec *spec, size_t p,
                         const gp_kernel *kernel, const gp_fit_request *req, gp_error *err)
{
    memset(cp, 0, sizeof *cp);
    cp->type = spec->type;
    cp->p = p;
    cp->q = spec->type == GP_COREG_LMC ? spec->latents : 1;
    cp->rank = spec->rank;
    cp->learn_kappa = spec->kappa;
    cp->learn_noise = req ? !req->noise_fixed : 1;
    cp->n_kparams = gp_kernel_n_params(kernel);
    int rc = alloc_arrays(cp, err);
    for (size_t l = 0; rc == GP_OK && l < cp->q; l++)
        rc = init_kernel(cp, l, kernel, req ? req->hyper : NULL, err);
    if (rc) {
        gp_coreg_params_free(cp);
        return rc;
    }
    start_W(cp);
    /* kappa 0.5 / Q: half of each output's unit signal variance its own,
     * half shared through W, a start that favours neither independent
     * outputs nor one shared function. */
    for (size_t i = 0; i < p * cp->q; i++)
        cp->kappa[i] = cp->learn_kappa ? 0.5 / (double)cp->q : 0.0;
    for (size_t j = 0; req && req->noise_given && j < p; j++)
        cp->noise[j] = req->noise_variance;
    gp_coreg_params_update_B(cp);
    return GP_OK;
}

void gp_coreg_params_free(gp_coreg_params *cp)
{
    for (size_t l = 0; cp->kernels && l < cp->q; l++)
        gp_kernel_free(cp->kernels[l]);
    free(cp->kernels);
    free(cp->kfree);
    free(cp->n_kfree);
    free(cp->W);
    free(cp->kappa);
    free(cp->noise);
    free(cp->noise_floor);
    free(cp->y_mean);
    free(cp->y_scale);
    free(cp->B);
    memset(cp, 0, sizeof *cp);
}

size_t gp_coreg_params_w_offset(const gp_coreg_params *cp)
{
    size_t o = 0;
    for (size_t l = 0; l < cp->q; l++)
        o += cp->n_kfree[l];
    return o;
}

size_t gp_coreg_params_dim(const gp_coreg_params *cp)
{
    return gp_coreg_params_w_offset(cp) + cp->q * cp->p * cp->rank +
           (cp->learn_kappa ? cp->p * cp->q : 0) + (cp->learn_noise ? cp->p : 0);
}

void gp_coreg_params_pack(const gp_coreg_params *cp, double *x)
{
    size_t o = 0, np = cp->n_kparams, pq = cp->p * cp->q;
    double *theta = malloc((np + 1) * sizeof *theta);
    for (size_t l = 0; theta && l < cp->q; l++) {
        gp_kernel_get_params(cp->kernels[l], theta);
        for (size_t i = 0; i < cp->n_kfree[l]; i++)
            x[o++] = theta[cp->kfree[l * np + i]];
    }
    free(theta);
    memcpy(x + o, cp->W, cp->q * cp->p * cp->rank * sizeof *x);
    o += cp->q * cp->p * cp->rank;
    for (size_t i = 0; cp->learn_kappa && i < pq; i++)
        x[o++] = log(cp->kappa[i]);
    for (size_t j = 0; cp->learn_noise && j < cp->p; j++)
        x[o++] = log(fmax(cp->noise[j] - cp->noise_floor[j], 1e-300));
}

void gp_coreg_params_unpack(gp_coreg_params *cp, const double *x)
{
    size_t o = 0, np = cp->n_kparams, pq = cp->p * cp->q;
    double *theta = malloc((np + 1) * sizeof *theta);
    for (size_t l = 0; theta && l < cp->q; l++) {
        gp_kernel_get_params(cp->kernels[l], theta);
        for (size_t i = 0; i < cp->n_kfree[l]; i++)
            theta[cp->kfree[l * np + i]] = x[o++];
        gp_kernel_set_params(cp->kernels[l], theta);
    }
    free(theta);
    memcpy(cp->W, x + o, cp->q * cp->p * cp->rank * sizeof *x);
    o += cp->q * cp->p * cp->rank;
    for (size_t i = 0; cp->learn_kappa && i < pq; i++)
        cp->kappa[i] = exp(x[o++]);
    for (size_t j = 0; cp->learn_noise && j < cp->p; j++)
        cp->noise[j] = cp->noise_floor[j] + exp(x[o++]);
    gp_coreg_params_update_B(cp);
}

void gp_coreg_params_update_B(gp_coreg_params *cp)
{
    size_t p = cp->p, R = cp->rank;
    for (size_t l = 0; l < cp->q; l++) {
        const double *W = cp->W + l * p * R;
        double *B = cp->B + l * p * p;
        for (size_t j = 0; j < p; j++)
            for (size_t i = 0; i < p; i++) {
                double s = 0.0;
                for (size_t r = 0; r < R; r++)
                    s += W[r * p + i] * W[r * p + j];
                B[j * p + i] = s + (i == j ? cp->kappa[l * p + i] : 0.0);
            }
    }
}

void gp_coreg_params_chain(const gp_coreg_params *cp, const double *gk, const double *gB,
                           const double *gs, double *g)
{
    size_t o = 0, np = cp->n_kparams, p = cp->p, R = cp->rank;
    for (size_t l = 0; l < cp->q; l++)
        for (size_t i = 0; i < cp->n_kfree[l]; i++)
            g[o++] = gk[l * np + cp->kfree[l * np + i]];
    for (size_t l = 0; l < cp->q; l++) { /* dB/dW: (G + G^T) W */
        const double *G = gB + l * p * p, *W = cp->W + l * p * R;
        for (size_t r = 0; r < R; r++)
            for (size_t i = 0; i < p; i++) {
                double s = 0.0;
                for (size_t j = 0; j < p; j++)
                    s += (G[j * p + i] + G[i * p + j]) * W[r * p + j];
                g[o++] = s;
            }
    }
    for (size_t l = 0; cp->learn_kappa && l < cp->q; l++)
        for (size_t j = 0; j < p; j++)
            g[o++] = gB[l * p * p + j * p + j] * cp->kappa[l * p + j];
    for (size_t j = 0; cp->learn_noise && j < p; j++)
        g[o++] = gs[j] * (cp->noise[j] - cp->noise_floor[j]);
}

void gp_coreg_standardise(gp_coreg_params *cp, const double *y, size_t n,
                          const gp_coreg_entries *e, int standardize, double *yw)
{
    size_t p = cp->p;
    double *buf = malloc((n ? n : 1) * sizeof *buf);
    for (size_t j = 0; buf && j < p; j++) {
        size_t c = observed_column(y, n, j, buf);
        cp->y_mean[j] = 0.0;
        cp->y_scale[j] = 1.0;
        if (standardize && c > 0)
            gp_column_stats(buf, c, 1, &cp->y_mean[j], &cp->y_scale[j]);
    }
    free(buf);
    double power[GP_COREG_MAX_OUTPUTS] = {0};
    size_t count[GP_COREG_MAX_OUTPUTS] = {0};
    for (size_t a = 0; a < e->M; a++) {
        size_t j = e->out[a];
        yw[a] = (y[j * n + e->row[a]] - cp->y_mean[j]) / cp->y_scale[j];
        if (j < GP_COREG_MAX_OUTPUTS) {
            power[j] += yw[a] * yw[a];
            count[j]++;
        }
    }
    /* The noise floor of gp_noise_param, per output: 1e-8 of its power. */
    for (size_t j = 0; j < p && j < GP_COREG_MAX_OUTPUTS; j++) {
        double P = count[j] && power[j] > 0.0 && isfinite(power[j]) ? power[j] / (double)count[j]
                                                                      : 1.0;
        cp->noise_floor[j] = cp->learn_noise ? GP_NOISE_FLOOR_REL * P : 0.0;
        if (cp->noise[j] <= cp->noise_floor[j])
            cp->noise[j] = 2.0 * cp->noise_floor[j];
    }
}

/* ---- persistence ---- */

int gp_coreg_params_export(const gp_coreg_params *cp, gp_state *st, gp_error *err)
{
    size_t p = cp->p, q = cp->q, np = cp->n_kparams;
    double sizes[6] = {(double)cp->type, (double)p, (double)q, (double)cp->rank,
                       (double)cp->learn_kappa, (double)cp->learn_noise};
    double *theta = gp_alloc_doubles(np * q + 1, err);
    if (theta == NULL)
        return GP_ENOMEM;
    for (size_t l = 0; l < q; l++)
        gp_kernel_get_params(cp->kernels[l], theta + l * np);
    int rc = gp_state_put(st, "coreg_sizes", 6, 1, sizes, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_kernel_params", np, q, theta, err);
    free(theta);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_W", p * cp->rank, q, cp->W, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_kappa", p, q, cp->kappa, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_noise", p, 1, cp->noise, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_noise_floor", p, 1, cp->noise_floor, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_y_mean", p, 1, cp->y_mean, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_y_scale", p, 1, cp->y_scale, err);
    return rc;
}

static int import_sizes(const gp_state *st, gp_coreg_spec *spec, size_t *p, int *learn_noise,
                        gp_error *err)
{
    const double *s;
    int rc = gp_state_get(st, "coreg_sizes", 6, 1, &s, err);
    if (rc)
        return rc;
    int ok = (s[0] == GP_COREG_ICM || s[0] == GP_COREG_LMC) && s[1] >= 1 &&
             s[1] <= GP_COREG_MAX_OUTPUTS && s[2] >= 1 && s[2] <= GP_COREG_MAX_LATENTS &&
             s[3] >= 1 && s[3] <= s[1] && (s[4] == 0 || s[4] == 1) && (s[5] == 0 || s[5] == 1);
    for (int i = 0; ok && i < 6; i++)
        ok = s[i] == floor(s[i]);
    if (!ok)
        return gp_error_set(err, GP_EDATA, "coreg_sizes", "corrupt coregionalisation sizes");
    spec->type = (gp_coreg_type)s[0];
    *p = (size_t)s[1];
    spec->latents = (size_t)s[2];
    spec->rank = (size_t)s[3];
    spec->kappa = (int)s[4];
    *learn_noise = (int)s[5];
    if (spec->type == GP_COREG_ICM && spec->latents != 1)
        return gp_error_set(err, GP_EDATA, "coreg_sizes", "corrupt coregionalisation sizes");
    return GP_OK;
}

static int import_copy(const gp_state *st, const char *name, size_t rows, size_t cols,
                       double *dst, int positive, gp_error *err)
{
    const double *src;
    int rc = gp_state_get(st, name, rows, cols, &src, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < rows * cols; i++)
        if (!isfinite(src[i]) || (positive == 1 && !(src[i] > 0.0)) ||
            (positive == 2 && !(src[i] >= 0.0)))
            return gp_error_set(err, GP_EDATA, name, "corrupt %s", name);
    memcpy(dst, src, rows * cols * sizeof *dst);
    return GP_OK;
}

int gp_coreg_params_import(gp_coreg_params *cp, const gp_state *st, const gp_kernel *kernel,
                           gp_error *err)
{
    gp_coreg_spec spec;
    size_t p = 0;
    int learn_noise = 1;
    memset(cp, 0, sizeof *cp);
    int rc = import_sizes(st, &spec, &p, &learn_noise, err);
    if (rc == GP_OK)
        rc = gp_coreg_params_init(cp, &spec, p, kernel, NULL, err);
    if (rc)
        return rc;
    cp->learn_noise = learn_noise;
    size_t q = cp->q, np = cp->n_kparams;
    const double *theta;
    rc = gp_state_get(st, "coreg_kernel_params", np, q, &theta, err);
    for (size_t l = 0; rc == GP_OK && l < q; l++) {
        if (!gp_all_finite(theta + l * np, np, NULL))
            rc = gp_error_set(err, GP_EDATA, "coreg_kernel_params", "corrupt kernel parameters");
        else
            gp_kernel_set_params(cp->kernels[l], theta + l * np);
    }
    if (rc == GP_OK)
        rc = import_copy(st, "coreg_W", p * cp->rank, q, cp->W, 0, err);
    if (rc == GP_OK)
        rc = import_copy(st, "coreg_kappa", p, q, cp->kappa, 2, err);
    if (rc == GP_OK)
        rc = import_copy(st, "coreg_noise", p, 1, cp->noise, 1, err);
    if (rc == GP_OK)
        rc = import_copy(st, "coreg_noise_floor", p, 1, cp->noise_floor, 2, err);
    if (rc == GP_OK)
        rc = import_copy(st, "coreg_y_mean", p, 1, cp->y_mean, 0, err);
    if (rc == GP_OK)
        rc = import_copy(st, "coreg_y_scale", p, 1, cp->y_scale, 1, err);
    if (rc) {
        gp_coreg_params_free(cp);
        return rc;
    }
    gp_coreg_params_update_B(cp);
    return GP_OK;
}

void gp_coreg_params_view(const gp_coreg_params *cp, gp_coreg_view *v)
{
    v->type = cp->type;
    v->p = cp->p;
    v->q = cp->q;
    v->rank = cp->rank;
    v->kernels = (const gp_kernel *const *)cp->kernels;
    v->W = cp->W;
    v->kappa = cp->kappa;
    v->noise = cp->noise;
    v->y_mean = cp->y_mean;
    v->y_scale = cp->y_scale;
}
