/* SPDX-License-Identifier: MIT */
/*
 * Multi-object tracking: LibreYOLO's ByteTrack (libreyolo/tracking at
 * c41461e), the same decisions frame by frame: its XYAH Kalman filter in
 * float64, its three association stages, SciPy's linear_sum_assignment
 * (ties included), its lost-track buffer and output filter.
 *
 *   ly_track_config cfg;
 *   ly_track_config_init(&cfg);            (LibreYOLO's TrackConfig defaults)
 *   ly_tracker *t;
 *   ly_tracker_create(&cfg, &t);
 *   for each frame:
 *       ly_detection d[n] ... (from ly_results_get, or boxes of your own)
 *       size_t index[n], m; int64_t id[n];
 *       ly_tracker_update(t, d, n, index, id, &m);
 *       (rows index[0..m) of d are tracked, with ids id[0..m), in the tracker's order)
 *   ly_tracker_free(t);
 *
 * One tracker follows one stream: it keeps state from frame to frame and is
 * used by one thread at a time; trackers of different streams are
 * independent. The model that detects may be shared by all of them.
 *
 * One deviation: a detection whose box or score is not finite is dropped
 * before the tracker sees it, with a warning (LibreYOLO lets one NaN box
 * turn every cost NaN, which leaves every track unmatched for as long as the
 * NaN stays in its Kalman state).
 */
#ifndef LIBREYOLO_TRACK_H
#define LIBREYOLO_TRACK_H
#include "libreyolo/model.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct ly_track_config {
    double track_high_thresh;        /* first association: scores >= this (0.25) */
    double track_low_thresh;         /* second association: scores >= this (0.1) */
    double new_track_thresh;         /* a new track needs this score (0.25) */
    double match_thresh;             /* stage 1: highest cost (1 - IoU, fused) matched (0.8) */
    double match_thresh_low;         /* stage 2 (0.5) */
    double match_thresh_unconfirmed; /* stage 3 (0.7) */
    int track_buffer;                /* frames a lost track is kept, at 30 frames/s (30) */
    int frame_rate;                  /* the config's rate, never the video's (30) */
    bool fuse_score;                 /* stage 1 cost 1 - IoU * score (true) */
    int minimum_consecutive_frames;  /* matches before a track is reported (1) */
} ly_track_config;

/* LibreYOLO's TrackConfig defaults (shown above). */
LY_API ly_status ly_track_config_init(ly_track_config *config);
/* LibreYOLO's __post_init__ checks, with its words (LY_E_INVALID_ARGUMENT):
 * "frame_rate must be > 0, got 0", "track_high_thresh must be in [0, 1],
 * got 2", ... and "track_high_thresh (0.1) must be >= track_low_thresh (0.2)". */
LY_API ly_status ly_track_config_check(const ly_track_config *config);

typedef struct ly_tracker ly_tracker;

/* A tracker with `config` (checked; NULL: the defaults). */
LY_API ly_status ly_tracker_create(const ly_track_config *config, ly_tracker **out);
/* One frame: `n` detections (xyxy, conf and cls are read; name is not). On
 * return rows `index[0..*count)` of `detections` are the tracked ones, each
 * with its id in `id`, in the tracker's order (LibreYOLO's Results._select);
 * both arrays need room for `n`. A frame with no detections is fine (n 0,
 * arrays may be NULL). */
LY_API ly_status ly_tracker_update(ly_tracker *tracker, const ly_detection *detections, size_t n,
                                   size_t *index, int64_t *id, size_t *count);
/* Forget every track and start the ids from 1 again. */
LY_API ly_status ly_tracker_reset(ly_tracker *tracker);
/* Release the tracker; NULL is fine. */
LY_API ly_status ly_tracker_free(ly_tracker *tracker);

#ifdef __cplusplus
}
#endif
#endif
