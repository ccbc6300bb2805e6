#!/usr/bin/env bash
# Every conv2d version with a spread of masks and channel counts, and every
# tone operation, run once each under one compute-sanitizer tool on a
# 257x131 image (a prime size: partial tiles, several steps down a column),
# in parallel. Prints one line per run that the tool reported, with the
# report's first lines, then a count. A quick way to find which kernel a
# failing --sanitizer test run points at.
#
#   bash bench/sanitize_matrix.sh racecheck     # or memcheck, synccheck
set -uo pipefail
cd "$(dirname "$0")/.."
TOOL=${1:-racecheck}
BIN=${BIN:-build/gpufilter}
DIR=${DIR:-/tmp/gpufilter-sanitize-matrix}
rm -rf "$DIR" && mkdir -p "$DIR"
python3 - "$DIR" <<'PY'
import sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(7)
for c, mode in ((1, "L"), (2, "LA"), (3, "RGB"), (4, "RGBA")):
    a = rng.integers(0, 256, (131, 257, c), dtype=np.uint8)
    Image.fromarray(a[:, :, 0] if c == 1 else a, mode).save(f"{sys.argv[1]}/c{c}.png")
PY
{
    # the masks each version runs: one or two 3x3 matrices, 5x5, 7x7, 9x9
    # (generic), separable or not
    declare -A masks=([tiled]="box3 sobel gaussian5 motion9" [naive]="box3 sobel"
                      [blocked]="box3 sobel emboss gaussian5 gaussian7 motion9"
                      [separable]="box3 gaussian5 gaussian7 box9"
                      [direct]="box3 sobel emboss gaussian5 gaussian7"
                      [auto]="box3 sobel emboss gaussian5 gaussian7 box9 motion9")
    for k in "${!masks[@]}"; do
        for m in ${masks[$k]}; do
            for c in 1 2 3 4; do
                tiles="auto 32x8 64x32"
                [ "$k" = tiled ] || [ "$k" = naive ] && tiles="auto 32x8 16x16"
                for t in $tiles; do
                    [ "$k" = direct ] && [ "$c" = 3 ] && [ "$m" = gaussian7 ] && continue
                    echo "--kernel $k --tile $t -m $m c$c"
                done
            done
        done
    done
    for op in --equalize --equalize=channels --normalize --auto-level --stats "-m gaussian5 --equalize"; do
        for c in 1 3 4; do echo "$op c$c"; done
    done
} >"$DIR/runs.txt"
run_one() {  # "OPTIONS cN": the options, then the image
    local line=$1 img=${1##* } opts=${1% *}
    local tag
    tag=$(echo "$line" | tr -c 'a-zA-Z0-9' '_')
    # shellcheck disable=SC2086
    compute-sanitizer --tool "$TOOL" --error-exitcode 99 --log-file "$DIR/$tag.log" \
        "$BIN" --backend cuda $opts "$DIR/$img.png" "$DIR/$tag.png" >/dev/null 2>"$DIR/$tag.err"
    local rc=$?
    if [ $rc -eq 99 ] || grep -qE '(Error|Warning|Race|hazard)' "$DIR/$tag.log" &&
        ! grep -qE 'SUMMARY: 0 (errors|hazards)' "$DIR/$tag.log"; then
        echo "REPORT [$line] rc $rc: $(grep -m1 -E 'SUMMARY' "$DIR/$tag.log")"
        grep -m 6 -E '^=+ +(Error|Warning|Race|Invalid|.*hazard|.*at .* in )' "$DIR/$tag.log" | cut -c1-200
    elif [ $rc -ne 0 ]; then
        echo "FAILED [$line] rc $rc: $(head -c 200 "$DIR/$tag.err")"
    fi
}
export -f run_one
export TOOL BIN DIR
xargs -P "$(nproc)" -I{} bash -c 'run_one "$@"' _ {} <"$DIR/runs.txt" | tee "$DIR/reports.txt"
echo "sanitize_matrix $TOOL: $(wc -l <"$DIR/runs.txt") runs, $(grep -c '^REPORT' "$DIR/reports.txt") reported," \
     "$(grep -c '^FAILED' "$DIR/reports.txt") failed otherwise"
