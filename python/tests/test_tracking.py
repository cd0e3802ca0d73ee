# SPDX-License-Identifier: MIT
"""LibreYOLO's tracking API: TrackConfig and ByteTracker replaying LibreYOLO's
own outputs (track_seed0.json) through Python, and model.track on a static
scene the test makes (one photo as an image sequence)."""
import ctypes
import json
import os
import shutil
import warnings

import numpy as np
import pytest

from libreyolo_c import Boxes, ByteTracker, LibreYOLO, Results, TrackConfig
from libreyolo_c import _native as n

from conftest import SHARED

FIXTURE = os.path.join(SHARED, "track", "track_seed0.json")


def test_config_like_libreyolo():
    assert TrackConfig().track_buffer == 30 and TrackConfig().fuse_score is True
    with pytest.raises(TypeError):
        TrackConfig(0.3)  # keyword-only
    with pytest.raises(TypeError):
        TrackConfig(no_such_key=1)
    with pytest.raises(ValueError, match=r"track_high_thresh must be in \[0, 1\], got 2"):
        TrackConfig(track_high_thresh=2)
    with pytest.raises(ValueError, match=r"track_high_thresh \(0.1\) must be >= "
                                         r"track_low_thresh \(0.2\)"):
        TrackConfig(track_high_thresh=0.1, track_low_thresh=0.2)
    with pytest.warns(UserWarning, match="Unknown tracking config keys"):
        cfg = TrackConfig.from_kwargs(track_buffer=10, bogus=1)
    assert cfg.track_buffer == 10
    with pytest.warns(UserWarning, match="Unknown tracking config keys"):
        ByteTracker(bogus=1)


def test_replay_fixture():
    if not os.path.exists(FIXTURE):
        pytest.skip("../shared/testdata/track is absent")
    data = json.load(open(FIXTURE))
    for scenario in data["scenarios"]:
        frames = [np.asarray(f, dtype=np.float32).reshape(-1, 6) for f in scenario["frames"]]
        for name, entry in scenario["configs"].items():
            tracker = ByteTracker(TrackConfig(**entry["config"]))
            for k, rows in enumerate(frames):
                r = Results(Boxes(rows[:, :4], rows[:, 4], rows[:, 5]),
                            tuple(scenario["orig_shape"]))
                tracked = tracker.update(r)
                want = entry["tracked"][k]
                assert [int(i) for i in tracked.track_id] == [p[1] for p in want], (name, k)
                np.testing.assert_array_equal(tracked.boxes.id, tracked.track_id)
                np.testing.assert_array_equal(
                    tracked.boxes.xyxy, rows[[p[0] for p in want], :4].reshape(-1, 4))
            tracker.reset()
            again = tracker.update(Results(Boxes(frames[0][:, :4], frames[0][:, 4],
                                                 frames[0][:, 5]), (720, 1280)))
            assert len(again) == 0 or int(again.track_id.min()) == 1


def test_track_static_scene(detector_path, images, tmp_path):
    c = ctypes.c_bool()
    n.lib.ly_video_available(ctypes.byref(c))
    if not c.value:
        pytest.skip("this build has no video (FFmpeg's libraries)")
    for k in range(6):
        shutil.copy(images[2], tmp_path / f"{k:03d}.jpg")
    model = LibreYOLO(detector_path)
    out = tmp_path / "tracked.mp4"
    gen = model.track(str(tmp_path / "%03d.jpg"), max_det=10, save=True, output_path=str(out))
    first = None
    frames = 0
    for r in gen:
        ids = sorted(int(i) for i in r.track_id)
        assert ids, "no tracks"
        first = first or ids
        assert ids == first and r.frame_idx == frames
        frames += 1
    assert frames == 6 and out.exists()
    with pytest.warns(UserWarning, match="track_high_thresh"):
        next(model.track(str(tmp_path / "%03d.jpg"), track_conf=0.5))
    with pytest.raises(TypeError):
        next(model.track(str(tmp_path / "%03d.jpg"), tracker_config=TrackConfig(),
                         track_buffer=3))
    with pytest.raises(FileNotFoundError, match="Video file not found"):
        next(model.track(str(tmp_path / "absent.mp4x")))


def test_track_refuses_classifier(tmp_path):
    vit = os.path.join(SHARED, "vit", "LibreViTti_seed0.pt")
    if not os.path.exists(vit):
        pytest.skip("../shared/testdata/vit is absent")
    gen = LibreYOLO(vit).track(str(tmp_path / "clip.mp4"))
    with pytest.raises(NotImplementedError,
                       match=r"Tracking does not support classification models\. Use predict\(\)\."):
        next(gen)


def test_tiling_like_libreyolo(images, tmp_path):
    """predict(tiling=True): LibreYOLO's tiles and detections on parkour.jpg
    (tiled_parkour_640.json, D-FINE-n seed 0, overlap 0.2)."""
    fixture = os.path.join(SHARED, "track", "tiled_parkour_640.json")
    dfine = os.path.join(SHARED, "dfine", "LibreDFINEn_seed0.pt")
    if not (os.path.exists(fixture) and os.path.exists(dfine)):
        pytest.skip("../shared/testdata (tiling fixture, D-FINE-n) is absent")
    ref = json.load(open(fixture))
    model = LibreYOLO(dfine)
    r = model.predict(images[2], tiling=True, overlap_ratio=ref["overlap_ratio"])
    assert r.tiled is True and r.num_tiles == ref["num_tiles"]
    assert len(r) == len(ref["conf"])
    # as sets: two scores within 1e-4 of each other may come in either order
    ours = np.column_stack([r.boxes.cls, r.boxes.xyxy, r.boxes.conf])
    theirs = np.column_stack([ref["cls"], ref["xyxy"], ref["conf"]])
    ours, theirs = (a[np.lexsort(np.round(a[:, :5], 0).T[::-1])] for a in (ours, theirs))
    np.testing.assert_array_equal(ours[:, 0], theirs[:, 0])
    np.testing.assert_allclose(ours[:, 1:5], theirs[:, 1:5], atol=1.28)  # 1e-3 of 1280
    np.testing.assert_allclose(ours[:, 5], theirs[:, 5], atol=1e-4)
    small = model.predict(np.zeros((240, 320, 3), np.uint8), tiling=True)
    assert not hasattr(small, "num_tiles")
    saved = model.predict(images[2], tiling=True, save=True, output_path=str(tmp_path))
    names = sorted(os.listdir(saved.saved_path))
    assert names == ["final_image.jpg", "grid_visualization.jpg", "metadata.json", "tiles"]
    assert len(os.listdir(saved.tiles_path)) == ref["num_tiles"]
    meta = json.load(open(os.path.join(saved.saved_path, "metadata.json")))
    assert meta["num_tiles"] == 6 and meta["num_detections"] == len(r) and meta["iou"] == 0.45
    with pytest.raises(ValueError, match="tiling and augment cannot be used together"):
        model.predict(images[2], tiling=True, augment=True)
    with pytest.raises(ValueError, match=r"overlap_ratio 1: expected a number in \[0, 1\)"):
        model.predict(images[2], tiling=True, overlap_ratio=1.0)
