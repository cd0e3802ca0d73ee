/* SPDX-License-Identifier: MIT */
/* HTTP(S) GET into memory through libcurl (io/http.h; this folder is built
 * only when CMake found libcurl). */
#include "io/http.h"

#include "core/core.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* curl_global_init is not thread-safe in every libcurl: once per process, and
 * never cleaned up (other code in the process may use libcurl too). */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_code;

static void curl_init(void)
{
    curl_init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

typedef struct sink {
    uint8_t *data;
    size_t size, capacity, max;
    bool too_big, no_memory;
} sink;

static size_t on_data(char *bytes, size_t size, size_t count, void *user)
{
    sink *s = user;
    size_t n = size * count;
    if (n > s->max - s->size) {
        s->too_big = true;
        return 0; /* aborts the transfer */
    }
    if (s->size + n > s->capacity) {
        size_t grown = s->capacity ? s->capacity : 1 << 16;
        while (grown < s->size + n)
            grown = grown > s->max / 2 ? s->max : grown * 2;
        uint8_t *p = realloc(s->data, grown);
        if (!p) {
            s->no_memory = true;
            return 0;
        }
        s->data = p;
        s->capacity = grown;
    }
    memcpy(s->data + s->size, bytes, n);
    s->size += n;
    return n;
}

ly_status ly_http_get(const char *url, size_t max_bytes, uint8_t **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    pthread_once(&curl_once, curl_init);
    if (curl_init_code != CURLE_OK)
        return ly_set_error(LY_E_UNAVAILABLE, "%s: libcurl does not initialise: %s", url,
                            curl_easy_strerror(curl_init_code));
    CURL *curl = curl_easy_init();
    if (!curl) return ly_set_error(LY_E_NO_MEMORY, "%s: libcurl: no handle", url);
    sink s = {.max = max_bytes};
    char error[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
    /* No signals: this runs inside an application's threads. */
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 15L);
    /* A stalled server gives up after 30 s below 1 byte/s, not never. */
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "libreyolo/" LY_VERSION_STRING);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    CURLcode rc = curl_easy_perform(curl);
    curl_easy_cleanup(curl);
    ly_status st = LY_OK;
    if (s.too_big)
        st = ly_set_error(LY_E_FORMAT, "%s: larger than %zu bytes", url, max_bytes);
    else if (s.no_memory)
        st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", url);
    else if (rc != CURLE_OK)
        st = ly_set_error(LY_E_IO, "%s: %s", url, error[0] ? error : curl_easy_strerror(rc));
    if (st != LY_OK) {
        free(s.data);
        return st;
    }
    *data = s.data ? s.data : malloc(1); /* an empty file is still a result */
    if (!*data) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", url);
    *size = s.size;
    return LY_OK;
}
