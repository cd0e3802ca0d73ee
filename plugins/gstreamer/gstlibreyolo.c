/* SPDX-License-Identifier: MIT */
/*
 * The `libreyolo` GStreamer element: a video filter that runs a libreyolo
 * model on every buffer (RGB or BGR), attaches its detections as metadata and
 * optionally draws them. It uses only the library's public API.
 *
 *   gst-launch-1.0 filesrc location=clip.mp4 ! decodebin ! videoconvert ! \
 *       video/x-raw,format=RGB ! libreyolo model=LibreYOLO9t.pt draw=true ! \
 *       videoconvert ! autovideosink
 *
 * Metadata. GStreamer 1.22 has no GstAnalytics object-detection meta (1.24
 * adds it), so each detection is a GstVideoRegionOfInterestMeta (the
 * standard region meta of gst-plugins-base): roi_type is the class name (its
 * id where the model names none), x/y/w/h the box in the frame's pixels
 * rounded outwards, and one parameter, a GstStructure named "libreyolo"
 * with "class-id" (int), "confidence" (double) and "x1", "y1", "x2", "y2"
 * (double: the exact box). With jsonl-location set, each frame is also
 * appended to that file as one JSON line: {"frame", "timestamp" (s, the
 * buffer's PTS), "original_shape": [h, w], "detections": [{"class",
 * "class_id", "confidence", "bbox_xyxy"}]}.
 *
 * With track=true the element follows objects across its buffers with
 * ByteTrack (libreyolo/track.h, LibreYOLO's defaults): only the tracked
 * detections are reported, each region meta's id is its track id, and its
 * parameters and JSON line carry "track-id" / "track_id".
 *
 * Threads: GStreamer calls the transform on one streaming thread per
 * element; several elements may share nothing but the library, which is
 * thread-safe. The model loads when the element starts (READY -> PAUSED).
 */
#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>
#include <gst/video/gstvideofilter.h>
#include <gst/video/gstvideometa.h>
#include <gst/video/video.h>

#include <libreyolo/image.h>
#include <libreyolo/libreyolo.h>
#include <libreyolo/model.h>
#include <libreyolo/track.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CLASSES 4096

typedef struct GstLibreyolo {
    GstVideoFilter parent;
    gchar *model_path;
    gdouble conf, iou; /* < 0: the model's default */
    gint max_det;      /* 0: the model's default */
    gchar *classes;    /* "0,2,5"; NULL: all */
    gint threads;      /* 0: LIBREYOLO_THREADS, else all CPUs */
    gboolean draw;
    gchar *jsonl_location;
    ly_model *model;
    FILE *jsonl;
    guint64 frames;
    int class_ids[MAX_CLASSES];
    size_t n_class_ids;
    ly_image scratch; /* drawing on frames whose rows are padded, or BGR */
    gboolean track;   /* ByteTrack across buffers (LibreYOLO's defaults) */
    ly_tracker *tracker;
    ly_detection *dets, *picked; /* a frame's detections, and those reported */
    size_t *rows;
    int64_t *ids;
    size_t cap;
} GstLibreyolo;

typedef struct GstLibreyoloClass {
    GstVideoFilterClass parent_class;
} GstLibreyoloClass;

G_DEFINE_TYPE(GstLibreyolo, gst_libreyolo, GST_TYPE_VIDEO_FILTER)

enum {
    PROP_0,
    PROP_MODEL,
    PROP_CONF,
    PROP_IOU,
    PROP_MAX_DET,
    PROP_CLASSES,
    PROP_THREADS,
    PROP_DRAW,
    PROP_JSONL_LOCATION,
    PROP_TRACK
};

#define CAPS GST_VIDEO_CAPS_MAKE("{ RGB, BGR }")

static void set_property(GObject *object, guint id, const GValue *value, GParamSpec *pspec)
{
    GstLibreyolo *self = (GstLibreyolo *)object;
    GST_OBJECT_LOCK(self);
    switch (id) {
    case PROP_MODEL:
        g_free(self->model_path);
        self->model_path = g_value_dup_string(value);
        break;
    case PROP_CONF:
        self->conf = g_value_get_double(value);
        break;
    case PROP_IOU:
        self->iou = g_value_get_double(value);
        break;
    case PROP_MAX_DET:
        self->max_det = g_value_get_int(value);
        break;
    case PROP_CLASSES:
        g_free(self->classes);
        self->classes = g_value_dup_string(value);
        break;
    case PROP_THREADS:
        self->threads = g_value_get_int(value);
        break;
    case PROP_DRAW:
        self->draw = g_value_get_boolean(value);
        break;
    case PROP_JSONL_LOCATION:
        g_free(self->jsonl_location);
        self->jsonl_location = g_value_dup_string(value);
        break;
    case PROP_TRACK:
        self->track = g_value_get_boolean(value);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
    }
    GST_OBJECT_UNLOCK(self);
}

