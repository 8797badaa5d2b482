/* See peers.h. */
#include "bench/driver/peers.h"

#include <stdlib.h>
#include <string.h>

#include "bench/driver/experiment.h"

#define MAX_COMMAND 4096

/* s with every character outside [A-Za-z0-9_.,/=-] refused: the command is
 * given to sh, and a dataset name or argument never needs quoting. */
static int plain(const char *s)
{
    for (; *s != '\0'; s++)
        if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,/=-", *s) ==
            NULL)
            return 0;
    return 1;
}

/* The peer's command line with its placeholders filled; -1 when an argument
 * is not plain text or the line is too long. */
static int command_line(const json_t *peer, const char *names, long splits, int quick, char *buf,
                        size_t len)
{
    size_t used = 0, i;
    json_t *arg;
    buf[0] = '\0';
    json_array_foreach(json_object_get(peer, "command"), i, arg)
    {
        const char *a = json_string_value(arg);
        char num[32];
        snprintf(num, sizeof num, "%ld", splits);
        if (a == NULL)
            return -1;
        if (strcmp(a, "{quick}") == 0 && !quick)
            continue;
        const char *v = strcmp(a, "{datasets}") == 0 ? names
                        : strcmp(a, "{splits}") == 0 ? num
                        : strcmp(a, "{quick}") == 0  ? "--quick"
                                                     : a;
        if (!plain(v))
            return -1;
        int w = snprintf(buf + used, len - used, "%s%s", used > 0 ? " " : "", v);
        if (w < 0 || (size_t)w >= len - used)
            return -1;
        used += (size_t)w;
    }
    return used > 0 ? 0 : -1;
}

/* The lines of one peer's command into out. */
static int run_peer(const json_t *exp, const json_t *peer, const char *cmd, int quick, FILE *out)
{
    const char *name = json_string_value(json_object_get(peer, "name"));
    FILE *p = popen(cmd, "r");
    if (p == NULL) {
        fprintf(stderr, "gpbench: peer %s: cannot run '%s'\n", name, cmd);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    int bad = 0;
    while (getline(&line, &cap, p) > 0) {
        json_error_t jerr;
        json_t *rec = json_loads(line, 0, &jerr);
        if (!json_is_object(rec)) {
            fprintf(stderr, "gpbench: peer %s: not a JSON object: %s", name, line);
            json_decref(rec);
            bad = 1;
            continue;
        }
        json_object_set(rec, "experiment", json_object_get(exp, "name"));
        json_object_set_new(rec, "quick", json_boolean(quick));
        json_object_set_new(rec, "peer", json_string(name != NULL ? name : "?"));
        json_dumpf(rec, out, JSON_COMPACT | JSON_REAL_PRECISION(17));
        fputc('\n', out);
        json_decref(rec);
    }
    free(line);
    int status = pclose(p);
    if (status != 0) {
        fprintf(stderr, "gpbench: peer %s: '%s' exited with status %d\n", name, cmd, status);
        bad = 1;
    }
    fflush(out);
    return bad ? -1 : 0;
}

/* 1 when the peer's "requires" (a Python module) imports. */
static int requirement_met(const json_t *peer)
{
    const char *mod = json_string_value(json_object_get(peer, "requires"));
    char cmd[256];
    if (mod == NULL)
        return 1;
    if (!plain(mod))
        return 0;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import %s' >/dev/null 2>&1", mod);
    return system(cmd) == 0;
}

int gpb_run_peers(const json_t *exp, const json_t *datasets, int quick, FILE *out)
{
    char names[1024] = "", cmd[MAX_COMMAND];
    size_t i, used = 0;
    json_t *ds;
    json_array_foreach(datasets, i, ds)
    {
        int w = snprintf(names + used, sizeof names - used, "%s%s", used > 0 ? "," : "",
                         json_string_value(json_object_get(ds, "name")));
        used = w > 0 && (size_t)w < sizeof names - used ? used + (size_t)w : used;
    }
    json_t *splits = gpb_dataset_splits(exp, json_array_get(datasets, 0), quick);
    long n_splits = (long)json_array_size(splits);
    json_decref(splits);
    int rc = 0;
    json_t *peer;
    json_array_foreach(json_object_get(exp, "peers"), i, peer)
    {
        const char *name = json_string_value(json_object_get(peer, "name"));
        if (json_array_size(datasets) == 0)
            break;
        if (!requirement_met(peer)) {
            fprintf(stderr, "gpbench: peer %s skipped: /usr/bin/python3 cannot import %s "
                            "(sh mk/deps.sh bench as root installs it)\n",
                    name, json_string_value(json_object_get(peer, "requires")));
            continue;
        }
        if (command_line(peer, names, n_splits, quick, cmd, sizeof cmd) != 0) {
            fprintf(stderr, "gpbench: peer %s: its command is not plain text\n", name);
            rc = -1;
            continue;
        }
        fprintf(stderr, "gpbench: peer %s: %s\n", name, cmd);
        if (run_peer(exp, peer, cmd, quick, out) != 0)
            rc = -1;
    }
    return rc;
}
