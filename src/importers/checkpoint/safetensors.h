/* SPDX-License-Identifier: MIT */
/* .safetensors files (internal): the header and tensors into the container. */
#ifndef LY_IMPORTERS_CHECKPOINT_SAFETENSORS_H
#define LY_IMPORTERS_CHECKPOINT_SAFETENSORS_H

#include "importers/checkpoint/container.h"

/* Whether `data` starts as a .safetensors file does (a header length, then '{'). */
bool ly_safetensors_looks_like(const uint8_t *data, size_t size);
/* The header's tensors and __metadata__ added to `ck`. */
ly_status ly_safetensors_load(ly_checkpoint *ck, const uint8_t *data, size_t size);

#endif
