# SPDX-License-Identifier: MIT
"""ctypes bindings of libreyolo.so: the C library's public API (include/libreyolo/).

The library is found, in order: $LIBREYOLO_LIBRARY; inside this package (pip
install puts it there); next to this package as installed by CMake
(<libdir>/python3/dist-packages/libreyolo_c -> <libdir>); the build tree
(<build>/python/libreyolo_c -> <build>); the source tree's build/.
ctypes releases the GIL around every foreign call, so inference runs while
other Python threads do.
"""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_CANDIDATES = [
    os.path.join(_HERE, "libreyolo.so.0"),  # pip install
    os.path.join(_HERE, "..", "..", "..", "libreyolo.so.0"),  # cmake --install
    os.path.join(_HERE, "..", "..", "libreyolo.so.0"),  # <build>/python/libreyolo_c
    os.path.join(_HERE, "..", "..", "build", "libreyolo.so.0"),  # <source>/python/libreyolo_c
]


def _find_library():
    env = os.environ.get("LIBREYOLO_LIBRARY")
    if env:
        if not os.path.exists(env):
            raise OSError(f"LIBREYOLO_LIBRARY={env!r}: no such file")
        return env
    for path in _CANDIDATES:
        if os.path.exists(path):
            return os.path.realpath(path)
    raise OSError(
        "libreyolo.so not found (looked in: "
        + ", ".join(os.path.normpath(p) for p in _CANDIDATES)
        + "); build it (make build) or set LIBREYOLO_LIBRARY"
    )


LIBRARY_PATH = _find_library()
lib = ctypes.CDLL(LIBRARY_PATH)

LY_OK = 0
LY_E_INVALID_ARGUMENT = 1
LY_E_SHAPE = 2
LY_E_DTYPE = 3
LY_E_UNSUPPORTED = 4
LY_E_NOT_FOUND = 5
LY_E_IO = 6
LY_E_FORMAT = 7

c_p = ctypes.c_void_p


class ModelInfo(ctypes.Structure):
    _fields_ = [
        ("family", ctypes.c_char_p),
        ("size", ctypes.c_char_p),
        ("task", ctypes.c_char_p),
        ("nc", ctypes.c_int64),
        ("imgsz", ctypes.c_int64),
        ("names", ctypes.POINTER(ctypes.c_char_p)),
        ("default_conf", ctypes.c_float),
        ("default_iou", ctypes.c_float),
        ("default_max_det", ctypes.c_int),
        ("input", ctypes.c_char_p),
        ("engine", ctypes.c_char_p),
        ("quant_recipe", ctypes.c_char_p),
        ("quant_state", ctypes.c_char_p),
        ("quant_remainder", ctypes.c_char_p),
        ("quant_modules", ctypes.c_int),
        ("batched", ctypes.c_bool),
    ]


class PredictOptions(ctypes.Structure):
    _fields_ = [
        ("conf", ctypes.c_float),
        ("iou", ctypes.c_float),
        ("max_det", ctypes.c_int),
        ("imgsz", ctypes.c_int),
        ("classes", ctypes.POINTER(ctypes.c_int)),
        ("n_classes", ctypes.c_size_t),
        ("tile", ctypes.c_int),
        ("tile_pad", ctypes.c_int),
        ("given", ctypes.c_uint),
        ("tiling", ctypes.c_bool),
        ("overlap_ratio", ctypes.c_double),
    ]


# ly_predict_options.given: the fields the user gave, checked whatever they hold
LY_PREDICT_CONF, LY_PREDICT_IOU, LY_PREDICT_MAX_DET, LY_PREDICT_IMGSZ = 1, 2, 4, 8
LY_PREDICT_TILE, LY_PREDICT_TILE_PAD, LY_PREDICT_OVERLAP_RATIO = 16, 32, 64


class Image(ctypes.Structure):
    _fields_ = [
        ("pixels", ctypes.c_void_p),
        ("width", ctypes.c_int),
        ("height", ctypes.c_int),
    ]


class ImageView(ctypes.Structure):
    _fields_ = [
        ("pixels", ctypes.c_void_p),
        ("width", ctypes.c_int),
        ("height", ctypes.c_int),
        ("stride", ctypes.c_size_t),
        ("format", ctypes.c_int),
    ]


class SourceList(ctypes.Structure):
    _fields_ = [
        ("paths", ctypes.POINTER(ctypes.c_char_p)),
        ("count", ctypes.c_size_t),
        ("skipped", ctypes.c_size_t),
    ]


class VideoOptions(ctypes.Structure):
    _fields_ = [
        ("vid_stride", ctypes.c_int),
        ("timeout_ms", ctypes.c_int),
        ("max_pixels", ctypes.c_uint64),
    ]


