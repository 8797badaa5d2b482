/* The flat encoding of a kernel tree (core/kernel/kernel_codec.h). */
#include "core/kernel/kernel_codec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel/kernel.h"
#include "core/kernel/kernel_formula.h"

/* Encoding: header [magic, version, total length], then the root node. */
#define CODE_MAGIC 1196444494.0 /* "GPKN" as a 32-bit integer */
#define CODE_VERSION 1.0
#define CODE_HEADER 3

/* Fixed-size fields of one node (type .. n_terms without the arrays). */
#define CODE_MIN_NODE 10

/* ------------------------------------------------------------------------ */
/* the flat encoding                                                          */

/* Node: type, input_dim, n_active_dims (0 = all), active_dims..., ard, fixed,
 * log_variance, log_alpha, log_period, n_lengthscale, log_lengthscale...,
 * n_terms, terms... Every field is written, used or not, so that decoding
 * reproduces the struct exactly. */
typedef struct writer {
    double *out;
    size_t pos;
} writer;

static void put(writer *w, double v)
{
    if (w->out)
        w->out[w->pos] = v;
    w->pos++;
}

static void encode_node(const gp_kernel *k, writer *w)
{
    put(w, (double)k->type);
    put(w, (double)k->input_dim);
    size_t n_act = k->active_dims ? k->n_active : 0;
    put(w, (double)n_act);
    for (size_t i = 0; i < n_act; i++)
        put(w, (double)k->active_dims[i]);
    put(w, k->ard ? 1.0 : 0.0);
    put(w, (double)k->fixed);
    put(w, k->log_variance);
    put(w, k->log_alpha);
    put(w, k->log_period);
    put(w, (double)k->n_lengthscale);
    for (size_t i = 0; i < k->n_lengthscale; i++)
        put(w, k->log_lengthscale[i]);
    put(w, (double)k->n_terms);
    for (size_t t = 0; t < k->n_terms; t++)
        encode_node(k->terms[t], w);
}

size_t gp_kernel_encode(const gp_kernel *k, double *out)
{
    writer w = {out, CODE_HEADER};
    encode_node(k, &w);
    if (out) {
        out[0] = CODE_MAGIC;
        out[1] = CODE_VERSION;
        out[2] = (double)w.pos;
    }
    return w.pos;
}

typedef struct reader {
    const double *code;
    size_t len; /* the declared total length (never more than the caller's) */
    size_t pos;
    gp_error *err;
} reader;

static int take(reader *r, double *v, const char *what)
{
    if (r->pos >= r->len)
        return gp_error_set(r->err, GP_EDATA, "kernel",
                            "kernel code truncated: %s missing at position %zu", what, r->pos);
    *v = r->code[r->pos++];
    return GP_OK;
}

static int take_count(reader *r, size_t max, size_t *out, const char *what)
{
    double v = 0.0;
    int rc = take(r, &v, what);
    if (rc)
        return rc;
    /* The negated test also rejects NaN. */
    if (!(v >= 0.0 && v <= (double)max && v == floor(v)))
        return gp_error_set(r->err, GP_EDATA, "kernel",
                            "kernel code: %s = %g at position %zu is not an integer in [0, %zu]",
                            what, v, r->pos - 1, max);
    *out = (size_t)v;
    return GP_OK;
}

static int take_real(reader *r, double *out, const char *what)
{
    int rc = take(r, out, what);
    if (rc == GP_OK && !isfinite(*out))
        rc = gp_error_set(r->err, GP_EDATA, "kernel",
                          "kernel code: %s at position %zu is not finite", what, r->pos - 1);
    return rc;
}

static size_t remaining(const reader *r)
{
    return r->len - r->pos;
}

typedef struct node_fields {
    size_t type, input_dim, n_act, ard, fixed, n_ls, n_terms;
    double log_variance, log_alpha, log_period;
    size_t *dims; /* n_act entries, owned */
    double *ls;   /* n_ls entries, owned */
} node_fields;

static int take_dims(reader *r, node_fields *f)
{
    int rc = take_count(r, f->input_dim, &f->n_act, "active dimension count");
    if (rc == GP_OK && f->n_act > remaining(r))
        rc = gp_error_set(r->err, GP_EDATA, "kernel", "kernel code truncated: %zu active "
                          "dimensions announced, %zu values left", f->n_act, remaining(r));
    if (rc || f->n_act == 0)
        return rc;
    f->dims = malloc(f->n_act * sizeof *f->dims);
    if (f->dims == NULL)
        return gp_error_set(r->err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < f->n_act && rc == GP_OK; i++)
        rc = take_count(r, f->input_dim - 1, &f->dims[i], "active dimension");
    return rc;
}

static int take_lengthscales(reader *r, node_fields *f)
{
    int rc = take_count(r, remaining(r), &f->n_ls, "lengthscale count");
    if (rc || f->n_ls == 0)
        return rc;
    f->ls = malloc(f->n_ls * sizeof *f->ls);
    if (f->ls == NULL)
        return gp_error_set(r->err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < f->n_ls && rc == GP_OK; i++)
        rc = take_real(r, &f->ls[i], "log lengthscale");
    return rc;
}

