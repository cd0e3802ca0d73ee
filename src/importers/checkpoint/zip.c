/* SPDX-License-Identifier: MIT */
/*
 * Zip reader for torch.save archives (APPNOTE.TXT 6.3, the subset PyTorch's
 * miniz writer produces).
 *
 * The central directory is the only source of sizes and CRCs: PyTorch sets the
 * data-descriptor flag and leaves them zero in the local headers. Local headers
 * are still checked (signature, same name) because their extra field, which
 * PyTorch uses to align data to 64 bytes, decides where the data starts.
 */
#include "importers/checkpoint/zip.h"

#include "core/checked.h"
#include "core/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define ZIP_LOCAL_SIG 0x04034b50u
#define ZIP_CENTRAL_SIG 0x02014b50u
#define ZIP_EOCD_SIG 0x06054b50u
#define ZIP64_EOCD_SIG 0x06064b50u
#define ZIP64_LOCATOR_SIG 0x07064b50u

#define ZIP_LOCAL_LEN 30u
#define ZIP_CENTRAL_LEN 46u
#define ZIP_EOCD_LEN 22u
#define ZIP64_EOCD_LEN 56u
#define ZIP64_LOCATOR_LEN 20u
#define ZIP_MAX_COMMENT 65535u

#define ZIP_METHOD_STORED 0u
#define ZIP_FLAG_ENCRYPTED 0x0001u

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static ly_status zip_fail(const ly_zip *z, ly_status status, const char *fmt, ...) LY_PRINTF(3, 4);

static ly_status zip_fail(const ly_zip *z, ly_status status, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ly_set_error(status, "%s: %s", z->context, what);
}

/* ---- CRC-32 ---------------------------------------------------------------- */

/* zlib's crc32_z takes size_t lengths (zlib >= 1.2.9), so one call covers any entry. */
uint32_t ly_crc32(uint32_t crc, const void *bytes, size_t n)
{
    return (uint32_t)crc32_z(crc, bytes, n);
}

/* ---- End records ----------------------------------------------------------- */

bool ly_zip_looks_like(const uint8_t *data, size_t size)
{
    return size >= 4 && data[0] == 'P' && data[1] == 'K' &&
           ((data[2] == 3 && data[3] == 4) || (data[2] == 5 && data[3] == 6));
}

typedef struct zip_directory {
    uint64_t entries;
    uint64_t cd_at;
    uint64_t cd_size;
    uint64_t cd_limit; /* the central directory must end at or before this */
} zip_directory;

static ly_status zip_find_eocd(const ly_zip *z, size_t *eocd_at)
{
    if (z->size < ZIP_EOCD_LEN)
        return zip_fail(z, LY_E_FORMAT,
                        "truncated zip: %zu bytes cannot hold an end-of-central-directory record",
                        z->size);
    /* The record is followed only by its comment: search back at most that far,
     * and take the last signature whose comment length fits exactly. */
    size_t lowest =
        z->size - ZIP_EOCD_LEN > ZIP_MAX_COMMENT ? z->size - ZIP_EOCD_LEN - ZIP_MAX_COMMENT : 0;
    for (size_t at = z->size - ZIP_EOCD_LEN + 1; at-- > lowest;) {
        const uint8_t *p = z->data + at;
        if (rd32(p) == ZIP_EOCD_SIG && at + ZIP_EOCD_LEN + rd16(p + 20) == z->size) {
            *eocd_at = at;
            return LY_OK;
        }
    }
    return zip_fail(z, LY_E_FORMAT,
                    "truncated zip: no end-of-central-directory record in the last %zu bytes (the "
                    "file is cut short or is not a zip archive)",
                    z->size - lowest);
}

