/* gpserve core, internal to core/kernel: a stationary leaf's value over a
 * block of pairs in vector lanes, for the Gram and cross matrices and the
 * gradient contraction (kernel_gram.c).
 *
 * For one point b against rows i0 .. i0 + len of a coordinate-major copy of
 * the scaled points, the pair statistic q, then k and the gradient factor c0
 * of rbf and the Matérns: the same operations in the same order as vec_q and
 * the *_terms functions of kernel_formula.h (exp through gp_exp), so each
 * lane's bits are the single pair's. */
#ifndef GP_KERNEL_BLOCK_H
#define GP_KERNEL_BLOCK_H

#include <stddef.h>

#include "core/kernel/kernel_formula.h"

/* Pairs per block: the callers' scratch arrays hold this many. */
#define GP_KERNEL_BLOCK 64

/* 1 for the leaf types the blocks compute (rbf, matern12, matern32, matern52). */
int gp_kernel_block_type(gp_kernel_type type);

/* q[t] = sum over c < na, in order, of (at[i0 + t + c ldat] - b[c])^2, t < len
 * (len <= GP_KERNEL_BLOCK). */
void gp_kernel_block_q(const double *at, size_t ldat, size_t na, size_t i0, size_t len,
                       const double *b, double *q);

/* From q (len entries): v[t] = k, and with c0 non-NULL c0[t] = the factor of
 * dk/dlog l_i = c0 r_i^2 (leaf_terms's c[0]). p->type must be a block type.
 * scratch: len doubles. */
void gp_kernel_block_terms(const leaf_par *p, const double *q, size_t len, double *v,
                           double *c0, double *scratch);

/* ---- the Kuf contraction from known values, one X point at a time ----
 * gp_kernel_cross_grad_contract_known's pair loop for a block type with at
 * most GP_KNOWN_MAX_COORDS coordinates: for X point a against every Z_j,
 * q by coordinate a block of Z at a time, the factor c0 from the known
 * value, then each pair's terms added in pair order, the coordinates side by
 * side in vector lanes (each gradient entry's sequence of additions is the
 * scalar loop's, so the bits are). */
#define GP_KNOWN_MAX_COORDS 32

typedef struct gp_known_args {
    gp_kernel_type type;
    int ard;       /* per-coordinate lengthscale terms (else one, g[1], from q) */
    int iso_term;  /* !ard with a lengthscale: g[1] += w c0 q */
    size_t na, m;  /* coordinates; Z points */
    size_t width;  /* na rounded up to a multiple of 8: the padded row length */
    const double *zp;  /* m x width: Z's scaled points, zero-padded rows */
    const double *zt;  /* m x na, leading dimension m: Z by coordinate */
    const double *inv; /* width: 1 / lengthscale of each coordinate, zero-padded */
} gp_known_args;

/* a: X point (na scaled coordinates); kcol, wcol: its m values of K and W.
 * g: the running partial sums (g[0], then g[1] or g[1 .. na]); gzp (m x
 * width, or NULL): the running Z-gradient, coordinate c of Z_j at
 * gzp[j width + c]. */
void gp_kernel_block_known(const gp_known_args *ka, const double *a, const double *kcol,
                           const double *wcol, double *g, double *gzp);

#endif
