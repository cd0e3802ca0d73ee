/* SPDX-License-Identifier: MIT */
/*
 * HTTP(S) downloads (internal): the one place the library fetches a URL,
 * for the kernel hub's artifacts and for image URLs. Through libcurl, which
 * is optional: only where CMake found it is LY_HAVE_CURL defined and
 * src/io/curl/ built; callers say what they do without it.
 */
#ifndef LY_IO_HTTP_H
#define LY_IO_HTTP_H

#include "libreyolo/libreyolo.h"

#ifdef LY_HAVE_CURL
/* GET `url` (http or https only, redirects followed within them) into a
 * malloc'ed buffer. Fails on an HTTP error status, on more than `max_bytes`,
 * and on a stalled server (30 s below 1 byte/s); the message names the URL. */
ly_status ly_http_get(const char *url, size_t max_bytes, uint8_t **data, size_t *size);
#endif

#endif
