# SPDX-License-Identifier: MIT
"""predict on video as LibreYOLO's: Results per frame (frame_idx, path), a
generator with stream=True that reads one frame at a time, vid_stride, and
save=True writing <stem>.mp4; the clip is written here with the library."""
import ctypes
import os

import numpy as np
import pytest

from libreyolo_c import LibreYOLO
from libreyolo_c import _images
from libreyolo_c import _native as n
from libreyolo_c.errors import check

FRAMES = 9


def _video_built():
    c = ctypes.c_bool()
    n.lib.ly_video_available(ctypes.byref(c))
    return c.value


@pytest.fixture(scope="module")
def clip(tmp_path_factory, images):
    if not _video_built():
        pytest.skip("this build has no video (FFmpeg's libraries)")
    photo = _images.load_rgb(images[2])
    path = str(tmp_path_factory.mktemp("video") / "clip.avi")
    writer = ctypes.c_void_p()
    check(n.ly_video_writer_open(path.encode(), 320, 240, 25.0, b"mjpeg", ctypes.byref(writer)))
    for k in range(FRAMES):
        frame = np.ascontiguousarray(photo[200:440, 16 * k:16 * k + 320])
        check(n.ly_video_write(writer, ctypes.byref(_images.as_c_image(frame))))
    check(n.ly_video_writer_close(writer))
    return path


def test_stream_yields_frames(detector_path, clip):
    model = LibreYOLO(detector_path)
    gen = model.predict(clip, stream=True)
    assert not isinstance(gen, list)
    seen = []
    for r in gen:
        assert r.path == clip and r.orig_shape == (240, 320)
        seen.append(r.frame_idx)
    assert seen == list(range(FRAMES))
    listed = model(clip, vid_stride=4)
    assert [r.frame_idx for r in listed] == [0, 4, 8]


def test_frames_match_images(detector_path, clip, tmp_path):
    """Each frame's boxes are predict's on that frame as an array."""
    model = LibreYOLO(detector_path)
    for r in model.predict(clip, stream=True):
        again = model.predict(r.orig_img)
        np.testing.assert_array_equal(r.boxes.xyxy, again.boxes.xyxy)
        np.testing.assert_array_equal(r.boxes.conf, again.boxes.conf)


def test_save_writes_mp4(detector_path, clip, tmp_path):
    model = LibreYOLO(detector_path)
    out = tmp_path / "annotated.mp4"
    results = model.predict(clip, save=True, output_path=str(out), vid_stride=2)
    assert len(results) == 5 and results[0].saved_path == str(out)
    reader = ctypes.c_void_p()
    check(n.ly_video_open(str(out).encode(), None, ctypes.byref(reader)))
    info = n.VideoInfo()
    check(n.ly_video_get_info(reader, ctypes.byref(info)))
    n.ly_video_close(reader)
    assert (info.width, info.height, info.codec) == (320, 240, b"mpeg4")
    assert abs(info.fps - 12.5) < 1e-6 and info.frame_count == 5


def test_missing_video(detector_path, tmp_path):
    if not _video_built():
        pytest.skip("this build has no video (FFmpeg's libraries)")
    with pytest.raises(FileNotFoundError):
        LibreYOLO(detector_path).predict(str(tmp_path / "absent.mp4"))
