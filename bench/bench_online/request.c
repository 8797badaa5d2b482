/* bench_online: the fit request of an rfgp model (every part's rfgp). */

#include "bench/bench_online/online.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/value.h"
#include "core/kernel/kernel.h"
#include "core/methods/registry.h"

/* ---- the rfgp request ---- */

/* The option value {"kind": "messages", "messages": ["normal", "beta"]}, in
 * storage the caller owns (no allocation). */
typedef struct messages_value {
    gp_value root, members[2], names[2];
    char *keys[2];
    char kind[16], messages[16], kind_value[16], normal[16], beta[16];
} messages_value;

static const gp_value *messages_input(messages_value *mv)
{
    memset(mv, 0, sizeof *mv);
    snprintf(mv->kind, sizeof mv->kind, "kind");
    snprintf(mv->messages, sizeof mv->messages, "messages");
    snprintf(mv->kind_value, sizeof mv->kind_value, "messages");
    snprintf(mv->normal, sizeof mv->normal, "normal");
    snprintf(mv->beta, sizeof mv->beta, "beta");
    mv->names[0] = (gp_value){.type = GP_VALUE_STRING, .string = mv->normal};
    mv->names[1] = (gp_value){.type = GP_VALUE_STRING, .string = mv->beta};
    mv->members[0] = (gp_value){.type = GP_VALUE_STRING, .string = mv->kind_value};
    mv->members[1] = (gp_value){.type = GP_VALUE_ARRAY, .n = 2, .items = mv->names};
    mv->keys[0] = mv->kind;
    mv->keys[1] = mv->messages;
    mv->root = (gp_value){.type = GP_VALUE_OBJECT, .n = 2, .keys = mv->keys, .items = mv->members};
    return &mv->root;
}

#define MAX_OPTS 12

typedef struct rfgp_request {
    messages_value mv;
    gp_option_value opts[MAX_OPTS];
    size_t n_opts;
    gp_fit_request req;
} rfgp_request;

/* The fit request of an rfgp model for rows X (n x width) and Y (n x outputs). */
static void rfgp_request_make(rfgp_request *r, const rfgp_spec *s, const double *X,
                              const double *Y, size_t n, size_t width)
{
    memset(r, 0, sizeof *r);
    if (s->messages)
        r->opts[r->n_opts++] =
            (gp_option_value){.name = "input", .object = messages_input(&r->mv)};
    if (s->widths != NULL)
        r->opts[r->n_opts++] = (gp_option_value){.name = "width_selection", .string = s->widths};
    if (s->features > 0)
        r->opts[r->n_opts++] = (gp_option_value){.name = "features", .number = (double)s->features};
    if (s->inner > 0)
        r->opts[r->n_opts++] =
            (gp_option_value){.name = "inner_features", .number = (double)s->inner};
    if (s->warmup >= 0)
        r->opts[r->n_opts++] = (gp_option_value){.name = "warmup", .number = (double)s->warmup};
    if (s->outputs > 1)
        r->opts[r->n_opts++] = (gp_option_value){.name = "outputs", .number = (double)s->outputs};
    if (s->gate_kappa > 0)
        r->opts[r->n_opts++] = (gp_option_value){.name = "gate_kappa", .number = s->gate_kappa};
    if (s->refactor_batch > 0)
        r->opts[r->n_opts++] =
            (gp_option_value){.name = "refactor_batch", .number = s->refactor_batch};
    gp_fit_request *q = &r->req;
    q->X = X;
    q->y = Y;
    q->n = n;
    q->d = width;
    q->noise_given = 1;
    q->noise_variance = s->noise > 0 ? s->noise : NOISE;
    q->noise_fixed = 1;
    q->standardize = s->standardize;
    q->seed = FIT_SEED;
    q->options = r->opts;
    q->n_options = r->n_opts;
    q->n_outputs = s->outputs;
}

/* Fit an rfgp model; NULL with a message in why on failure. */
gp_model *rfgp_fit(const rfgp_spec *s, const double *X, const double *Y, size_t n,
                          size_t width, char *why, size_t why_len)
{
    const gp_method *m = gp_method_find("rfgp");
    if (m == NULL) {
        snprintf(why, why_len, "rfgp is not registered (not merged yet)");
        return NULL;
    }
    rfgp_request r;
    rfgp_request_make(&r, s, X, Y, n, width);
    gp_error err;
    gp_error_clear(&err);
    gp_kernel *k = NULL;
    int rc = gp_options_validate(m, r.opts, r.n_opts, &err);
    if (rc == GP_OK)
        rc = gp_method_input_spec(m, r.opts, r.n_opts, width, &r.req.input, &err);
    /* rbf ARD on the space of the inner kernel (R^c for c messages): its
     * variance is the weights' prior variance (1, §4), its lengthscales are
     * what width_selection replaces */
    if (rc == GP_OK)
        rc = gp_kernel_leaf(&k, GP_KERNEL_RBF, gp_input_point_dim(&r.req.input), 1, NULL, 0,
                            &err);
    r.req.kernel = k;
    gp_model *model = NULL;
    if (rc == GP_OK)
        rc = gp_model_fit(m, &r.req, &model, &err);
    gp_kernel_free(k);
    if (rc != GP_OK) {
        snprintf(why, why_len, "rfgp fit: %s (%s%s%s)", gp_status_name(rc), err.message,
                 err.field[0] ? ", field " : "", err.field);
        return NULL;
    }
    return model;
}
