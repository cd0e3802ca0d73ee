# SPDX-License-Identifier: MIT
"""The Python API against the C library's own results (through the command's
JSON, bit for bit), its exceptions, NumPy inputs, threads sharing one model,
classification, and export."""
import os
import struct
import threading

import numpy as np
import pytest

from conftest import SHARED, VIT, cli_json
from libreyolo_c import LibreYOLO, LibreYOLOValueError


def write_bmp(path, rgb):
    """A 24-bit BMP (BGR rows, bottom-up, padded to 4 bytes): a lossless file
    of exactly these pixels."""
    h, w, _ = rgb.shape
    row = (w * 3 + 3) // 4 * 4
    with open(path, "wb") as f:
        f.write(b"BM" + struct.pack("<IHHI", 54 + row * h, 0, 0, 54))
        f.write(struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, row * h, 2835, 2835, 0, 0))
        for y in range(h - 1, -1, -1):
            f.write(rgb[y, :, ::-1].tobytes() + b"\0" * (row - w * 3))


def test_same_numbers_as_the_c_api(detector_path, images):
    m = LibreYOLO(detector_path)
    for path in images:
        r = m.predict(path)
        doc = cli_json(["predict", "--model", detector_path, "--source", path, "--no-save"])
        want = doc["results"][0]
        assert tuple(r.orig_shape) == tuple(want["original_shape"])
        assert len(r.boxes) == len(want["detections"])
        for i, d in enumerate(want["detections"]):
            assert np.float32(d["confidence"]) == r.boxes.conf[i]
            assert (np.array(d["bbox_xyxy"], dtype=np.float32) == r.boxes.xyxy[i]).all()
            assert int(r.boxes.cls[i]) == d["class_id"]
            assert r.names[d["class_id"]] == d["class"]
    assert set(r.speed) == {"preprocess", "inference", "postprocess"}


def test_folders_lists_and_options(detector_path, images):
    m = LibreYOLO(detector_path)
    folder = m.predict(os.path.dirname(images[0]))
    assert [r.path for r in folder] == sorted(images)
    listed = m.predict(images[::-1], conf=0.5, max_det=3, classes=[27, 0])
    assert [r.path for r in listed] == images[::-1]
    for r in listed:
        assert len(r.boxes) <= 3 and (r.boxes.conf > 0.5).all()
        assert set(r.boxes.cls.astype(int)) <= {27, 0}


def test_numpy_arrays(detector_path, tmp_path):
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, size=(240, 320, 3), dtype=np.uint8)
    bmp = tmp_path / "x.bmp"
    write_bmp(bmp, rgb)
    m = LibreYOLO(detector_path)
    a = m.predict(rgb, conf=0.01)
    f = m.predict(str(bmp), conf=0.01)
    b = m.predict(np.ascontiguousarray(rgb[..., ::-1]), conf=0.01, bgr=True)
    s = m.predict(rgb[:, ::-1][:, ::-1], conf=0.01)  # a strided view
    for other in (f, b, s):
        assert (other.boxes.xyxy == a.boxes.xyxy).all() and (other.boxes.conf == a.boxes.conf).all()
    assert a.orig_shape == (240, 320) and a.path is None
    with pytest.raises(ValueError):
        m.predict(rgb[..., :2])


def test_exceptions(detector_path, tmp_path):
    with pytest.raises(FileNotFoundError):
        LibreYOLO(str(tmp_path / "missing.pt"))
    hostile = tmp_path / "hostile.pt"
    hostile.write_bytes(b"PK\x03\x04" + os.urandom(200))
    with pytest.raises(ValueError) as e:
        LibreYOLO(str(hostile))
    assert "hostile.pt" in str(e.value)
    m = LibreYOLO(detector_path)
    with pytest.raises(FileNotFoundError):
        m.predict(str(tmp_path / "nothing.jpg"))
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(ValueError) as e:
        m.predict(str(bad))
    assert "bad.jpg" in str(e.value)


def test_threads_share_a_model(detector_path, images):
    m = LibreYOLO(detector_path)
    alone = [m.predict(p) for p in images]
    got = {}

    def work(k):
        got[k] = [m.predict(p) for p in images * 2]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(3):
        for r, want in zip(got[k], alone * 2):
            assert (r.boxes.xyxy == want.boxes.xyxy).all() and (r.boxes.conf == want.boxes.conf).all()


def test_classify_and_fused_attention(images):
    if not os.path.exists(VIT):
        pytest.skip("../shared/testdata/vit is absent")
    m = LibreYOLO(VIT)
    assert m.task == "classify"
    r = m.predict(images[0])
    assert r.probs.top1 == 521 and len(r.probs.top5) == 5
    assert abs(float(r.probs.data.sum()) - 1.0) < 1e-4
    assert m.set_fused_attention(False) == 12


def test_export_round_trip(detector_path, tmp_path, images):
    m = LibreYOLO(detector_path)
    out = m.export(format="executorch", imgsz=320, output_path=str(tmp_path / "y.pte"))
    assert out.endswith("y.pte") and os.path.exists(out + ".json")
    p = LibreYOLO(out)
    assert p.info()["engine"] == "executorch" and p.family == "yolo9"
    assert p.predict(images[2]).orig_shape == m.predict(images[2]).orig_shape
    with pytest.raises(ValueError):
        m.export(format="executorch", imgsz=333)
    # ours: the DETR families' deformable attention form (YOLO9 has none: no effect)
    assert m.export(format="executorch", imgsz=320, msda="custom",
                    output_path=str(tmp_path / "c.pte")).endswith("c.pte")
    with pytest.raises(ValueError, match="msda must be 'portable' or 'custom'"):
        m.export(format="executorch", imgsz=320, msda="grid", output_path=str(tmp_path / "g.pte"))


SWINIR = os.path.join(SHARED, "swinir", "LibreSwinIRs-restore_seed0.pt")


def test_restore(tmp_path):
    """A restoration model's results: `restored` and `restore_scale`, as LibreYOLO's."""
    if not os.path.exists(SWINIR):
        pytest.skip("../shared/testdata/swinir is absent")
    model = LibreYOLO(SWINIR)
    assert model.set_fused_attention() == 0  # no module carries the flag
    ref = os.path.join(SHARED, "swinir", "ref_dog_162x118_tile60")
    r = model.predict(os.path.join(ref, "image.png"), tile=60, tile_pad=16)
    assert r.restore_scale == 4 and r.orig_shape == (118, 162) and len(r) == 0
    want = np.load(os.path.join(ref, "restored.npy"))
    got = r.restored.numpy()
    assert got.shape == want.shape and got.dtype == np.uint8
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max() <= 1 and (diff > 0).mean() <= 0.0005
    saved = r.restored.save(str(tmp_path / "restored.png"))
    assert os.path.getsize(saved) > 0
    with pytest.raises(LibreYOLOValueError, match="tile -1"):
        model.predict(os.path.join(ref, "image.png"), tile=-1)