class VideoInfo(ctypes.Structure):
    _fields_ = [
        ("width", ctypes.c_int),
        ("height", ctypes.c_int),
        ("fps", ctypes.c_double),
        ("frame_count", ctypes.c_int64),
        ("live", ctypes.c_bool),
        ("codec", ctypes.c_char_p),
        ("container", ctypes.c_char_p),
    ]


class VideoFrame(ctypes.Structure):
    _fields_ = [
        ("index", ctypes.c_int64),
        ("time_s", ctypes.c_double),
    ]


class TrackConfig(ctypes.Structure):
    _fields_ = [
        ("track_high_thresh", ctypes.c_double),
        ("track_low_thresh", ctypes.c_double),
        ("new_track_thresh", ctypes.c_double),
        ("match_thresh", ctypes.c_double),
        ("match_thresh_low", ctypes.c_double),
        ("match_thresh_unconfirmed", ctypes.c_double),
        ("track_buffer", ctypes.c_int),
        ("frame_rate", ctypes.c_int),
        ("fuse_score", ctypes.c_bool),
        ("minimum_consecutive_frames", ctypes.c_int),
    ]


class Detection(ctypes.Structure):
    _fields_ = [
        ("xyxy", ctypes.c_float * 4),
        ("conf", ctypes.c_float),
        ("cls", ctypes.c_int),
        ("name", ctypes.c_char_p),
    ]


class ClassProb(ctypes.Structure):
    _fields_ = [("cls", ctypes.c_int), ("conf", ctypes.c_float), ("name", ctypes.c_char_p)]


class ExportOptions(ctypes.Structure):
    _fields_ = [
        ("format", ctypes.c_char_p),
        ("imgsz", ctypes.POINTER(ctypes.c_int64)),
        ("imgsz_len", ctypes.c_size_t),
        ("batch", ctypes.c_int),
        ("dynamic", ctypes.c_bool),
        ("delegate", ctypes.c_char_p),
        ("device", ctypes.c_char_p),
        ("half", ctypes.c_bool),
        ("int8", ctypes.c_bool),
        ("nms", ctypes.c_bool),
        ("output_path", ctypes.c_char_p),
        ("model_path", ctypes.c_char_p),
        ("msda", ctypes.c_char_p),
    ]


