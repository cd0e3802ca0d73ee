/* SPDX-License-Identifier: MIT */
/*
 * ByteTrack as LibreYOLO's libreyolo/tracking (config.py, kalman_filter.py,
 * strack.py, matching.py, tracker.py at c41461e), transcribed step by step:
 * the same lists in the same orders, the same float64 expressions, so that
 * every frame gives the same (detection, id) pairs. Python shares STrack
 * objects between its lists; here tracks are heap objects and the lists hold
 * pointers to them, which is the same thing.
 */
#include "core/core.h"
#include "libreyolo/track.h"
#include "track/lsap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STATE_NEW, STATE_TRACKED, STATE_LOST, STATE_REMOVED };

#define STD_WEIGHT_POSITION (1.0 / 20)
#define STD_WEIGHT_VELOCITY (1.0 / 160)

typedef struct strack {
    double mean[8], cov[8][8];
    double box[4]; /* the detection's xyxy (float32 values) */
    double score;
    int cls;
    size_t detection_index;
    int64_t track_id;
    int state;
    bool activated;
    int64_t frame_id, start_frame;
    int64_t hits;
} strack;

/* A list of tracks (pointers; the tracks live elsewhere). */
typedef struct track_list {
    strack **at;
    size_t n, cap;
} track_list;

struct ly_tracker {
    ly_track_config cfg;
    int64_t id_count, frame_id;
    track_list tracked, lost; /* own their tracks */
    /* per-frame scratch, kept between frames so memory stays flat */
    strack *dets;
    size_t dets_cap;
    track_list high, low, unconfirmed, confirmed, pool, remaining, remaining_high, next_tracked,
        next_lost, scratch;
    double *cost;
    size_t cost_cap;
    size_t *rows, *cols, *match_rows, *match_cols, *unmatched_a, *unmatched_b, *unmatched_c;
    size_t index_cap;
    bool *flags;
    size_t flags_cap;
};

/* NumPy's maximum/minimum (a NaN wins) and Python's max (the first unless
 * the second is larger): what the transcribed expressions use, inlined. */
static inline double np_maximum(double a, double b)
{
    return (a >= b || a != a) ? a : b;
}

static inline double np_minimum(double a, double b)
{
    return (a <= b || a != a) ? a : b;
}

static inline double py_max(double a, double b)
{
    return b > a ? b : a;
}

/* ---- Config ---------------------------------------------------------------- */

ly_status ly_track_config_init(ly_track_config *c)
{
    if (!c) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_track_config_init: config is NULL");
    *c = (ly_track_config){.track_high_thresh = 0.25,
                           .track_low_thresh = 0.1,
                           .new_track_thresh = 0.25,
                           .match_thresh = 0.8,
                           .match_thresh_low = 0.5,
                           .match_thresh_unconfirmed = 0.7,
                           .track_buffer = 30,
                           .frame_rate = 30,
                           .fuse_score = true,
                           .minimum_consecutive_frames = 1};
    return LY_OK;
}

/* Python's repr of a float where it matters for the messages: 0.25, 2.0, nan. */
static const char *py_float(double v, char *buf, size_t size)
{
    if (isnan(v)) return "nan";
    if (isinf(v)) return v > 0 ? "inf" : "-inf";
    ly_shortest_decimal(v, false, buf, size);
    if (!strpbrk(buf, ".en")) strncat(buf, ".0", size - strlen(buf) - 1);
    return buf;
}

