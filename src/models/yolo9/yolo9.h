/* SPDX-License-Identifier: MIT */
/*
 * The LibreYOLO9 network (internal): built from a checkpoint's state dict with
 * Conv+BN folded and RepConvN branches merged at load, run on a memory plan made
 * once per input shape.
 */
#ifndef LY_MODELS_YOLO9_YOLO9_H
#define LY_MODELS_YOLO9_YOLO9_H

#include "graph/graph.h"
#include "libreyolo/checkpoint.h"

typedef struct ly_yolo9 ly_yolo9;

#define LY_YOLO9_OUTPUTS 4 /* predictions, raw_p3, raw_p4, raw_p5 */

/* Build from `ck` (which may be closed afterwards). The size comes from the
 * checkpoint's metadata or, when absent, from the state dict (yolo9.md 1.2);
 * keys may carry "detect." for "head.". Every missing/unexpected key and wrong
 * shape is an error naming the key. */
ly_status ly_yolo9_build(const ly_checkpoint *ck, ly_yolo9 **out);
void ly_yolo9_free(ly_yolo9 *net);
/* Free `net` but keep its graph, which the caller owns from then on. */
ly_graph *ly_yolo9_release_graph(ly_yolo9 *net);

/* Size letter ("t", ...) and number of classes the weights have. */
const char *ly_yolo9_size(const ly_yolo9 *net);
int64_t ly_yolo9_num_classes(const ly_yolo9 *net);

/* Forward on input [1, 3, H, W] (H, W multiples of 32) in `ctx`, a context of
 * the net's graph (ly_yolo9_graph) that no other thread uses meanwhile; `net`
 * itself is not changed, so threads may share it. On success outputs[0..3] are
 * views of "predictions" [1, 4+nc, A] (xyxy in input pixels, then class
 * scores), "raw_p3", "raw_p4", "raw_p5" [1, 64+nc, h, w], owned by `ctx` and
 * valid until its next run or release. `names` receives the output names. */
ly_status ly_yolo9_forward(const ly_yolo9 *net, ly_graph_ctx *ctx, const ly_tensor *input,
                           int threads, ly_tensor outputs[LY_YOLO9_OUTPUTS],
                           const char *names[LY_YOLO9_OUTPUTS]);

#endif
