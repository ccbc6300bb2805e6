"""JPEG input turned by its EXIF Orientation tag (1..8) before any
operation, as vips autorot and ImageMagick -auto-orient turn it, and kept
as stored with --no-autorotate.

The Exif segments are written here by hand (both byte orders, and broken
ones) or by Pillow. Two oracles: numpy's turn of the stored pixels that
gpufilter --no-autorotate decodes (the same decoder: exact), and Pillow's
ImageOps.exif_transpose of its own decode (another decoder: the geometry,
on an image of flat blocks whose every turn differs by whole blocks)."""

import io
import json
import re
import struct

import numpy as np
import pytest
from PIL import Image, ImageOps

from gftest import assert_close, assert_equal_image, photo, read_image, write_png
from groups import write_bytes

W, H = 48, 32  # stored size; 5..8 come out H x W
ORIENTATIONS = range(1, 9)
TAG = 0x0112
TURNED = "decoded whole and turned on the host"


def blocks_image():
    """Flat coloured blocks of unequal sizes: no turn or flip maps it onto itself."""
    img = np.zeros((H, W, 3), np.uint8)
    img[:16, :16] = (230, 30, 30)
    img[:16, 16:] = (30, 200, 40)
    img[16:, :24] = (20, 40, 220)
    img[16:, 24:40] = (240, 230, 20)
    img[16:, 40:] = (250, 250, 250)
    return img


def jpeg_bytes(img, **save):
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=95, **save)
    return buf.getvalue()


def tiff(entries, big):
    """A TIFF structure with IFD0 at offset 8 holding (tag, type, count,
    value) entries; a SHORT (type 3) value sits in its field's first bytes."""
    e = ">" if big else "<"
    out = (b"MM" if big else b"II") + struct.pack(e + "HI", 42, 8)
    out += struct.pack(e + "H", len(entries))
    for tag, kind, count, value in entries:
        field = struct.pack(e + "HH", value, 0) if kind == 3 else struct.pack(e + "I", value)
        out += struct.pack(e + "HHI", tag, kind, count) + field
    return out + struct.pack(e + "I", 0)


def orientation_tiff(orientation, big):
    return tiff([(0x010F, 2, 4, 0x41424300), (TAG, 3, 1, orientation)], big)


def with_exif(jpeg, payload):
    """The JPEG with an APP1 segment of 'Exif\\0\\0' + payload right after SOI."""
    body = b"Exif\x00\x00" + payload
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body + jpeg[2:]


def oriented_jpeg(orientation, writer):
    """The blocks as a JPEG whose Exif says orientation: written by Pillow,
    or by hand in II (little-endian) or MM (big-endian) order."""
    img = blocks_image()
    if writer == "pillow":
        exif = Image.Exif()
        exif[TAG] = orientation
        return jpeg_bytes(img, exif=exif.tobytes())
    return with_exif(jpeg_bytes(img), orientation_tiff(orientation, writer == "MM"))


def turned(stored, orientation):
    """numpy's turn: a transpose for 5..8, then a left-right flip for 2, 3,
    6, 7 and a top-bottom flip for 3, 4, 7, 8 (the EXIF definitions)."""
    out = np.transpose(stored, (1, 0, 2)) if orientation >= 5 else stored
    if orientation in (2, 3, 6, 7):
        out = out[:, ::-1]
    if orientation in (3, 4, 7, 8):
        out = out[::-1]
    return np.ascontiguousarray(out)


def pillow_view(data):
    """Pillow's decode of a JPEG, turned by Pillow's reading of its Exif."""
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))


def decode(gf, src, dst, *extra, **kw):
    gf.run("--backend", gf.backend, *extra, src, dst, **kw).ok()
    return read_image(dst)


def expected_shape(orientation):
    return (W, H, 3) if orientation >= 5 else (H, W, 3)


def grouped_decode(gf, groups, request, *args, tag=""):
    """The test's JPEG and its decode by its group's batch run (groups.py)."""
    member = groups.run(request, lambda rng, orientation, writer: oriented_jpeg(orientation, writer),
                        [*args, "-f", "png"], write=write_bytes, suffix=".jpg", out_suffix=".png",
                        tag=tag)
    return member.source.read_bytes(), read_image(member.outputs[gf.backend])


@pytest.mark.batch_group("all")
@pytest.mark.parametrize("writer", ["II", "MM", "pillow"])
@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_each_orientation_comes_out_as_viewers_show_it(gf, groups, request, orientation, writer):
    _, stored = grouped_decode(gf, groups, request, "--no-autorotate", tag="-stored")
    assert stored.shape == (H, W, 3)
    data, got = grouped_decode(gf, groups, request, "-m", "identity")
    assert got.shape == expected_shape(orientation)
    assert_equal_image(got, turned(stored, orientation), f"orientation {orientation} ({writer})")
    assert_close(got, pillow_view(data), f"against Pillow's exif_transpose ({writer})",
                 max_diff=8, fraction=0.02)