static int take_fields(reader *r, node_fields *f)
{
    int rc = take_count(r, GP_KERNEL_TYPE_COUNT - 1, &f->type, "type");
    if (rc == GP_OK)
        rc = take_count(r, KERNEL_MAX_DIM, &f->input_dim, "input dimension");
    if (rc == GP_OK && f->input_dim < 1)
        rc = gp_error_set(r->err, GP_EDATA, "kernel", "kernel code: input dimension 0");
    if (rc == GP_OK)
        rc = take_dims(r, f);
    if (rc == GP_OK)
        rc = take_count(r, 1, &f->ard, "ard");
    if (rc == GP_OK)
        rc = take_count(r, GP_FIX_ALL, &f->fixed, "fixed bits");
    if (rc == GP_OK)
        rc = take_real(r, &f->log_variance, "log variance");
    if (rc == GP_OK)
        rc = take_real(r, &f->log_alpha, "log alpha");
    if (rc == GP_OK)
        rc = take_real(r, &f->log_period, "log period");
    if (rc == GP_OK)
        rc = take_lengthscales(r, f);
    if (rc == GP_OK)
        rc = take_count(r, remaining(r) / CODE_MIN_NODE, &f->n_terms, "term count");
    return rc;
}

static int corrupt(reader *r, const char *what, const gp_error *sub)
{
    return gp_error_set(r->err, GP_EDATA, "kernel", "kernel code: %s%s%s", what,
                        sub ? ": " : "", sub ? sub->message : "");
}

static int build_leaf(reader *r, const node_fields *f, gp_kernel **out)
{
    gp_error sub;
    gp_error_clear(&sub);
    if (f->n_terms != 0)
        return corrupt(r, "a leaf with terms", NULL);
    int rc = gp_kernel_leaf(out, (gp_kernel_type)f->type, f->input_dim, (int)f->ard, f->dims,
                            f->n_act, &sub);
    if (rc)
        return rc == GP_ENOMEM ? gp_error_set(r->err, rc, NULL, "out of memory")
                               : corrupt(r, "invalid leaf", &sub);
    gp_kernel *k = *out;
    if ((size_t)k->ard != f->ard || k->n_lengthscale != f->n_ls) {
        gp_kernel_free(k);
        *out = NULL;
        return corrupt(r, "leaf lengthscales do not match its type, ard and dimensions", NULL);
    }
    if (f->n_ls)
        memcpy(k->log_lengthscale, f->ls, f->n_ls * sizeof *f->ls);
    return GP_OK;
}

static int decode_node(reader *r, size_t depth, gp_kernel **out);

static int build_composite(reader *r, const node_fields *f, size_t depth, gp_kernel **out)
{
    if (f->n_act || f->ard || f->n_ls || f->n_terms == 0)
        return corrupt(r, "a sum or product with leaf fields or no terms", NULL);
    gp_kernel **terms = calloc(f->n_terms, sizeof *terms);
    if (terms == NULL)
        return gp_error_set(r->err, GP_ENOMEM, NULL, "out of memory");
    int rc = GP_OK;
    for (size_t t = 0; t < f->n_terms && rc == GP_OK; t++) {
        rc = decode_node(r, depth + 1, &terms[t]);
        if (rc == GP_OK && terms[t]->input_dim != f->input_dim)
            rc = corrupt(r, "a term's input dimension differs from its parent's", NULL);
    }
    gp_error sub;
    gp_error_clear(&sub);
    if (rc == GP_OK) {
        rc = gp_kernel_composite(out, (gp_kernel_type)f->type, terms, f->n_terms, &sub);
        if (rc)
            rc = corrupt(r, "invalid sum or product", &sub);
    }
    if (rc)
        for (size_t t = 0; t < f->n_terms; t++)
            gp_kernel_free(terms[t]);
    free(terms);
    return rc;
}

static int decode_node(reader *r, size_t depth, gp_kernel **out)
{
    *out = NULL;
    if (depth > KERNEL_MAX_DEPTH)
        return corrupt(r, "the tree nests too deep", NULL);
    node_fields f;
    memset(&f, 0, sizeof f);
    int rc = take_fields(r, &f);
    if (rc == GP_OK)
        rc = gp_kernel_is_leaf_type((int)f.type) ? build_leaf(r, &f, out)
                                       : build_composite(r, &f, depth, out);
    if (rc == GP_OK) {
        (*out)->fixed = (unsigned)f.fixed;
        (*out)->log_variance = f.log_variance;
        (*out)->log_alpha = f.log_alpha;
        (*out)->log_period = f.log_period;
    }
    free(f.dims);
    free(f.ls);
    return rc;
}

int gp_kernel_decode(const double *code, size_t len, gp_kernel **out, gp_error *err)
{
    *out = NULL;
    if (code == NULL || len < CODE_HEADER)
        return gp_error_set(err, GP_EDATA, "kernel", "kernel code too short (%zu values)", len);
    if (code[0] != CODE_MAGIC)
        return gp_error_set(err, GP_EDATA, "kernel", "not a kernel code (bad magic number)");
    if (code[1] != CODE_VERSION)
        return gp_error_set(err, GP_EDATA, "kernel", "unsupported kernel code version %g",
                            code[1]);
    /* The code's own length, so that it may sit at the start of a longer array. */
    double total = code[2];
    if (!(total >= CODE_HEADER + CODE_MIN_NODE && total <= (double)len && total == floor(total)))
        return gp_error_set(err, GP_EDATA, "kernel",
                            "kernel code length %g does not fit the %zu values given", total, len);
    reader r = {code, (size_t)total, CODE_HEADER, err};
    int rc = decode_node(&r, 1, out);
    if (rc == GP_OK && r.pos != r.len) {
        gp_kernel_free(*out);
        *out = NULL;
        rc = gp_error_set(err, GP_EDATA, "kernel", "kernel code has %zu values past its end",
                          r.len - r.pos);
    }
    return rc;
}
