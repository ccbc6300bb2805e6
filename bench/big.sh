#!/usr/bin/env bash
# One large JPEG filtered into a JPEG: wall-clock seconds and peak memory
# (MiB, the largest process) of gpufilter beside vips and OpenCV, on the
# same file, mask (gaussian5, border nearest) and quality (92, 4:4:4).
#
#   bash bench/big.sh                       # 20000x20000 RGB, backend cpu
#   SIZE=16384x16384 BACKENDS="cpu auto" bash bench/big.sh
#
# The input is made once under WORK (default /tmp/gpufilter-e2e) by
# e2e_peers.py (photos tiled, light grain, quality 92). gpufilter streams it
# in bands (docs/formats.md); vips streams too (convsep with the mask's
# 1-D halves, integer precision); OpenCV decodes it whole (sepFilter2D, all
# cores, in one Python process). Each figure is one run after a warm-up.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-/tmp/gpufilter-e2e}
BIN=${BIN:-$ROOT/build/gpufilter}
SIZE=${SIZE:-20000x20000}
BACKENDS=${BACKENDS:-cpu}
PYTHON=${PYTHON:-python3}
TIMED=("$PYTHON" "$ROOT/bench/timed.py")
mkdir -p "$WORK/out"
in=$WORK/in-$SIZE.jpg
[[ -f $in ]] || "$PYTHON" "$ROOT/bench/e2e_peers.py" make "$WORK" "$SIZE.jpg"
printf '5 1 16 0\n1 4 6 4 1\n' >"$WORK/gaussian5.sep.mat"

row() {  # NAME COMMAND...: a warm-up, then one timed run
    "${TIMED[@]}" "${@:2}" >/dev/null
    printf '%-28s %s\n' "$1" "$("${TIMED[@]}" "${@:2}")"
}

echo "big: $SIZE JPEG ($(stat -c %s "$in") bytes), gaussian5, $(nproc) cores; $($BIN --version | head -1)"
printf '%-28s %s\n' "run" "seconds peak-MiB"
for b in $BACKENDS; do
    row "gpufilter --backend $b" "$BIN" --backend "$b" -m gaussian5 -q 92 "$in" "$WORK/out/big-gf-$b.jpg"
done
if command -v vips >/dev/null; then
    row "vips convsep" vips convsep "$in" "$WORK/out/big-vips.jpg[Q=92,subsample_mode=off]" \
        "$WORK/gaussian5.sep.mat" --precision integer
fi
if "$PYTHON" -c "import cv2" 2>/dev/null; then
    cat >"$WORK/big_opencv.py" <<'PY'
import os, sys
import cv2, numpy as np
cv2.setNumThreads(os.cpu_count())
k = np.array([1, 4, 6, 4, 1], np.float32) / 16
img = cv2.imread(sys.argv[1])
out = cv2.sepFilter2D(img, -1, k, k, borderType=cv2.BORDER_REPLICATE)
cv2.imwrite(sys.argv[2], out, [cv2.IMWRITE_JPEG_QUALITY, 92, cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
                               cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444])
PY
    row "opencv (one process)" "$PYTHON" "$WORK/big_opencv.py" "$in" "$WORK/out/big-opencv.jpg"
fi
