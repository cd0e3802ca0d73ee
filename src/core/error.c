/* SPDX-License-Identifier: MIT */
#include "core/core.h"

#include <stdio.h>

/* Messages are kept per thread so concurrent callers never see each other's. */
static _Thread_local char last_error[1024];

ly_status ly_set_errorv(ly_status status, const char *fmt, va_list ap)
{
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    return status;
}

ly_status ly_set_error(ly_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ly_set_errorv(status, fmt, ap);
    va_end(ap);
    return status;
}

void ly_clear_error(void)
{
    last_error[0] = '\0';
}

ly_status ly_error_prefix(ly_status status, const char *context)
{
    char message[768];
    snprintf(message, sizeof message, "%s", ly_last_error());
    return ly_set_error(status, "%s: %s", context, message);
}

const char *ly_last_error(void)
{
    return last_error;
}

const char *ly_status_name(ly_status status)
{
    switch (status) {
    case LY_OK:
        return "LY_OK";
    case LY_E_INVALID_ARGUMENT:
        return "LY_E_INVALID_ARGUMENT";
    case LY_E_SHAPE:
        return "LY_E_SHAPE";
    case LY_E_DTYPE:
        return "LY_E_DTYPE";
    case LY_E_UNSUPPORTED:
        return "LY_E_UNSUPPORTED";
    case LY_E_NOT_FOUND:
        return "LY_E_NOT_FOUND";
    case LY_E_IO:
        return "LY_E_IO";
    case LY_E_FORMAT:
        return "LY_E_FORMAT";
    case LY_E_NO_MEMORY:
        return "LY_E_NO_MEMORY";
    case LY_E_UNAVAILABLE:
        return "LY_E_UNAVAILABLE";
    case LY_E_DECLINED:
        return "LY_E_DECLINED";
    case LY_E_PROVIDER:
        return "LY_E_PROVIDER";
    case LY_E_INTERNAL:
        return "LY_E_INTERNAL";
    }
    return "LY_E_UNKNOWN";
}

const char *ly_version(void)
{
    return LY_VERSION_STRING;
}
