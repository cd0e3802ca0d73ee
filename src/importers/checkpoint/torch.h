/* SPDX-License-Identifier: MIT */
/* PyTorch checkpoints (internal): a torch.save zip archive into the container. */
#ifndef LY_IMPORTERS_CHECKPOINT_TORCH_H
#define LY_IMPORTERS_CHECKPOINT_TORCH_H

#include "importers/checkpoint/container.h"

/* Whether `data` starts as a zip archive does (torch.save's format). */
bool ly_torch_looks_like(const uint8_t *data, size_t size);
/* The archive's data.pkl unpickled and its state dict, metadata and class
 * names added to `ck`. */
ly_status ly_torch_load(ly_checkpoint *ck, const uint8_t *data, size_t size);

#endif