def test_keep_orientation_gives_the_stored_pixels(gf, tmp_path):
    data = oriented_jpeg(6, "MM")
    src = tmp_path / "in.jpg"
    src.write_bytes(data)
    got = decode(gf, src, tmp_path / "out.png", "--no-autorotate", "-m", "identity")
    with Image.open(io.BytesIO(data)) as im:
        assert_close(got, np.asarray(im), "--no-autorotate against Pillow's stored decode",
                     max_diff=8, fraction=0.02)
    assert got.shape == (H, W, 3)


def broken_segments():
    """Exif payloads that must read as orientation 1 (no error)."""
    whole = orientation_tiff(6, False)
    entry = 8 + 2 + 12  # the orientation entry's offset in 'whole'
    past_end = bytearray(whole)
    past_end[4:8] = struct.pack("<I", len(whole) + 100)
    huge_count = bytearray(tiff([(0x0100, 3, 1, 5), (TAG, 3, 1, 6)], True))
    huge_count[8:10] = b"\xff\xff"
    return {
        "cut-in-the-value": whole[:entry + 9],
        "cut-in-the-header": whole[:6],
        "ifd-past-the-end": bytes(past_end),
        "count-past-the-end": bytes(huge_count)[:len(huge_count) - 16],
        "value-0": tiff([(TAG, 3, 1, 0)], False),
        "value-9": tiff([(TAG, 3, 1, 9)], True),
        "ascii-type": tiff([(TAG, 2, 1, 6)], False),
        "count-2": tiff([(TAG, 3, 2, 6)], True),
        "bad-magic": b"II\x2b\x00" + whole[4:],
        "bad-byte-order": b"IM" + whole[2:],
        "empty": b"",
        "garbage": bytes(range(7, 250, 3)),
    }


# the decodes of the file without EXIF are one batch run (groups.py)
@pytest.mark.batch_group("all")
@pytest.mark.parametrize("case", list(broken_segments()))
def test_broken_exif_reads_as_stored(gf, groups, request, tmp_path, case):
    plain = jpeg_bytes(blocks_image())
    src = tmp_path / "in.jpg"
    src.write_bytes(with_exif(plain, broken_segments()[case]))
    r = gf.run("--backend", gf.backend, "-v", "-m", "identity", src, tmp_path / "out.png").ok()
    assert TURNED not in r.err
    reference = groups.run(request, lambda rng, case: plain, ["-f", "png"], write=write_bytes,
                           suffix=".jpg", out_suffix=".png")
    want = read_image(reference.outputs[gf.backend])
    assert_equal_image(read_image(tmp_path / "out.png"), want, case)


def test_output_jpeg_has_no_orientation_tag(gf, tmp_path):
    data = oriented_jpeg(8, "pillow")
    src = tmp_path / "in.jpg"
    src.write_bytes(data)
    out = tmp_path / "out.jpg"
    gf.run("--backend", gf.backend, "-q", "95", src, out).ok()
    written = out.read_bytes()
    assert b"Exif\x00\x00" not in written
    with Image.open(out) as im:
        assert TAG not in im.getexif()
        view = np.asarray(im)
    assert view.shape == expected_shape(8)
    # a second JPEG generation blurs the blocks' edges; a wrong turn moves whole blocks
    mean = np.abs(view.astype(float) - pillow_view(data)).mean()
    assert mean < 3, f"the written JPEG against Pillow's view of the input: mean |diff| {mean:.2f}"


def test_standard_input_is_turned(gf, tmp_path):
    data = oriented_jpeg(6, "II")
    src = tmp_path / "in.jpg"
    src.write_bytes(data)
    want = decode(gf, src, tmp_path / "file.png")
    assert want.shape == expected_shape(6)
    got = decode(gf, "-", tmp_path / "stdin.png", stdin=data)
    assert_equal_image(got, want, "from standard input")
    r = gf.run("--backend", gf.backend, "--no-autorotate", "-", "-", stdin=data).ok()
    assert read_image(r.out).shape == (H, W, 3)