ly_status ly_track_config_check(const ly_track_config *c)
{
    if (!c) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_track_config_check: config is NULL");
    char a[40], b[40];
    if (c->frame_rate <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "frame_rate must be > 0, got %d", c->frame_rate);
    const struct {
        const char *name;
        double value;
    } unit[] = {{"track_high_thresh", c->track_high_thresh},
                {"track_low_thresh", c->track_low_thresh},
                {"new_track_thresh", c->new_track_thresh},
                {"match_thresh", c->match_thresh},
                {"match_thresh_low", c->match_thresh_low},
                {"match_thresh_unconfirmed", c->match_thresh_unconfirmed}};
    for (size_t i = 0; i < sizeof unit / sizeof unit[0]; i++)
        if (!(unit[i].value >= 0 && unit[i].value <= 1))
            return ly_set_error(LY_E_INVALID_ARGUMENT, "%s must be in [0, 1], got %s", unit[i].name,
                                py_float(unit[i].value, a, sizeof a));
    if (c->track_buffer < 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "track_buffer must be >= 0, got %d",
                            c->track_buffer);
    if (c->minimum_consecutive_frames < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "minimum_consecutive_frames must be >= 1, got %d",
                            c->minimum_consecutive_frames);
    if (c->track_high_thresh < c->track_low_thresh)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "track_high_thresh (%s) must be >= "
                            "track_low_thresh (%s)",
                            py_float(c->track_high_thresh, a, sizeof a),
                            py_float(c->track_low_thresh, b, sizeof b));
    return LY_OK;
}

/* ---- Kalman filter (KalmanFilterXYAH) ---------------------------------------- */

static void xyxy_to_xyah(const double *xyxy, double *out)
{
    double w = xyxy[2] - xyxy[0], h = xyxy[3] - xyxy[1];
    out[0] = xyxy[0] + w / 2;
    out[1] = xyxy[1] + h / 2;
    out[2] = w / py_max(h, 1e-6);
    out[3] = h;
}

static void kalman_initiate(const double *z, double mean[8], double cov[8][8])
{
    for (int i = 0; i < 4; i++)
        mean[i] = z[i], mean[4 + i] = 0;
    double h = z[3];
    double std[8] = {2 * STD_WEIGHT_POSITION * h,
                     2 * STD_WEIGHT_POSITION * h,
                     1e-2,
                     2 * STD_WEIGHT_POSITION * h,
                     10 * STD_WEIGHT_VELOCITY * h,
                     10 * STD_WEIGHT_VELOCITY * h,
                     1e-5,
                     10 * STD_WEIGHT_VELOCITY * h};
    memset(cov, 0, sizeof(double[8][8]));
    for (int i = 0; i < 8; i++)
        cov[i][i] = std[i] * std[i];
}

static double clip(double v)
{
    return v < -1e10 ? -1e10 : v > 1e10 ? 1e10 : v; /* NaN passes, as np.clip */
}

/* F x, F P F^T + Q with F = [I I; 0 I]: each entry is at most two products
 * of 1 and a value added, which every BLAS computes alike. */
static void kalman_predict(double mean[8], double cov[8][8])
{
    double h = py_max(mean[3], 1e-2);
    double std[8] = {
        STD_WEIGHT_POSITION * h, STD_WEIGHT_POSITION * h, 1e-2, STD_WEIGHT_POSITION * h,
        STD_WEIGHT_VELOCITY * h, STD_WEIGHT_VELOCITY * h, 1e-5, STD_WEIGHT_VELOCITY * h};
    for (int i = 0; i < 4; i++)
        mean[i] = mean[i] + mean[4 + i];
    double fp[8][8];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            fp[i][j] = i < 4 ? clip(cov[i][j]) + clip(cov[i + 4][j]) : clip(cov[i][j]);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            cov[i][j] = j < 4 ? fp[i][j] + fp[i][j + 4] : fp[i][j];
            if (i == j) cov[i][j] += std[i] * std[i];
        }
}

/* The correction through a Cholesky factor of the projected covariance (as
 * scipy.linalg.cho_factor / cho_solve: LAPACK's potrf and potrs). */
