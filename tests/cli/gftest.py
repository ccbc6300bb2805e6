"""Helpers shared by the gpufilter CLI tests: image I/O, comparison, and an
independent oracle (mask parser + float64 correlation with scipy.ndimage).

Nothing here imports project code. Images are numpy uint8 arrays of shape
H x W x C (C = 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA); writers also accept H x W.
"""

import io
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.ndimage as ndi
from PIL import Image

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MASKS_DIR = REPO / "masks"


def _images_dir():
    """Where the sample photos are: $GPUFILTER_TEST_IMAGES, else the
    checkout's tests/data/images (CC0 / public-domain photos, see its
    LICENSES.md)."""
    return Path(os.environ.get("GPUFILTER_TEST_IMAGES") or REPO / "tests" / "data" / "images")


IMAGES_DIR = _images_dir()

BORDERS = ["nearest", "constant", "reflect", "mirror", "wrap"]
MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
CHANNELS_OF_MODE = {v: k for k, v in MODES.items()}

MAGIC = {
    "png": b"\x89PNG\r\n\x1a\n",
    "jpg": b"\xff\xd8\xff",
    "jpeg": b"\xff\xd8\xff",
    "bmp": b"BM",
}


# ---------------------------------------------------------------------------
# images


def as3d(arr):
    arr = np.asarray(arr)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    assert arr.ndim == 3 and 1 <= arr.shape[2] <= 4, arr.shape
    return arr


def to_pil(arr):
    arr = as3d(arr)
    assert arr.dtype == np.uint8, arr.dtype
    c = arr.shape[2]
    data = arr[:, :, 0] if c == 1 else arr
    im = Image.fromarray(np.ascontiguousarray(data))
    assert im.mode == MODES[c], (im.mode, c)
    return im


def write_png(path, arr, compress_level=1):
    """Write an 8-bit PNG of mode L / LA / RGB / RGBA from H x W [x C] uint8."""
    to_pil(arr).save(path, format="PNG", compress_level=compress_level)
    return Path(path)


def png_bytes(arr):
    buf = io.BytesIO()
    to_pil(arr).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def read_image(src, expect_mode=None):
    """Decode a file (path) or bytes into H x W x C uint8. The file must
    decode to one of L / LA / RGB / RGBA (what gpufilter writes)."""
    if isinstance(src, (bytes, bytearray)):
        src = io.BytesIO(bytes(src))
    with Image.open(src) as im:
        im.load()
        mode = im.mode
        assert mode in CHANNELS_OF_MODE, f"unexpected image mode {mode!r}"
        if expect_mode is not None:
            assert mode == expect_mode, f"mode {mode}, expected {expect_mode}"
        return as3d(np.array(im))


def read_deep(path):
    """A PNG gpufilter wrote, at its depth (uint8 or uint16), H x W x C in
    RGB(A) order: OpenCV reads it (16-bit gray+alpha as BGRA, its gray
    repeated), IHDR says which layout the file has."""
    import cv2
    data = Path(path).read_bytes()
    assert data[:8] == MAGIC["png"] and data[12:16] == b"IHDR", "not a PNG file"
    color = data[25]
    arr = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert arr is not None, f"OpenCV cannot read {path}"
    arr = as3d(arr)
    if color == 4:
        assert arr.shape[2] == 4 and (arr[:, :, 0] == arr[:, :, 1]).all()
        return np.ascontiguousarray(arr[:, :, [0, 3]])
    if color in (2, 6):
        order = [2, 1, 0, 3][:arr.shape[2]]
        return np.ascontiguousarray(arr[:, :, order])
    return arr


def png_depth(path):
    """The bit depth IHDR declares."""
    data = Path(path).read_bytes()
    assert data[12:16] == b"IHDR"
    return data[24]


def read_png(src, channels=None):
    if isinstance(src, (str, Path)):
        head = Path(src).read_bytes()[:8]
    else:
        head = bytes(src[:8])
    assert head == MAGIC["png"], f"not a PNG file: starts with {head!r}"
    return read_image(src, MODES[channels] if channels else None)


