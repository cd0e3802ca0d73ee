/* SPDX-License-Identifier: MIT */
/*
 * Element types as checkpoint files store them (internal), shared by the
 * container (which converts them to f32 or i64) and the format readers
 * (which name them): PyTorch storages and safetensors dtypes. Also the UTF-8
 * check both formats apply to the text they decode.
 */
#ifndef LY_IMPORTERS_CHECKPOINT_ELEM_H
#define LY_IMPORTERS_CHECKPOINT_ELEM_H

#include "libreyolo/libreyolo.h"

typedef enum ly_elem {
    LY_ELEM_F32,
    LY_ELEM_F64,
    LY_ELEM_F16,
    LY_ELEM_BF16,
    LY_ELEM_I64,
    LY_ELEM_I32,
    LY_ELEM_I16,
    LY_ELEM_I8,
    LY_ELEM_U8,
    LY_ELEM_BOOL,
    LY_ELEM_F8E4M3, /* torch.float8_e4m3fn (LibreYOLO's fp8 weight_packed) */
    LY_ELEM_UNTYPED /* torch.UntypedStorage: bytes, typed by the tensor that views it */
} ly_elem;

size_t ly_elem_size(ly_elem elem);
const char *ly_elem_name(ly_elem elem);
bool ly_elem_is_float(ly_elem elem);

/* `n` elements of type `elem` spaced `stride` elements apart from `src`,
 * into f32 (`to_float`, the float types) or i64 (the integer types) at `dst`. */
void ly_elem_convert(void *dst, const uint8_t *src, int64_t n, int64_t stride, ly_elem elem,
                     bool to_float);

/* UTF-8 as Python decodes it with 'surrogatepass' (lone surrogates pass). */
bool ly_utf8_valid(const uint8_t *s, size_t n);

#endif