static ly_status zip_read_directory(const ly_zip *z, zip_directory *dir)
{
    size_t eocd_at = 0;
    ly_status st = zip_find_eocd(z, &eocd_at);
    if (st != LY_OK) return st;
    const uint8_t *e = z->data + eocd_at;
    uint16_t disk = rd16(e + 4), cd_disk = rd16(e + 6);
    uint16_t on_disk = rd16(e + 8), total = rd16(e + 10);
    dir->entries = total;
    dir->cd_size = rd32(e + 12);
    dir->cd_at = rd32(e + 16);
    dir->cd_limit = eocd_at;

    bool has_locator = eocd_at >= ZIP64_LOCATOR_LEN &&
                       rd32(z->data + eocd_at - ZIP64_LOCATOR_LEN) == ZIP64_LOCATOR_SIG;
    if (has_locator) {
        size_t loc_at = eocd_at - ZIP64_LOCATOR_LEN;
        const uint8_t *loc = z->data + loc_at;
        uint64_t z64_at = rd64(loc + 8);
        if (rd32(loc + 4) != 0 || rd32(loc + 16) > 1)
            return zip_fail(z, LY_E_UNSUPPORTED,
                            "multi-disk zip archives are not supported (ZIP64 locator at byte %zu)",
                            loc_at);
        if (z64_at > loc_at || loc_at - z64_at < ZIP64_EOCD_LEN)
            return zip_fail(z, LY_E_FORMAT,
                            "ZIP64 end-of-central-directory offset %llu (from the locator at byte "
                            "%zu) does not leave room for the record before the locator",
                            (unsigned long long)z64_at, loc_at);
        const uint8_t *r = z->data + z64_at;
        if (rd32(r) != ZIP64_EOCD_SIG)
            return zip_fail(z, LY_E_FORMAT,
                            "no ZIP64 end-of-central-directory record at byte %llu (bad signature)",
                            (unsigned long long)z64_at);
        uint64_t record_size = rd64(r + 4);
        if (record_size < ZIP64_EOCD_LEN - 12 || record_size > loc_at - z64_at - 12)
            return zip_fail(z, LY_E_FORMAT,
                            "ZIP64 end-of-central-directory record at byte %llu claims %llu bytes, "
                            "which does not fit before the locator",
                            (unsigned long long)z64_at, (unsigned long long)record_size);
        if (rd32(r + 16) != 0 || rd32(r + 20) != 0 || rd64(r + 24) != rd64(r + 32))
            return zip_fail(z, LY_E_UNSUPPORTED, "multi-disk zip archives are not supported");
        dir->entries = rd64(r + 32);
        dir->cd_size = rd64(r + 40);
        dir->cd_at = rd64(r + 48);
        dir->cd_limit = z64_at;
    } else {
        if (disk != 0 || cd_disk != 0 || on_disk != total)
            return zip_fail(z, LY_E_UNSUPPORTED, "multi-disk zip archives are not supported");
        if (total == 0xffffu || dir->cd_size == 0xffffffffu || dir->cd_at == 0xffffffffu)
            return zip_fail(
                z, LY_E_FORMAT,
                "the end-of-central-directory record defers to ZIP64 records, but there "
                "is no ZIP64 locator before it (truncated zip?)");
    }
    if (dir->cd_at > dir->cd_limit || dir->cd_size > dir->cd_limit - dir->cd_at)
        return zip_fail(z, LY_E_FORMAT,
                        "central directory (%llu bytes at byte %llu) runs past its end records at "
                        "byte %llu (truncated or corrupt zip)",
                        (unsigned long long)dir->cd_size, (unsigned long long)dir->cd_at,
                        (unsigned long long)dir->cd_limit);
    if (dir->entries > dir->cd_size / ZIP_CENTRAL_LEN)
        return zip_fail(
            z, LY_E_FORMAT,
            "central directory claims %llu entries but its %llu bytes hold at most %llu",
            (unsigned long long)dir->entries, (unsigned long long)dir->cd_size,
            (unsigned long long)(dir->cd_size / ZIP_CENTRAL_LEN));
    return LY_OK;
}

/* ---- Central directory ----------------------------------------------------- */

/* Fill the 64-bit values a ZIP64 extra field (id 1) carries for the fields the
 * header set to all ones, in the APPNOTE order. */
static ly_status zip_apply_zip64_extra(const ly_zip *z, const uint8_t *extra, size_t extra_len,
                                       size_t entry_at, uint64_t *usize, uint64_t *csize,
                                       uint64_t *local_at, bool need_usize, bool need_csize,
                                       bool need_local)
{
    size_t pos = 0;
    while (extra_len - pos >= 4) {
        uint16_t id = rd16(extra + pos), len = rd16(extra + pos + 2);
        pos += 4;
        if (len > extra_len - pos)
            return zip_fail(z, LY_E_FORMAT,
                            "central directory entry at byte %zu: extra field %u runs past the "
                            "entry's extra data",
                            entry_at, (unsigned)id);
        if (id == 1) {
            const uint8_t *f = extra + pos;
            size_t left = len;
            uint64_t *targets[3] = {usize, csize, local_at};
            bool needed[3] = {need_usize, need_csize, need_local};
            for (int i = 0; i < 3; i++) {
                if (!needed[i]) continue;
                if (left < 8)
                    return zip_fail(z, LY_E_FORMAT,
                                    "central directory entry at byte %zu: ZIP64 extra field is too "
                                    "short for the sizes it must carry",
                                    entry_at);
                *targets[i] = rd64(f);
                f += 8;
                left -= 8;
            }
            return LY_OK;
        }
        pos += len;
    }
    return zip_fail(z, LY_E_FORMAT,
                    "central directory entry at byte %zu: sizes are deferred to a ZIP64 extra "
                    "field that is missing",
                    entry_at);
}

