"""Traps a new user falls into: an existing image taken for the output, and
--stats over several files."""

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from gftest import random_image, read_png, write_png
from test_cli import check_error

ROOT = Path(__file__).resolve().parents[2]


def two_photos(rng, tmp_path):
    a = write_png(tmp_path / "a.png", random_image(rng, 31, 23, 3))
    b = write_png(tmp_path / "b.png", random_image(rng, 29, 17, 3))
    return a, b


def test_stats_of_two_files_writes_neither(gf, rng, tmp_path):
    """--stats a.png b.png: statistics of both (one JSON document each), and both
    files unchanged (b.png used to be overwritten with a.png's pixels)."""
    a, b = two_photos(rng, tmp_path)
    before = {p: p.read_bytes() for p in (a, b)}
    r = gf.run("--backend", gf.backend, "--stats=json", "-j", "1", a, b).ok()
    lines, text, at = [], r.out.decode(), 0
    decoder = json.JSONDecoder()
    while text[at:].strip():  # one JSON document a file
        doc, at = decoder.raw_decode(text, at + len(text[at:]) - len(text[at:].lstrip()))
        lines.append(doc)
    assert sorted(line["file"] for line in lines) == sorted([str(a), str(b)])
    for line in lines:
        img = read_png(line["file"])
        assert (line["width"], line["height"]) == (img.shape[1], img.shape[0])
    assert {p: p.read_bytes() for p in (a, b)} == before


def test_stats_output_only_when_named(gf, rng, tmp_path):
    a, _ = two_photos(rng, tmp_path)
    out = tmp_path / "out.png"
    gf.run("--backend", gf.backend, "--stats", "-m", "box3", "--output", out, a).ok()
    assert out.exists()
    r = gf.run("--backend", gf.backend, "--stats", "--output", out, a, a)
    check_error(r, 2, ["--output"])


def test_two_images_as_input_output_is_refused(gf, rng, tmp_path):
    """gpufilter -m sobel *.png matching two images: the second is an image
    gpufilter did not write, so it is not replaced; the message says how."""
    a, b = two_photos(rng, tmp_path)
    before = b.read_bytes()
    r = gf.run("--backend", gf.backend, "-m", "sobel", a, b)
    check_error(r, 2, [str(b), "--force", "--output", "-o DIR"])
    assert b.read_bytes() == before


@pytest.mark.parametrize("how", [["--force", "{a}", "{b}"], ["--output", "{b}", "{a}"]])
def test_replacing_a_foreign_image_when_asked(gf, rng, tmp_path, how):
    a, b = two_photos(rng, tmp_path)
    args = [x.format(a=a, b=b) for x in how]
    gf.run("--backend", gf.backend, *args).ok()
    assert np.array_equal(read_png(b), read_png(a))


@pytest.mark.parametrize("ext", ["png", "jpg"])
def test_running_a_command_again_replaces_its_own_output(gf, rng, tmp_path, ext):
    """The outputs carry gpufilter's mark (PNG tEXt Software, JPEG COM), so
    the same command runs again over its own output."""
    a, _ = two_photos(rng, tmp_path)
    out = tmp_path / f"out.{ext}"
    for mask in ("box3", "sobel"):
        gf.run("--backend", gf.backend, "-m", mask, a, out).ok()
    with Image.open(out) as im:
        if ext == "png":
            assert im.info.get("Software") == "gpufilter"
        else:
            assert im.info.get("comment") == b"gpufilter"
        assert im.size == (31, 23)


@pytest.mark.parametrize("ext", ["bmp", "tga"])
def test_unmarkable_formats_need_force_to_run_again(gf, rng, tmp_path, ext):
    a, _ = two_photos(rng, tmp_path)
    out = tmp_path / f"out.{ext}"
    gf.run("--backend", gf.backend, a, out).ok()
    check_error(gf.run("--backend", gf.backend, a, out), 2, [str(out), "--force"])
    gf.run("--backend", gf.backend, "--force", a, out).ok()


def test_output_onto_its_own_input_is_allowed(gf, rng, tmp_path):
    a, _ = two_photos(rng, tmp_path)
    gf.run("--backend", gf.backend, "-m", "box3", a, a).ok()


def test_existing_file_that_is_no_image_is_replaced(gf, rng, tmp_path):
    a, _ = two_photos(rng, tmp_path)
    out = tmp_path / "out.png"
    out.write_bytes(b"not an image")
    gf.run("--backend", gf.backend, a, out).ok()
    assert np.array_equal(read_png(out), read_png(a))


