/* The ELBO of method "svgp" and its natural-gradient steps: what core/methods/svgp/elbo.c shares
 * with the other files of the method. */
#ifndef GP_METHODS_SVGP_ELBO_H
#define GP_METHODS_SVGP_ELBO_H

#include "core/methods/svgp/internal.h"

void svgp_work_free(svgp_work *w);

int svgp_work_alloc(svgp_work *w, size_t m, size_t cap, gp_error *err);

/* The same for C latents (svgp_work's comment). */
int svgp_work_alloc_latents(svgp_work *w, size_t m, size_t cap, size_t C, gp_error *err);

int svgp_factor_kuu(const svgp_eval *e, svgp_work *w, gp_error *err);

void svgp_block_moments(const svgp_eval *e, const double *X, const double *off, size_t nb,
                        svgp_work *w);

double svgp_block_expect(const svgp_eval *e, const double *y, const double *r, size_t nb,
                         double scale, svgp_work *w, double *dlog_s2);

void svgp_block_sens(const svgp_eval *e, size_t nb, int kernel_sens, svgp_work *w);

int svgp_kernel_grad(const svgp_eval *e, const double *X, size_t nb, const svgp_work *w,
                     double dlog_s2, double *theta, double *gz, gp_error *err);

double svgp_kl_value(const double *mq, const double *Lq, size_t m);

/* The KLs of C latents' q (blocks of mq and Lq) added up. */
double svgp_kl_sum(const double *mq, const double *Lq, size_t m, size_t C);

int svgp_eval_full(const svgp_eval *e, const double *X, size_t n, const double *y,
                   svgp_work *w, gp_svgp_terms *t, const svgp_out *out, gp_error *err);

int svgp_expected_blocks(const svgp_eval *e, const double *X, size_t d, size_t n,
                         const double *y, svgp_work *w, double *sum, gp_error *err);

int svgp_natgrad_buf_alloc(natgrad_buf *b, size_t m, gp_error *err);

void svgp_natgrad_buf_free(natgrad_buf *b);

int svgp_natgrad_update(size_t m, const double *D, const double *agmu, double step, double *mq,
                        double *Lq, natgrad_buf *b, gp_error *err);

#endif
