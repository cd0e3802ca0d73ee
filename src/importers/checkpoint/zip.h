/* SPDX-License-Identifier: MIT */
/*
 * Read-only zip container reader for checkpoints (internal).
 *
 * Only what torch.save writes is accepted: one disk, STORED entries, optional
 * ZIP64 end records and ZIP64 extra fields, data descriptors (sizes and CRC are
 * taken from the central directory). Every offset and size is checked against
 * the buffer before it is used, and every entry read has its CRC-32 verified.
 * The reader never copies entry data: entries are views of the caller's buffer,
 * which must outlive the ly_zip.
 */
#ifndef LY_IO_ZIP_H
#define LY_IO_ZIP_H

#include "libreyolo/libreyolo.h"

typedef struct ly_zip_entry {
    const char *name; /* NUL-terminated copy owned by the ly_zip */
    uint64_t data_at; /* offset of the first data byte in the buffer */
    uint64_t size;    /* bytes (STORED: compressed == uncompressed) */
    uint32_t crc32;   /* from the central directory */
    uint16_t method;  /* 0 = STORED; anything else is refused on read */
} ly_zip_entry;

typedef struct ly_zip {
    const uint8_t *data;
    size_t size;
    const char *context;   /* message prefix, e.g. "ly_checkpoint_open: a.pt" */
    ly_zip_entry *entries; /* central-directory order */
    size_t count;
    const ly_zip_entry **by_name; /* sorted by name, for lookups */
    char *names;                  /* storage of every entry name */
} ly_zip;

/* True when `data` starts like a zip file ("PK\3\4" or an empty archive). */
bool ly_zip_looks_like(const uint8_t *data, size_t size);

/* Parse the end records and central directory of `data`. `context` prefixes
 * every message and must outlive `z`. On failure `z` is left empty. */
ly_status ly_zip_open(ly_zip *z, const uint8_t *data, size_t size, const char *context);
void ly_zip_close(ly_zip *z);

/* The entry called `name`, or NULL. */
const ly_zip_entry *ly_zip_find(const ly_zip *z, const char *name);

/* A view of the bytes of `e` after its local header has been checked, its
 * method is STORED and its CRC-32 matches. */
ly_status ly_zip_read(const ly_zip *z, const ly_zip_entry *e, const uint8_t **bytes, size_t *size);

/* CRC-32 (ISO-HDLC, as zip and zlib compute it) of `n` bytes, continuing from
 * `crc` (0 to start). */
uint32_t ly_crc32(uint32_t crc, const void *bytes, size_t n);

#endif
