/* gpserve api: the files of the browser view (web/), embedded in the binary
 * by mk/gen_assets.sh (the generated $(BUILD)/gen/api/ui_assets.c). */
#ifndef GP_API_UI_ASSETS_H
#define GP_API_UI_ASSETS_H

#include <stddef.h>

typedef struct gp_ui_asset {
    const char *path;           /* relative to web/: "index.html", "vendor/chart.umd.min.js" */
    const unsigned char *bytes; /* len bytes (a NUL follows, not counted) */
    size_t len;
    const char *etag;           /* quoted: "\"<32 hex digits of its sha256>\"" */
} gp_ui_asset;

/* The table, sorted by path; *count entries. */
const gp_ui_asset *gp_ui_assets(size_t *count);

#endif
