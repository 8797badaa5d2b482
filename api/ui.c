/* GET / and GET /ui/{file}: the browser view, the files of web/ embedded in
 * the binary by mk/gen_assets.sh (api/ui_assets.h). Every answer may be
 * cached but is revalidated (no-cache) against its ETag, the hash of the
 * embedded bytes, so a new binary is never hidden by a browser's copy. The
 * page runs under a strict Content-Security-Policy: its own origin only, no
 * inline script or style, no plugins, not framed. */
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "api/ui_assets.h"

#define UI_CSP                                                                    \
    "default-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; " \
    "form-action 'self'"

typedef struct media_type {
    const char *suffix;
    const char *type;
} media_type;

static const media_type media_types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".json", "application/json"},
    {".md", "text/markdown; charset=utf-8"},
    {".txt", "text/plain; charset=utf-8"},
};

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

const char *gp_api_ui_content_type(const char *path)
{
    for (size_t i = 0; i < sizeof media_types / sizeof media_types[0]; i++)
        if (ends_with(path, media_types[i].suffix))
            return media_types[i].type;
    /* LICENSE and other plain files without a suffix */
    return "text/plain; charset=utf-8";
}

static const gp_ui_asset *find_asset(const char *path)
{
    size_t count = 0;
    const gp_ui_asset *all = gp_ui_assets(&count);
    for (size_t i = 0; i < count; i++)
        if (strcmp(all[i].path, path) == 0)
            return &all[i];
    return NULL;
}

/* If-None-Match names the asset's ETag (one of a list, or "*"). The ETag is
 * quoted, so it cannot match inside another tag; a weak W/"..." of it
 * matches too, as RFC 9110 §13.1.2 asks for GET. */
static int etag_matches(const char *if_none_match, const char *etag)
{
    if (if_none_match == NULL)
        return 0;
    while (*if_none_match == ' ' || *if_none_match == '\t')
        if_none_match++;
    if (if_none_match[0] == '*')
        return 1;
    return strstr(if_none_match, etag) != NULL;
}

void gp_api_ui_asset(const char *path, const char *if_none_match, gp_response *out)
{
    gp_response_free(out);
    const gp_ui_asset *a = path ? find_asset(path) : NULL;
    if (a == NULL) {
        gp_api_fail(out, GP_ENOTFOUND, NULL, "no file '%s' in the browser view",
                    path ? path : "");
        return;
    }
    gp_response_header(out, "ETag", a->etag);
    gp_response_header(out, "Cache-Control", "no-cache");
    if (etag_matches(if_none_match, a->etag)) {
        out->status = 304; /* the browser's copy is current: no body */
        out->content_type = NULL;
        return;
    }
    gp_response_header(out, "X-Content-Type-Options", "nosniff");
    gp_response_header(out, "Content-Security-Policy", UI_CSP);
    gp_response_header(out, "Referrer-Policy", "no-referrer");
    out->body = malloc(a->len + 1);
    if (out->body == NULL) {
        out->n_headers = 0;
        gp_api_fail(out, GP_ENOMEM, NULL, "out of memory");
        return;
    }
    memcpy(out->body, a->bytes, a->len);
    out->body[a->len] = '\0';
    out->body_len = a->len;
    out->status = 200;
    out->content_type = gp_api_ui_content_type(path);
}
