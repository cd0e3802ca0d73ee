/* SPDX-License-Identifier: MIT */
/*
 * The metadata sidecar of an ExecuTorch program (<program>.pte.json,
 * executorch.md A2 and A5), written by the exporter and read by the engine
 * through one table (sidecar.c): one row per key with its JSON type, whether
 * a reader needs it, how it is read and validated (in upstream's order, with
 * upstream's refusal), and how it is written. The text is Python's
 * json.dumps(indent=2, sort_keys=True), so the row order is the reading order.
 */
#ifndef LY_PTE_SIDECAR_H
#define LY_PTE_SIDECAR_H

#include "libreyolo/libreyolo.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the sidecar records (executorch.md A2), and the ExecuTorch we target. */
#define LY_SIDECAR_SCHEMA_VERSION "1.0"
#define LY_SIDECAR_EXECUTORCH_VERSION "1.2.0"

enum {
    LY_SIDECAR_MAX_IMGSZ = 16384,    /* per side, as the exporter accepts */
    LY_SIDECAR_MAX_CLASSES = 100000, /* a class count beyond it is refused */
};

typedef struct ly_sidecar {
    char family[32], size[16];
    char task[64]; /* read: task, else default_task, else "detect" (not canonicalized) */
    int64_t h, w;  /* the fixed input size */
    int64_t nc;
    char **names; /* nc entries (written: NULL or "" gives class_<i>; read: owned) */
    /* written only */
    const char *libreyolo_version;
    int delegate_partitions;
    double crop_pct;           /* 0: not written */
    const char *interpolation; /* NULL: not written */
} ly_sidecar;

/* The program's sidecar as json.dumps text (*text malloc'd, no trailing newline). */
ly_status ly_sidecar_write(const ly_sidecar *s, char **text, size_t *length);

typedef struct ly_sidecar_read_options {
    /* Whether programs of `family` may take a rectangular input (NULL: none may). */
    bool (*rectangular)(const char *family);
    /* The names an 80-class (n_default_names) sidecar without a names object
     * gets, as upstream gives COCO's; others get class_<i>. */
    const char *const *default_names;
    int64_t n_default_names;
} ly_sidecar_read_options;

/* Read and check <program_path>.json key by key, in upstream's order and
 * words (each refusal names the sidecar). Free with ly_sidecar_free, also on
 * failure. */
ly_status ly_sidecar_read(const char *program_path, const ly_sidecar_read_options *options,
                          ly_sidecar *out);
void ly_sidecar_free(ly_sidecar *s);

#endif