def _sig(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


st = ctypes.c_int
ly_last_error = _sig("ly_last_error", ctypes.c_char_p)
ly_status_name = _sig("ly_status_name", ctypes.c_char_p, st)
ly_version = _sig("ly_version", ctypes.c_char_p)
ly_model_load = _sig("ly_model_load", st, ctypes.c_char_p, c_p, ctypes.POINTER(c_p))
ly_model_free = _sig("ly_model_free", st, c_p)
ly_model_get_info = _sig("ly_model_get_info", st, c_p, ctypes.POINTER(ModelInfo))
ly_model_set_fused_attention = _sig(
    "ly_model_set_fused_attention", st, c_p, ctypes.c_bool, ctypes.POINTER(ctypes.c_int)
)
ly_predict_options_init = _sig("ly_predict_options_init", st, ctypes.POINTER(PredictOptions))
ly_predict_options_set_imgsz = _sig(
    "ly_predict_options_set_imgsz", st, ctypes.POINTER(PredictOptions), ctypes.c_int, ctypes.c_int
)
ly_predict_options_check = _sig(
    "ly_predict_options_check", st, c_p, ctypes.POINTER(PredictOptions)
)
ly_model_predict_file = _sig(
    "ly_model_predict_file", st, c_p, ctypes.c_char_p, ctypes.POINTER(PredictOptions),
    ctypes.POINTER(c_p),
)
ly_model_predict_image = _sig(
    "ly_model_predict_image", st, c_p, ctypes.POINTER(ImageView), ctypes.POINTER(PredictOptions),
    ctypes.POINTER(c_p),
)
ly_model_predict_batch = _sig(
    "ly_model_predict_batch", st, c_p, ctypes.POINTER(ImageView), ctypes.c_size_t,
    ctypes.POINTER(PredictOptions), ctypes.POINTER(c_p),
)
ly_results_count = _sig("ly_results_count", st, c_p, ctypes.POINTER(ctypes.c_size_t))
ly_results_get = _sig("ly_results_get", st, c_p, ctypes.c_size_t, ctypes.POINTER(Detection))
ly_results_orig_shape = _sig(
    "ly_results_orig_shape", st, c_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)
)
ly_results_speed = _sig(
    "ly_results_speed", st, c_p, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double),
    ctypes.POINTER(ctypes.c_double),
)
ly_results_task = _sig("ly_results_task", st, c_p, ctypes.POINTER(ctypes.c_char_p))
ly_results_top = _sig(
    "ly_results_top", st, c_p, ctypes.c_size_t, ctypes.POINTER(ClassProb),
    ctypes.POINTER(ctypes.c_size_t),
)
ly_results_probs = _sig(
    "ly_results_probs", st, c_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_float)),
    ctypes.POINTER(ctypes.c_size_t),
)
ly_results_restored = _sig(
    "ly_results_restored", st, c_p, ctypes.POINTER(ImageView), ctypes.POINTER(ctypes.c_int)
)
ly_results_free = _sig("ly_results_free", st, c_p)
ly_image_save = _sig("ly_image_save", st, ctypes.c_char_p, ctypes.POINTER(Image), ctypes.c_int)
ly_image_load = _sig("ly_image_load", st, ctypes.c_char_p, ctypes.POINTER(Image))
ly_image_load_buffer = _sig(
    "ly_image_load_buffer", st, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
    ctypes.POINTER(Image),
)
ly_image_load_url = _sig("ly_image_load_url", st, ctypes.c_char_p, ctypes.POINTER(Image))
ly_image_free = _sig("ly_image_free", st, ctypes.POINTER(Image))
ly_image_annotate_detections = _sig(
    "ly_image_annotate_detections", st, ctypes.POINTER(Image), ctypes.POINTER(Detection),
    ctypes.c_size_t,
)
ly_image_annotate_classes = _sig(
    "ly_image_annotate_classes", st, ctypes.POINTER(Image), ctypes.POINTER(ClassProb),
    ctypes.c_size_t,
)
ly_source_list_expand = _sig(
    "ly_source_list_expand", st, ctypes.c_char_p, ctypes.POINTER(SourceList)
)
ly_source_list_free = _sig("ly_source_list_free", st, ctypes.POINTER(SourceList))
ly_save_folder = _sig(
    "ly_save_folder", st, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool, ctypes.c_char_p,
    ctypes.c_size_t,
)
ly_export_options_init = _sig("ly_export_options_init", st, ctypes.POINTER(ExportOptions))
ly_model_export = _sig(
    "ly_model_export", st, c_p, ctypes.POINTER(ExportOptions), ctypes.c_char_p, ctypes.c_size_t
)
ly_video_options_init = _sig("ly_video_options_init", st, ctypes.POINTER(VideoOptions))
ly_video_is_source = _sig("ly_video_is_source", st, ctypes.c_char_p, ctypes.POINTER(ctypes.c_bool))
ly_video_open = _sig(
    "ly_video_open", st, ctypes.c_char_p, ctypes.POINTER(VideoOptions), ctypes.POINTER(c_p)
)
ly_video_get_info = _sig("ly_video_get_info", st, c_p, ctypes.POINTER(VideoInfo))
ly_video_read = _sig(
    "ly_video_read", st, c_p, ctypes.POINTER(Image), ctypes.POINTER(VideoFrame),
    ctypes.POINTER(ctypes.c_bool),
)
ly_video_close = _sig("ly_video_close", st, c_p)
ly_video_writer_open = _sig(
    "ly_video_writer_open", st, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_double,
    ctypes.c_char_p, ctypes.POINTER(c_p),
)
ly_video_write = _sig("ly_video_write", st, c_p, ctypes.POINTER(Image))
ly_video_writer_close = _sig("ly_video_writer_close", st, c_p)
ly_video_writer_discard = _sig("ly_video_writer_discard", st, c_p)
ly_track_config_check = _sig("ly_track_config_check", st, ctypes.POINTER(TrackConfig))
ly_tracker_create = _sig(
    "ly_tracker_create", st, ctypes.POINTER(TrackConfig), ctypes.POINTER(c_p)
)
ly_tracker_update = _sig(
    "ly_tracker_update", st, c_p, ctypes.POINTER(Detection), ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int64),
    ctypes.POINTER(ctypes.c_size_t),
)
ly_tracker_reset = _sig("ly_tracker_reset", st, c_p)
ly_tracker_free = _sig("ly_tracker_free", st, c_p)
ly_image_annotate_tracks = _sig(
    "ly_image_annotate_tracks", st, ctypes.POINTER(Image), ctypes.POINTER(Detection),
    ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t,
)
ly_results_tiles = _sig("ly_results_tiles", st, c_p, ctypes.POINTER(ctypes.c_int))
ly_results_save_tiled = _sig(
    "ly_results_save_tiled", st, c_p, ctypes.POINTER(Image), c_p, ctypes.c_char_p, ctypes.c_char_p,
    ctypes.c_char_p,
)
