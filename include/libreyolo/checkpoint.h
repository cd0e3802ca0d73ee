/* SPDX-License-Identifier: MIT */
/*
 * Checkpoints: LibreYOLO .pt files (the zip container PyTorch 1.x and 2.x write,
 * read with a restricted unpickler that accepts only what a state dict needs, as
 * torch.load(weights_only=True) does) and .safetensors files.
 *
 * A checkpoint is an opaque handle owning every tensor (converted to f32, or i64
 * for integer tensors such as num_batches_tracked, and made C-contiguous) and
 * the metadata of LibreYOLO's checkpoint schema 1.0 (model_family, size, task, nc,
 * names, imgsz, and a quantization manifest). State-dict keys are
 * returned as stored, with a DDP "module." prefix stripped.
 */
#ifndef LIBREYOLO_CHECKPOINT_H
#define LIBREYOLO_CHECKPOINT_H

#include "libreyolo/libreyolo.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ly_checkpoint ly_checkpoint;

/* Open `path` (format from its contents: zip -> PyTorch, else safetensors).
 * Errors name the file and the entry, key or byte offset that was wrong. */
LY_API ly_status ly_checkpoint_open(const char *path, ly_checkpoint **out);
/* The same from memory (`name` is used in messages); the bytes are copied. */
LY_API ly_status ly_checkpoint_open_buffer(const void *bytes, size_t size, const char *name,
                                           ly_checkpoint **out);
LY_API ly_status ly_checkpoint_close(ly_checkpoint *ck);

/* State-dict tensors, in file order. The views stay valid until close. */
LY_API ly_status ly_checkpoint_tensor_count(const ly_checkpoint *ck, size_t *count);
LY_API ly_status ly_checkpoint_tensor_at(const ly_checkpoint *ck, size_t index, const char **name,
                                         ly_tensor *view);
/* LY_E_NOT_FOUND (message names the key) when absent. */
LY_API ly_status ly_checkpoint_find(const ly_checkpoint *ck, const char *name, ly_tensor *view);

/* The element type tensor `name` has in the file ("float32", "float16",
 * "int8", "float8_e4m3fn", ...; its view is f32 or i64 whatever it was): a
 * static string. LY_E_NOT_FOUND when absent. */
LY_API ly_status ly_checkpoint_stored_dtype(const ly_checkpoint *ck, const char *name,
                                            const char **dtype);

/* Top-level metadata: strings (schema_version, libreyolo_version, model_family,
 * size, task) and integers (nc, imgsz). A quantization manifest (the dict
 * `quant`) reads as "quant.<key>": strings (recipe, state, remainder, ...),
 * integers (module_count, calibrated as 0/1) and lists of strings joined by
 * newlines (keep_high_precision). LY_E_NOT_FOUND when absent. */
LY_API ly_status ly_checkpoint_meta_string(const ly_checkpoint *ck, const char *key,
                                           const char **value);
LY_API ly_status ly_checkpoint_meta_int(const ly_checkpoint *ck, const char *key, int64_t *value);
/* Class names from `names` (dict[int, str]): names[i] for i in [0, count), NULL
 * where an index is missing. LY_E_NOT_FOUND when the checkpoint has none. */
LY_API ly_status ly_checkpoint_class_names(const ly_checkpoint *ck, size_t *count,
                                           const char *const **names);

#ifdef __cplusplus
}
#endif

#endif
