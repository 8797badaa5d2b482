/* The flat encoding of a kernel tree (kernel_codec.c). */
#ifndef GP_KERNEL_CODEC_H
#define GP_KERNEL_CODEC_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/kernel/kernel.h"

/* Self-describing flat encoding of the whole tree (structure, active dims, fixed
 * bits and parameter values) as doubles, for export; decoding gives back an
 * identical kernel. gp_kernel_encode writes nothing when out is NULL and
 * returns the length needed. */
size_t gp_kernel_encode(const gp_kernel *k, double *out);
int gp_kernel_decode(const double *code, size_t len, gp_kernel **out, gp_error *err);

#endif