static void get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
    GstLibreyolo *self = (GstLibreyolo *)object;
    GST_OBJECT_LOCK(self);
    switch (id) {
    case PROP_MODEL:
        g_value_set_string(value, self->model_path);
        break;
    case PROP_CONF:
        g_value_set_double(value, self->conf);
        break;
    case PROP_IOU:
        g_value_set_double(value, self->iou);
        break;
    case PROP_MAX_DET:
        g_value_set_int(value, self->max_det);
        break;
    case PROP_CLASSES:
        g_value_set_string(value, self->classes);
        break;
    case PROP_THREADS:
        g_value_set_int(value, self->threads);
        break;
    case PROP_DRAW:
        g_value_set_boolean(value, self->draw);
        break;
    case PROP_JSONL_LOCATION:
        g_value_set_string(value, self->jsonl_location);
        break;
    case PROP_TRACK:
        g_value_set_boolean(value, self->track);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
    }
    GST_OBJECT_UNLOCK(self);
}

/* "0,2,5" or "[0, 2, 5]" into class_ids; FALSE for anything else. */
static gboolean parse_classes(GstLibreyolo *self)
{
    self->n_class_ids = 0;
    if (!self->classes || !*self->classes) return TRUE;
    const char *p = self->classes;
    while (*p) {
        while (*p == ' ' || *p == '[' || *p == ']' || *p == ',')
            p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > 1000000 || self->n_class_ids == MAX_CLASSES)
            return FALSE;
        self->class_ids[self->n_class_ids++] = (int)v;
        p = end;
    }
    return TRUE;
}

static gboolean start(GstBaseTransform *base)
{
    GstLibreyolo *self = (GstLibreyolo *)base;
    if (!self->model_path || !*self->model_path) {
        GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND, ("libreyolo: no model"),
                          ("set the model property: a checkpoint, a .pte or a name (nanodet)"));
        return FALSE;
    }
    if (!parse_classes(self)) {
        GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("libreyolo: classes \"%s\"", self->classes),
                          ("expected class ids like 0,2,5"));
        return FALSE;
    }
    ly_model_options mo = {self->threads};
    if (ly_model_load(self->model_path, &mo, &self->model) != LY_OK) {
        GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ, ("libreyolo: %s", self->model_path),
                          ("%s", ly_last_error()));
        return FALSE;
    }
    if (self->jsonl_location && !(self->jsonl = fopen(self->jsonl_location, "w"))) {
        GST_ELEMENT_ERROR(self, RESOURCE, OPEN_WRITE, ("libreyolo: %s", self->jsonl_location),
                          ("%s", g_strerror(errno)));
        ly_model_free(self->model);
        self->model = NULL;
        return FALSE;
    }
    if (self->track && ly_tracker_create(NULL, &self->tracker) != LY_OK) {
        GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("libreyolo: track"), ("%s", ly_last_error()));
        return FALSE;
    }
    self->frames = 0;
    return TRUE;
}

static gboolean stop(GstBaseTransform *base)
{
    GstLibreyolo *self = (GstLibreyolo *)base;
    if (self->jsonl) fclose(self->jsonl);
    self->jsonl = NULL;
    ly_model_free(self->model);
    self->model = NULL;
    ly_image_free(&self->scratch);
    ly_tracker_free(self->tracker);
    self->tracker = NULL;
    g_free(self->dets), g_free(self->picked), g_free(self->rows), g_free(self->ids);
    self->dets = self->picked = NULL, self->rows = NULL, self->ids = NULL, self->cap = 0;
    return TRUE;
}

