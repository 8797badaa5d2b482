/* rfgp: the end of the warm-up (select.c): the selection of the widths, the
 * features, the standardisation, the batch fit of the buffered rows. */
#ifndef GP_METHODS_RFGP_SELECT_H
#define GP_METHODS_RFGP_SELECT_H

#include "core/methods/rfgp/internal.h"

/* The buffer's rows into st (allocated here, freed on failure); row i is the
 * caller's row i + shift. */
int rfgp_warmup_end(gp_model *model, const rfgp_impl *im, const gp_fit_request *req, long shift,
                    staged *st, gp_error *err);

#endif