static void kalman_update(double mean[8], double cov[8][8], const double *z)
{
    double h = mean[3];
    double r[4] = {STD_WEIGHT_POSITION * h, STD_WEIGHT_POSITION * h, 1e-1, STD_WEIGHT_POSITION * h};
    double s[4][4], l[4][4] = {{0}};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            s[i][j] = cov[i][j] + (i == j ? r[i] * r[i] : 0.0);
    /* potf2, lower: a column at a time, scaled by the reciprocal of its pivot */
    for (int j = 0; j < 4; j++) {
        double dot = 0;
        for (int k = 0; k < j; k++)
            dot += l[j][k] * l[j][k];
        double ajj = sqrt(s[j][j] - dot);
        l[j][j] = ajj;
        for (int i = j + 1; i < 4; i++) {
            double sum = s[i][j];
            for (int k = 0; k < j; k++)
                sum -= l[i][k] * l[j][k];
            l[i][j] = sum * (1.0 / ajj);
        }
    }
    /* solve S X = (P H^T)^T, X 4x8: L Y = B then L^T X = Y (potrs) */
    double x[4][8];
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 8; j++)
            x[k][j] = cov[j][k];
    for (int j = 0; j < 8; j++) {
        for (int k = 0; k < 4; k++) {
            if (x[k][j] == 0) continue;
            x[k][j] /= l[k][k];
            for (int i = k + 1; i < 4; i++)
                x[i][j] -= x[k][j] * l[i][k];
        }
        for (int i = 3; i >= 0; i--) {
            double t = x[i][j];
            for (int k = i + 1; k < 4; k++)
                t -= l[k][i] * x[k][j];
            x[i][j] = t / l[i][i];
        }
    }
    /* K = X^T (8x4) */
    double innovation[4];
    for (int k = 0; k < 4; k++)
        innovation[k] = z[k] - mean[k];
    for (int i = 0; i < 8; i++) {
        double add = 0;
        for (int k = 0; k < 4; k++)
            add += innovation[k] * x[k][i];
        mean[i] = mean[i] + add;
    }
    /* P - K S K^T */
    double ks[8][4];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) {
            double sum = 0;
            for (int k = 0; k < 4; k++)
                sum += x[k][i] * s[k][j];
            ks[i][j] = sum;
        }
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            double sum = 0;
            for (int k = 0; k < 4; k++)
                sum += ks[i][k] * x[k][j];
            cov[i][j] = cov[i][j] - sum;
        }
}

/* ---- Tracks (STrack) ------------------------------------------------------------ */

static void track_xyxy(const strack *t, double out[4])
{
    double tl[4] = {t->mean[0], t->mean[1], t->mean[2], t->mean[3]};
    tl[2] *= tl[3];
    tl[0] -= tl[2] / 2;
    tl[1] -= tl[3] / 2;
    out[0] = tl[0], out[1] = tl[1], out[2] = tl[0] + tl[2], out[3] = tl[1] + tl[3];
}

static void track_activate(strack *t, int64_t frame_id, int64_t track_id)
{
    t->track_id = track_id;
    double z[4];
    xyxy_to_xyah(t->box, z);
    kalman_initiate(z, t->mean, t->cov);
    t->state = STATE_TRACKED;
    t->activated = true;
    t->frame_id = t->start_frame = frame_id;
    t->hits = 1;
}

static bool cov_finite(const strack *t)
{
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            if (!isfinite(t->cov[i][j])) return false;
    return true;
}

/* update and re_activate: the same but for re-initiating a degenerate state */
static void track_update(strack *t, const strack *det, int64_t frame_id, bool reactivate)
{
    double z[4];
    xyxy_to_xyah(det->box, z);
    if (reactivate && !cov_finite(t))
        kalman_initiate(z, t->mean, t->cov);
    else
        kalman_update(t->mean, t->cov, z);
    t->state = STATE_TRACKED;
    t->activated = true;
    t->frame_id = frame_id;
    t->score = det->score;
    t->cls = det->cls;
    t->detection_index = det->detection_index;
    t->hits++;
}

static void track_predict(strack *t)
{
    if (t->state != STATE_TRACKED) t->mean[7] = 0;
    kalman_predict(t->mean, t->cov);
}

/* ---- Lists ------------------------------------------------------------------ */

static bool list_push(track_list *l, strack *t)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 32;
        strack **grown = realloc(l->at, cap * sizeof *grown);
        if (!grown) return false;
        l->at = grown, l->cap = cap;
    }
    l->at[l->n++] = t;
    return true;
}

static bool list_has_id(const track_list *l, int64_t id)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->at[i]->track_id == id) return true;
    return false;
}

/* ---- Matching (matching.py) --------------------------------------------------- */

