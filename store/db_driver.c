/* gpserve store: which driver a --db value names (the one file that knows
 * every driver, above them and db.c). */
#include "store/db.h"

const gp_db_driver *gp_db_driver_for(const char *target)
{
    return gp_db_is_pg_url(target) ? &gp_db_pg_driver : &gp_db_sqlite_driver;
}