def random_image(rng, width, height, channels):
    """Random uint8 H x W x C data, never constant and never all zero."""
    while True:
        img = rng.integers(0, 256, size=(height, width, channels), dtype=np.uint8)
        if img.size == 1:
            if img.flat[0] != 0:
                return img
        elif img.min() != img.max():
            return img


_photo_cache = {}


def photo(name="astronaut.png", mode="RGB"):
    """A sample photo converted with Pillow (read-only array, cached)."""
    key = (name, mode)
    if key not in _photo_cache:
        if not (IMAGES_DIR / name).is_file():
            raise FileNotFoundError(f"sample photo {name} not found in {IMAGES_DIR} "
                                    "(set GPUFILTER_TEST_IMAGES to the folder of the photos)")
        with Image.open(IMAGES_DIR / name) as im:
            arr = as3d(np.array(im.convert(mode)))
        arr.setflags(write=False)
        _photo_cache[key] = arr
    return _photo_cache[key]


def photo_with_channels(rng, channels, name="astronaut.png"):
    """The photo as 1..4 channels: L via Pillow, alpha random."""
    base = photo(name, "L" if channels <= 2 else "RGB")
    if channels in (1, 3):
        return base.copy()
    alpha = rng.integers(0, 256, size=base.shape[:2] + (1,), dtype=np.uint8)
    return np.concatenate([base, alpha], axis=2)


# ---------------------------------------------------------------------------
# comparison


def assert_close(got, want, what="image", max_diff=1, fraction=0.001, ties=None):
    """Same shape; max |got - want| <= max_diff; at most floor(fraction * size)
    values differ at all (so a tiny image must match exactly), not counting
    those that differ by one where ties (a bool array, see rounding_ties and
    float_ties) marks a rounding boundary."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    counted = diff != 0
    excused = 0
    if ties is not None:
        at_ties = counted & (diff == 1) & np.asarray(ties)
        excused = int(at_ties.sum())
        counted &= ~at_ties
    bad = np.argwhere(counted)
    allowed = int(math.floor(fraction * diff.size))
    worst = int(diff.max()) if diff.size else 0
    if worst <= max_diff and len(bad) <= allowed:
        return
    lines = [
        f"{what}: max |diff| {worst} (allowed {max_diff}), "
        f"{len(bad)} of {diff.size} values differ (allowed {allowed}"
        f"{f'; {excused} more by one at rounding ties' if excused else ''}); "
        f"shape {got.shape} (y, x, c)"
    ]
    order = np.argsort(-diff[tuple(bad.T)], kind="stable") if len(bad) else []
    shown = [tuple(int(i) for i in bad[j]) for j in list(order[:6])]
    shown += [tuple(int(i) for i in b) for b in bad[:6] if tuple(int(i) for i in b) not in shown]
    for idx in shown[:12]:
        lines.append(f"  at {idx}: got {int(got[idx])}, want {int(want[idx])}")
    raise AssertionError("\n".join(lines))


def assert_equal_image(got, want, what="image"):
    got = np.asarray(got)
    want = np.asarray(want)
    assert_close(got, want, what=what, max_diff=0, fraction=0.0)


# ---------------------------------------------------------------------------
# masks


@dataclass
class Matrix:
    weights: np.ndarray  # H x W float64
    scale: float = 1.0
    offset: float = 0.0


@dataclass
class Mask:
    matrices: list = field(default_factory=list)
    combine: str = None  # None | magnitude | max | min | sum
    description: str = ""

    @property
    def width(self):
        return self.matrices[0].weights.shape[1]

    @property
    def height(self):
        return self.matrices[0].weights.shape[0]


COMBINES = ("magnitude", "max", "min", "sum")


def parse_mask(text):
    """Parse the libvips matrix text format (strictly); ValueError if bad."""
    lines = []
    description = None
    for raw in text.splitlines():
        s = raw.strip()
        if s.startswith("#"):
            if description is None:
                description = s.lstrip("#").strip()
            continue
        if not s:
            continue
        lines.append(s)
    mask = Mask(description=description or "")
    i = 0
    if i < len(lines) and lines[i].split()[0] == "combine":
        parts = lines[i].split()
        if len(parts) != 2 or parts[1] not in COMBINES:
            raise ValueError(f"bad combine line {lines[i]!r}")
        mask.combine = parts[1]
        i += 1
    while i < len(lines):
        head = lines[i].split()
        i += 1
        if not 2 <= len(head) <= 4:
            raise ValueError(f"bad matrix header {head}")
        w, h = int(head[0]), int(head[1])
        if w < 1 or h < 1:
            raise ValueError("empty matrix")
        scale = float(head[2]) if len(head) > 2 else 1.0
        offset = float(head[3]) if len(head) > 3 else 0.0
        if scale == 0:
            raise ValueError("scale 0")
        rows = []
        for _ in range(h):
            if i >= len(lines):
                raise ValueError("missing rows")
            row = [float(t) for t in lines[i].split()]
            i += 1
            if len(row) != w:
                raise ValueError(f"row of {len(row)} numbers, expected {w}")
            rows.append(row)
        mask.matrices.append(Matrix(np.array(rows, dtype=np.float64), scale, offset))
    if not mask.matrices:
        raise ValueError("no matrix")
    if mask.combine is None and len(mask.matrices) != 1:
        raise ValueError("several matrices need a combine line")
    return mask


def load_mask(name_or_path):
    s = str(name_or_path)
    path = Path(s) if ("/" in s or s.endswith(".mask")) else MASKS_DIR / f"{s}.mask"
    return parse_mask(path.read_text())


def builtin_mask_names():
    return sorted(p.stem for p in MASKS_DIR.glob("*.mask"))


def format_matrix(weights, scale=None, offset=None):
    """Text of one matrix (header + rows); floats written with repr so the
    binary's strtod and Python read the same doubles."""
    weights = np.asarray(weights, dtype=np.float64)
    h, w = weights.shape
    head = [str(w), str(h)]
    if scale is not None:
        head.append(_num(scale))
        if offset is not None:
            head.append(_num(offset))
    rows = [" ".join(_num(v) for v in row) for row in weights]
    return " ".join(head) + "\n" + "\n".join(rows) + "\n"


