/* rfgp: width selection by the type-II marginal likelihood (ml.c); the LML
 * for tests, gp_rfgp_primal_lml, is rfgp.c's. */
#ifndef GP_METHODS_RFGP_ML_H
#define GP_METHODS_RFGP_ML_H

#include "core/methods/rfgp/embed.h"
#include "core/methods/rfgp/internal.h"

/* The primal marginal likelihood of the selection's rows and its gradient
 * (§7, option 3), for the selection and for gp_rfgp_primal_lml. */
typedef struct ml_prob {
    sel_ctx *s;
    gp_embed e;
    size_t n_ls;   /* 0 (fixed widths), 1 (shared) or dk */
    int free_var, two;
    gp_noise_param np;
    double *yy;    /* p: sum of squared working targets */
    double *Xp;    /* points: dk x n, standardised */
    double *Phi, *Psi, *Sin, *P, *B, *Z, *A, *R, *Q, *F, *T, *gw;
    double *w;     /* dk current widths */
    double gamma, s0, noise;
} ml_prob;

int rfgp_ml_init(ml_prob *m, sel_ctx *s, gp_error *err);
void rfgp_ml_free(ml_prob *m);
/* LML at the current widths, gamma, s0 and noise; with grad the sensitivities
 * (g_w: dk, to the log widths). GP_ENOTPD when P cannot be factorised,
 * GP_ECANCELLED when the token asks. */
int rfgp_ml_eval(ml_prob *m, double *lml, int grad, double *g_gamma, double *g_s0,
                 double *g_noise, gp_error *err);

int rfgp_select_ml(sel_ctx *s, gp_error *err);
int rfgp_selected_lml(sel_ctx *s, double *lml, gp_error *err);
double rfgp_lml_offset(const sel_ctx *s);

#endif
