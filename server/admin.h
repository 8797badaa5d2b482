/* gpserve server: the commands that are not the daemon (`gpserve backup`,
 * `gpserve restore`; docs/design/storage.md, "Backups"). */
#ifndef GP_SERVER_ADMIN_H
#define GP_SERVER_ADMIN_H

#include <stdio.h>

#include "server/config.h"

/* 1 when argv[1] names a command (backup, restore). */
int gp_admin_is_command(int argc, char *const argv[]);

/* Run the command of argv[1]: its options are --db PATH (else GPSERVE_DB,
 * else the daemon's default) and --out FILE (backup) or --from FILE
 * (restore). Messages go to out and err. The exit status: 0 done, 1 failed,
 * 2 bad arguments, 3 the database is held by a running daemon (restore). */
int gp_admin_run(int argc, char *const argv[], gp_getenv_fn getenv_fn, FILE *out, FILE *err);

#endif
