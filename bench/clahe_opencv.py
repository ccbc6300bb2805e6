"""OpenCV's CPU CLAHE (cv2.createCLAHE(40, (8, 8)).apply) on the sizes of
bench/clahe_bench.cu, with every core: gray and RGBA at 8 bits (RGBA as
the tool does it: RGB -> YCrCb, CLAHE on Y, back), gray at 16 bits.
Median ms of 20 runs.

    python3 bench/clahe_opencv.py [WIDTH HEIGHT]
"""

import os
import sys
import time

import cv2
import numpy as np


def median_ms(fn, runs=20):
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def image(w, h, c, dtype):
    top = np.iinfo(dtype).max
    rng = np.random.default_rng(12345)
    yy, xx = np.mgrid[0:h, 0:w]
    base = (xx + yy).astype(np.float64) * top / (w + h)
    img = base[:, :, None] + rng.integers(-top // 16, top // 16, size=(h, w, c))
    img[: h // 4] /= 3
    return np.clip(img, 0, top).astype(dtype)


def main():
    w, h = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (8192, 8192)
    cv2.setNumThreads(os.cpu_count() or 1)
    clahe = cv2.createCLAHE(clipLimit=40.0, tileGridSize=(8, 8))
    print(f"# OpenCV {cv2.__version__} CLAHE {w}x{h}, {cv2.getNumThreads()} threads; "
          "ms = median of 20")
    gray8 = image(w, h, 1, np.uint8)[:, :, 0].copy()
    print(f"gray8   {median_ms(lambda: clahe.apply(gray8)):10.3f}")
    rgb8 = np.ascontiguousarray(image(w, h, 4, np.uint8)[:, :, :3])

    def colour():
        ycc = cv2.cvtColor(rgb8, cv2.COLOR_RGB2YCrCb)
        ycc[:, :, 0] = clahe.apply(ycc[:, :, 0])
        return cv2.cvtColor(ycc, cv2.COLOR_YCrCb2RGB)

    print(f"rgba8   {median_ms(colour):10.3f}")
    gray16 = image(w, h, 1, np.uint16)[:, :, 0].copy()
    print(f"gray16  {median_ms(lambda: clahe.apply(gray16)):10.3f}")


if __name__ == "__main__":
    main()
