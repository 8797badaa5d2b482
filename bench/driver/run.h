/* gpbench run: every fit of an experiment, one JSON line of results each.
 *
 * For each dataset of the experiment, each of its splits and each repeat,
 * the split is loaded once (bench/support/dataset.h) and every expanded run
 * is fitted and scored on it with the protocol of bench/support/fit.h. A
 * line holds where the fit ran (experiment, dataset, scheme, split, repeat,
 * seed, sizes), what ran (method, label, options), and what came out (ok or
 * error; seconds; rmse, nlpd, clamped; lml, iterations, evaluations,
 * converged, noise, jitter; the model's diag.info as "info"). */
#ifndef GP_BENCH_RUN_H
#define GP_BENCH_RUN_H

#include <jansson.h>
#include <stdio.h>

typedef struct gpb_run_config {
    int quick;        /* the experiment's quick preset */
    const char *only; /* comma-separated dataset names, or NULL for all */
    const char *methods; /* comma-separated method names to run, or NULL for all */
    const char *set;     /* "METHOD.OPTION=VALUE,...": options over the file's, or NULL */
    int no_peers;        /* 1: the experiment's peers are not run (peers.h) */
    int smoke;           /* 1: each method's quick preset (its descriptor's) over the file's
                          * options, before --set: every run in seconds, to check the file */
} gpb_run_config;

/* Run exp, writing the lines to out. 0, or -1 when the datasets folder is
 * missing (nothing can run; said on stderr). Fits that fail are lines with
 * "ok": false and the reason, not errors. */
int gpb_run(const json_t *exp, const gpb_run_config *cfg, FILE *out);

/* Method name's quick preset (gp_method.quick: the budgets and sizes the
 * contract test and t_methods.sh fit with) over run's "options" (made when
 * missing); nothing for a name the registry does not know. */
void gpb_apply_method_quick(json_t *run, const char *name);

#endif
