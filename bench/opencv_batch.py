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


def read_masks(path):
    """The mask file's matrices (each divided by its scale) and its combine
    rule (None for one matrix, "magnitude" for a gradient pair)."""
    lines = [line.split() for line in Path(path).read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    combine = None
    if lines[0][0] == "combine":
        combine, lines = lines[0][1], lines[1:]
    matrices = []
    while lines:
        w, h = int(lines[0][0]), int(lines[0][1])
        scale = float(lines[0][2]) if len(lines[0]) > 2 else 1.0
        matrices.append(np.array(lines[1:1 + h], dtype=np.float32).reshape(h, w) / scale)
        lines = lines[1 + h:]
    return matrices, combine


def apply(img, matrices, combine):
    if combine is None:
        return cv2.filter2D(img, -1, matrices[0], borderType=cv2.BORDER_REPLICATE)
    gx = cv2.filter2D(img, cv2.CV_32F, matrices[0], borderType=cv2.BORDER_REPLICATE)
    gy = cv2.filter2D(img, cv2.CV_32F, matrices[1], borderType=cv2.BORDER_REPLICATE)
    return cv2.convertScaleAbs(cv2.magnitude(gx, gy))


def main():
    mask_file, out, jobs, inputs = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    matrices, combine = read_masks(mask_file)
    out.mkdir(parents=True, exist_ok=True)
    cv2.setNumThreads(1)

    def one(src):
        img = cv2.imread(src, cv2.IMREAD_UNCHANGED)
        res = apply(img, matrices, combine)
        cv2.imwrite(str(out / Path(src).name), res, [cv2.IMWRITE_JPEG_QUALITY, 92])

    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, inputs))


if __name__ == "__main__":
    main()