def test_copied_binary_keeps_its_masks(gf, rng, tmp_path):
    """The built-in masks are compiled in: a binary copied anywhere (no
    masks/ beside it) still has them, and --list-masks says where it looked."""
    lone = tmp_path / "bin" / "gpufilter"
    lone.parent.mkdir()
    shutil.copy(gf.path, lone)
    src = write_png(tmp_path / "in.png", random_image(rng, 33, 21, 3))
    for mask in ("sobel", "gaussian5", "emboss"):
        run = subprocess.run([str(lone), "--backend", "cpu", "-m", mask, str(src),
                              str(tmp_path / f"{mask}-lone.png")],
                             capture_output=True, env={"PATH": "/usr/bin:/bin"}, timeout=60)
        assert run.returncode == 0, run.stderr
        gf.run("--backend", "cpu", "-m", mask, src, tmp_path / f"{mask}.png").ok()
        assert np.array_equal(read_png(tmp_path / f"{mask}-lone.png"), read_png(tmp_path / f"{mask}.png"))
    listing = subprocess.run([str(lone), "--list-masks"], capture_output=True, text=True,
                             timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert listing.returncode == 0
    lines = listing.stdout.split("# parametric: ")[0].splitlines()
    assert lines[0].startswith("# masks from: ") and "built in" in lines[0], lines[0]
    names = [line.split()[0] for line in lines[1:]]
    assert "sobel" in names and all(line.endswith("(built-in)") for line in lines[1:]), lines


def test_a_mask_file_overrides_the_built_in(gf, rng, tmp_path):
    lone = tmp_path / "bin" / "gpufilter"
    lone.parent.mkdir()
    shutil.copy(gf.path, lone)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "sobel.mask").write_text("# my sobel: identity\n1 1\n1\n")
    img = random_image(rng, 17, 9, 3)
    src = write_png(tmp_path / "in.png", img)
    env = {**os.environ, "GPUFILTER_MASKS": str(folder)}
    run = subprocess.run([str(lone), "--backend", "cpu", "-m", "sobel", str(src),
                          str(tmp_path / "o.png")], capture_output=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert np.array_equal(read_png(tmp_path / "o.png"), img)
    listing = subprocess.run([str(lone), "--list-masks"], capture_output=True, text=True,
                             env=env, timeout=60).stdout
    assert f"my sobel: identity  ({folder})" in listing and str(folder) in listing.splitlines()[0]


# ---- --gray, --verify, --summary, libvips matrices ------------------------------------------


def luma(rgb):
    """The Y of OpenCV's RGB2YCrCb (fixed-point BT.601): the luminance that
    --equalize works on, and so the oracle of --gray (RGB2GRAY rounds
    differently in about 0.2% of pixels)."""
    import cv2
    return cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2YCrCb)[:, :, 0]


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_gray(gf, rng, tmp_path, channels):
    img = random_image(rng, 37, 19, channels)
    src = write_png(tmp_path / "in.png", img)
    out = tmp_path / "out.png"
    gf.run("--backend", gf.backend, "--gray", src, out).ok()
    got = read_png(out)
    if channels <= 2:
        want = img
    else:
        want = luma(img[:, :, :3])[:, :, None]
        if channels == 4:
            want = np.concatenate([want, img[:, :, 3:]], axis=2)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_gray_jpeg_is_one_channel(gf, rng, tmp_path):
    """A colour photo made gray is written as a one-channel JPEG, smaller than
    the colour one, and it decodes as gray."""
    src = tmp_path / "in.png"
    from gftest import photo
    write_png(src, photo("astronaut.png", "RGB"))
    gf.run("--backend", gf.backend, "--gray", src, tmp_path / "gray.jpg").ok()
    gf.run("--backend", gf.backend, src, tmp_path / "colour.jpg").ok()
    with Image.open(tmp_path / "gray.jpg") as im:
        assert im.mode == "L" and im.layers == 1
    assert (tmp_path / "gray.jpg").stat().st_size < (tmp_path / "colour.jpg").stat().st_size


