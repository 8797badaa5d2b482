/* A method's descriptor and its options (descriptor.c): validation of the
 * options a fit is given, and the facts of a method read from its
 * descriptor. core/model/model.h, which defines the descriptor, includes
 * this header; the types are only named here. */
#ifndef GP_MODEL_DESCRIPTOR_H
#define GP_MODEL_DESCRIPTOR_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/kernel/kernel.h"
#include "core/likelihood/likelihood.h"
#include "core/model/inputs.h"

typedef struct gp_method gp_method;
typedef struct gp_option_spec gp_option_spec;
typedef struct gp_option_value gp_option_value;
typedef struct gp_info_spec gp_info_spec;

/* Check every given option exists in the spec and is within its bounds/choices
 * (OBJECT options: their check with d = 0). */
int gp_options_validate(const gp_method *m, const gp_option_value *opts, size_t n, gp_error *err);
/* The checks of the OBJECT options that depend on the number of input columns
 * d (e.g. a dimension index in range), for every OBJECT option of the method
 * (an absent one's default too): run once X is known, before a fit is
 * accepted (gp_model_fit runs it too). */
int gp_options_check_data(const gp_method *m, const gp_option_value *opts, size_t n, size_t d,
                          gp_error *err);

/* 1 when the method's models take gp_model_observe. */
int gp_method_can_observe(const gp_method *m);
/* 1 when the method's predictions carry ask_oracle. */
int gp_method_has_gate(const gp_method *m);
/* 1 when batched calls of the method share work (method.h,
 * batch_shares_work): what the server's dynamic batching asks. */
int gp_method_batch_shares_work(const gp_method *m);
/* The input spec of a fit of method m with these (validated) options: its
 * "input" option when it has one (kind and dimensions checked against
 * m->input_kinds), else points of d columns (d may be 0: not known yet). */
int gp_method_input_spec(const gp_method *m, const gp_option_value *opts, size_t n, size_t d,
                         gp_input_spec *out, gp_error *err);

/* The outputs an empty fit of method m declares: its option "outputs" when
 * it has one (given or default), else 1. */
size_t gp_method_declared_outputs(const gp_method *m, const gp_option_value *opts, size_t n);

/* Facts of a method, read from its descriptor. */
/* The spec of option `name`, NULL when m has no such option. */
const gp_option_spec *gp_method_option_spec(const gp_method *m, const char *name);
/* 1 when m accepts a leaf of type t (sum and product: m->composite_kernels). */
int gp_method_accepts_kernel_type(const gp_method *m, gp_kernel_type t);
/* The iteration budget of a fit with these options: the iterations option x
 * (restarts + 1), 0 when the method names no iterations option. Options are
 * assumed validated (gp_options_validate). */
int gp_method_max_iterations(const gp_method *m, const gp_option_value *opts, size_t n);
/* 1 when m fits likelihood l. */
int gp_method_accepts_likelihood(const gp_method *m, gp_likelihood l);
/* 1 when the method predicts with a mixture of Gaussians (gp_model_components). */
int gp_method_is_mixture(const gp_method *m);
/* 1 when the method predicts a sum of independent parts (gp_model_parts). */
int gp_method_has_parts(const gp_method *m);
/* The spec of method_info key `key`, NULL when m does not list it. */
const gp_info_spec *gp_method_info_spec(const gp_method *m, const char *key);

#endif
