"""Limits checked before decoding: --max-pixels and images whose header
declares more pixels than the limit (a "decompression bomb")."""

import struct
from pathlib import Path
import zlib

import pytest

from gftest import random_image, read_png, write_png
from test_cli import check_error, check_truncations_refused


def png_header_only(width, height):
    """A PNG whose IHDR declares width x height gray pixels but whose data is
    one tiny compressed row: decoding it would allocate width * height bytes."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\0" * 64)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def test_over_max_pixels_is_refused(gf, rng, tmp_path):
    src = write_png(tmp_path / "in.png", random_image(rng, 40, 30, 3))
    out = tmp_path / "out.png"
    r = gf.run("--backend", gf.backend, "--max-pixels", "1199", "-m", "box3", src, out)
    check_error(r, 1, [str(src), "1200", "1199"])
    assert not out.exists()


def test_at_max_pixels_works(gf, rng, tmp_path):
    img = random_image(rng, 40, 30, 3)
    src = write_png(tmp_path / "in.png", img)
    out = tmp_path / "out.png"
    r = gf.run("--backend", gf.backend, "--max-pixels", "1200", "-m", "identity", src, out)
    assert r.rc == 0, r.describe()
    assert (read_png(out) == img).all()


@pytest.mark.parametrize("value", ["0", "-5", "abc", "1e9", "", "99999999999999999999999"])
def test_bad_max_pixels_value(gf, rng, tmp_path, value):
    src = write_png(tmp_path / "in.png", random_image(rng, 4, 4, 1))
    out = tmp_path / "out.png"
    r = gf.run("--backend", gf.backend, "--max-pixels", value, src, out)
    check_error(r, 2, ["--max-pixels"])
    assert not out.exists()


@pytest.mark.parametrize("width,height", [(20000, 20000), (1 << 20, 300)])
def test_declared_size_is_checked_before_decoding(gf, tmp_path, width, height):
    """400 Mpx and 300 Mpx declared, under stb's own limit: refused by the
    pixel limit from the header alone, before any pixel memory exists."""
    src = tmp_path / "bomb.png"
    src.write_bytes(png_header_only(width, height))
    out = tmp_path / "out.png"
    r = gf.run("--backend", gf.backend, "--max-pixels", "100000000", "-m", "box3", src, out,
               timeout=20)
    check_error(r, 1, [str(src), "over the limit"])
    assert not out.exists()


@pytest.mark.parametrize("width,height", [(100000, 100000), (1 << 24, 1 << 24), (40000, 30000)])
def test_absurd_declared_size(gf, tmp_path, width, height):
    """Sizes stb itself refuses (over 2^30 bytes): a clean failure, no output."""
    src = tmp_path / "bomb.png"
    src.write_bytes(png_header_only(width, height))
    out = tmp_path / "out.png"
    r = gf.run("--backend", gf.backend, "-m", "box3", src, out, timeout=20)
    check_error(r, 1, [str(src)])
    assert not out.exists()


REGRESSIONS = sorted((Path(__file__).resolve().parent.parent / "fuzz" / "regressions").iterdir())


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: p.name)
def test_fuzz_regression(gf, tmp_path, path):
    """Inputs that once crashed a decoder: refused with a message, no output."""
    out = tmp_path / "out.png"
    r = gf.run("--backend", gf.backend, "-m", "sobel", "--equalize", path, out, timeout=60)
    check_error(r, 1, [str(path)])
    assert not out.exists()


@pytest.mark.parametrize("fmt", ["BMP", "TGA"])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_truncated_bmp_and_tga_are_refused(gf, rng, tmp_path, fmt, channels):
    """stb_image pads missing pixel data with zeros; the tool refuses instead.
    The whole file still works."""
    import io
    from PIL import Image
    img = random_image(rng, 53, 37, channels)
    buf = io.BytesIO()
    Image.fromarray(img[..., 0] if channels == 1 else img).save(buf, format=fmt)
    data = buf.getvalue()
    whole = tmp_path / f"whole.{fmt.lower()}"
    whole.write_bytes(data)
    gf.run("--backend", gf.backend, whole, tmp_path / "whole.png").ok()
    check_truncations_refused(gf, tmp_path, data, (len(data) // 2, len(data) - 200), fmt.lower())
