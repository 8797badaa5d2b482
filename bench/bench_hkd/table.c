/* bench_hkd's tables: part 1's per large set, part 3's, and the summary
 * against the targets (means ± std over splits or seeds, speed ratios as
 * geometric means over splits). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench_hkd/hkd_bench.h"
#include "bench/support/args.h"

/* ---- summaries ---- */

typedef struct stat2 {
    int n;
    double mean, sd;
} stat2;

static stat2 stat_of(const double *x, int n)
{
    stat2 s = {0, NAN, NAN};
    double sum = 0.0, ss = 0.0;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i])) {
            sum += x[i];
            s.n++;
        }
    if (s.n == 0)
        return s;
    s.mean = sum / s.n;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]))
            ss += (x[i] - s.mean) * (x[i] - s.mean);
    s.sd = sqrt(ss / s.n);
    return s;
}

/* Geometric mean of the finite positive entries (NAN when none). */
static double geo_mean(const double *x, int n)
{
    double s = 0.0;
    int c = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]) && x[i] > 0.0) {
            s += log(x[i]);
            c++;
        }
    return c > 0 ? exp(s / c) : NAN;
}

static void print_pm(stat2 s, int prec)
{
    if (s.n == 0)
        printf(" — |");
    else if (s.n == 1)
        printf(" %.*f |", prec, s.mean);
    else
        printf(" %.*f ± %.*f |", prec, s.mean, prec, s.sd);
}

/* hkd / sgpr 2m per split, of the seconds (fit) or predict_us. */
static double ratio_vs_2m(const large_outcome *lo, size_t mi, int v, int splits, int fit)
{
    double r[MAX_SPLITS];
    for (int k = 0; k < splits; k++) {
        int peer = v == V_HKD_OPT || v == V_SGPR_2M_OPT ? V_SGPR_2M_OPT : V_SGPR_2M;
        const result *a = &lo->cell[mi][v].r[k], *b = &lo->cell[mi][peer].r[k];
        r[k] = NAN;
        if (a->ok && b->ok)
            r[k] = fit ? a->seconds / b->seconds : a->predict_us / b->predict_us;
    }
    return geo_mean(r, splits);
}

static stat2 field_stat(const result *rs, int n, int which)
{
    double x[MAX_SPLITS];
    for (int i = 0; i < n; i++) {
        const result *r = &rs[i];
        double val = which == 0 ? r->rmse : which == 1 ? r->nlpd : which == 2 ? r->seconds
                                                                               : r->predict_us;
        x[i] = r->ok ? val : NAN;
    }
    return stat_of(x, n);
}

void hkdb_print_large_table(const options *o, const large_set *ls, const large_outcome *lo)
{
    if (!lo->ran) {
        printf("no split ran.\n\n");
        return;
    }
    double ell[MAX_SPLITS];
    memcpy(ell, lo->ell, sizeof ell);
    stat2 se = stat_of(ell, lo->splits);
    char rows[96];
    if (lo->n_train < lo->n_train_full)
        snprintf(rows, sizeof rows, "%zu of %zu (subsampled, seed = split index)", lo->n_train,
                 lo->n_train_full);
    else
        snprintf(rows, sizeof rows, "%zu (all rows)", lo->n_train);
    printf("%s splits 0..%d: N train %s, N test %zu, d %zu; median-heuristic "
           "lengthscale (standardised) %.3f.\n\n",
           ls->scheme, lo->splits - 1, rows, lo->n_test, lo->d, se.mean);
    printf("| m | method | RMSE | NLPD | fit s | fit / sgpr 2m | predict µs (median) | "
           "predict / sgpr 2m | L-BFGS it | splits |\n");
    printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (size_t mi = 0; mi < o->n_m; mi++)
        for (int v = 0; v < N_VARIANTS; v++) {
            if (!o->use[v])
                continue;
            int opt = v == V_SGPR_2M_OPT || v == V_HKD_OPT;
            if (opt && (!gp_bench_list_has(o->opt_datasets, ls->name) ||
                        !hkdb_size_listed(o->opt_m, o->n_opt_m, o->m[mi])))
                continue;
            const result *rs = lo->cell[mi][v].r;
            char label[64];
            hkdb_variant_label(v, o->m[mi], label, sizeof label);
            int ok = 0;
            const char *why = NULL;
            double it = 0.0;
            for (int k = 0; k < lo->splits; k++) {
                if (rs[k].ok) {
                    ok++;
                    it += rs[k].iterations;
                } else if (rs[k].ran && why == NULL)
                    why = rs[k].error;
            }
            printf("| %zu | %s |", o->m[mi], label);
            if (ok == 0) {
                printf(" %s | | | | | | | 0 / %d |\n", why ? why : "not run",
                       opt && o->opt_splits < lo->splits ? o->opt_splits : lo->splits);
                continue;
            }
            print_pm(field_stat(rs, lo->splits, 0), 4);
            print_pm(field_stat(rs, lo->splits, 1), 3);
            print_pm(field_stat(rs, lo->splits, 2), 1);
            double fr = ratio_vs_2m(lo, mi, v, lo->splits, 1);
            if (v == V_SGPR_2M || v == V_SGPR_2M_OPT || !isfinite(fr))
                printf(" %s |", v == V_SGPR_2M || v == V_SGPR_2M_OPT ? "1" : "—");
            else
                printf(" %.2f |", fr);
            print_pm(field_stat(rs, lo->splits, 3), 1);
            double pr = ratio_vs_2m(lo, mi, v, lo->splits, 0);
            if (v == V_SGPR_2M || v == V_SGPR_2M_OPT || !isfinite(pr))
                printf(" %s |", v == V_SGPR_2M || v == V_SGPR_2M_OPT ? "1" : "—");
            else
                printf(" %.2f |", pr);
            int planned = opt && o->opt_splits < lo->splits ? o->opt_splits : lo->splits;
            printf(" %.0f | %d / %d%s%s |\n", it / ok, ok, planned,
                   planned < o->splits ? " (budget)" : "", why ? " (some failed)" : "");
        }
    printf("\n");
    fflush(stdout);
}

