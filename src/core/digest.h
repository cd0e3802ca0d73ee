/* SPDX-License-Identifier: MIT */
/* Content hashes for pinned downloads (internal; OpenSSL's libcrypto). */
#ifndef LY_CORE_DIGEST_H
#define LY_CORE_DIGEST_H

#include "libreyolo/libreyolo.h"

#include <stddef.h>
#include <stdint.h>

typedef enum ly_digest_kind { LY_SHA256 = 0, LY_SHA512 = 1 } ly_digest_kind;

enum { LY_DIGEST_MAX = 64 };

/* Digest of a whole file. `*len` receives 32 or 64. Errors name the file. */
ly_status ly_digest_file(const char *path, ly_digest_kind kind, uint8_t out[LY_DIGEST_MAX],
                         size_t *len);
ly_status ly_digest_buffer(const void *data, size_t size, ly_digest_kind kind,
                           uint8_t out[LY_DIGEST_MAX], size_t *len);

/* Lower-case hex (2·len + 1 bytes) and standard base64 (npm's "sha512-..."
 * integrity strings) of a digest. */
void ly_digest_hex(const uint8_t *digest, size_t len, char *out);
void ly_digest_base64(const uint8_t *digest, size_t len, char *out, size_t out_size);

#endif
