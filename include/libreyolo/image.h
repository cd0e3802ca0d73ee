/* SPDX-License-Identifier: MIT */
/*
 * Image files: JPEG, PNG and BMP read into interleaved 8-bit RGB, JPEG or PNG
 * written from it (stb, libstb-dev, and libjpeg-turbo for JPEG where the build
 * has them; without stb every call that touches a file fails with
 * LY_E_UNSUPPORTED), and detections drawn onto an image.
 *
 *   ly_image im;
 *   ly_image_load("photo.jpg", &im);
 *   ly_image_view view = {im.pixels, im.width, im.height, (size_t)im.width * 3, LY_PIXELS_RGB};
 *   ly_model_predict_image(model, &view, NULL, &results);
 *   ly_image_annotate(&im, results);
 *   ly_image_save("out.jpg", &im, 95);
 *   ly_image_free(&im);
 *
 * The pixels belong to the ly_image: ly_image_free releases them. Any number
 * of threads may load, save and annotate images of their own at once.
 */
#ifndef LIBREYOLO_IMAGE_H
#define LIBREYOLO_IMAGE_H

#include "libreyolo/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Interleaved RGB, rows of exactly width * 3 bytes. */
typedef struct ly_image {
    uint8_t *pixels;
    int width, height;
} ly_image;

/* An uninitialised width x height image (both > 0). */
LY_API ly_status ly_image_alloc(ly_image *image, int width, int height);
/* Free the pixels and empty `image`; NULL or an empty image is fine. */
LY_API ly_status ly_image_free(ly_image *image);
/* Read `path` (JPEG, PNG or BMP, recognised by content; grey, palette and
 * alpha are converted to RGB, alpha dropped, 16-bit samples reduced to 8).
 * LY_E_NOT_FOUND for a missing file, LY_E_IO when it cannot be read,
 * LY_E_FORMAT for another format, a corrupt file or one without pixels;
 * every message names the file. */
LY_API ly_status ly_image_load(const char *path, ly_image *out);
/* The same from `size` bytes in memory (copied from as needed; the caller
 * keeps them); `name` is what messages call them. */
LY_API ly_status ly_image_load_buffer(const void *bytes, size_t size, const char *name,
                                      ly_image *out);
/* An http:// or https:// URL, downloaded (at most 64 MiB, redirects followed)
 * and decoded as ly_image_load_buffer does. LY_E_UNSUPPORTED in builds
 * without libcurl; LY_E_IO naming the URL when the download fails. */
LY_API ly_status ly_image_load_url(const char *url, ly_image *out);
/* Write `image` to `path` as JPEG (.jpg, .jpeg; quality 1..100) or PNG (.png),
 * chosen by the extension (case-insensitive), atomically: a temporary file in
 * the same directory is written and renamed over `path`. */
LY_API ly_status ly_image_save(const char *path, const ly_image *image, int jpeg_quality);
/* The folder saved predictions go into, created (with its parents) and
 * written to out: <project>/<name>, or where that exists (and !exist_ok) the
 * first free <project>/<name>N for N = 2, 3, ... (LibreYOLO's
 * increment_path: predict, predict2, ...); with name NULL, project itself.
 * LY_E_IO naming the folder when it cannot be created; LY_E_INVALID_ARGUMENT
 * when the path does not fit `size`. */
LY_API ly_status ly_save_folder(const char *project, const char *name, bool exist_ok, char *out,
                                size_t size);
/* The images a predict source names, as LibreYOLO reads a source: a file, an
 * http(s) URL, a folder's images and its subfolders' (in path order), a glob
 * (quoted, so the shell did not expand it), or a .txt file listing sources one
 * per line ('#' comments and blank lines skipped). Images are JPEG, PNG and
 * BMP by extension; WebP, TIFF and GIF files met in folders and globs are
 * counted in `skipped` (this build does not read them), named alone they are
 * refused (LY_E_FORMAT), and a video source (ly_video_is_source, a GIF
 * included, as LibreYOLO) named alone is LY_E_UNSUPPORTED: it is read with
 * ly_video_open (libreyolo/video.h).
 * LY_E_NOT_FOUND names what is missing (a list's line number too), or the
 * folder or list that holds no images. The paths belong to the list:
 * ly_source_list_free. The command and the Python package read sources here. */
typedef struct ly_source_list {
    char **paths;
    size_t count;
    size_t skipped; /* images of formats this build does not read */
} ly_source_list;
LY_API ly_status ly_source_list_expand(const char *source, ly_source_list *out);
LY_API ly_status ly_source_list_free(ly_source_list *list);

/* Whether this build reads and writes image files (*available). */
LY_API ly_status ly_image_codecs(bool *available);

/* Draw each detection of `results` onto `image`: a 2-pixel box in a colour of
 * its class and a "name 0.87" label (class id when unnamed) above it, or
 * inside when there is no room above. Everything is clipped to the image. */
LY_API ly_status ly_image_annotate(ly_image *image, const ly_results *results);
/* The same drawing from detections the caller holds (a subset of a result's,
 * or boxes from elsewhere): n boxes with their labels, the name of each from
 * detections[i].name (its class id where NULL or empty). */
LY_API ly_status ly_image_annotate_detections(ly_image *image, const ly_detection *detections,
                                              size_t n);
/* Tracked detections as LibreYOLO draws them: a colour per track id and a
 * "#<id> 0.87" label (ids[i] is detections[i]'s). */
LY_API ly_status ly_image_annotate_tracks(ly_image *image, const ly_detection *detections,
                                          const int64_t *ids, size_t n);
/* LibreYOLO's save of a tiled prediction (its _predict_tiled with
 * save=True), into `dir` (created with its parents): tiles/tile_000.<ext>,
 * ... (each tile's crop of `image`), final_image.<ext> (`image` with the
 * detections drawn), grid_visualization.<ext> (the tiles outlined in red)
 * and metadata.json (model, size, image_source, original_size, num_tiles,
 * tile_size, overlap_ratio, num_detections, conf, iou; "model" is the
 * family's name here). `image` is the one predicted (not modified);
 * `source` what metadata names (NULL: "PIL/numpy input", LibreYOLO's words);
 * ext "jpg" or "png". LY_E_INVALID_ARGUMENT for results that did not tile. */
LY_API ly_status ly_results_save_tiled(const ly_results *results, const ly_image *image,
                                       const ly_model *model, const char *source, const char *dir,
                                       const char *ext);
/* A classifier's drawing: the n classes given, one "name 0.87" line each from
 * the top-left corner. */
LY_API ly_status ly_image_annotate_classes(ly_image *image, const ly_class_prob *top, size_t n);

#ifdef __cplusplus
}
#endif

#endif