static void write_json_line(GstLibreyolo *self, GstBuffer *buffer, const ly_detection *d,
                            const int64_t *ids, size_t n, int width, int height)
{
    FILE *f = self->jsonl;
    GstClockTime pts = GST_BUFFER_PTS(buffer);
    fprintf(f, "{\"frame\": %" G_GUINT64_FORMAT ", \"timestamp\": ", self->frames);
    if (GST_CLOCK_TIME_IS_VALID(pts))
        fprintf(f, "%.6f", (double)pts / GST_SECOND);
    else
        fputs("null", f);
    fprintf(f, ", \"original_shape\": [%d, %d], \"detections\": [", height, width);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s{\"class\": \"", i ? ", " : "");
        for (const char *c = d[i].name ? d[i].name : ""; *c; c++) /* class names are plain text */
            if (*c == '"' || *c == '\\')
                fprintf(f, "\\%c", *c);
            else if ((unsigned char)*c >= 0x20)
                fputc(*c, f);
        fprintf(
            f,
            "\", \"class_id\": %d, \"confidence\": %.9g, \"bbox_xyxy\": [%.9g, %.9g, %.9g, %.9g]",
            d[i].cls, (double)d[i].conf, (double)d[i].xyxy[0], (double)d[i].xyxy[1],
            (double)d[i].xyxy[2], (double)d[i].xyxy[3]);
        if (ids) fprintf(f, ", \"track_id\": %lld", (long long)ids[i]);
        fputc('}', f);
    }
    fputs("]}\n", f);
    fflush(f);
}

static void attach_meta(GstBuffer *buffer, const ly_detection *d, const int64_t *ids, size_t n,
                        int width, int height)
{
    for (size_t i = 0; i < n; i++) {
        char unnamed[32];
        snprintf(unnamed, sizeof unnamed, "%d", d[i].cls);
        double x1 = fmax(0.0, floor(d[i].xyxy[0])), y1 = fmax(0.0, floor(d[i].xyxy[1]));
        double x2 = fmin(width, ceil(d[i].xyxy[2])), y2 = fmin(height, ceil(d[i].xyxy[3]));
        GstVideoRegionOfInterestMeta *meta = gst_buffer_add_video_region_of_interest_meta(
            buffer, d[i].name && *d[i].name ? d[i].name : unnamed, (guint)x1, (guint)y1,
            (guint)fmax(0.0, x2 - x1), (guint)fmax(0.0, y2 - y1));
        if (!meta) continue;
        if (ids) meta->id = (gint)ids[i];
        GstStructure *param = gst_structure_new(
            "libreyolo", "class-id", G_TYPE_INT, d[i].cls, "confidence", G_TYPE_DOUBLE,
            (double)d[i].conf, "x1", G_TYPE_DOUBLE, (double)d[i].xyxy[0], "y1", G_TYPE_DOUBLE,
            (double)d[i].xyxy[1], "x2", G_TYPE_DOUBLE, (double)d[i].xyxy[2], "y2", G_TYPE_DOUBLE,
            (double)d[i].xyxy[3], NULL);
        if (ids) gst_structure_set(param, "track-id", G_TYPE_INT64, (gint64)ids[i], NULL);
        gst_video_region_of_interest_meta_add_param(meta, param);
    }
}

static ly_status annotate(ly_image *im, const ly_detection *d, const int64_t *ids, size_t n)
{
    return ids ? ly_image_annotate_tracks(im, d, ids, n) : ly_image_annotate_detections(im, d, n);
}

/* Draw the detections onto the frame: in place where its rows are packed
 * RGB, else through an RGB copy. */
static ly_status draw(GstLibreyolo *self, GstVideoFrame *frame, const ly_detection *d,
                      const int64_t *ids, size_t n)
{
    int w = GST_VIDEO_FRAME_WIDTH(frame), h = GST_VIDEO_FRAME_HEIGHT(frame);
    int stride = GST_VIDEO_FRAME_PLANE_STRIDE(frame, 0);
    uint8_t *data = GST_VIDEO_FRAME_PLANE_DATA(frame, 0);
    bool bgr = GST_VIDEO_FRAME_FORMAT(frame) == GST_VIDEO_FORMAT_BGR;
    if (!bgr && stride == w * 3) {
        ly_image im = {data, w, h};
        return annotate(&im, d, ids, n);
    }
    if (self->scratch.width != w || self->scratch.height != h) {
        ly_image_free(&self->scratch);
        ly_status st = ly_image_alloc(&self->scratch, w, h);
        if (st != LY_OK) return st;
    }
    for (int y = 0; y < h; y++) {
        const uint8_t *src = data + (size_t)y * (size_t)stride;
        uint8_t *dst = self->scratch.pixels + (size_t)y * (size_t)w * 3;
        for (int x = 0; x < w; x++) {
            dst[3 * x] = src[3 * x + (bgr ? 2 : 0)];
            dst[3 * x + 1] = src[3 * x + 1];
            dst[3 * x + 2] = src[3 * x + (bgr ? 0 : 2)];
        }
    }
    ly_status st = annotate(&self->scratch, d, ids, n);
    for (int y = 0; st == LY_OK && y < h; y++) {
        const uint8_t *src = self->scratch.pixels + (size_t)y * (size_t)w * 3;
        uint8_t *dst = data + (size_t)y * (size_t)stride;
        for (int x = 0; x < w; x++) {
            dst[3 * x + (bgr ? 2 : 0)] = src[3 * x];
            dst[3 * x + 1] = src[3 * x + 1];
            dst[3 * x + (bgr ? 0 : 2)] = src[3 * x + 2];
        }
    }
    return st;
}

