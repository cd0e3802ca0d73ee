# SPDX-License-Identifier: MIT
"""LibreYOLO's Results API and predict's calling conventions (libreyolo/utils/
results.py, predict_args.py and image_loader.py at c41461e): one Results for
one image and a list for several, the Boxes and Probs surface, summary and
to_json rows, plot and save (the command's bytes), every keyword honoured or
refused, and the inputs LibreYOLO takes."""
import io
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import VIT, cli
from libreyolo_c import LibreYOLO, Results
from libreyolo_c._images import load_rgb
from libreyolo_c.model import LibreYOLONotImplementedError, LibreYOLOValueError


@pytest.fixture(scope="module")
def model(detector_path):
    return LibreYOLO(detector_path, device="cpu", task="detect")


def same(a, b):
    return (len(a) == len(b) and (np.asarray(a.boxes.xyxy) == np.asarray(b.boxes.xyxy)).all()
            and (np.asarray(a.boxes.conf) == np.asarray(b.boxes.conf)).all())


def test_one_image_one_results(model, images):
    r = model(images[2])
    assert isinstance(r, Results) and len(r) == len(r.boxes) > 0
    xyxy = r.boxes.xyxy.cpu().numpy()
    assert type(xyxy) is np.ndarray and xyxy.shape == (len(r), 4)
    listed = model([images[2]])
    assert isinstance(listed, list) and len(listed) == 1 and same(listed[0], r)
    stream = model(images, stream=True)
    assert not isinstance(stream, list)
    assert [x.path for x in stream] == images


def test_boxes_surface(model, images):
    r = model(images[2], conf=0.3)
    b = r.boxes
    h, w = r.orig_shape
    xyxy, xywh = np.asarray(b.xyxy), np.asarray(b.xywh)
    assert np.allclose(xywh[:, :2], (xyxy[:, :2] + xyxy[:, 2:]) / 2)
    assert np.allclose(xywh[:, 2:], xyxy[:, 2:] - xyxy[:, :2])
    assert np.allclose(np.asarray(b.xyxyn), xyxy / [w, h, w, h])
    assert np.allclose(np.asarray(b.xywhn), xywh / [w, h, w, h])
    assert b.data.shape == (len(b), 6) and (np.asarray(b.data[:, 4]) == np.asarray(b.conf)).all()
    assert b.id is None and not b.is_track
    first = b[0]
    assert len(first) == 1 and first.xyxy.shape == (1, 4)
    assert [float(x.conf[0]) for x in b] == [float(c) for c in b.conf]
    assert b.cpu().numpy() is not None and float(b.conf[0].item()) == float(b.conf[0])
    top3 = r[0:3]
    assert isinstance(top3, Results) and len(top3) == min(3, len(r))


def test_summary_and_json(model, images):
    r = model(images[2], conf=0.3)
    rows = r.summary()
    assert len(rows) == len(r)
    assert set(rows[0]) == {"name", "class", "confidence", "box"}
    assert set(rows[0]["box"]) == {"x1", "y1", "x2", "y2"}
    assert rows[0]["name"] == r.names[rows[0]["class"]]
    assert rows[0]["confidence"] == round(float(r.boxes.conf[0]), 5)
    assert json.loads(r.to_json(normalize=True, decimals=3))[0]["box"]["x2"] <= 1.0


def test_plot_and_save_as_the_command_saves(model, images, tmp_path):
    subprocess.run([cli(), "predict", "--model", model.model_path, "--source", images[0],
                    "--save", str(tmp_path / "cli")], check=True, capture_output=True)
    r = model(images[0], save=True, output_path=str(tmp_path / "py"))
    assert r.saved_path == str(tmp_path / "py" / "dog.jpg")
    with open(tmp_path / "cli" / "dog.jpg", "rb") as a, open(r.saved_path, "rb") as b:
        assert a.read() == b.read()
    plotted = r.plot()
    assert plotted.shape == (*r.orig_shape, 3) and plotted.dtype == np.uint8
    assert r.save(str(tmp_path / "again.png")).endswith("again.png")


def test_save_folders_numbered(model, images, tmp_path):
    first = model(images[:2], save=True, project=str(tmp_path), name="run")
    assert {os.path.dirname(r.saved_path) for r in first} == {str(tmp_path / "run")}
    again = model(images[0], save=True, project=str(tmp_path), name="run", exist_ok=True)
    assert os.path.dirname(again.saved_path) == str(tmp_path / "run")
    png = model(images[0], save=True, output_path=str(tmp_path / "one.png"),
                output_file_format="png")
    assert png.saved_path == str(tmp_path / "one.png") and os.path.getsize(png.saved_path) > 0