/* ---- part 3 ---- */

void hkdb_print_synth_table(const options *o, const synth_outcome *so)
{
    printf("| m | method | RMSE | NLPD | fit s | L-BFGS it | seeds |\n");
    printf("|---:|---|---:|---:|---:|---:|---|\n");
    for (size_t mi = 0; mi < o->n_synth_m; mi++)
        for (int v = 0; v < N_SYNTH; v++) {
            const result *rs = so->r[mi][v];
            char label[96];
            hkdb_synth_label(v, o->synth_m[mi], label, sizeof label);
            int ok = 0;
            double it = 0.0;
            const char *why = NULL;
            for (int s = 0; s < o->synth_seeds; s++) {
                if (rs[s].ok) {
                    ok++;
                    it += rs[s].iterations;
                } else if (why == NULL)
                    why = rs[s].error;
            }
            printf("| %zu | %s |", o->synth_m[mi], label);
            if (ok == 0) {
                printf(" %s | | | | 0 / %d |\n", why ? why : "not run", o->synth_seeds);
                continue;
            }
            print_pm(field_stat(rs, o->synth_seeds, 0), 4);
            print_pm(field_stat(rs, o->synth_seeds, 1), 3);
            print_pm(field_stat(rs, o->synth_seeds, 2), 2);
            printf(" %.0f | %d / %d |\n", it / ok, ok, o->synth_seeds);
        }
    printf("\n");
    fflush(stdout);
}

/* ---- the verdict ---- */

static const char *met(int pass)
{
    return pass ? "**met**" : "**not met**";
}

