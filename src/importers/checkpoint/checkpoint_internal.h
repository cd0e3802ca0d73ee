/* SPDX-License-Identifier: MIT */
/*
 * What the checkpoint format readers (PyTorch zip in checkpoint.c, safetensors
 * in safetensors.c) use to fill a ly_checkpoint (internal).
 */
#ifndef LY_IO_CHECKPOINT_INTERNAL_H
#define LY_IO_CHECKPOINT_INTERNAL_H

#include "importers/checkpoint/pickle.h"
#include "libreyolo/checkpoint.h"

/* Set the error "<context>: <message>" (context names the function and file). */
ly_status ly_ck_fail(const ly_checkpoint *ck, ly_status status, const char *fmt, ...)
    LY_PRINTF(3, 4);

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

/* Parse a .safetensors file into `ck` (tensors and __metadata__). */
ly_status ly_safetensors_load(ly_checkpoint *ck, const uint8_t *data, size_t size);

#endif
