"""Traps a new user falls into: an existing image taken for the output, and
--stats over several files."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from gftest import random_image, read_png, write_png
from test_cli import check_error


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
    lines = listing.stdout.splitlines()
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
