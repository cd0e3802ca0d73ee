/* SPDX-License-Identifier: MIT */
/*
 * Tensor files: NumPy .npy, so anyone can feed the kernels their own data and
 * compare the results with their own reference.
 *
 * Read: format versions 1.0, 2.0 and 3.0, C order, little-endian, with descr
 *   '<f4' (f32), '<f8' (f64), '<f2' (f16), '|i1' (i8), '|u1' (u8), '<i4' (i32),
 *   '<i8' (i64), and up to LY_MAX_DIMS dimensions. Anything else is refused with
 *   LY_E_FORMAT and a message naming the file and what was wrong.
 * Write: version 1.0 (a header of LY_MAX_DIMS dimensions always fits), the
 *   same descrs; an f8e4m3 tensor is written as '|u1' (NumPy has no E4M3
 *   dtype), so it reads back as u8.
 *
 * Every function here is reentrant (any thread, any number at once, on
 * tensors of their own); a tensor filled here is the caller's until
 * ly_tensor_free / ly_npy_free.
 */
#ifndef LIBREYOLO_IO_H
#define LIBREYOLO_IO_H

#include "libreyolo/libreyolo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fill `t` with a zeroed, 64-byte aligned buffer of the given dtype and shape
 * (data is never NULL, even for an empty tensor). Release with ly_tensor_free.
 * On failure `t` is left empty (data NULL). */
LY_API ly_status ly_tensor_alloc(ly_tensor *t, ly_dtype dtype, int ndim, const int64_t *shape);

/* Free the buffer of a tensor filled by ly_tensor_alloc or ly_npy_load and
 * empty `t` (data NULL, ndim 0). NULL or an already empty tensor is fine. */
LY_API ly_status ly_tensor_free(ly_tensor *t);

/* Read the .npy file at `path` into `out`, which owns a new buffer (free it with
 * ly_npy_free). LY_E_NOT_FOUND if the file does not exist, LY_E_IO if it cannot
 * be read, LY_E_FORMAT if it is malformed or of an unsupported kind. */
LY_API ly_status ly_npy_load(const char *path, ly_tensor *out);

/* The same from `size` bytes in memory; `name_for_messages` (may be NULL) is
 * how error messages refer to them. The payload is copied. */
LY_API ly_status ly_npy_load_buffer(const void *bytes, size_t size, const char *name_for_messages,
                                    ly_tensor *out);

/* Free a tensor read by ly_npy_load or ly_npy_load_buffer. */
LY_API ly_status ly_npy_free(ly_tensor *t);

/* Write `t` to `path` atomically: a temporary file in the same directory is
 * written, flushed to disk and renamed over `path`, so readers see either the
 * old file or the complete new one; on failure the temporary file is removed
 * and `path` is untouched. */
LY_API ly_status ly_npy_save(const char *path, const ly_tensor *t);

#ifdef __cplusplus
}
#endif

#endif
