#!/usr/bin/env bash
# Batch throughput over a folder of 12 Mpx JPEGs (JPEG -> filter -> JPEG,
# quality 92), in images/s, every row on the same files in one run.
#
#   bash bench/throughput.sh                 # N=200 images, J=$(nproc) workers
#   N=50 MASKS=gaussian5 bash bench/throughput.sh
#
# Rows: the codec bound (gpufilter with no operation: decode + encode only)
# on the CPU codecs and on the GPU codecs (nvJPEG, with the hardware decoder
# where the GPU has one, and forced onto nvJPEG's GPU backend, as a GPU
# without one runs: GPUFILTER_NVJPEG_BACKEND=gpu); then per mask (MASKS,
# default sobel and gaussian5) gpufilter on the GPU with each codec path,
# gpufilter --backend cpu, and OpenCV (imread, filter2D, imwrite on a
# thread pool of J; bench/e2e.sh has the single-call peers).
# Columns: seconds, images/s, the peak resident memory of the largest
# process, and the rate against OpenCV's with the same mask and against the
# GPU codec-only run.
set -euo pipefail
N=${N:-200}
J=${J:-$(nproc)}
MASKS=${MASKS:-sobel gaussian5}
DIR=${DIR:-/tmp/gpufilter-throughput}
BIN=${BIN:-build/gpufilter}

python3 bench/make_images.py --count "$N" --out "$DIR/in"
mapfile -t INPUTS < <(ls "$DIR"/in/img*.jpg | head -n "$N")
rm -rf "$DIR"/out-*
GPU=0
"$BIN" --list-devices >/dev/null 2>&1 && GPU=1

declare -a LABELS SECS RSS MASK_OF
declare -A RATE
measure() {  # key, mask ("" for the codec rows), label, command...
    local key=$1 mask=$2 label=$3 result
    shift 3
    sync
    result=$(python3 bench/timed.py "$@")
    LABELS+=("$label")
    MASK_OF+=("$mask")
    if [[ $result == failed* ]]; then
        SECS+=("$result")
        RSS+=("")
        return
    fi
    SECS+=("${result% *}")
    RSS+=("${result#* }")
    RATE[$key]=$(awk "BEGIN { print $N / ${result% *} }")
}

if [ "$GPU" = 1 ]; then
    measure codec-cpu "" "codec only: CPU codecs (libjpeg-turbo)" \
        "$BIN" --quiet --backend cuda --codec cpu -j "$J" -o "$DIR/out-codec-cpu" "${INPUTS[@]}"
    measure codec-gpu "" "codec only: GPU codecs (nvJPEG)" \
        "$BIN" --quiet --backend cuda --codec gpu -j "$J" -o "$DIR/out-codec-gpu" "${INPUTS[@]}"
    # what a GPU without the hardware decoder gets: nvJPEG's GPU backend
    measure codec-gpu-hybrid "" "codec only: GPU codecs, nvJPEG GPU backend" \
        env GPUFILTER_NVJPEG_BACKEND=gpu "$BIN" --quiet --backend cuda --codec gpu -j "$J" \
        -o "$DIR/out-codec-hybrid" "${INPUTS[@]}"
else
    measure codec-cpu "" "codec only: CPU codecs (libjpeg-turbo)" \
        "$BIN" --quiet --backend cpu -j "$J" -o "$DIR/out-codec-cpu" "${INPUTS[@]}"
fi
for M in $MASKS; do
    if [ "$GPU" = 1 ]; then
        measure "$M-gpu" "$M" "gpufilter -m $M, GPU, GPU codecs" \
            "$BIN" --quiet --backend cuda --codec gpu -j "$J" -m "$M" -o "$DIR/out-$M-gpu" "${INPUTS[@]}"
        measure "$M-cuda-cpu" "$M" "gpufilter -m $M, GPU, CPU codecs" \
            "$BIN" --quiet --backend cuda --codec cpu -j "$J" -m "$M" -o "$DIR/out-$M-cc" "${INPUTS[@]}"
    fi
    measure "$M-cpu" "$M" "gpufilter -m $M --backend cpu" \
        "$BIN" --quiet --backend cpu -j "$J" -m "$M" -o "$DIR/out-$M-cpu" "${INPUTS[@]}"
    if python3 -c "import cv2" 2>/dev/null; then
        measure "$M-opencv" "$M" "OpenCV -m $M, $J threads" \
            python3 bench/opencv_batch.py "masks/$M.mask" "$DIR/out-$M-opencv" "$J" "${INPUTS[@]}"
    fi
done

echo "throughput: $N JPEGs of 4000x3000 -> JPEG q92, $J workers, $(nproc) cores" \
     "($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
"$BIN" --version
"$BIN" --list-devices 2>/dev/null | sed 's/^/GPU /' || true
printf '%-42s %8s %9s %8s %9s %9s\n' "run" "s" "images/s" "peak MiB" "vs OpenCV" "vs codec"
for i in "${!LABELS[@]}"; do
    if [[ ${SECS[$i]} == failed* ]]; then
        printf '%-42s %s\n' "${LABELS[$i]}" "${SECS[$i]}"
        continue
    fi
    rate=$(awk "BEGIN { print $N / ${SECS[$i]} }")
    m=${MASK_OF[$i]}
    peer=${RATE[$m-opencv]:-}
    codec=${RATE[codec-gpu]:-${RATE[codec-cpu]}}
    vs_peer=$([ -n "$m" ] && [ -n "$peer" ] && awk "BEGIN { printf \"%.2fx\", $rate / $peer }" || echo "")
    printf '%-42s %8.2f %9.1f %8s %9s %8.0f%%\n' "${LABELS[$i]}" "${SECS[$i]}" "$rate" "${RSS[$i]}" \
        "$vs_peer" "$(awk "BEGIN { print 100 * $rate / $codec }")"
done
