/* rfgp: export and import of the configuration, the warm-up buffer or the
 * online state. */
#include "core/methods/rfgp/persist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"
#include "core/methods/rfgp/config.h"
#include "core/methods/rfgp/embed.h"
#include "core/methods/rfgp/model.h"
#include "core/model/method.h"

/* ---- configuration: fixed when the model is created, exported ---- */

#define CFG_LEN 20

static void cfg_encode(const rfgp_cfg *c, double *v)
{
    /* the seed as two 32-bit halves: a double holds 53 bits */
    double vals[CFG_LEN] = {(double)c->D, (double)c->d_in, (double)c->p, (double)c->warmup,
                            (double)c->dk, (double)c->width, c->two_stage, c->selection,
                            c->gate_absolute, c->noise_learn, c->median_factor, c->outer_width,
                            c->forgetting, c->refactor_batch, c->gate_tau, c->kappa,
                            c->max_iterations, c->tolerance, (double)(c->seed >> 32),
                            (double)(c->seed & 0xffffffffu)};
    memcpy(v, vals, sizeof vals);
}

static int is_count(double v, double below)
{
    return isfinite(v) && v >= 0.0 && v == floor(v) && v < below;
}

static int cfg_decode(const double *v, rfgp_cfg *c, gp_error *err)
{
    for (int i = 0; i < 10; i++)
        if (!is_count(v[i], 1e9))
            return gp_error_set(err, GP_EDATA, "rfgp_config", "corrupt configuration");
    if (!is_count(v[16], 1e9) || !is_count(v[18], 4294967296.0) ||
        !is_count(v[19], 4294967296.0) || !(v[12] > 0.0 && v[12] <= 1.0) || v[0] < 1 ||
        v[2] < 1 || v[4] < 1 || v[7] > SEL_FIXED)
        return gp_error_set(err, GP_EDATA, "rfgp_config", "corrupt configuration");
    *c = (rfgp_cfg){.D = (size_t)v[0], .d_in = (size_t)v[1], .p = (size_t)v[2],
                    .warmup = (size_t)v[3], .dk = (size_t)v[4], .width = (size_t)v[5],
                    .two_stage = v[6] != 0.0, .selection = (int)v[7],
                    .gate_absolute = v[8] != 0.0, .noise_learn = v[9] != 0.0,
                    .median_factor = v[10], .outer_width = v[11], .forgetting = v[12],
                    .refactor_batch = v[13], .gate_tau = v[14], .kappa = v[15],
                    .max_iterations = (int)v[16], .tolerance = v[17],
                    .seed = ((uint64_t)v[18] << 32) | (uint64_t)v[19]};
    return GP_OK;
}

/* ---- export / import ---- */

static int put_pair(gp_state *st, const char *name, const double *a, const double *b, size_t n,
                    gp_error *err)
{
    double *v = gp_alloc_doubles(2 * n, err);
    if (v == NULL)
        return GP_ENOMEM;
    memcpy(v, a, n * sizeof *a);
    memcpy(v + n, b, n * sizeof *b);
    return gp_state_put_owned(st, name, n, 2, v, err);
}

static int export_buffer(const rfgp_impl *im, gp_state *st, gp_error *err)
{
    const rfgp_cfg *c = &im->c;
    size_t n = im->n_buf;
    double *x = gp_alloc_doubles(n * c->width, err), *y = gp_alloc_doubles(n * c->p, err);
    if (x == NULL || y == NULL) {
        free(x);
        free(y);
        return GP_ENOMEM;
    }
    for (size_t j = 0; j < c->width; j++)
        memcpy(x + j * n, im->buf_x + j * c->warmup, n * sizeof *x);
    for (size_t q = 0; q < c->p; q++)
        memcpy(y + q * n, im->buf_y + q * c->warmup, n * sizeof *y);
    int rc = gp_state_put_owned(st, "warmup_x", n, c->width, x, err);
    if (rc == GP_OK)
        rc = gp_state_put_owned(st, "warmup_y", n, c->p, y, err);
    else
        free(y);
    return rc;
}

static int export_online(const rfgp_impl *im, gp_state *st, gp_error *err)
{
    const rfgp_cfg *c = &im->c;
    const fmap *m = &im->map;
    size_t D = c->D, m1 = c->two_stage ? c->d_in : c->dk;
    double counters[3] = {im->post.n, im->post.refactorisations, im->post.rank_one};
    int rc = GP_OK;
    if (c->two_stage) {
        rc = gp_state_put(st, "w_in", c->dk, c->d_in, m->w_in, err);
        if (rc == GP_OK)
            rc = gp_state_put(st, "b_in", c->d_in, 1, m->b_in, err);
    }
    if (rc == GP_OK)
        rc = gp_state_put(st, "w_out", m1, D, m->w_out, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "b_out", D, 1, m->b_out, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "widths", c->dk, 1, m->widths, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "outer_width", m->gamma, err);
    if (rc == GP_OK)
        rc = put_pair(st, "x_stats", m->x_mean, m->x_scale, c->dk, err);
    if (rc == GP_OK)
        rc = put_pair(st, "output_stats", m->y_mean, m->y_scale, c->p, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "factor_packed", rfgp_packed_len(D), 1, im->post.L, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "z", D, c->p, im->post.z, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "b", D, c->p, im->post.b, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "counters", 3, 1, counters, err);
    return rc;
}

int rfgp_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const rfgp_impl *im = model->impl;
    double cfg[CFG_LEN], state[2] = {(double)im->online, (double)im->n_buf};
    cfg_encode(&im->c, cfg);
    int rc = gp_state_put(st, "rfgp_config", CFG_LEN, 1, cfg, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "rfgp_state", 2, 1, state, err);
    if (rc == GP_OK && !im->online && im->n_buf > 0)
        rc = export_buffer(im, st, err);
    if (rc == GP_OK && im->online)
        rc = export_online(im, st, err);
    return rc;
}

