/* SPDX-License-Identifier: MIT */
/* The 80 COCO class names, in the order of COCO-trained YOLO checkpoints. */
#ifndef LY_MODELS_COCO_NAMES_H
#define LY_MODELS_COCO_NAMES_H

#define LY_COCO_CLASSES 80

extern const char *const ly_coco_names[LY_COCO_CLASSES];

#endif
