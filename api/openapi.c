/* GET /openapi.yaml: the document embedded from api/openapi.yaml by
 * api/gen_openapi.sh (api/openapi_doc.c). */
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

const char *gp_openapi_text(size_t *len);

void gp_api_openapi(gp_response *out)
{
    size_t len = 0;
    const char *text = gp_openapi_text(&len);
    free(out->body);
    out->body = malloc(len + 1);
    if (out->body == NULL) {
        out->body_len = 0;
        gp_api_fail(out, GP_ENOMEM, NULL, "out of memory");
        return;
    }
    memcpy(out->body, text, len);
    out->body[len] = '\0';
    out->body_len = len;
    out->status = 200;
    out->content_type = "application/yaml";
}
