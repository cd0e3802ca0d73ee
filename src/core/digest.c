/* SPDX-License-Identifier: MIT */
/* SHA-256/512 through OpenSSL's EVP interface. */
#include "core/digest.h"

#include "core/core.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

static const EVP_MD *md_of(ly_digest_kind kind)
{
    return kind == LY_SHA512 ? EVP_sha512() : EVP_sha256();
}

ly_status ly_digest_buffer(const void *data, size_t size, ly_digest_kind kind,
                           uint8_t out[LY_DIGEST_MAX], size_t *len)
{
    unsigned int n = 0;
    if (!EVP_Digest(data, size, out, &n, md_of(kind), NULL))
        return ly_set_error(LY_E_INTERNAL, "digest: OpenSSL failed to hash %zu bytes", size);
    *len = n;
    return LY_OK;
}

ly_status ly_digest_file(const char *path, ly_digest_kind kind, uint8_t out[LY_DIGEST_MAX],
                         size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return ly_set_error(LY_E_IO, "%s: cannot open: %s", path, strerror(errno));
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    ly_status st = LY_OK;
    if (!ctx || !EVP_DigestInit_ex(ctx, md_of(kind), NULL)) {
        st = ly_set_error(LY_E_NO_MEMORY, "%s: cannot start a digest", path);
    } else {
        unsigned char buf[1 << 16];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0)
            if (!EVP_DigestUpdate(ctx, buf, got)) {
                st = ly_set_error(LY_E_INTERNAL, "%s: digest update failed", path);
                break;
            }
        if (st == LY_OK && ferror(f)) st = ly_set_error(LY_E_IO, "%s: read error", path);
        unsigned int n = 0;
        if (st == LY_OK && !EVP_DigestFinal_ex(ctx, out, &n))
            st = ly_set_error(LY_E_INTERNAL, "%s: digest final failed", path);
        *len = n;
    }
    EVP_MD_CTX_free(ctx);
    fclose(f);
    return st;
}

void ly_digest_hex(const uint8_t *digest, size_t len, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[2 * len] = '\0';
}

void ly_digest_base64(const uint8_t *digest, size_t len, char *out, size_t out_size)
{
    if (out_size < 4 * ((len + 2) / 3) + 1) {
        if (out_size) out[0] = '\0';
        return;
    }
    EVP_EncodeBlock((unsigned char *)out, digest, (int)len);
}
