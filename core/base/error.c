#include "core/base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gp_error_set(gp_error *err, int code, const char *field, const char *fmt, ...)
{
    if (err == NULL)
        return code;
    err->code = code;
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return code;
}

void gp_error_clear(gp_error *err)
{
    if (err == NULL)
        return;
    err->code = GP_OK;
    err->field[0] = '\0';
    err->message[0] = '\0';
}

const char *gp_status_name(int code)
{
    switch (code) {
    case GP_OK: return "ok";
    case GP_EINVAL: return "invalid_argument";
    case GP_ENOMEM: return "internal";
    case GP_EDATA: return "invalid_data";
    case GP_ENOTPD: return "not_positive_definite";
    case GP_ETOOBIG: return "payload_too_large";
    case GP_EUNSUPPORTED: return "unsupported";
    case GP_ECANCELLED: return "cancelled";
    case GP_ENOTFOUND: return "not_found";
    case GP_ECONFLICT: return "conflict";
    case GP_EOVERLOADED: return "overloaded";
    case GP_ENOTREADY: return "not_ready";
    case GP_EUNAUTHORIZED: return "unauthorized";
    case GP_EMEDIATYPE: return "unsupported_media_type";
    case GP_EMETHOD: return "method_not_allowed";
    case GP_EMALFORMED: return "malformed_json";
    default: return "internal";
    }
}