static bool grow(void **p, size_t *cap, size_t want, size_t each)
{
    if (want <= *cap) return true;
    size_t cap_new = want < 64 ? 64 : want * 2;
    void *grown = realloc(*p, cap_new * each);
    if (!grown) return false;
    *p = grown, *cap = cap_new;
    return true;
}

static double box_iou(const double *a, const double *b)
{
    double x1 = np_maximum(a[0], b[0]), y1 = np_maximum(a[1], b[1]);
    double x2 = np_minimum(a[2], b[2]), y2 = np_minimum(a[3], b[3]);
    double inter = np_maximum(0.0, x2 - x1) * np_maximum(0.0, y2 - y1);
    double area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
    double uni = area_a + area_b - inter;
    return inter / np_maximum(uni, 1e-6);
}

/* 1 - IoU between the tracks' Kalman boxes and the detections' boxes,
 * fused with the detection scores when asked: 1 - (1 - cost) * score. */
static void iou_distance(const track_list *tracks, const track_list *dets, bool fuse, double *cost)
{
    for (size_t i = 0; i < tracks->n && dets->n; i++) {
        double tb[4];
        track_xyxy(tracks->at[i], tb);
        for (size_t j = 0; j < dets->n; j++) {
            double c = 1.0 - box_iou(tb, dets->at[j]->box);
            if (fuse) c = 1.0 - (1.0 - c) * dets->at[j]->score;
            cost[i * dets->n + j] = c;
        }
    }
}

/* linear_assignment: matches (in SciPy's order) at cost <= thresh, and the
 * unmatched rows and columns in increasing order. */
static ly_status assign(ly_tracker *t, size_t nr, size_t nc, double thresh, size_t *n_match,
                        size_t *match_r, size_t *match_c, size_t *n_ua, size_t *ua, size_t *n_ub,
                        size_t *ub)
{
    *n_match = 0;
    size_t need = nr > nc ? nr : nc;
    if (!grow((void **)&t->flags, &t->flags_cap, nr + nc + 1, sizeof *t->flags))
        return ly_set_error(LY_E_NO_MEMORY, "tracker: out of memory");
    bool *row_done = t->flags, *col_done = t->flags + nr;
    memset(t->flags, 0, (nr + nc) * sizeof *t->flags);
    bool finite = true;
    for (size_t k = 0; k < nr * nc && finite; k++)
        finite = isfinite(t->cost[k]);
    if (nr && nc && finite) {
        size_t n = 0;
        ly_status st = ly_lsap_solve(nr, nc, t->cost, t->rows, t->cols, &n);
        if (st != LY_OK) return st;
        for (size_t k = 0; k < n; k++) {
            size_t r = t->rows[k], c = t->cols[k];
            if (t->cost[r * nc + c] > thresh) continue;
            match_r[*n_match] = r, match_c[*n_match] = c, (*n_match)++;
            row_done[r] = col_done[c] = true;
        }
    }
    (void)need;
    *n_ua = *n_ub = 0;
    for (size_t r = 0; r < nr; r++)
        if (!row_done[r]) ua[(*n_ua)++] = r;
    for (size_t c = 0; c < nc; c++)
        if (!col_done[c]) ub[(*n_ub)++] = c;
    return LY_OK;
}

/* ---- The tracker ---------------------------------------------------------------- */

ly_status ly_tracker_create(const ly_track_config *config, ly_tracker **out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_tracker_create: out is NULL");
    *out = NULL;
    ly_track_config cfg;
    ly_track_config_init(&cfg);
    if (config) cfg = *config;
    ly_status st = ly_track_config_check(&cfg);
    if (st != LY_OK) return st;
    ly_tracker *t = calloc(1, sizeof *t);
    if (!t) return ly_set_error(LY_E_NO_MEMORY, "ly_tracker_create: out of memory");
    t->cfg = cfg;
    *out = t;
    return LY_OK;
}

static void free_list_tracks(track_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->at[i]);
    l->n = 0;
}

ly_status ly_tracker_reset(ly_tracker *t)
{
    if (!t) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_tracker_reset: tracker is NULL");
    free_list_tracks(&t->tracked);
    free_list_tracks(&t->lost);
    t->id_count = t->frame_id = 0;
    return LY_OK;
}