def _num(v):
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


# ---------------------------------------------------------------------------
# oracle

# scipy.ndimage mode -> numpy.pad mode (same extension, verified against
# scipy.ndimage.correlate1d by test_oracle_selfcheck).
NP_PAD = {
    "nearest": "edge",
    "constant": "constant",
    "reflect": "symmetric",
    "mirror": "reflect",
    "wrap": "wrap",
}


def correlate(chan, weights, border):
    """scipy.ndimage.correlate(chan, weights, mode=border, cval=0) in float64.

    The image is extended explicitly with numpy.pad and then correlated by
    scipy with all taps inside the padded array: scipy 1.17's n-D correlate
    mis-extends 'reflect' when the mask reaches more than two periods past
    a short axis (e.g. a 17-wide mask on a 2-pixel axis), which a 31x31
    user mask on a tiny image hits; its 1-D extension is right and matches
    numpy.pad (checked in test_oracle_selfcheck)."""
    chan = np.asarray(chan, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    kh, kw = weights.shape
    by, bx = kh // 2, kw // 2
    pad = ((by, kh - 1 - by), (bx, kw - 1 - bx))
    mode = NP_PAD[border]
    if mode == "constant":
        padded = np.pad(chan, pad, mode="constant", constant_values=0.0)
    else:
        padded = np.pad(chan, pad, mode=mode)
    full = ndi.correlate(padded, weights, mode="constant", cval=0.0)
    h, w = chan.shape
    return full[by:by + h, bx:bx + w]


def _unrounded(img, mask, border, filter_alpha):
    """The exact values of one -m before rounding and clamping, float64
    H x W x F (F: the filtered channels), and F."""
    img = as3d(img)
    c = img.shape[2]
    filtered = c if (filter_alpha or c in (1, 3)) else c - 1
    out = np.zeros(img.shape[:2] + (filtered,), np.float64)
    for ch in range(filtered):
        x = img[:, :, ch].astype(np.float64)
        vs = [correlate(x, m.weights, border) / m.scale + m.offset for m in mask.matrices]
        if mask.combine is None:
            assert len(vs) == 1
            v = vs[0]
        elif mask.combine == "magnitude":
            v = np.sqrt(sum(vk * vk for vk in vs))
        elif mask.combine == "max":
            v = np.maximum.reduce(vs)
        elif mask.combine == "min":
            v = np.minimum.reduce(vs)
        elif mask.combine == "sum":
            v = np.add.reduce(vs)
        else:
            raise ValueError(mask.combine)
        out[:, :, ch] = v
    return out, filtered


def apply_mask(img, mask, border="nearest", filter_alpha=False):
    """The expected output of one -m: uint8 H x W x C."""
    out = as3d(img).copy()
    values, filtered = _unrounded(out, mask, border, filter_alpha)
    out[:, :, :filtered] = np.clip(np.rint(values), 0, 255).astype(np.uint8)
    return out


def rounding_ties(img, mask, border="nearest", filter_alpha=False, within=1e-6):
    """Where the exact value of one -m lies on a rounding boundary (k + 1/2,
    to within `within`, a number or one per value as float_ties gives it):
    bool H x W x C. A sum of several matrices, each
    divided by its own scale, lands there exactly for some pixels; any float
    evaluation (double on the CPU, float on the GPU) then falls on either side
    of it, so two correct backends may differ by one level at those pixels
    and nowhere else."""
    img = as3d(img)
    values, filtered = _unrounded(img, mask, border, filter_alpha)
    ties = np.zeros(img.shape, bool)
    ties[:, :, :filtered] = np.abs(values - np.floor(values) - 0.5) < within
    return ties


def float_ties(img, mask, border="nearest", filter_alpha=False):
    """Where a binary32 evaluation of one single-matrix -m may round to the
    other side of k + 1/2 than the exact value: bool H x W x C. The CUDA
    backend's float path sums a mask's taps in float, the CPU backend in
    double (DESIGN.md: at most 1 apart where float summation order differs).
    The bound is the worst case of recursive summation, n u sum |w x| for n
    taps and u = 2^-24, with room for the weights' own rounding, the scale
    and the offset: (n + 8) u (sum |w x| / |scale| + |offset| + 1). Masks of
    fractional weights on tiny images, where assert_close allows no
    difference at all, need it; with random weights summing to 1 it marks
    ~0.05% of the pixels at 3x3 and 1-2% at 31x31."""
    assert mask.combine is None and len(mask.matrices) == 1, "one matrix"
    m = mask.matrices[0]
    # sum |w x| / |scale| + |offset| + 1, as the values of a mask of |w|
    size = Mask([Matrix(np.abs(m.weights), abs(m.scale), abs(m.offset) + 1.0)])
    sizes, _ = _unrounded(img, size, border, filter_alpha)
    return rounding_ties(img, mask, border, filter_alpha,
                         within=(m.weights.size + 8) * 2.0**-24 * sizes)


def apply_masks(img, masks, border="nearest", filter_alpha=False):
    out = as3d(img)
    for m in masks:
        if not isinstance(m, Mask):
            m = load_mask(m)
        out = apply_mask(out, m, border, filter_alpha)
    return out


# Peak resident memory of one process: its parent reads the child's
# ru_maxrss, so that the test process's own memory is not counted.
_MEASURE = """
import resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True)
sys.stderr.buffer.write(proc.stderr)
print(proc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def peak_memory_kib(argv, env=None):
    """Peak resident memory of one run of argv, which must succeed: (KiB, its stderr)."""
    proc = subprocess.run([sys.executable, "-c", _MEASURE] + [str(a) for a in argv],
                          capture_output=True, timeout=600, env={**os.environ, **(env or {})})
    rc, max_rss_kib = map(int, proc.stdout.split())
    assert rc == 0, proc.stderr
    return max_rss_kib, proc.stderr.decode()


def parse_paths(text):
    """--list-paths as [(name, masks, {layout: [sizes]})], in its order."""
    paths = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.startswith(" "):
            paths.append((line, None, {}))
        elif line.startswith("  masks: "):
            paths[-1] = (paths[-1][0], line[len("  masks: "):], paths[-1][2])
        else:
            layout, sizes = line.strip().split(": ")
            assert all(re.fullmatch(r"(\d+)x\1", size) for size in sizes.split()), line
            paths[-1][2][layout] = [int(size.split("x")[0]) for size in sizes.split()]
    return paths
