#!/usr/bin/env python3
"""The OpenCV peer of a gpufilter batch: imread, filter2D with the same mask
(BORDER_REPLICATE = gpufilter's 'nearest'), imwrite at the same JPEG
quality, on a thread pool of the same size (OpenCV releases the GIL in all
three calls; its own threading is set to 1 so that the pool alone decides).

    python3 bench/opencv_batch.py MASKFILE OUTDIR JOBS INPUT...
"""
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np


def read_mask(path):
    rows = [line.split() for line in Path(path).read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    w, h = int(rows[0][0]), int(rows[0][1])
    scale = float(rows[0][2]) if len(rows[0]) > 2 else 1.0
    return np.array(rows[1:1 + h], dtype=np.float32).reshape(h, w) / scale


def main():
    mask_file, out, jobs, inputs = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    kernel = read_mask(mask_file)
    out.mkdir(parents=True, exist_ok=True)
    cv2.setNumThreads(1)

    def one(src):
        img = cv2.imread(src, cv2.IMREAD_UNCHANGED)
        res = cv2.filter2D(img, -1, kernel, borderType=cv2.BORDER_REPLICATE)
        cv2.imwrite(str(out / Path(src).name), res, [cv2.IMWRITE_JPEG_QUALITY, 92])

    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, inputs))


if __name__ == "__main__":
    main()