ly_status ly_tracker_free(ly_tracker *t)
{
    if (!t) return LY_OK;
    ly_tracker_reset(t);
    track_list *lists[] = {&t->tracked,        &t->lost,         &t->high,      &t->low,
                           &t->unconfirmed,    &t->confirmed,    &t->pool,      &t->remaining,
                           &t->remaining_high, &t->next_tracked, &t->next_lost, &t->scratch};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        free(lists[i]->at);
    free(t->dets), free(t->cost), free(t->rows), free(t->cols), free(t->match_rows);
    free(t->match_cols), free(t->unmatched_a), free(t->unmatched_b), free(t->unmatched_c);
    free(t->flags);
    free(t);
    return LY_OK;
}

/* Room for a frame of n detections against m tracks. */
static bool reserve(ly_tracker *t, size_t n, size_t m)
{
    size_t k = (n > m ? n : m) + 1;
    bool ok = grow((void **)&t->dets, &t->dets_cap, n + 1, sizeof *t->dets) &&
              grow((void **)&t->cost, &t->cost_cap, (n + 1) * (m + 1), sizeof *t->cost);
    size_t cap = t->index_cap;
    size_t **arrays[] = {&t->rows,        &t->cols,        &t->match_rows, &t->match_cols,
                         &t->unmatched_a, &t->unmatched_b, &t->unmatched_c};
    for (size_t i = 0; ok && i < sizeof arrays / sizeof arrays[0]; i++) {
        size_t c = cap;
        ok = grow((void **)arrays[i], &c, k, sizeof(size_t));
        if (i + 1 == sizeof arrays / sizeof arrays[0]) t->index_cap = c;
    }
    return ok;
}

/* Remove duplicates between tracked and lost: a pair overlapping by IoU >
 * 0.85 keeps the older (frame_id - start_frame), the tracked one on a tie. */
static bool remove_duplicates(ly_tracker *t, track_list *tracked, track_list *lost)
{
    if (!tracked->n || !lost->n) return true;
    if (!grow((void **)&t->flags, &t->flags_cap, tracked->n + lost->n, sizeof *t->flags))
        return false;
    bool *drop_t = t->flags, *drop_l = t->flags + tracked->n;
    memset(t->flags, 0, (tracked->n + lost->n) * sizeof *t->flags);
    for (size_t i = 0; i < tracked->n; i++) {
        double a[4];
        track_xyxy(tracked->at[i], a);
        for (size_t j = 0; j < lost->n; j++) {
            double b[4];
            track_xyxy(lost->at[j], b);
            if (!(box_iou(a, b) > 0.85)) continue;
            int64_t age_t = tracked->at[i]->frame_id - tracked->at[i]->start_frame;
            int64_t age_l = lost->at[j]->frame_id - lost->at[j]->start_frame;
            if (age_t >= age_l)
                drop_l[j] = true;
            else
                drop_t[i] = true;
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < tracked->n; i++)
        if (!drop_t[i]) tracked->at[k++] = tracked->at[i];
    tracked->n = k;
    k = 0;
    for (size_t j = 0; j < lost->n; j++)
        if (!drop_l[j]) lost->at[k++] = lost->at[j];
    lost->n = k;
    return true;
}

static bool in_list(const track_list *l, const strack *p)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->at[i] == p) return true;
    return false;
}

