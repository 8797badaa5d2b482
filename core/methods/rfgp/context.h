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
/* The fit's cancellation token (NULL in observe). */
const gp_cancel *rfgp_ctx_cancel(const sel_ctx *s);

#endif