def test_verify(gf, rng, tmp_path):
    """--verify runs the reference too and prints the largest difference and
    where; within one level the output is written."""
    src = write_png(tmp_path / "in.png", random_image(rng, 61, 43, 4))
    out = tmp_path / "out.png"
    r = gf.run("--backend", gf.backend, "--verify", "-m", "gaussian5", "-m", "sobel", src, out).ok()
    lines = [line for line in r.err_lines if "verify:" in line]
    assert len(lines) == 1, r.err
    m = re.search(r"largest difference (\d+) \(x (\d+), y (\d+), channel (\d)\), (\d+) of (\d+) "
                  r"values differ; within the bound of 1", lines[0])
    assert m, lines[0]
    assert int(m.group(1)) <= 1 and int(m.group(6)) == 61 * 43 * 4
    if gf.backend == "cpu":
        assert int(m.group(1)) == 0 and int(m.group(5)) == 0
    assert out.exists()
    check_error(gf.run("--verify", "-o", tmp_path / "d", src), 2, ["--verify"])


def test_stats_summary_over_files(gf, rng, tmp_path):
    """--summary: after each file's statistics, one document over every pixel
    of every file, per channel name, against numpy."""
    imgs = [random_image(rng, 13, 7, 3), random_image(rng, 5, 9, 4), random_image(rng, 8, 8, 1)]
    srcs = [write_png(tmp_path / f"i{k}.png", im) for k, im in enumerate(imgs)]
    r = gf.run("--backend", gf.backend, "--stats=json", "--summary", "-j", "2", *srcs).ok()
    decoder, text, at, docs = json.JSONDecoder(), r.out.decode(), 0, []
    while text[at:].strip():
        at += len(text[at:]) - len(text[at:].lstrip())
        doc, at = decoder.raw_decode(text, at)
        docs.append(doc)
    assert len(docs) == 4 and "summary" in docs[-1] and all("file" in d for d in docs[:3])
    summary = docs[-1]
    assert summary["summary"] == {"files": 3, "pixels": 13 * 7 + 5 * 9 + 64}
    values = {"red": [imgs[0][:, :, 0], imgs[1][:, :, 0]], "green": [imgs[0][:, :, 1], imgs[1][:, :, 1]],
              "blue": [imgs[0][:, :, 2], imgs[1][:, :, 2]], "alpha": [imgs[1][:, :, 3]],
              "gray": [imgs[2][:, :, 0]]}
    assert [ch["name"] for ch in summary["channels"]] == ["gray", "red", "green", "blue", "alpha"]
    for ch in summary["channels"]:
        v = np.concatenate([a.ravel() for a in values[ch["name"]]]).astype(np.int64)
        hist = np.bincount(v, minlength=256)
        assert ch["histogram"] == hist.tolist()
        assert (ch["min"], ch["max"]) == (v.min(), v.max())
        assert ch["median"] == int(np.searchsorted(np.cumsum(hist) * 2, v.size))
        assert math.isclose(ch["mean"], v.mean(), rel_tol=1e-12)
        assert math.isclose(ch["std"], v.std(), rel_tol=1e-9)
    check_error(gf.run("--stats", "--summary", srcs[0]), 2, ["--summary"])


def test_vips_matrix_files(gf, rng, tmp_path):
    """A mask file without its comment lines, named .mat, is a libvips matrix:
    gpufilter reads it as a file, and vips conv gives the same image."""
    body = "".join(line for line in (ROOT / "masks/gaussian5.mask").read_text().splitlines(True)
                   if not line.startswith("#"))
    mat = tmp_path / "g5.mat"
    mat.write_text(body)
    img = random_image(rng, 47, 31, 1)
    src = write_png(tmp_path / "in.png", img)
    gf.run("--backend", gf.backend, "-m", mat.name, src, tmp_path / "gf.png", cwd=tmp_path).ok()
    gf.run("--backend", gf.backend, "-m", "gaussian5", src, tmp_path / "named.png").ok()
    assert np.array_equal(read_png(tmp_path / "gf.png"), read_png(tmp_path / "named.png"))
    if not shutil.which("vips"):
        pytest.skip("vips is not installed")
    r = subprocess.run(["vips", "conv", str(src), str(tmp_path / "vips.png"), str(mat),
                        "--precision", "integer"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # vips reads pixels outside the image as its edge does (--border nearest's)
    # only in its interior: compare there
    got, want = read_png(tmp_path / "gf.png")[2:-2, 2:-2], read_png(tmp_path / "vips.png")[2:-2, 2:-2]
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
