#!/usr/bin/env bash
# Batch throughput over a folder of 12 Mpx JPEGs, in images/s, all tools on
# the same files, the same mask (a 5x5 Gaussian), the same JPEG quality (92)
# and the same number of worker threads.
#
#   bash bench/throughput.sh            # N=200 images, J=$(nproc) workers
#   N=50 J=8 bash bench/throughput.sh
#
# Rows: gpufilter with no operation (decode + encode only: the codec bound),
# gpufilter --backend cuda (and --devices all where there are several GPUs)
# and --backend cpu, OpenCV (imread, filter2D,
# imwrite on a thread pool), vips conv and ImageMagick -morphology Convolve
# (one process per file, J at a time, each single-threaded); tools that are
# not installed are listed as such.
set -euo pipefail
N=${N:-200}
J=${J:-$(nproc)}
MASK=${MASK:-gaussian5}
DIR=${DIR:-/tmp/gpufilter-throughput}
BIN=${BIN:-build/gpufilter}
MASK_FILE=masks/$MASK.mask

python3 bench/make_images.py --count "$N" --out "$DIR/in"
mapfile -t INPUTS < <(ls "$DIR"/in/img*.jpg | head -n "$N")
rm -rf "$DIR"/out-*
# the matrix without its comment lines, for vips and ImageMagick
grep -v '^#' "$MASK_FILE" | grep -v '^combine' > "$DIR/mask.mat"
read -r MW MH MSCALE _ < <(head -1 "$DIR/mask.mat")
IM_KERNEL="${MW}x${MH}: $(tail -n +2 "$DIR/mask.mat" | tr -s ' \n' ',' | sed 's/^,//; s/,$//')"

declare -a ROWS
base_rate=""
measure() {  # label, command...
    local label=$1; shift
    local start end secs rate
    sync
    start=$(date +%s.%N)
    if ! "$@" >/dev/null 2>"$DIR/err.log"; then
        ROWS+=("$(printf '%-46s %10s' "$label" "failed: $(head -c 60 "$DIR/err.log")")")
        return
    fi
    end=$(date +%s.%N)
    # awk, not bc: the GPU machine has no bc
    secs=$(awk "BEGIN { print $end - $start }")
    rate=$(awk "BEGIN { print $N / $secs }")
    [ -z "$base_rate" ] && base_rate=$rate
    ROWS+=("$(printf '%-46s %8.2f s %8.2f img/s %6.0f%%' "$label" "$secs" "$rate" \
               "$(awk "BEGIN { print 100 * $rate / $base_rate }")")")
}

measure "decode + encode only (gpufilter, no op)" \
    "$BIN" --quiet -j "$J" -o "$DIR/out-none" "${INPUTS[@]}"
if "$BIN" --list-devices >/dev/null 2>&1; then
    measure "gpufilter --backend cuda -m $MASK" \
        "$BIN" --quiet --backend cuda -j "$J" -m "$MASK" -o "$DIR/out-cuda" "${INPUTS[@]}"
    # with several GPUs, the same batch dealt out over all of them
    if [ "$("$BIN" --list-devices | wc -l)" -gt 1 ]; then
        measure "gpufilter --backend cuda --devices all" \
            "$BIN" --quiet --backend cuda --devices all -j "$J" -m "$MASK" -o "$DIR/out-cuda-all" "${INPUTS[@]}"
    fi
else
    ROWS+=("$(printf '%-46s %s' "gpufilter --backend cuda -m $MASK" "no GPU here")")
fi
measure "gpufilter --backend cpu -m $MASK" \
    "$BIN" --quiet --backend cpu -j "$J" -m "$MASK" -o "$DIR/out-cpu" "${INPUTS[@]}"
if python3 -c "import cv2" 2>/dev/null; then
    measure "OpenCV imread+filter2D+imwrite, $J threads" \
        python3 bench/opencv_batch.py "$MASK_FILE" "$DIR/out-opencv" "$J" "${INPUTS[@]}"
else
    ROWS+=("$(printf '%-46s %s' "OpenCV" "not installed")")
fi
if command -v vips >/dev/null; then
    measure "vips conv, $J processes" env VIPS_CONCURRENCY=1 \
        bash -c 'mkdir -p "$0/out-vips"; printf "%s\n" "${@}" | xargs -P '"$J"' -I{} sh -c '"'"'vips conv "$1" "$2/out-vips/$(basename "$1")[Q=92]" "$2/mask.mat"'"'"' _ {} "$0"' "$DIR" "${INPUTS[@]}"
else
    ROWS+=("$(printf '%-46s %s' "vips" "not installed")")
fi
IM=${IM:-$(command -v magick || command -v convert || true)}
if [ -n "$IM" ]; then
    measure "ImageMagick -morphology Convolve, $J processes" env MAGICK_THREAD_LIMIT=1 IM="$IM" K="$IM_KERNEL" \
        bash -c 'mkdir -p "$0/out-im"; printf "%s\n" "${@}" | xargs -P '"$J"' -I{} sh -c '"'"'"$IM" "$1" -define convolve:scale=! -morphology Convolve "$K" -quality 92 "$2/out-im/$(basename "$1")"'"'"' _ {} "$0"' "$DIR" "${INPUTS[@]}"
else
    ROWS+=("$(printf '%-46s %s' "ImageMagick" "not installed")")
fi

echo "throughput: $N JPEGs of 4000x3000, -m $MASK, quality 92, $J workers, $(nproc) cores" \
     "($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
"$BIN" --list-devices 2>/dev/null | sed 's/^/GPU /' || true
printf '%-46s %10s %14s %7s\n' "tool" "time" "rate" "vs codec"
printf '%s\n' "${ROWS[@]}"
