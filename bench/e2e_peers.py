#!/usr/bin/env python3
"""Helper of bench/e2e.sh: makes its input images and runs its Python peers.

    e2e_peers.py make OUTDIR SPEC...        SPEC: WxH.png or WxH.jpg
    e2e_peers.py opencv MASK INPUT OUTPUT   MASK: sobel, gaussian5 or box31
    e2e_peers.py pillow MASK INPUT OUTPUT
    e2e_peers.py size PATH                  prints WxH

opencv and pillow print the seconds from just before reading INPUT to just
after writing OUTPUT (the library import is not included: e2e.sh times the
whole process for that); exit status 3 means the peer has no such filter.
Outputs take INPUT's format; JPEG at quality 92 and 4:4:4 (no chroma
subsampling), as gpufilter writes it; PNG at each library's default level.
"""
import os
import sys
import time
from pathlib import Path

PHOTOS = Path(os.environ.get("PHOTOS", Path(__file__).resolve().parent.parent / "tests" / "data" / "images"))
TILE = 2048        # largest tile taken from one photo
GRAIN = float(os.environ.get("GRAIN", "3"))  # sensor-like grain, std dev in levels
NA = 3             # exit status: filter not available in this peer

# gpufilter's masks, for the peers that take a matrix
GAUSS5_ROW = [1, 4, 6, 4, 1]                    # binomial, / 16 per axis
GAUSS5 = [a * b for a in GAUSS5_ROW for b in GAUSS5_ROW]  # / 256


def make(outdir, specs):
    """Each SPEC WxH.ext: a grid of tiles of at most TILE px, each one photo
    (cycled, every other one mirrored) scaled to cover its tile, then a light
    grain, so that the codecs see a photo rather than a smooth upscale."""
    import numpy as np
    from PIL import Image, ImageOps
    photos = []
    for p in sorted(PHOTOS.iterdir()):
        if p.suffix.lower() in (".png", ".jpg", ".jpeg"):
            im = Image.open(p)
            if im.mode == "RGB":       # colour photos only (no gray, no alpha)
                photos.append(im)
    if not photos:
        sys.exit(f"e2e_peers: no RGB photos in {PHOTOS}")
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for spec in specs:
        out = outdir / f"in-{spec}"
        if out.exists():
            continue
        size, ext = spec.split(".")
        w, h = map(int, size.split("x"))
        cols, rows = -(-w // TILE), -(-h // TILE)
        canvas = Image.new("RGB", (w, h))
        k = 0
        for r in range(rows):
            for c in range(cols):
                x0, x1 = c * w // cols, (c + 1) * w // cols
                y0, y1 = r * h // rows, (r + 1) * h // rows
                tile = ImageOps.fit(photos[k % len(photos)], (x1 - x0, y1 - y0),
                                    Image.Resampling.BICUBIC)
                if k % 2:
                    tile = ImageOps.mirror(tile)
                canvas.paste(tile, (x0, y0))
                k += 1
        pixels = np.asarray(canvas).copy()
        # the grain in bands of rows (the same draws as in one piece), so
        # that a 20000x20000 image needs no float copy of itself
        for y in range(0, h, 1024) if GRAIN > 0 else ():
            band = pixels[y:y + 1024].astype(np.float32)
            band += rng.normal(0, GRAIN, band.shape).astype(np.float32)
            pixels[y:y + 1024] = np.clip(band + 0.5, 0, 255).astype(np.uint8)
        img = Image.fromarray(pixels)
        tmp = out.with_name(out.stem + ".tmp" + out.suffix)
        if ext in ("jpg", "jpeg"):
            img.save(tmp, quality=92)
        else:
            img.save(tmp, compress_level=6)
        tmp.rename(out)
        print(f"made {out}", file=sys.stderr)


def is_jpeg(path):
    return Path(path).suffix.lower() in (".jpg", ".jpeg")


def opencv(mask, src, dst):
    import cv2
    import numpy as np
    cv2.setNumThreads(os.cpu_count())          # all cores
    border = cv2.BORDER_REPLICATE              # gpufilter's 'nearest'
    params = ([cv2.IMWRITE_JPEG_QUALITY, 92,
               cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444]
              if is_jpeg(dst) else [])
    gauss = np.array(GAUSS5, np.float32).reshape(5, 5) / 256
    t0 = time.perf_counter()
    img = cv2.imread(src, cv2.IMREAD_UNCHANGED)
    if mask == "sobel":        # sqrt(gx^2 + gy^2) of the 3x3 pair, rounded, clamped
        gx = cv2.Sobel(img, cv2.CV_32F, 1, 0, ksize=3, borderType=border)
        gy = cv2.Sobel(img, cv2.CV_32F, 0, 1, ksize=3, borderType=border)
        res = cv2.convertScaleAbs(cv2.magnitude(gx, gy))   # round + saturate
    elif mask == "gaussian5":  # binomial 5x5 / 256
        res = cv2.filter2D(img, -1, gauss, borderType=border)
    elif mask == "box31":      # 31x31 mean
        res = cv2.blur(img, (31, 31), borderType=border)
    else:
        sys.exit(NA)
    if not cv2.imwrite(dst, res, params):
        sys.exit(f"e2e_peers: cv2.imwrite {dst} failed")
    print(f"{time.perf_counter() - t0:.6f}")


def pillow(mask, src, dst):
    from PIL import Image, ImageFilter
    if mask == "gaussian5":    # Kernel takes 3x3 or 5x5 only
        filt = ImageFilter.Kernel((5, 5), GAUSS5, scale=256)
    elif mask == "box31":      # BoxBlur(15): a box of 2*15+1 = 31
        filt = ImageFilter.BoxBlur(15)
    else:                      # no gradient magnitude in Pillow
        sys.exit(NA)
    t0 = time.perf_counter()
    with Image.open(src) as img:
        res = img.filter(filt)
    if is_jpeg(dst):
        res.save(dst, quality=92, subsampling=0)
    else:
        res.save(dst)
    print(f"{time.perf_counter() - t0:.6f}")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "make":
        make(args[0], args[1:])
    elif cmd == "opencv":
        opencv(*args)
    elif cmd == "pillow":
        pillow(*args)
    elif cmd == "size":
        from PIL import Image
        with Image.open(args[0]) as im:
            print(f"{im.size[0]}x{im.size[1]}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