static GstFlowReturn transform_frame_ip(GstVideoFilter *filter, GstVideoFrame *frame)
{
    GstLibreyolo *self = (GstLibreyolo *)filter;
    int w = GST_VIDEO_FRAME_WIDTH(frame), h = GST_VIDEO_FRAME_HEIGHT(frame);
    ly_image_view view = {
        GST_VIDEO_FRAME_PLANE_DATA(frame, 0), w, h, (size_t)GST_VIDEO_FRAME_PLANE_STRIDE(frame, 0),
        GST_VIDEO_FRAME_FORMAT(frame) == GST_VIDEO_FORMAT_BGR ? LY_PIXELS_BGR : LY_PIXELS_RGB};
    ly_predict_options options;
    ly_predict_options_init(&options);
    GST_OBJECT_LOCK(self);
    if (self->conf >= 0) options.conf = (float)self->conf, options.given |= LY_PREDICT_CONF;
    /* tracking sees the low scores too: the detector at track_low_thresh, as
     * LibreYOLO's model.track */
    else if (self->tracker)
        options.conf = 0.1f, options.given |= LY_PREDICT_CONF;
    if (self->iou >= 0) options.iou = (float)self->iou, options.given |= LY_PREDICT_IOU;
    if (self->max_det > 0) options.max_det = self->max_det, options.given |= LY_PREDICT_MAX_DET;
    gboolean drawing = self->draw;
    GST_OBJECT_UNLOCK(self);
    if (self->n_class_ids) options.classes = self->class_ids, options.n_classes = self->n_class_ids;
    ly_results *r = NULL;
    if (ly_model_predict_image(self->model, &view, &options, &r) != LY_OK) {
        GST_ELEMENT_ERROR(self, STREAM, FAILED,
                          ("libreyolo: frame %" G_GUINT64_FORMAT, self->frames),
                          ("%s", ly_last_error()));
        return GST_FLOW_ERROR;
    }
    size_t n = 0;
    ly_results_count(r, &n);
    ly_status st = LY_OK;
    if (n + 1 > self->cap) {
        self->cap = 2 * (n + 1);
        self->dets = g_renew(ly_detection, self->dets, self->cap);
        self->picked = g_renew(ly_detection, self->picked, self->cap);
        self->rows = g_renew(size_t, self->rows, self->cap);
        self->ids = g_renew(int64_t, self->ids, self->cap);
    }
    for (size_t i = 0; i < n; i++)
        ly_results_get(r, i, &self->dets[i]); /* names are r's until it is freed */
    const ly_detection *report = self->dets;
    const int64_t *ids = NULL;
    if (self->tracker) {
        size_t m = 0;
        st = ly_tracker_update(self->tracker, self->dets, n, self->rows, self->ids, &m);
        for (size_t k = 0; st == LY_OK && k < m; k++)
            self->picked[k] = self->dets[self->rows[k]];
        report = self->picked, ids = self->ids, n = st == LY_OK ? m : 0;
    }
    attach_meta(frame->buffer, report, ids, n, w, h);
    if (self->jsonl) write_json_line(self, frame->buffer, report, ids, n, w, h);
    if (st == LY_OK && drawing) st = draw(self, frame, report, ids, n);
    ly_results_free(r);
    self->frames++;
    if (st != LY_OK) {
        GST_ELEMENT_ERROR(self, STREAM, FAILED, ("libreyolo: tracking or drawing"),
                          ("%s", ly_last_error()));
        return GST_FLOW_ERROR;
    }
    return GST_FLOW_OK;
}