ly_status ly_tracker_update(ly_tracker *t, const ly_detection *d, size_t n, size_t *index,
                            int64_t *id, size_t *count)
{
    if (!t || !count || (n && (!d || !index || !id)))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_tracker_update: NULL argument");
    *count = 0;
    const ly_track_config *cfg = &t->cfg;
    size_t live = t->tracked.n + t->lost.n;
    if (!reserve(t, n, live)) return ly_set_error(LY_E_NO_MEMORY, "tracker: out of memory");
    t->frame_id++;

    /* 1. detections at or above track_low_thresh, split at track_high_thresh */
    t->high.n = t->low.n = 0;
    size_t dropped = 0;
    for (size_t i = 0; i < n; i++) {
        bool finite = isfinite(d[i].conf);
        for (int k = 0; k < 4; k++)
            finite = finite && isfinite(d[i].xyxy[k]);
        if (!finite) {
            dropped++;
            continue;
        }
        double score = (double)d[i].conf;
        if (!(score >= cfg->track_low_thresh)) continue;
        strack *s = &t->dets[i];
        memset(s, 0, sizeof *s);
        for (int k = 0; k < 4; k++)
            s->box[k] = (double)d[i].xyxy[k];
        s->score = score;
        s->cls = d[i].cls;
        s->detection_index = i;
        s->state = STATE_NEW;
        if (!list_push(score >= cfg->track_high_thresh ? &t->high : &t->low, s)) goto oom;
    }
    if (dropped)
        ly_log(LY_LOG_WARNING,
               "tracker: frame %lld: %zu detection%s with a box or score that is not finite "
               "dropped before tracking",
               (long long)t->frame_id, dropped, dropped == 1 ? "" : "s");

    /* 2. predict; confirmed tracked + lost form the pool */
    for (size_t i = 0; i < t->tracked.n; i++)
        track_predict(t->tracked.at[i]);
    for (size_t i = 0; i < t->lost.n; i++)
        track_predict(t->lost.at[i]);
    t->unconfirmed.n = t->confirmed.n = t->pool.n = 0;
    for (size_t i = 0; i < t->tracked.n; i++)
        if (!list_push(t->tracked.at[i]->activated ? &t->confirmed : &t->unconfirmed,
                       t->tracked.at[i]))
            goto oom;
    for (size_t i = 0; i < t->confirmed.n; i++)
        if (!list_has_id(&t->pool, t->confirmed.at[i]->track_id) &&
            !list_push(&t->pool, t->confirmed.at[i]))
            goto oom;
    for (size_t i = 0; i < t->lost.n; i++)
        if (!list_has_id(&t->pool, t->lost.at[i]->track_id) && !list_push(&t->pool, t->lost.at[i]))
            goto oom;

    /* 3. stage 1: high detections against the pool */
    size_t nm, nua, nub;
    iou_distance(&t->pool, &t->high, cfg->fuse_score && t->high.n > 0, t->cost);
    ly_status st = assign(t, t->pool.n, t->high.n, cfg->match_thresh, &nm, t->match_rows,
                          t->match_cols, &nua, t->unmatched_a, &nub, t->unmatched_b);
    if (st != LY_OK) return st;
    for (size_t k = 0; k < nm; k++) {
        strack *track = t->pool.at[t->match_rows[k]];
        track_update(track, t->high.at[t->match_cols[k]], t->frame_id,
                     track->state != STATE_TRACKED);
    }
    size_t n_unmatched_high = nub;
    /* 4. stage 2: low detections against the pool's unmatched tracked */
    t->remaining.n = 0;
    for (size_t k = 0; k < nua; k++) {
        strack *p = t->pool.at[t->unmatched_a[k]];
        if (p->state == STATE_TRACKED && !list_push(&t->remaining, p)) goto oom;
    }
    iou_distance(&t->remaining, &t->low, false, t->cost);
    size_t nm2, nua2, nub2;
    st = assign(t, t->remaining.n, t->low.n, cfg->match_thresh_low, &nm2, t->match_rows,
                t->match_cols, &nua2, t->unmatched_a, &nub2, t->unmatched_c);
    if (st != LY_OK) return st;
    for (size_t k = 0; k < nm2; k++)
        track_update(t->remaining.at[t->match_rows[k]], t->low.at[t->match_cols[k]], t->frame_id,
                     false);
    for (size_t k = 0; k < nua2; k++) {
        strack *p = t->remaining.at[t->unmatched_a[k]];
        if (p->state != STATE_LOST) p->state = STATE_LOST;
    }
    /* 5. stage 3: the remaining high detections against unconfirmed tracks */
    t->remaining_high.n = 0;
    for (size_t k = 0; k < n_unmatched_high; k++)
        if (!list_push(&t->remaining_high, t->high.at[t->unmatched_b[k]])) goto oom;
    iou_distance(&t->unconfirmed, &t->remaining_high, false, t->cost);
    size_t nm3, nua3, nub3;
    st = assign(t, t->unconfirmed.n, t->remaining_high.n, cfg->match_thresh_unconfirmed, &nm3,
                t->match_rows, t->match_cols, &nua3, t->unmatched_a, &nub3, t->unmatched_b);
    if (st != LY_OK) return st;
    for (size_t k = 0; k < nm3; k++)
        track_update(t->unconfirmed.at[t->match_rows[k]], t->remaining_high.at[t->match_cols[k]],
                     t->frame_id, false);
    for (size_t k = 0; k < nua3; k++)
        t->unconfirmed.at[t->unmatched_a[k]]->state = STATE_REMOVED;
    /* 6. new tracks from what is left */
    for (size_t k = 0; k < nub3; k++) {
        strack *det = t->remaining_high.at[t->unmatched_b[k]];
        if (det->score >= cfg->new_track_thresh) {
            track_activate(det, t->frame_id, ++t->id_count);
            if (cfg->minimum_consecutive_frames > 1) det->activated = false;
        }
    }
    /* 7. lost tracks past the buffer are removed */
    int64_t max_time_lost =
        (int64_t)((double)((int64_t)cfg->track_buffer * cfg->frame_rate) / 30.0);
    for (size_t i = 0; i < t->lost.n; i++)
        if (t->frame_id - t->lost.at[i]->frame_id > max_time_lost)
            t->lost.at[i]->state = STATE_REMOVED;

    /* 8. the new lists: tracked from pool, unconfirmed, high, low (first of an
     * id kept); lost from pool and the old lost list */
    t->next_tracked.n = t->next_lost.n = 0;
    const track_list *sources[] = {&t->pool, &t->unconfirmed, &t->high, &t->low};
    for (size_t s = 0; s < 4; s++)
        for (size_t i = 0; i < sources[s]->n; i++) {
            strack *p = sources[s]->at[i];
            if (p->state == STATE_TRACKED && !list_has_id(&t->next_tracked, p->track_id) &&
                !list_push(&t->next_tracked, p))
                goto oom;
        }
    const track_list *lost_sources[] = {&t->pool, &t->lost};
    for (size_t s = 0; s < 2; s++)
        for (size_t i = 0; i < lost_sources[s]->n; i++) {
            strack *p = lost_sources[s]->at[i];
            if (p->state == STATE_LOST && !list_has_id(&t->next_tracked, p->track_id) &&
                !list_has_id(&t->next_lost, p->track_id) && !list_push(&t->next_lost, p))
                goto oom;
        }
    if (!remove_duplicates(t, &t->next_tracked, &t->next_lost)) goto oom;

    /* Ownership: new tracks (detections of this frame) get a heap copy; old
     * tracks in neither list are freed (LibreYOLO never reads removed ones). */
    for (size_t i = 0; i < t->next_tracked.n; i++) {
        strack *p = t->next_tracked.at[i];
        if (p >= t->dets && p < t->dets + n) {
            strack *copy = malloc(sizeof *copy);
            if (!copy) goto oom;
            *copy = *p;
            t->next_tracked.at[i] = copy;
        }
    }
    track_list *old[] = {&t->tracked, &t->lost};
    for (size_t s = 0; s < 2; s++)
        for (size_t i = 0; i < old[s]->n; i++) {
            strack *p = old[s]->at[i];
            if (!in_list(&t->next_tracked, p) && !in_list(&t->next_lost, p) &&
                !(s == 1 && in_list(&t->tracked, p)))
                free(p);
        }
    track_list swap = t->tracked;
    t->tracked = t->next_tracked;
    t->next_tracked = swap;
    swap = t->lost;
    t->lost = t->next_lost;
    t->next_lost = swap;

    /* 9. the output: activated tracks with enough hits, in list order */
    for (size_t i = 0; i < t->tracked.n; i++) {
        const strack *p = t->tracked.at[i];
        if (p->activated && p->hits >= cfg->minimum_consecutive_frames) {
            index[*count] = p->detection_index;
            id[*count] = p->track_id;
            (*count)++;
        }
    }
    return LY_OK;
oom:
    return ly_set_error(LY_E_NO_MEMORY, "tracker: out of memory");
}
