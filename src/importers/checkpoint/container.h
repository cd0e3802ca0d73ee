/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint container (internal): what ly_checkpoint holds (tensors
 * converted to f32 or i64, metadata, class names) and how a format reader
 * (torch.h, safetensors.h) fills it; include/libreyolo/checkpoint.h reads
 * it. The container knows no format; checkpoint.c picks the reader.
 */
#ifndef LY_IMPORTERS_CHECKPOINT_CONTAINER_H
#define LY_IMPORTERS_CHECKPOINT_CONTAINER_H

#include "importers/checkpoint/elem.h"
#include "libreyolo/checkpoint.h"

/* An empty container for the file `name` opened by `func` (messages say
 * "<func>: <name>: ..."), which may convert up to what `file_size` bytes can
 * expand to. NULL when out of memory (the error is set). */
ly_checkpoint *ly_ck_create(const char *func, const char *name, size_t file_size);
/* Index the tensors by name, refusing two of one name; after a reader's fill. */
ly_status ly_ck_finish(ly_checkpoint *ck);

/* "<func>: <file>", what the container's messages start with. */
const char *ly_ck_context(const ly_checkpoint *ck);
/* Set the error "<context>: <message>" (context names the function and file). */
ly_status ly_ck_fail(const ly_checkpoint *ck, ly_status status, const char *fmt, ...)
    LY_PRINTF(3, 4);

/* The most tensors a checkpoint may hold. LibreYOLO's largest checkpoints
 * (quantized, or transformers with their buffers) hold a few thousand; the
 * cap bounds what a hostile header of millions of tiny entries costs before
 * any family can refuse it (readers check it as they count entries). */
#define LY_CK_MAX_TENSORS ((size_t)1 << 16)

/* Add the tensor `key` (a leading "module." is dropped): the view of `base`
 * (`base_bytes` bytes, described by `base_what` in messages) with the given
 * element type, element offset, shape and element strides (NULL: C-contiguous),
 * copied into a new C-contiguous f32 (float types) or i64 (integer types)
 * buffer. Every element the view touches is checked to lie inside `base`. */
ly_status ly_ck_add_tensor(ly_checkpoint *ck, const char *key, ly_elem elem, const uint8_t *base,
                           uint64_t base_bytes, const char *base_what, int64_t offset, int ndim,
                           const int64_t *shape, const int64_t *stride);

/* Metadata. Strings are copied; a string that spells a decimal integer also
 * answers ly_checkpoint_meta_int. Values of other kinds are recorded by what
 * they are ("a list", "None": a static string) so lookups can say so. */
ly_status ly_ck_add_meta_string(ly_checkpoint *ck, const char *key, const char *value);
ly_status ly_ck_add_meta_int(ly_checkpoint *ck, const char *key, int64_t value);
ly_status ly_ck_add_meta_other(ly_checkpoint *ck, const char *key, const char *type_phrase);

/* Class names: reserve `count` slots (all NULL), then set them. */
ly_status ly_ck_names_reserve(ly_checkpoint *ck, size_t count);
ly_status ly_ck_names_set(ly_checkpoint *ck, size_t index, const char *name);
#define LY_CK_MAX_CLASSES ((size_t)1 << 20)

/* A checkpoint of the tensors of `ck` that keep() accepts (copies; no
 * metadata), for models that rebuild their network later from what they keep
 * and not from the whole file. */
ly_status ly_checkpoint_subset(const ly_checkpoint *ck, bool (*keep)(const char *key, void *user),
                               void *user, ly_checkpoint **out);

#endif