static int zip_cmp_entry(const void *a, const void *b)
{
    return strcmp((*(const ly_zip_entry *const *)a)->name, (*(const ly_zip_entry *const *)b)->name);
}

ly_status ly_zip_open(ly_zip *z, const uint8_t *data, size_t size, const char *context)
{
    if (!z) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_zip_open: zip is NULL");
    *z = (ly_zip){.data = data, .size = size, .context = context ? context : "zip"};
    if (!data && size) return zip_fail(z, LY_E_INVALID_ARGUMENT, "bytes are NULL");

    zip_directory dir;
    ly_status st = zip_read_directory(z, &dir);
    if (st != LY_OK) return st;

    size_t count = (size_t)dir.entries;
    /* Names total at most the directory size: one block holds them all. */
    z->entries = calloc(count ? count : 1, sizeof *z->entries);
    z->by_name = calloc(count ? count : 1, sizeof *z->by_name);
    z->names = malloc((size_t)dir.cd_size + 1);
    if (!z->entries || !z->by_name || !z->names) {
        ly_zip_close(z);
        return zip_fail(z, LY_E_NO_MEMORY, "cannot allocate the table of %zu zip entries", count);
    }

    size_t names_used = 0;
    uint64_t pos = dir.cd_at;
    const uint64_t cd_end = dir.cd_at + dir.cd_size; /* <= cd_limit: checked at the read */
    for (size_t i = 0; i < count; i++) {
        size_t at = (size_t)pos;
        if (cd_end - pos < ZIP_CENTRAL_LEN || rd32(data + at) != ZIP_CENTRAL_SIG) {
            st = zip_fail(z, LY_E_FORMAT, "central directory entry %zu of %zu at byte %zu is %s", i,
                          count, at,
                          cd_end - pos < ZIP_CENTRAL_LEN ? "cut short" : "missing (bad signature)");
            goto fail;
        }
        const uint8_t *h = data + at;
        uint16_t flags = rd16(h + 8), method = rd16(h + 10);
        uint64_t crc = rd32(h + 16), csize = rd32(h + 20), usize = rd32(h + 24);
        size_t name_len = rd16(h + 28), extra_len = rd16(h + 30), comment_len = rd16(h + 32);
        uint16_t disk = rd16(h + 34);
        uint64_t local_at = rd32(h + 42);
        if (cd_end - pos - ZIP_CENTRAL_LEN < (uint64_t)name_len + extra_len + comment_len) {
            st = zip_fail(z, LY_E_FORMAT,
                          "central directory entry at byte %zu: name, extra and comment run past "
                          "the end of the central directory",
                          at);
            goto fail;
        }
        const uint8_t *name = h + ZIP_CENTRAL_LEN;
        if (memchr(name, 0, name_len)) {
            st = zip_fail(z, LY_E_FORMAT,
                          "central directory entry at byte %zu: the name contains a NUL byte", at);
            goto fail;
        }
        bool need_usize = usize == 0xffffffffu, need_csize = csize == 0xffffffffu,
             need_local = local_at == 0xffffffffu;
        if (need_usize || need_csize || need_local) {
            st = zip_apply_zip64_extra(z, name + name_len, extra_len, at, &usize, &csize, &local_at,
                                       need_usize, need_csize, need_local);
            if (st != LY_OK) goto fail;
        }
        memcpy(z->names + names_used, name, name_len);
        z->names[names_used + name_len] = '\0';
        ly_zip_entry *e = &z->entries[i];
        e->name = z->names + names_used;
        names_used += name_len + 1;
        e->crc32 = (uint32_t)crc;
        e->method = method;
        e->size = csize;
        if (disk != 0 && disk != 0xffffu) {
            st = zip_fail(z, LY_E_UNSUPPORTED, "entry '%s' lives on another disk", e->name);
            goto fail;
        }
        if (flags & ZIP_FLAG_ENCRYPTED) {
            st = zip_fail(z, LY_E_UNSUPPORTED, "entry '%s' is encrypted", e->name);
            goto fail;
        }
        if (method == ZIP_METHOD_STORED && csize != usize) {
            st = zip_fail(z, LY_E_FORMAT,
                          "entry '%s' is stored but its sizes differ (%llu compressed, %llu "
                          "uncompressed)",
                          e->name, (unsigned long long)csize, (unsigned long long)usize);
            goto fail;
        }
        /* The local header and the data both precede the central directory. */
        if (local_at > dir.cd_at || dir.cd_at - local_at < ZIP_LOCAL_LEN) {
            st = zip_fail(z, LY_E_FORMAT,
                          "entry '%s': local header offset %llu is past the central directory at "
                          "byte %llu",
                          e->name, (unsigned long long)local_at, (unsigned long long)dir.cd_at);
            goto fail;
        }
        const uint8_t *l = data + local_at;
        if (rd32(l) != ZIP_LOCAL_SIG) {
            st =
                zip_fail(z, LY_E_FORMAT, "entry '%s': no local header at byte %llu (bad signature)",
                         e->name, (unsigned long long)local_at);
            goto fail;
        }
        int64_t data_at = 0; /* local_at < 2^64 from a ZIP64 field: checked */
        bool placed = local_at <= (uint64_t)INT64_MAX &&
                      ly_checked_add((int64_t)local_at, ZIP_LOCAL_LEN + rd16(l + 26), &data_at) &&
                      ly_checked_add(data_at, rd16(l + 28), &data_at);
        uint64_t local_name_len = rd16(l + 26);
        if (!placed || (uint64_t)data_at > dir.cd_at || csize > dir.cd_at - (uint64_t)data_at) {
            st = zip_fail(z, LY_E_FORMAT,
                          "entry '%s': %llu bytes of data at byte %llu run past the central "
                          "directory at byte %llu (truncated or corrupt zip)",
                          e->name, (unsigned long long)csize, (unsigned long long)data_at,
                          (unsigned long long)dir.cd_at);
            goto fail;
        }
        if (local_name_len != name_len || memcmp(l + ZIP_LOCAL_LEN, name, name_len) != 0) {
            st = zip_fail(z, LY_E_FORMAT,
                          "entry '%s': the local header at byte %llu names a different entry",
                          e->name, (unsigned long long)local_at);
            goto fail;
        }
        e->data_at = (uint64_t)data_at;
        z->by_name[i] = e;
        pos += ZIP_CENTRAL_LEN + name_len + extra_len + comment_len;
    }
    z->count = count;

    qsort(z->by_name, count, sizeof *z->by_name, zip_cmp_entry);
    for (size_t i = 1; i < count; i++) {
        const char *a = z->by_name[i - 1]->name, *b = z->by_name[i]->name;
        if (strcmp(a, b) == 0) {
            st = zip_fail(z, LY_E_FORMAT, "two entries are named '%s'", a);
            goto fail;
        }
    }
    return LY_OK;

fail:
    ly_zip_close(z);
    return st;
}