void hkdb_print_targets(const options *o, const large_outcome *lo, const synth_outcome *so)
{
    printf("## Summary against the targets\n\n");
    /* (1) */
    if (!o->parts[P_LARGE]) {
        printf("- (1) hkd 8×m RMSE ≤ sgpr 2m with a fit no slower: not measured (--parts).\n");
    } else {
        for (size_t mi = 0; mi < o->n_m; mi++) {
            int measured = 0, wins = 0;
            char list[1024] = "";
            for (size_t i = 0; i < N_LARGE; i++) {
                if (!lo[i].ran)
                    continue;
                stat2 h = field_stat(lo[i].cell[mi][V_HKD].r, lo[i].splits, 0);
                stat2 s = field_stat(lo[i].cell[mi][V_SGPR_2M].r, lo[i].splits, 0);
                if (h.n == 0 || s.n == 0)
                    continue;
                measured++;
                double fr = ratio_vs_2m(&lo[i], mi, V_HKD, lo[i].splits, 1);
                int acc = h.mean <= s.mean, fast = isfinite(fr) && fr <= 1.0;
                wins += acc && fast;
                char item[192];
                snprintf(item, sizeof item, "%s%s RMSE %.4g vs %.4g, fit ratio %.2f (%s)",
                         list[0] ? "; " : "", hkdb_large_sets[i].name, h.mean, s.mean, fr,
                         acc && fast ? "yes" : !acc && !fast ? "no: RMSE, slower"
                                               : !acc       ? "no: RMSE"
                                                            : "no: slower");
                strncat(list, item, sizeof list - strlen(list) - 1);
            }
            printf("- (1) m = %zu: hkd %d×%zu RMSE ≤ sgpr M=%zu with fit ≤ sgpr's on at least %d "
                   "of the 5 large sets: ",
                   o->m[mi], HKD_BLOCKS, o->m[mi], 2 * o->m[mi], TARGET_WINS);
            if (measured == 0)
                printf("not measured (hkd or sgpr 2m did not run).\n");
            else
                printf("%d of %d measured: %s. %s.\n", wins, measured,
                       wins >= TARGET_WINS ? met(1) : met(0), list);
        }
    }
    /* (1) with Z optimised: the reference pair */
    for (size_t i = 0; o->parts[P_LARGE] && i < N_LARGE; i++) {
        if (!lo[i].ran || !gp_bench_list_has(o->opt_datasets, hkdb_large_sets[i].name))
            continue;
        for (size_t mi = 0; mi < o->n_m; mi++) {
            stat2 h = field_stat(lo[i].cell[mi][V_HKD_OPT].r, lo[i].splits, 0);
            stat2 s = field_stat(lo[i].cell[mi][V_SGPR_2M_OPT].r, lo[i].splits, 0);
            if (h.n == 0 || s.n == 0)
                continue;
            double fr = ratio_vs_2m(&lo[i], mi, V_HKD_OPT, lo[i].splits, 1);
            printf("- (1, for reference) both with their defaults (Z optimised), %s, %d "
                   "split%s: hkd %d×%zu RMSE %.4g vs sgpr M=%zu %.4g, fit ratio %.2f: %s.\n",
                   hkdb_large_sets[i].name, h.n, h.n == 1 ? "" : "s", HKD_BLOCKS, o->m[mi], h.mean,
                   2 * o->m[mi], s.mean, fr,
                   h.mean <= s.mean && fr <= 1.0 ? "would meet"
                   : h.mean <= s.mean            ? "more accurate, slower"
                                                 : "less accurate");
        }
    }
    /* (2) */
    static const int mine[2] = {S_HKD, S_HKD_FIXED};
    static const int peers[2] = {S_SGPR, S_SGPR_FIXED};
    static const char *const regime[2] = {"both with their defaults (Z optimised)",
                                          "both with Z fixed"};
    for (int pi = 0; pi < 2; pi++) {
        printf("- (2%s) synthetic: hkd %d×m NLPD lower than sgpr %d·m, %s, by at least "
               "%.2f nats at every m: ",
               pi ? "b" : "", SYNTH_BLOCKS, SYNTH_BLOCKS, regime[pi], SYNTH_MARGIN);
        if (!o->parts[P_SYNTH] || !so->ran) {
            printf("not measured.\n");
            continue;
        }
        int all = 1, any = 0;
        char list[512] = "";
        for (size_t mi = 0; mi < o->n_synth_m; mi++) {
            stat2 h = field_stat(so->r[mi][mine[pi]], o->synth_seeds, 1);
            stat2 sg = field_stat(so->r[mi][peers[pi]], o->synth_seeds, 1);
            char item[128];
            if (h.n == 0 || sg.n == 0) {
                all = 0;
                snprintf(item, sizeof item, "%sm = %zu not measured", list[0] ? "; " : "",
                         o->synth_m[mi]);
            } else {
                any = 1;
                all &= sg.mean - h.mean >= SYNTH_MARGIN;
                snprintf(item, sizeof item, "%sm = %zu: %.3f vs %.3f (Δ %+.3f)",
                         list[0] ? "; " : "", o->synth_m[mi], h.mean, sg.mean, sg.mean - h.mean);
            }
            strncat(list, item, sizeof list - strlen(list) - 1);
        }
        printf("%s%s. %s.\n", any ? met(all) : "not measured",
               pi == 0 ? " (the target)" : " (for reference)", list);
    }
    /* (3) */
    printf("- (3) single-point predict under %.0f µs at %d×%d on kin40k (median): ",
           TARGET_PREDICT_US, HKD_BLOCKS, TARGET_PREDICT_M);
    const large_outcome *kin = NULL;
    size_t at = MAX_M;
    for (size_t i = 0; i < N_LARGE; i++)
        if (strcmp(hkdb_large_sets[i].name, "kin40k") == 0 && lo[i].ran)
            kin = &lo[i];
    for (size_t mi = 0; mi < o->n_m; mi++)
        if (o->m[mi] == TARGET_PREDICT_M)
            at = mi;
    if (!o->parts[P_LARGE] || kin == NULL || at == MAX_M) {
        printf("not measured.\n");
    } else {
        stat2 p = field_stat(kin->cell[at][V_HKD].r, kin->splits, 3);
        if (p.n == 0)
            printf("not measured (hkd did not run).\n");
        else
            printf("%.1f µs (mean over splits of the per-fit medians; sgpr M=%d: %.1f µs): "
                   "%s.\n",
                   p.mean, 2 * TARGET_PREDICT_M,
                   field_stat(kin->cell[at][V_SGPR_2M].r, kin->splits, 3).mean,
                   met(p.mean < TARGET_PREDICT_US));
    }
    printf("\n");
}
