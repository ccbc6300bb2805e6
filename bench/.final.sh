export LD_LIBRARY_PATH=$PWD/.deps/nvjpeg/lib:${LD_LIBRARY_PATH:-}
BUILD_TARGETS="all build/cuda-hold" bash bench/gpu_check.sh build > $OUT/build.log 2>&1; tail -1 $OUT/build.log
N=200 timeout 220 bash bench/throughput.sh > $OUT/throughput.txt 2>&1; tail -15 $OUT/throughput.txt
D=/tmp/gpufilter-throughput/in
for n in 50 200; do rm -rf /tmp/m; echo "n=$n codec-gpu: $(python3 bench/timed.py build/gpufilter --quiet --backend cuda --codec gpu -o /tmp/m $(ls $D/*.jpg | head -$n))"; done
rm -rf /tmp/vo; build/gpufilter -v --backend cuda -m sobel -o /tmp/vo $(ls $D/*.jpg | head -64) 2>&1 | tail -2
timeout 150 python3 -m pytest tests/cli/test_gpu_codec.py --backend cuda -s -q -p no:xdist > $OUT/gpu_codec.txt 2>&1; grep -E "max \|diff" $OUT/gpu_codec.txt | awk '{print $4, $5}' | sort | uniq -c | head; grep -E "passed|failed" $OUT/gpu_codec.txt
timeout 200 python3 -m pytest -n 16 --backend cuda -q tests/cli/test_backends.py tests/cli/test_cli.py tests/cli/test_first_use.py tests/cli/test_png_codec.py tests/cli/test_jpeg_strips.py tests/cli/test_batch.py tests/cli/test_faults.py tests/cli/test_hostile.py tests/cli/test_strips.py tests/cli/test_formats.py tests/cli/test_limits.py tests/cli/test_install.py tests/cli/test_sanitizer_harness.py > $OUT/cli.txt 2>&1; tail -2 $OUT/cli.txt