static int get_copy(const gp_state *st, const char *name, size_t rows, size_t cols, double *out,
                    gp_error *err)
{
    const double *p;
    int rc = gp_state_get(st, name, rows, cols, &p, err);
    if (rc == GP_OK)
        memcpy(out, p, rows * cols * sizeof *p);
    return rc;
}

static int import_online(rfgp_impl *im, const gp_state *st, gp_error *err)
{
    const rfgp_cfg *c = &im->c;
    fmap *m = &im->map;
    size_t D = c->D, m1 = c->two_stage ? c->d_in : c->dk;
    const double *xs, *ys;
    double counters[3];
    int rc = rfgp_map_alloc(c, m, err);
    if (rc == GP_OK)
        rc = rfgp_post_alloc(c, &im->post, err);
    if (rc == GP_OK && c->two_stage && (rc = get_copy(st, "w_in", c->dk, c->d_in, m->w_in, err)) == 0)
        rc = get_copy(st, "b_in", c->d_in, 1, m->b_in, err);
    if (rc == GP_OK)
        rc = get_copy(st, "w_out", m1, D, m->w_out, err);
    if (rc == GP_OK)
        rc = get_copy(st, "b_out", D, 1, m->b_out, err);
    if (rc == GP_OK)
        rc = get_copy(st, "widths", c->dk, 1, m->widths, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "outer_width", &m->gamma, err);
    if (rc == GP_OK && (rc = gp_state_get(st, "x_stats", c->dk, 2, &xs, err)) == 0) {
        memcpy(m->x_mean, xs, c->dk * sizeof *xs);
        memcpy(m->x_scale, xs + c->dk, c->dk * sizeof *xs);
    }
    if (rc == GP_OK && (rc = gp_state_get(st, "output_stats", c->p, 2, &ys, err)) == 0) {
        memcpy(m->y_mean, ys, c->p * sizeof *ys);
        memcpy(m->y_scale, ys + c->p, c->p * sizeof *ys);
    }
    if (rc == GP_OK)
        rc = get_copy(st, "factor_packed", rfgp_packed_len(D), 1, im->post.L, err);
    if (rc == GP_OK)
        rc = get_copy(st, "z", D, c->p, im->post.z, err);
    if (rc == GP_OK)
        rc = get_copy(st, "b", D, c->p, im->post.b, err);
    if (rc == GP_OK && (rc = get_copy(st, "counters", 3, 1, counters, err)) == 0) {
        im->post.n = counters[0];
        im->post.refactorisations = counters[1];
        im->post.rank_one = counters[2];
    }
    const double *col = im->post.L;
    for (size_t j = 0; rc == GP_OK && j < D; col += D - j, j++)
        if (!(col[0] > 0.0) || !isfinite(col[0]))
            rc = gp_error_set(err, GP_EDATA, "factor_packed", "corrupt Cholesky factor");
    for (size_t q = 0; rc == GP_OK && q < c->p; q++)
        if (!(m->y_scale[q] > 0.0) || !isfinite(m->y_scale[q]))
            rc = gp_error_set(err, GP_EDATA, "output_stats", "corrupt output scale");
    return rc;
}

static int import_buffer(rfgp_impl *im, const gp_state *st, gp_error *err)
{
    const rfgp_cfg *c = &im->c;
    size_t n = im->n_buf;
    const double *x, *y;
    if (n == 0)
        return GP_OK;
    int rc = gp_state_get(st, "warmup_x", n, c->width, &x, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "warmup_y", n, c->p, &y, err);
    if (rc)
        return rc;
    for (size_t j = 0; j < c->width; j++)
        memcpy(im->buf_x + j * c->warmup, x + j * n, n * sizeof *x);
    for (size_t q = 0; q < c->p; q++)
        memcpy(im->buf_y + q * c->warmup, y + q * n, n * sizeof *y);
    return GP_OK;
}

int rfgp_import(gp_model *model, const gp_state *st, gp_error *err)
{
    const double *v, *s;
    rfgp_cfg c;
    int rc = gp_state_get(st, "rfgp_config", CFG_LEN, 1, &v, err);
    if (rc == GP_OK)
        rc = cfg_decode(v, &c, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "rfgp_state", 2, 1, &s, err);
    if (rc)
        return rc;
    if (c.p != model->n_outputs || c.width != model->input_dim ||
        c.dk != gp_input_point_dim(&model->input) ||
        c.two_stage != gp_embed_two_stage(&model->input) ||
        !(s[0] == 0.0 || s[0] == 1.0) || !is_count(s[1], 1e15) ||
        (s[0] == 1.0 ? s[1] != 0.0 : s[1] >= (double)c.warmup))
        return gp_error_set(err, GP_EDATA, "rfgp_config", "configuration does not match the model");
    rfgp_impl *im = NULL;
    rc = rfgp_impl_new(&c, &im, err);
    if (rc)
        return rc;
    im->online = s[0] == 1.0;
    im->n_buf = (size_t)s[1];
    rc = im->online ? import_online(im, st, err) : import_buffer(im, st, err);
    if (rc) {
        rfgp_impl_free(im);
        return rc;
    }
    if (im->online) {
        free(im->buf_x);
        free(im->buf_y);
        im->buf_x = im->buf_y = NULL;
        im->n_buf = 0;
    }
    model->impl = im;
    if (im->online)
        rfgp_set_thresholds(model, im);
    rfgp_set_info(model);
    return GP_OK;
}

