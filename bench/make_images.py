#!/usr/bin/env python3
"""Make the throughput benchmark's folder: COUNT JPEGs of 4000x3000 (12 Mpx)
from the photos in tests/data/images (a copy of ../shared/images), each one
a different crop, flip, tone and noise so that no two files are alike.

    python3 bench/make_images.py --count 200 --out /tmp/gpufilter-throughput/in
"""
import argparse
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

PHOTOS = Path(__file__).resolve().parent.parent / "tests" / "data" / "images"
SIZE = (4000, 3000)


def make(args):
    index, photo, out = args
    rng = np.random.default_rng(index)
    img = Image.open(photo).convert("RGB")
    w, h = img.size
    # a random 4:3 crop of at least half the photo, scaled up to 12 Mpx
    cw = int(w * rng.uniform(0.5, 1.0))
    ch = min(h, cw * 3 // 4)
    cw = ch * 4 // 3
    x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
    img = img.crop((x, y, x + cw, y + ch)).resize(SIZE, Image.Resampling.BICUBIC)
    if index % 2:
        img = ImageOps.mirror(img)
    arr = np.asarray(img, dtype=np.float32) * rng.uniform(0.8, 1.2)
    arr += rng.normal(0, 4, arr.shape).astype(np.float32)  # sensor-like noise
    Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(out, quality=90)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    photos = sorted(p for p in PHOTOS.iterdir() if p.suffix in (".png", ".jpg"))
    jobs = [(i, photos[i % len(photos)], args.out / f"img{i:04d}.jpg") for i in range(args.count)]
    jobs = [j for j in jobs if not j[2].exists()]
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        for _ in pool.map(make, jobs):
            pass


if __name__ == "__main__":
    main()
