"""Write PNG files of any colour type, bit depth, filter and chunk layout,
and say what stb_image 2.27 decodes them to (req_comp 0), from the sample
values alone: the independent oracle of test_png_codec.py. A 16-bit file
decodes to its samples (uint16; a tRNS key gives alpha 0 or 65535), as
stbi_load_16 gives them, with wide=True; else to stbi_load's high bytes.

    data, expect = make_png(rng, color=0, depth=4, width=9, height=5, trns=True)
"""

import struct
import zlib

import numpy as np

SAMPLES = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}       # per pixel in the data
DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
GRAY_SCALE = {1: 0xFF, 2: 0x55, 4: 0x11, 8: 1}  # stb scales gray up to 0..255


def chunk(kind, body):
    crc = zlib.crc32(kind + body) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def paeth(a, b, c):
    """The PNG Paeth predictor, element-wise over int arrays."""
    p = a + b - c
    pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
    return np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))


def filter_rows(rows, bpp, filters):
    """Filter each row (bytes) with the filter type given for it: each byte
    less its predictor from the unfiltered bytes to its left and above."""
    out = bytearray()
    prior = np.zeros(len(rows[0]), dtype=np.int32)
    for row, f in zip(rows, filters):
        x = np.frombuffer(row, dtype=np.uint8).astype(np.int32)
        left = np.concatenate([np.zeros(min(bpp, len(x)), np.int32), x[:-bpp]])[:len(x)]
        upleft = np.concatenate([np.zeros(min(bpp, len(x)), np.int32), prior[:-bpp]])[:len(x)]
        pred = (np.zeros_like(x), left, prior, (left + prior) >> 1, paeth(left, prior, upleft))[f]
        out.append(int(f))
        out += ((x - pred) & 0xFF).astype(np.uint8).tobytes()
        prior = x
    return bytes(out)


def pack_row(samples, depth):
    """One row of sample values (1-D ints) as PNG bytes."""
    if depth == 16:
        return samples.astype(">u2").tobytes()
    if depth == 8:
        return samples.astype(np.uint8).tobytes()
    per = 8 // depth
    padded = np.zeros(-(-len(samples) // per) * per, dtype=np.uint32)
    padded[:len(samples)] = samples
    groups = padded.reshape(-1, per)
    shifts = np.arange(8 - depth, -1, -depth, dtype=np.uint32)
    return (groups << shifts).sum(axis=1).astype(np.uint8).tobytes()


def png_file(width, height, color, depth, idat, extra_before=(), idat_split=1,
             interlace=0):
    """A PNG from its IDAT zlib stream, split in idat_split chunks."""
    ihdr = struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, interlace)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    for kind, body in extra_before:
        out += chunk(kind, body)
    step = max(1, -(-len(idat) // idat_split))
    for at in range(0, len(idat), step):
        out += chunk(b"IDAT", idat[at:at + step])
    return out + chunk(b"IEND", b"")


# Adam7: (x origin, y origin, x step, y step) of each pass
ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2))


def scanlines(rng, samples, depth, bpp, interlace):
    """The filtered scanlines of H x W x n samples, Adam7 passes in turn."""
    passes = [samples[y0::dy, x0::dx] for x0, y0, dx, dy in ADAM7] if interlace else [samples]
    raw = b""
    for image in passes:
        if image.shape[0] and image.shape[1]:
            rows = [pack_row(image[y].reshape(-1), depth) for y in range(image.shape[0])]
            raw += filter_rows(rows, bpp, rng.integers(0, 5, size=len(rows)))
    return raw


def make_png(rng, color, depth, width, height, trns=False, palette_size=None,
             trns_size=None, idat_split=1, level=6, interlace=False, wide=False):
    """Random samples in a PNG with random row filters; returns the file and
    the H x W x C array stb_image decodes it to (uint16 for a 16-bit file
    with wide, else uint8)."""
    n = SAMPLES[color]
    top = (1 << depth) - 1
    extra = []
    if color == 3:
        palette_size = palette_size or (1 << depth)
        samples = rng.integers(0, min(palette_size, top + 1), size=(height, width, 1))
        pal = rng.integers(0, 256, size=(palette_size, 3), dtype=np.uint8)
        extra.append((b"PLTE", pal.tobytes()))
        alpha = np.full(palette_size, 255, dtype=np.uint8)
        if trns:
            k = trns_size or palette_size
            alpha[:k] = rng.integers(0, 256, size=k, dtype=np.uint8)
            extra.append((b"tRNS", alpha[:k].tobytes()))
        rgba = np.concatenate([pal, alpha[:, None]], axis=1)
        expect = rgba[samples[:, :, 0]][:, :, :4 if trns else 3]
    else:
        samples = rng.integers(0, top + 1, size=(height, width, n))
        if trns:
            # a key that some pixels match: the first pixel's colour
            key = samples[0, 0].copy()
            samples[height // 2, :: 3] = key
            extra.append((b"tRNS", struct.pack(">" + "H" * n, *key)))
        deep = wide and depth == 16
        expect = samples if deep else (samples >> 8) if depth == 16 else \
            samples * GRAY_SCALE[depth] if color == 0 else samples
        kind = np.uint16 if deep else np.uint8
        expect = expect.astype(kind)
        if trns:
            match = np.all(samples == key, axis=2)
            opaque = 65535 if deep else 255
            expect = np.concatenate([expect, np.where(match, 0, opaque)[:, :, None]], axis=2)
            expect = expect.astype(kind)
    raw = scanlines(rng, samples, depth, max(1, n * depth // 8), interlace)
    data = png_file(width, height, color, depth, zlib.compress(raw, level), extra, idat_split,
                    int(interlace))
    return data, expect if expect.dtype == np.uint16 else expect.astype(np.uint8)