def test_keywords_honoured_or_refused(model, images):
    with pytest.raises(TypeError, match=r"cnf \(did you mean conf\?\)"):
        model(images[0], cnf=0.5)
    with pytest.warns(UserWarning, match="float32"):
        model(images[0], half=True)
    with pytest.warns(UserWarning, match="no-op"):
        model(images[0], verbose=False)
    with pytest.raises(NotImplementedError, match="visualize"):
        model(images[0], visualize=True)
    with pytest.raises(LibreYOLOValueError, match="runs whole models on the CPU"):
        model(images[0], device="cuda")
    with pytest.raises(LibreYOLONotImplementedError, match="augment"):
        model(images[0], augment=True)
    with pytest.raises(LibreYOLOValueError, match="color_format must be"):
        model(images[0], color_format="hsv")
    with pytest.raises(LibreYOLONotImplementedError, match="webp"):
        model(images[0], save=True, output_file_format="webp")
    with pytest.raises(LibreYOLOValueError, match="batch"):
        model(images[0], batch=0)
    with pytest.raises(LibreYOLOValueError, match=r"batch=257: expected an integer in 1\.\.256"):
        model(images[0], batch=257)
    assert same(model(images[0], device="auto", batch=4), model(images[0]))
    with pytest.raises(LibreYOLOValueError, match="task='classify'"):
        LibreYOLO(model.model_path, task="classify")
    with pytest.raises(LibreYOLOValueError, match="device='mps'"):
        LibreYOLO(model.model_path, device="mps")


def test_batch_is_one_network_call_with_the_same_results(model, images):
    """LibreYOLO's batch=N: chunks of N images (files and arrays) stacked
    into one forward where the family's network takes a batch (yolo9 does),
    each image's results as alone: the same classes, scores within 1e-5."""
    assert model.info()["batched"] is True
    flipped = np.ascontiguousarray(load_rgb(images[0])[:, ::-1])
    sources = images + [flipped, np.full((300, 200, 3), 90, np.uint8)]
    alone = model(sources, conf=0.05)
    for batch in (2, 3):
        together = model(sources, conf=0.05, batch=batch)
        assert [r.path for r in together] == [r.path for r in alone]
        for a, b in zip(together, alone):
            assert a.orig_shape == b.orig_shape and len(a) == len(b)
            assert np.allclose(np.sort(a.boxes.conf.numpy()), np.sort(b.boxes.conf.numpy()),
                               rtol=0, atol=1e-5)
            assert sorted(a.boxes.cls.numpy().tolist()) == sorted(b.boxes.cls.numpy().tolist())


def test_inputs(model, images, tmp_path):
    want = model(images[0])
    data = open(images[0], "rb").read()
    assert same(model(data), want) and same(model(io.BytesIO(data)), want)
    rgb = want.plot()  # any image will do: compare paths that read the same pixels
    base = model(rgb)
    assert same(model(np.ascontiguousarray(rgb[..., ::-1]), color_format="bgr"), base)
    scaled = rgb.astype(np.float32) / 255.0  # LibreYOLO: floats <= 1 are x 255, truncated
    assert same(model(scaled), model((scaled * 255).astype(np.uint8)))
    assert same(model(np.transpose(rgb, (2, 0, 1))), base)
    rgba = np.concatenate([rgb, np.full(rgb.shape[:2] + (1,), 255, np.uint8)], axis=2)
    assert same(model(rgba), base)
    gray = rgb[..., 1]
    assert same(model(gray), model(np.repeat(gray[..., None], 3, axis=2)))
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    for i, path in enumerate(images):
        os.symlink(path, (nested if i else tmp_path) / os.path.basename(path))
    found = model(str(tmp_path))
    assert sorted(os.path.basename(r.path) for r in found) == sorted(map(os.path.basename, images))
    assert len(model(str(tmp_path / "a" / "b" / "*.jpg"))) == len(images) - 1
    listing = tmp_path / "list.txt"
    listing.write_text("# two images\n" + images[1] + "\n\n" + images[2] + "\n")
    assert [r.path for r in model(str(listing))] == images[1:]
    with pytest.raises(FileNotFoundError, match="Source not found"):
        model(str(tmp_path / "nothing.jpg"))
    PIL = pytest.importorskip("PIL.Image")
    assert same(model(PIL.open(images[0])), want)


def test_classifier_results(images):
    if not os.path.exists(VIT):
        pytest.skip("../shared/testdata/vit is absent")
    m = LibreYOLO(VIT)
    r = m(images[0])
    assert r.boxes is None and len(r) == 1
    data = np.asarray(r.probs.data)
    assert r.probs.top1 == int(np.argmax(data)) == 521
    assert r.probs.top5 == np.argsort(data)[-5:][::-1].tolist()
    assert float(r.probs.top1conf) == data[521]
    assert (np.asarray(r.probs.top5conf) == data[r.probs.top5]).all()
    assert r.probs.top1conf.cpu().numpy() == data[521]
    rows = r.summary()
    assert len(rows) == 5 and rows[0]["class"] == 521 and set(rows[0]) == {"name", "class",
                                                                            "confidence"}
    assert r.plot().shape == (*r.orig_shape, 3)