static void finalize(GObject *object)
{
    GstLibreyolo *self = (GstLibreyolo *)object;
    g_free(self->model_path);
    g_free(self->classes);
    g_free(self->jsonl_location);
    G_OBJECT_CLASS(gst_libreyolo_parent_class)->finalize(object);
}

static void gst_libreyolo_class_init(GstLibreyoloClass *klass)
{
    GObjectClass *object = G_OBJECT_CLASS(klass);
    GstElementClass *element = GST_ELEMENT_CLASS(klass);
    GstBaseTransformClass *base = GST_BASE_TRANSFORM_CLASS(klass);
    GstVideoFilterClass *filter = GST_VIDEO_FILTER_CLASS(klass);
    object->set_property = set_property;
    object->get_property = get_property;
    object->finalize = finalize;
    const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;
    g_object_class_install_property(
        object, PROP_MODEL,
        g_param_spec_string("model", "Model",
                            "A checkpoint (.pt, .safetensors), an ExecuTorch program (.pte), a "
                            "TF.js graph (.json) or a cached name (nanodet)",
                            NULL, rw));
    g_object_class_install_property(object, PROP_CONF,
                                    g_param_spec_double("conf", "Confidence",
                                                        "Score threshold; -1: the model's default",
                                                        -1, 1, -1, rw));
    g_object_class_install_property(
        object, PROP_IOU,
        g_param_spec_double("iou", "IoU", "NMS IoU threshold; -1: the model's default", -1, 1, -1,
                            rw));
    g_object_class_install_property(object, PROP_MAX_DET,
                                    g_param_spec_int("max-det", "Max detections",
                                                     "Per frame; 0: the model's default", 0, 100000,
                                                     0, rw));
    g_object_class_install_property(object, PROP_CLASSES,
                                    g_param_spec_string("classes", "Classes",
                                                        "Keep only these class ids: \"0,2,5\"",
                                                        NULL, rw));
    g_object_class_install_property(
        object, PROP_THREADS,
        g_param_spec_int("threads", "Threads",
                         "Worker threads; 0: LIBREYOLO_THREADS, else all CPUs", 0, 4096, 0, rw));
    g_object_class_install_property(
        object, PROP_DRAW,
        g_param_spec_boolean("draw", "Draw", "Draw boxes and labels onto the frames", FALSE, rw));
    g_object_class_install_property(
        object, PROP_JSONL_LOCATION,
        g_param_spec_string("jsonl-location", "JSON lines file",
                            "Write each frame's detections to this file, one JSON line per frame",
                            NULL, rw));
    g_object_class_install_property(
        object, PROP_TRACK,
        g_param_spec_boolean("track", "Track",
                             "Follow objects across buffers with ByteTrack (LibreYOLO's defaults; "
                             "the detector at track_low_thresh unless conf is set): only tracked "
                             "detections are reported, each with its id (the region meta's id, "
                             "track-id in its libreyolo parameters, track_id in the JSON lines)",
                             FALSE, rw));
    gst_element_class_set_static_metadata(
        element, "libreyolo detector", "Filter/Analyzer/Video",
        "Runs a libreyolo model (YOLO9, NanoDet, the DETR families, ...) on each frame and "
        "attaches the detections as region-of-interest metadata",
        "libreyolo-c");
    GstCaps *caps = gst_caps_from_string(CAPS);
    gst_element_class_add_pad_template(
        element, gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, caps));
    gst_element_class_add_pad_template(
        element, gst_pad_template_new("src", GST_PAD_SRC, GST_PAD_ALWAYS, caps));
    gst_caps_unref(caps);
    base->start = start;
    base->stop = stop;
    filter->transform_frame_ip = transform_frame_ip;
}

static void gst_libreyolo_init(GstLibreyolo *self)
{
    self->conf = -1;
    self->iou = -1;
    gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
}

static gboolean plugin_init(GstPlugin *plugin)
{
    return gst_element_register(plugin, "libreyolo", GST_RANK_NONE, gst_libreyolo_get_type());
}

#define PACKAGE "libreyolo"
GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, libreyolo,
                  "Object detection with libreyolo-c", plugin_init, "0.1.0", "MIT", "libreyolo-c",
                  "https://github.com/LibreYOLO")
