/* rfgp: the selection's context on the warm-up buffer (context.c): the staged
 * map with the standardisation of the buffer, the working targets, the unit
 * draws and the heuristics' subsample. */
#ifndef GP_METHODS_RFGP_CONTEXT_H
#define GP_METHODS_RFGP_CONTEXT_H

#include "core/methods/rfgp/internal.h"

/* Row i of the warm-up buffer is the caller's row i + shift (the rows of
 * earlier calls come first). */
int rfgp_sel_prepare(const gp_model *model, const rfgp_impl *im, const gp_fit_request *req,
                     long shift, staged *st, sel_ctx *s, gp_error *err);
void rfgp_sel_release(sel_ctx *s);
void rfgp_staged_free(staged *st);
/* The map's arrays at widths w (dk) and outer width gamma. */
void rfgp_scale_map(const rfgp_cfg *c, const unit_draws *u, const double *w, double gamma, fmap *m);
/* A mean (one output, point inputs) at the end of the warm-up, after
 * rfgp_sel_prepare: st->beta by least squares of the working targets on
 * the basis of the buffer's standardised points; s->Yw becomes the
 * residual the selection works on and s->Yr the buffer's residual y in
 * original units, the rows the posterior absorbs. Zero mean: nothing. */
int rfgp_mean_fit(const gp_model *model, const rfgp_impl *im, staged *st, sel_ctx *s,
                  gp_error *err);
/* The fit's cancellation token (NULL in observe). */
const gp_cancel *rfgp_ctx_cancel(const sel_ctx *s);

#endif
