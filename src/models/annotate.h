/* Drawing detections onto an image (internal). */
#ifndef LY_MODELS_ANNOTATE_H
#define LY_MODELS_ANNOTATE_H

#include "io/image.h"
#include "libreyolo/model.h"

/* Draw each detection of `results` onto `image`: a 2-pixel box in a colour of
 * its class and a "name 0.87" label (class id when unnamed) above it, or
 * inside when there is no room above. Everything is clipped to the image. */
ly_status ly_annotate(ly_image *image, const ly_results *results);

#endif