void ly_zip_close(ly_zip *z)
{
    if (!z) return;
    free(z->entries);
    free(z->by_name);
    free(z->names);
    z->entries = NULL;
    z->by_name = NULL;
    z->names = NULL;
    z->count = 0;
}

const ly_zip_entry *ly_zip_find(const ly_zip *z, const char *name)
{
    if (!z || !name) return NULL;
    size_t lo = 0, hi = z->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const ly_zip_entry *e = z->by_name[mid];
        int c = strcmp(e->name, name);
        if (c == 0) return e;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

ly_status ly_zip_read(const ly_zip *z, const ly_zip_entry *e, const uint8_t **bytes, size_t *size)
{
    if (!z || !e || !bytes || !size)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_zip_read: NULL argument");
    if (e->method != ZIP_METHOD_STORED)
        return zip_fail(z, LY_E_UNSUPPORTED,
                        "entry '%s' is compressed with method %u; only STORED (0) entries, as "
                        "torch.save writes them, are supported (re-save the checkpoint with "
                        "torch.save, or unzip and re-zip it with 'zip -0')",
                        e->name, (unsigned)e->method);
    /* Bounds were checked at open against the same buffer. */
    const uint8_t *p = z->data + e->data_at;
    uint32_t crc = ly_crc32(0, p, (size_t)e->size);
    if (crc != e->crc32)
        return zip_fail(z, LY_E_FORMAT,
                        "bad CRC-32 in entry '%s': computed 0x%08x, the directory says 0x%08x (the "
                        "file is corrupt)",
                        e->name, (unsigned)crc, (unsigned)e->crc32);
    *bytes = p;
    *size = (size_t)e->size;
    return LY_OK;
}