@pytest.mark.parametrize("keep", [False, True], ids=["autorotate", "no-autorotate"])
def test_batch_turns_each_file(gf, tmp_path, keep):
    folder = tmp_path / "in"
    folder.mkdir()
    inputs = []
    for orientation in ORIENTATIONS:
        path = folder / f"o{orientation}.jpg"
        path.write_bytes(oriented_jpeg(orientation, "MM" if orientation % 2 else "II"))
        inputs.append(path)
    inputs.append(write_png(folder / "plain.png", blocks_image()))
    extra = ["--no-autorotate"] if keep else []
    r = gf.run("--backend", gf.backend, "-v", "-j", "2", "--format", "png", *extra, "-o",
               tmp_path / "out", *inputs).ok()
    gf.run("--backend", gf.backend, "--no-autorotate", "--format", "png", "-o", tmp_path / "stored",
           *inputs[:-1]).ok()
    for orientation, path in zip(ORIENTATIONS, inputs):
        stored = read_image(tmp_path / "stored" / f"o{orientation}.png")
        got = read_image(tmp_path / "out" / f"o{orientation}.png")
        want = stored if keep else turned(stored, orientation)
        assert_equal_image(got, want, f"batch, orientation {orientation}")
        line = [x for x in r.err_lines if x.startswith(f"gpufilter: {path} ")]
        assert len(line) == 1, r.err
        said = f"(EXIF orientation {orientation}:" in line[0]
        assert said == (orientation > 1 and not keep), line[0]
    assert_equal_image(read_image(tmp_path / "out" / "plain.png"), blocks_image())


def test_stats_name_the_turned_size(gf, tmp_path):
    src = tmp_path / "in.jpg"
    src.write_bytes(oriented_jpeg(5, "MM"))
    doc = json.loads(gf.run("--backend", gf.backend, "--stats=json", src).ok().out)
    assert (doc["width"], doc["height"]) == (H, W)
    doc = json.loads(gf.run("--backend", gf.backend, "--stats=json", "--no-autorotate", src)
                     .ok().out)
    assert (doc["width"], doc["height"]) == (W, H)


def photo_jpeg(orientation, height=300, width=200):
    """A crop of a photo as a JPEG whose Exif (MM) says orientation."""
    img = np.ascontiguousarray(photo("astronaut.png")[:height, :width])
    return with_exif(jpeg_bytes(img), orientation_tiff(orientation, True))


def test_a_turned_jpeg_does_not_stream(gf, tmp_path):
    """A JPEG that would stream (forced here for a small one) is decoded
    whole when it turns, and -v says so; the file is the one its turned
    pixels give when filtered whole."""
    env = {"GPUFILTER_STREAM_BAND_ROWS": 128}
    for orientation in (1, 6):
        src = tmp_path / f"o{orientation}.jpg"
        src.write_bytes(photo_jpeg(orientation))
        out = tmp_path / f"o{orientation}-box3.jpg"
        r = gf.run("--backend", "cpu", "-v", "-m", "box3", src, out, env=env).ok()
        assert ("streamed in bands of" in r.err) == (orientation == 1), r.err
        said = re.search(rf"{re.escape(str(src))}: EXIF orientation 6 \(rotate 90 clockwise\): "
                         rf"{TURNED} before the operations", r.err)
        assert bool(said) == (orientation == 6), r.err
    # the same pixels, turned and stored losslessly, filtered whole: the same file
    gf.run("--backend", "cpu", src, tmp_path / "turned.png").ok()
    assert read_image(tmp_path / "turned.png").shape == (200, 300, 3)
    gf.run("--backend", "cpu", "-m", "box3", tmp_path / "turned.png", tmp_path / "whole.jpg",
           env=env).ok()
    assert out.read_bytes() == (tmp_path / "whole.jpg").read_bytes()


@pytest.mark.cuda_only
def test_gpu_codec_leaves_turned_jpegs_to_the_cpu_decoder(gf, tmp_path):
    """nvJPEG decodes the stored order: a turned JPEG is decoded and turned
    on the host, then filtered on the GPU; the others stay on nvJPEG."""
    folder = tmp_path / "in"
    folder.mkdir()
    inputs = []
    for orientation in (1, 6):
        path = folder / f"o{orientation}.jpg"
        path.write_bytes(photo_jpeg(orientation))
        inputs.append(path)
    r = gf.run("-v", "--backend", "cuda", "--codec", "gpu", "--format", "png", "-m", "identity",
               "-o", tmp_path / "out", *inputs).ok()
    lines = {line.split(" ")[1]: line for line in r.err_lines
             if re.match(r"gpufilter: \S+ \d+x\d+x\d: ", line)}
    assert "decode GPU" in lines[str(inputs[0])], r.err
    assert re.search(r"decode CPU [\d.]+ ms \(EXIF orientation 6: rotate 90 clockwise, on the "
                     r"host\), filter [\d.]+ ms on cuda", lines[str(inputs[1])]), r.err
    for orientation, path in zip((1, 6), inputs):
        stored = decode(gf, path, tmp_path / f"stored{orientation}.png", "--no-autorotate")
        got = read_image(tmp_path / "out" / f"o{orientation}.png")
        assert_close(got, turned(stored, orientation), f"--codec gpu, orientation {orientation}",
                     max_diff=4, fraction=0.05)
