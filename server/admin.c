#include "server/admin.h"

#include <string.h>

#include "api/api.h"
#include "server/route.h"

enum { ADMIN_OK = 0, ADMIN_FAILED = 1, ADMIN_USAGE = 2, ADMIN_HELD = 3 };

typedef struct admin_args {
    const char *db;
    const char *file; /* --out of backup, --from of restore */
} admin_args;

static int is_backup(const char *cmd)
{
    return strcmp(cmd, "backup") == 0;
}

int gp_admin_is_command(int argc, char *const argv[])
{
    return argc > 1 && (is_backup(argv[1]) || strcmp(argv[1], "restore") == 0 ||
                        strcmp(argv[1], "routes") == 0);
}

static void admin_usage(FILE *out)
{
    fprintf(out, "Usage: gpserve backup --db PATH --out FILE\n"
                 "       gpserve restore --db PATH --from FILE\n"
                 "       gpserve routes\n"
                 "backup copies a live SQLite database (daemons may keep running) into FILE;\n"
                 "restore puts FILE back as PATH, refused while a daemon holds PATH.\n"
                 "routes prints the route table: ID VERB PATTERN SCOPE SHAPE a line.\n"
                 "--db defaults to GPSERVE_DB, then ./gpserve.db. PostgreSQL: pg_dump and\n"
                 "pg_restore (docs/design/storage.md, \"Backups\").\n");
}

/* Fill a from argv[2..argc): --db and the command's file flag, as
 * "--flag VALUE" or "--flag=VALUE". 0, 1 for --help, or -1 (message in err). */
static int parse_args(admin_args *a, const char *file_flag, int argc, char *const argv[],
                      FILE *err)
{
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return 1;
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const char **slot = NULL;
        if (len == 4 && strncmp(arg, "--db", 4) == 0)
            slot = &a->db;
        else if (len == strlen(file_flag) && strncmp(arg, file_flag, len) == 0)
            slot = &a->file;
        if (slot == NULL) {
            fprintf(err, "gpserve %s: unexpected argument '%s' (see --help)\n", argv[1], arg);
            return -1;
        }
        const char *value = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (value == NULL || *value == '\0') {
            fprintf(err, "gpserve %s: option '%.*s' needs a value\n", argv[1], (int)len, arg);
            return -1;
        }
        *slot = value;
    }
    if (a->file == NULL) {
        fprintf(err, "gpserve %s: %s FILE is required (see --help)\n", argv[1], file_flag);
        return -1;
    }
    return 0;
}

int gp_admin_run(int argc, char *const argv[], gp_getenv_fn getenv_fn, FILE *out, FILE *err)
{
    if (strcmp(argv[1], "routes") == 0) { /* the keys area's matrix is made from it */
        gp_routes_print(out);
        return ADMIN_OK;
    }
    int backup = is_backup(argv[1]);
    gp_server_config defaults;
    gp_config_defaults(&defaults);
    const char *env_db = getenv_fn ? getenv_fn("GPSERVE_DB") : NULL;
    admin_args a = {env_db && *env_db ? env_db : defaults.db, NULL};
    int p = parse_args(&a, backup ? "--out" : "--from", argc, argv, err);
    if (p != 0) {
        if (p > 0)
            admin_usage(out);
        return p > 0 ? ADMIN_OK : ADMIN_USAGE;
    }
    gp_error e;
    gp_error_clear(&e);
    int rc = backup ? gp_api_backup(a.db, a.file, &e) : gp_api_restore(a.db, a.file, &e);
    if (rc != 0) {
        /* The catalogue's name and status, as an HTTP answer would carry them. */
        fprintf(err, "gpserve %s: %s (%d %s)\n", argv[1], e.message, gp_status_http(rc),
                gp_status_name(rc));
        return rc == GP_ECONFLICT ? ADMIN_HELD : rc == GP_EINVAL ? ADMIN_USAGE : ADMIN_FAILED;
    }
    fprintf(out, "gpserve %s: %s %s %s\n", argv[1], backup ? a.db : a.file,
            backup ? "copied to" : "restored as", backup ? a.file : a.db);
    return ADMIN_OK;
}
