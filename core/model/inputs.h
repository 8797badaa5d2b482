/* gpserve core: what one input of a model is. Most models take points (rows
 * of d numbers). A model of distributional inputs (rfgp, docs/methods/
 * kernel-jit-online.md §3 and §7 "Input kinds") takes a Gaussian, an
 * empirical sample or a fixed tuple of scalar messages per input; core sees
 * every input as one row of a fixed number of doubles (its encoding, below),
 * so fit, predict, sample and observe keep their column-major n x width X.
 *
 * Encodings (one row, in this order):
 *   POINT     x[0 .. d)                                   width d
 *   GAUSSIAN  mean[0 .. d), then var[0 .. d) (diagonal)   width 2d
 *             or mean[0 .. d), then cov (d x d, column-major; full)   d + d^2
 *   SAMPLES   S points one after the other: x_1[0 .. d), x_2, ...     S d
 *   MESSAGES  per message its two parameters: normal (mean, var),
 *             beta (a, b), gamma (shape, rate)                        2c
 * The space the inner kernel lives on (gp_input_point_dim) is R^d, or R^c for
 * c messages (each message is of one real variable). */
#ifndef GP_MODEL_INPUTS_H
#define GP_MODEL_INPUTS_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/base/value.h"

typedef enum gp_input_kind {
    GP_INPUT_POINT = 0,
    GP_INPUT_GAUSSIAN,
    GP_INPUT_SAMPLES,
    GP_INPUT_MESSAGES,
    GP_INPUT_KIND_COUNT
} gp_input_kind;

typedef enum gp_message_type {
    GP_MESSAGE_NORMAL = 0,
    GP_MESSAGE_BETA,
    GP_MESSAGE_GAMMA,
    GP_MESSAGE_TYPE_COUNT
} gp_message_type;

#define GP_INPUT_MAX_MESSAGES 16
#define GP_INPUT_MAX_SAMPLES 10000
#define GP_INPUT_MAX_DIM 1000

typedef struct gp_input_spec {
    gp_input_kind kind;
    size_t dim;          /* POINT, GAUSSIAN, SAMPLES: d (0 = from the data, POINT only) */
    int full_covariance; /* GAUSSIAN: rows carry a full covariance, else a diagonal */
    size_t samples;      /* SAMPLES: points per input */
    size_t arity;        /* MESSAGES: c */
    gp_message_type messages[GP_INPUT_MAX_MESSAGES];
} gp_input_spec;

/* Points of dimension d. */
void gp_input_spec_points(gp_input_spec *s, size_t d);
/* The spec of an `input` option value (NULL: points, dim from the data),
 * e.g. {"kind": "gaussian", "dim": 2, "covariance": "full"},
 * {"kind": "samples", "dim": 1, "samples": 50},
 * {"kind": "messages", "messages": ["normal", "beta"]}.
 * GP_EINVAL naming the member under field ("options.input.dim"). */
int gp_input_spec_parse(const gp_value *v, const char *field, gp_input_spec *out, gp_error *err);
/* The JSON Schema of that value, JSON text (an OBJECT option's choices). */
extern const char gp_input_spec_schema[];
/* Doubles per encoded row (0 for points whose d is not known yet). */
size_t gp_input_width(const gp_input_spec *s);
/* Dimension of the space the inner kernel lives on: d, or c for messages. */
size_t gp_input_point_dim(const gp_input_spec *s);
/* Names: "point", "gaussian", "samples", "messages"; "normal", "beta", "gamma". */
const char *gp_input_kind_name(gp_input_kind k);
const char *gp_message_type_name(gp_message_type t);
/* 1 when name is a message type (its value in *t). */
int gp_message_type_from_name(const char *name, gp_message_type *t);

/* Check row i of the encoded inputs X (rows n, row-to-row stride 1 within
 * the column-major n x width matrix, so entry j of row i is X[j n + i]):
 * finite numbers, positive variances and parameters, a symmetric positive
 * semi-definite covariance. GP_EDATA naming the member as the JSON input
 * spells it: "X[3].gaussian.var[1]", "X[0].messages[1].beta.a", "X[2].samples[4][0]",
 * or "X[i][j]" for points. prefix replaces "X" (e.g. "X" or "inputs"). */
int gp_input_check(const gp_input_spec *s, const double *X, size_t n, const char *prefix,
                   gp_error *err);

/* Moment matching (kernel-jit-online.md §6): the Gaussian N(mean, var) of
 * each message, into mean[c] and var[c]. Row i of X as above. */
void gp_input_message_moments(const gp_input_spec *s, const double *X, size_t n, size_t i,
                              double *mean, double *var);

/* A spec as numbers (for a model's state) and back: GP_INPUT_CODE_LEN doubles. */
#define GP_INPUT_CODE_LEN (5 + GP_INPUT_MAX_MESSAGES)
void gp_input_spec_encode(const gp_input_spec *s, double *code);
int gp_input_spec_decode(const double *code, size_t len, gp_input_spec *s, gp_error *err);

#endif
