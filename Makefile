# gpufilter - build, demo, test, test-gpu, install, clean.
#
#   make            build build/gpufilter (needs gcc, nvcc, libstb-dev)
#   make demo       build, then filter the samples into out/
#   make test       unit tests, then the CLI suite on every backend usable here
#   make test-gpu   conv2d-check and the CLI suite on CUDA; fails without a usable GPU
#   make test-kernels  every conv2d version and tile against the reference, one process
#   make test SANITIZE=1   the same tests on a build with ASan and UBSan (build-sanitize/)
#   make deps       install the Debian and Python packages the build and tests need
#                   (the other goals install what they need themselves)
#   make install    PREFIX=/usr/local: bin/gpufilter, the masks, the man page and
#                   bash and zsh completion; make uninstall removes them
#
# Variables: CUDA_HOME (default: the folder above nvcc's), NVCC_ARCH (GPU
# code), STB_CFLAGS (where stb_image.h is), PREFIX, PYTEST_ARGS, CLI_TESTS (the
# test files or folders test-gpu runs), GRID (test-gpu's: reduced or full),
# TEST_JOBS (the CLI suite's pytest-xdist workers; default one a core).

PREFIX      ?= /usr/local
SANITIZE    ?= 0
ifeq ($(SANITIZE),1)
BUILD       ?= build-sanitize
# AddressSanitizer and UndefinedBehaviorSanitizer on the host code; the first
# report ends the program with a failure, so the test suites fail on it.
SANITIZER_FLAGS = -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer
# a small quarantine, so that peak memory stays near the real build's (a test bounds it)
export ASAN_OPTIONS ?= detect_leaks=1:abort_on_error=0:allocator_may_return_null=1:quarantine_size_mb=8
export UBSAN_OPTIONS ?= print_stacktrace=1
endif
BUILD       ?= build
NVCC        ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME   ?= $(patsubst %/bin/nvcc,%,$(NVCC))
# Hopper machine code, plus PTX that any GPU from Turing on can compile at start.
NVCC_ARCH   ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75
STB_CFLAGS  ?= $(shell pkg-config --cflags stb 2>/dev/null || echo -I/usr/include/stb)
# the tests' Python: the system's when it has their packages, else
# $(BUILD)/venv (tools/deps.sh python writes which to $(BUILD)/python)
PYTHON      ?= $$(cat $(BUILD)/python)
PYTEST_ARGS ?=
CLI_TESTS   ?= tests/cli
GRID        ?= reduced

# What the build needs, installed here when missing (tools/deps.sh says
# what it installs, or which packages to install), before the optional
# libraries below are looked for. Goals that build nothing skip it.
ifneq ($(filter-out clean uninstall deps fuzz,$(or $(MAKECMDGOALS),all)),)
DEPS_STATUS := $(shell sh tools/deps.sh build $(BUILD) $(patsubst -I%,%,$(firstword $(STB_CFLAGS))) >&2; echo $$?)
ifneq ($(DEPS_STATUS),0)
$(error a package the build needs is missing (see above))
endif
endif

CC       ?= gcc
CFLAGS   ?= -O2 -g
CFLAGS   += $(SANITIZER_FLAGS)
CPPFLAGS += -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Isrc -I$(CUDA_HOME)/include $(STB_CFLAGS) \
            -DGF_MASKS_INSTALL_DIR='"$(PREFIX)/share/gpufilter/masks"'
WARN      = -std=c11 -Wall -Wextra -Werror
# --threads 0: the GPU targets compile in parallel, one per core
NVCCFLAGS ?= -O3 -std=c++17 $(NVCC_ARCH) --threads 0 -Xcompiler -Wall,-Wextra
LDLIBS    = -L$(CUDA_HOME)/lib64 -lcudart_static -lstdc++ -lpthread -ldl -lrt -lm
# libdeflate (Debian's libdeflate-dev) compresses PNGs when present, linked
# statically so that the binary runs where the library is not installed.
LIBDEFLATE ?= $(shell test -f /usr/include/libdeflate.h && echo 1)
ifeq ($(LIBDEFLATE),1)
CPPFLAGS  += -DGF_HAVE_LIBDEFLATE
LDLIBS    := -Wl,-Bstatic -ldeflate -Wl,-Bdynamic $(LDLIBS)
endif
# libjpeg-turbo (Debian's libturbojpeg0-dev) decodes and encodes JPEG when
# present, about twice as fast as stb_image; also linked statically.
TURBOJPEG ?= $(shell test -f /usr/include/turbojpeg.h && echo 1)
ifeq ($(TURBOJPEG),1)
CPPFLAGS  += -DGF_HAVE_TURBOJPEG
LDLIBS    := -Wl,-Bstatic -lturbojpeg -Wl,-Bdynamic $(LDLIBS)
endif
# With libjpeg-turbo's libjpeg header too (libjpeg-dev), large JPEGs stream
# through a call row by row; the static library above holds that API.
JPEGLIB ?= $(if $(TURBOJPEG),$(shell test -f /usr/include/jpeglib.h && echo 1))
ifeq ($(JPEGLIB),1)
CPPFLAGS  += -DGF_HAVE_JPEGLIB
endif

# nvJPEG's header (the CUDA toolkit's, PyPI's nvidia-nvjpeg, or .deps/nvjpeg)
# builds the GPU JPEG codec; the library itself is loaded at run time, from
# the loader's path or the folder beside the header found here.
NVJPEG_HEADER ?= $(firstword $(wildcard $(CUDA_HOME)/include/nvjpeg.h \
    $(shell python3 -c 'import nvidia; print(*[p + "/cu13/include/nvjpeg.h" for p in nvidia.__path__])' 2>/dev/null) \
    $(CURDIR)/.deps/nvjpeg/include/nvjpeg.h))
ifneq ($(NVJPEG_HEADER),)
NVJPEG_ROOT   = $(patsubst %/include/nvjpeg.h,%,$(NVJPEG_HEADER))
NVJPEG_CFLAGS = -DGF_HAVE_NVJPEG -I$(NVJPEG_ROOT)/include \
    -DGF_NVJPEG_LIBDIR='"$(if $(wildcard $(NVJPEG_ROOT)/lib64/libnvjpeg.so*),$(NVJPEG_ROOT)/lib64,$(NVJPEG_ROOT)/lib)"'
endif

HOST_SRC   = util.c image.c exif.c orientation.c decode_checks.c pnm.c image_write.c image_limits.c image_mark.c jpeg_turbo.c jpeg_strips.c jpeg_rows.c png_decode.c png_encode.c zlib_bands.c stb_impl.c mask.c mask_params.c tone_report.c options.c batch.c batch_run.c gpu_batch.c pipeline.c clahe.c diffuse.c diffuse_k.c diffuse_params.c backend_cpu.c cpu_conv.c cpu_conv_plan.c cost_model.c route.c stream.c decode_ahead.c backend_cuda.c cuda_large.c cuda_depth16.c cuda_diffuse.c cuda_fft.c cufft_dl.c tile_rule.c cuda_sweep.c cuda_paths.c cuda_clahe.c nvjpeg_codec.c exit_release.c
CORE_OBJ   = $(addprefix $(BUILD)/obj/,util.o image.o exif.o orientation.o decode_checks.o pnm.o image_write.o image_limits.o image_mark.o jpeg_turbo.o jpeg_strips.o jpeg_rows.o png_decode.o png_encode.o zlib_bands.o stb_impl.o mask.o mask_params.o builtin_masks.o)
HOST_OBJ   = $(addprefix $(BUILD)/obj/,$(HOST_SRC:.c=.o) builtin_masks.o)
# The kernels carry no host sanitizer, so every build shares build/'s
# (compiling conv2d.cu, every conv2d kernel, takes minutes; conv2d_plan.cu,
# their host-side planning, seconds).
KERNEL_BUILD = build
KERNEL_OBJ = $(addprefix $(KERNEL_BUILD)/obj/,conv2d.o $(CONV2D_SETS) conv2d_plan.o conv2d_query.o conv2d_paths.o conv2d_weights.o conv2d_large.o depth16.o clahe_gpu.o diffuse_gpu.o histogram.o reduce.o scan.o lut.o)
# the conv2d family headers (kernels/conv2d_*.cuh) the conv2d objects include
CONV2D_HEADERS = $(wildcard kernels/conv2d_*.cuh)
# the kernels' table in sets, each a module of its own (kernels/conv2d_variants.cuh),
# compressed for size where nvcc can (it leaves modules under ~10 MB as they are)
CONV2D_SETS = $(addprefix conv2d_set_,v23.o gray.o gray_large.o rgb.o rgba.o rgba_large.o)
NVCC_COMPRESS := $(shell $(NVCC) --help 2>/dev/null | grep -q -- '--compress-mode' && echo -compress-mode=size)
UNIT_TESTS = $(BUILD)/test_mask $(BUILD)/test_image $(BUILD)/test_exif $(BUILD)/test_depth16
# the host code and kernels without main(), for the tools and checks that link them
LIB_OBJ    = $(filter-out $(BUILD)/obj/main.o,$(HOST_OBJ)) $(KERNEL_OBJ)

.PHONY: all demo test test-unit test-cli test-kernels test-gpu deps unit-deps check-deps check-python install uninstall clean fuzz bench-png bench-depth16 bench-clahe bench-diffuse plan-dump
.DELETE_ON_ERROR:

all: $(BUILD)/gpufilter

$(BUILD)/gpufilter: $(BUILD)/obj/main.o $(HOST_OBJ) $(KERNEL_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# keeps the driver initialised while the CUDA suite starts the binary
$(BUILD)/cuda-hold: tests/tools/cuda_hold.c | $(BUILD)/obj
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -o $@ $< $(LDLIBS)

# The optional libraries this build links: what depends on them is built
# again when that changes (a library installed after the first build).
BUILD_CONFIG = LIBDEFLATE=$(LIBDEFLATE) TURBOJPEG=$(TURBOJPEG) JPEGLIB=$(JPEGLIB) NVJPEG=$(if $(NVJPEG_HEADER),1,0)
$(BUILD)/config: FORCE | $(BUILD)/obj
	@echo '$(BUILD_CONFIG)' | cmp -s - $@ || echo '$(BUILD_CONFIG)' > $@
.PHONY: FORCE

$(BUILD)/obj/%.o: src/%.c src/*.h kernels/*.h $(BUILD)/config | $(BUILD)/obj check-deps
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -c -o $@ $<

# the built-in masks: masks/*.mask compiled in as a table (builtin_masks.h)
MASK_FILES = $(sort $(wildcard masks/*.mask))
%/gen/builtin_masks.c: $(MASK_FILES) masks/embed.sh
	@mkdir -p $(@D)
	sh masks/embed.sh $(MASK_FILES) > $@

$(BUILD)/obj/builtin_masks.o: $(BUILD)/gen/builtin_masks.c src/builtin_masks.h | $(BUILD)/obj
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -c -o $@ $<

# stb_image_write shifts negative values in its JPEG encoder (defined by gcc,
# flagged by UBSan), and stb_image's PSD reader converts out-of-range floats
# to bytes when it un-premultiplies an alpha that does not cover its colour
# (x86 truncates them: a wrong colour for a malformed file, no memory
# error); those two checks are off for the stb translation unit only.
STB_UNCHECKED = -fno-sanitize=shift,float-cast-overflow
$(BUILD)/obj/stb_impl.o: CFLAGS += $(if $(SANITIZER_FLAGS),$(STB_UNCHECKED))

# the fast CPU convolution's row loops are written for the vectorizer (-O3);
# without errno and traps, sqrt and the selects of the rounding vectorize
# too (no value changes: the rounding mode and IEEE results are the same)
$(BUILD)/obj/cpu_conv.o: CFLAGS += -O3 -fno-math-errno -fno-trapping-math
# the PNG row filters likewise (-O3 vectorizes them: about 4 times faster)
$(BUILD)/obj/png_encode.o: CFLAGS += -O3
$(BUILD)/obj/nvjpeg_codec.o: CPPFLAGS += $(NVJPEG_CFLAGS)
$(BUILD)/obj/cufft_dl.o: CPPFLAGS += -DGF_CUFFT_LIBDIR='"$(CUDA_HOME)/lib64"'


$(KERNEL_BUILD)/obj/%.o: kernels/%.cu kernels/kernels.h src/border.h src/mask.h | $(KERNEL_BUILD)/obj
	$(NVCC) $(NVCCFLAGS) -Ikernels -c -o $@ $<

$(KERNEL_BUILD)/obj/conv2d_large.o: kernels/conv2d_large.h
$(addprefix $(KERNEL_BUILD)/obj/,$(CONV2D_SETS)): NVCCFLAGS += $(NVCC_COMPRESS)
$(KERNEL_BUILD)/obj/depth16.o: kernels/depth16.h
$(KERNEL_BUILD)/obj/clahe_gpu.o: kernels/clahe_gpu.h
$(KERNEL_BUILD)/obj/diffuse_gpu.o: kernels/diffuse_gpu.h src/diffuse.h src/image.h
$(addprefix $(KERNEL_BUILD)/obj/,histogram.o lut.o reduce.o scan.o depth16.o clahe_gpu.o): src/tone.h
$(KERNEL_BUILD)/obj/conv2d.o $(addprefix $(KERNEL_BUILD)/obj/,$(CONV2D_SETS)) $(KERNEL_BUILD)/obj/conv2d_plan.o $(KERNEL_BUILD)/obj/conv2d_query.o $(KERNEL_BUILD)/obj/conv2d_paths.o $(KERNEL_BUILD)/obj/conv2d_weights.o: $(CONV2D_HEADERS)
$(KERNEL_BUILD)/obj/conv2d_plan.o $(KERNEL_BUILD)/obj/conv2d_weights.o: kernels/conv2d_weights.h
$(KERNEL_BUILD)/obj/conv2d_plan.o $(KERNEL_BUILD)/obj/conv2d_query.o $(KERNEL_BUILD)/obj/conv2d_paths.o: kernels/conv2d_planner.h

$(sort $(BUILD)/obj $(KERNEL_BUILD)/obj):
	mkdir -p $@

# ---- packages ---------------------------------------------------------------

# the stb headers and the codecs are seen to when the Makefile is read (above)
check-deps:
	@test -x $(NVCC) || { echo "gpufilter: nvcc not found; install the CUDA toolkit" \
	       "(https://developer.nvidia.com/cuda-downloads) or set NVCC=/path/to/nvcc"; exit 1; }

unit-deps:
	@sh tools/deps.sh unit $(BUILD)

check-python:
	@sh tools/deps.sh python $(BUILD)

deps:
	@sh tools/deps.sh build $(BUILD) && sh tools/deps.sh unit $(BUILD) && \
	  sh tools/deps.sh python $(BUILD)

# ---- demo ---------------------------------------------------------------------

demo: $(BUILD)/gpufilter
	@mkdir -p out
	$(BUILD)/gpufilter -v -m sobel samples/chelsea.png out/chelsea-sobel.png
	$(BUILD)/gpufilter -m gaussian5 -m sharpen --border reflect samples/camera.png out/camera-soft.png
	$(BUILD)/gpufilter -m emboss samples/horse.png out/horse-emboss.png
	@echo "demo: wrote out/chelsea-sobel.png, out/camera-soft.png, out/horse-emboss.png"

# ---- tests --------------------------------------------------------------------

$(BUILD)/test_%: tests/unit/test_%.c tests/unit/test_rng.h $(CORE_OBJ) | $(BUILD)/obj unit-deps
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -DGF_TEST_MASKS_DIR='"$(CURDIR)/masks"' \
	  $$(pkg-config --cflags cmocka 2>/dev/null) -o $@ $< $(CORE_OBJ) \
	  $$(pkg-config --libs cmocka 2>/dev/null || echo -lcmocka) $(LDLIBS)

# the CPU backends' tests link the backends and the statistics' reports too
UNIT_CPU_OBJ = $(addprefix $(BUILD)/obj/,backend_cpu.o cpu_conv.o cpu_conv_plan.o tone_report.o)
$(BUILD)/test_depth16: tests/unit/test_depth16.c tests/unit/test_rng.h $(CORE_OBJ) $(UNIT_CPU_OBJ) | $(BUILD)/obj unit-deps
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -DGF_TEST_MASKS_DIR='"$(CURDIR)/masks"' \
	  $$(pkg-config --cflags cmocka 2>/dev/null) -o $@ $< $(CORE_OBJ) $(UNIT_CPU_OBJ) \
	  $$(pkg-config --libs cmocka 2>/dev/null || echo -lcmocka) $(LDLIBS)

test-unit: $(UNIT_TESTS) $(BUILD)/conv2d-check
	@for t in $(UNIT_TESTS); do echo "== $$t"; ./$$t || exit 1; done
	@echo "== $(BUILD)/conv2d-check --backend cpu --quick"
	@$(BUILD)/conv2d-check --backend cpu --quick

# The CLI suite runs on the CPU backend, and on CUDA too when a GPU is usable.
# With pytest-xdist the suite runs on TEST_JOBS workers (default: one a core).
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
XDIST = $$($(PYTHON) -c "import xdist" 2>/dev/null && printf -- "-n %s" $(TEST_JOBS))
test-cli: $(BUILD)/gpufilter check-python
	$(PYTHON) -m pytest tests/cli -q --backend cpu --gpufilter $(BUILD)/gpufilter $(XDIST) $(PYTEST_ARGS)
	@if $(BUILD)/gpufilter --list-devices >/dev/null 2>&1; then \
	  $(PYTHON) -m pytest tests/cli -q --backend cuda --gpufilter $(BUILD)/gpufilter $(XDIST) $(PYTEST_ARGS); \
	else echo "test-cli: no usable GPU here; the CUDA backend is tested by 'make test-gpu'"; fi

test: test-unit test-cli

# Every conv2d version and tile against the reference backend in one
# process (tests/kernels/conv2d_check.c): the CUDA backend where a GPU is
# usable, else the fast CPU path.
$(BUILD)/conv2d-check: tests/kernels/conv2d_check.c tests/unit/test_rng.h $(LIB_OBJ) | $(BUILD)/obj
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -o $@ $< $(LIB_OBJ) $(LDLIBS)

test-kernels: $(BUILD)/conv2d-check $(BUILD)/gpufilter
	@if $(BUILD)/gpufilter --list-devices >/dev/null 2>&1; then $(BUILD)/conv2d-check --backend cuda; \
	else echo "test-kernels: no usable GPU here: the fast CPU path instead"; \
	  $(BUILD)/conv2d-check --backend cpu; fi

# On a GPU machine: every conv2d version and tile in one process, then the
# CLI suite on the CUDA backend over its covering grid (GRID=full: every case;
# each case starts the binary, so that takes ~30 minutes).
test-gpu: $(BUILD)/gpufilter $(BUILD)/cuda-hold $(BUILD)/conv2d-check check-python
	@$(BUILD)/gpufilter --list-devices || { echo "test-gpu: no usable GPU"; exit 1; }
	$(BUILD)/conv2d-check --backend cuda
	$(PYTHON) -m pytest $(CLI_TESTS) -q --backend cuda --grid $(GRID) --gpufilter $(BUILD)/gpufilter \
	  $(XDIST) $(PYTEST_ARGS)

# ---- install --------------------------------------------------------------------

BASH_COMPLETIONS = $(PREFIX)/share/bash-completion/completions
ZSH_COMPLETIONS  = $(PREFIX)/share/zsh/site-functions
INSTALLED = $(PREFIX)/bin/gpufilter $(PREFIX)/share/man/man1/gpufilter.1 \
            $(BASH_COMPLETIONS)/gpufilter $(ZSH_COMPLETIONS)/_gpufilter \
            $(addprefix $(PREFIX)/share/gpufilter/,$(MASK_FILES))

install: $(BUILD)/gpufilter
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/gpufilter/masks \
	  $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(BASH_COMPLETIONS) $(DESTDIR)$(ZSH_COMPLETIONS)
	install -m 755 $(BUILD)/gpufilter $(DESTDIR)$(PREFIX)/bin/gpufilter
	install -m 644 masks/*.mask $(DESTDIR)$(PREFIX)/share/gpufilter/masks/
	install -m 644 gpufilter.1 $(DESTDIR)$(PREFIX)/share/man/man1/gpufilter.1
	install -m 644 completions/gpufilter.bash $(DESTDIR)$(BASH_COMPLETIONS)/gpufilter
	install -m 644 completions/_gpufilter $(DESTDIR)$(ZSH_COMPLETIONS)/_gpufilter

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(PREFIX)/share/gpufilter/masks $(DESTDIR)$(PREFIX)/share/gpufilter 2>/dev/null

clean:
	rm -rf build build-sanitize build-fuzz out

# ---- fuzzing (libFuzzer, clang) -------------------------------------------------
#   make fuzz FUZZ_SECONDS=300   runs each target for that long; findings (a
#   crashing input) land in build-fuzz/findings/ and make fails.

FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_BUILD    = build-fuzz
FUZZ_SAN      = -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all
FUZZ_CFLAGS   = -std=c11 -g -O1 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Isrc \
                -I$(CUDA_HOME)/include $(STB_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
                $(if $(LIBDEFLATE),-DGF_HAVE_LIBDEFLATE) $(if $(TURBOJPEG),-DGF_HAVE_TURBOJPEG) $(if $(JPEGLIB),-DGF_HAVE_JPEGLIB)
FUZZ_SRC      = util image exif orientation decode_checks pnm image_write image_limits image_mark jpeg_turbo jpeg_strips jpeg_rows png_decode png_encode zlib_bands stb_impl mask mask_params tone_report options pipeline clahe diffuse diffuse_k diffuse_params backend_cpu cpu_conv cpu_conv_plan cost_model nvjpeg_codec
FUZZ_OBJ      = $(addprefix $(FUZZ_BUILD)/obj/,$(addsuffix .o,$(FUZZ_SRC))) $(FUZZ_BUILD)/obj/no_cuda.o \
                $(FUZZ_BUILD)/obj/builtin_masks.o
FUZZ_TARGETS  = mask image image_limits options exif

$(FUZZ_BUILD)/obj/%.o: src/%.c src/*.h | check-deps
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(if $(filter stb_impl,$*),$(STB_UNCHECKED)) -c -o $@ $<

$(FUZZ_BUILD)/obj/builtin_masks.o: $(FUZZ_BUILD)/gen/builtin_masks.c src/builtin_masks.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_BUILD)/obj/no_cuda.o: tests/fuzz/no_cuda.c src/*.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

.SECONDARY: $(FUZZ_OBJ)

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJ) $(if $(LIBDEFLATE),-ldeflate) $(if $(TURBOJPEG),-lturbojpeg) $(if $(JPEGLIB),-ljpeg) -ldl -lm

fuzz: $(addprefix $(FUZZ_BUILD)/fuzz_,$(FUZZ_TARGETS))
	@mkdir -p $(FUZZ_BUILD)/findings
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  seeds=tests/fuzz/corpus/$$t; test $$t = image_limits && seeds=tests/fuzz/corpus/image; \
	  echo "== fuzz_$$t for $(FUZZ_SECONDS) s"; \
	  $(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	    $$(test $$t = image_limits && echo -malloc_limit_mb=128) \
	    -close_fd_mask=3 -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/findings/$$t- \
	    $(FUZZ_BUILD)/corpus/$$t $$seeds 2>&1 | \
	    grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|Done|==[0-9]+==ERROR|SUMMARY)|#[0-9]+ *DONE' ; \
	  ls $(FUZZ_BUILD)/findings/$$t-* >/dev/null 2>&1 && { echo "fuzz_$$t: findings in $(FUZZ_BUILD)/findings"; exit 1; }; \
	done; true

# ---- the planner's plans, without a GPU ----------------------------------------------
#   make plan-dump   every plan the conv2d planner makes for a grid of launches
#                    (tools/plan_dump.cu), on a fake H100 and with every device
#                    query failing: run before and after a change to the
#                    planner and diff the outputs (the same: the same plans)
# the tile rule (tile_rule.c) comes with the host code it links to
PLAN_DUMP_OBJ = $(LIB_OBJ)

plan-dump: $(BUILD)/plan-dump
	$(BUILD)/plan-dump
	$(BUILD)/plan-dump --fail

$(BUILD)/obj/plan_fake_device.o: tools/plan_fake_device.c | $(BUILD)/obj
	$(CC) $(WARN) -O2 -I$(CUDA_HOME)/include -c -o $@ $<

$(BUILD)/obj/plan_dump.o: tools/plan_dump.cu kernels/conv2d_planner.h src/tile_rule.h $(CONV2D_HEADERS) | $(BUILD)/obj
	$(NVCC) $(NVCCFLAGS) -Ikernels -Isrc $(STB_CFLAGS) -c -o $@ $<

# linked against the shared runtime, whose calls the fake device replaces
$(BUILD)/plan-dump: $(BUILD)/obj/plan_dump.o $(BUILD)/obj/plan_fake_device.o $(PLAN_DUMP_OBJ)
	$(CC) -o $@ $^ $(filter-out -lcudart_static,$(LDLIBS)) -lcudart -Wl,-rpath,$(CUDA_HOME)/lib64

# ---- benchmarks -------------------------------------------------------------------

bench-png: $(BUILD)/bench_png_stb $(BUILD)/bench_png_hook
	$(BUILD)/bench_png_stb $(BENCH_IMAGE)
	$(BUILD)/bench_png_hook $(BENCH_IMAGE)

$(BUILD)/bench_png_stb $(BUILD)/bench_png_hook: bench/png_deflate.c | $(BUILD)/obj
	$(CC) -O2 $(STB_CFLAGS) $(if $(findstring hook,$@),-DHOOK) -o $@ $< -ldeflate -lz -lm

# ---- bench --------------------------------------------------------------------------
#   make bench   builds $(BUILD)/gpufilter-bench (bench/gpufilter_bench.cu): every
#   kernel version, checked against the CPU reference, then timed beside the
#   device copy bandwidth and the peers (NPP when $(CUDA_HOME)/include/npp.h
#   exists, CUB always). It links the tool's own kernel objects. See bench/RESULTS.md.

.PHONY: bench

BENCH_NPP ?= $(shell test -f $(CUDA_HOME)/include/npp.h && echo 1)
# the objects the unit tests link (image I/O, masks, errors) plus the CPU reference
BENCH_OBJ  = $(CORE_OBJ) $(BUILD)/obj/backend_cpu.o $(BUILD)/obj/cpu_conv.o $(BUILD)/obj/cpu_conv_plan.o $(BUILD)/obj/tile_rule.o \
             $(BUILD)/obj/cuda_fft.o $(BUILD)/obj/cufft_dl.o
ifeq ($(BENCH_NPP),1)
BENCH_DEFS = -DGF_HAVE_NPP
BENCH_LIBS = -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lnppif -lnppc
endif

# the object's name says whether NPP was in it, so that a build carried from a
# machine without NPP to one with it is rebuilt there
BENCH_MAIN = $(BUILD)/obj/gpufilter_bench$(if $(BENCH_DEFS),-npp).o

bench: $(BUILD)/gpufilter-bench

$(BENCH_MAIN): bench/gpufilter_bench.cu kernels/kernels.h kernels/conv2d_large.h src/*.h | $(BUILD)/obj
	$(NVCC) $(NVCCFLAGS) $(BENCH_DEFS) -Isrc -Ikernels -c -o $@ $<

$(BUILD)/gpufilter-bench: $(BENCH_MAIN) $(BENCH_OBJ) $(KERNEL_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(BENCH_LIBS) $(LDLIBS)

# the 16-bit kernels against the device copy (bench/depth16_bench.cu)
bench-depth16: $(BUILD)/depth16-bench
$(BUILD)/depth16-bench: bench/depth16_bench.cu bench/bench_timing.cuh $(KERNEL_BUILD)/obj/depth16.o kernels/depth16.h src/border.h src/mask.h
	$(NVCC) $(NVCCFLAGS) -Ikernels -o $@ bench/depth16_bench.cu $(KERNEL_BUILD)/obj/depth16.o
# the CLAHE chain against the device copy, checked against the host
# (bench/clahe_bench.cu; OpenCV's CPU time: bench/clahe_opencv.py)
bench-clahe: $(BUILD)/clahe-bench
$(BUILD)/obj/clahe_bench.o: bench/clahe_bench.cu bench/bench_timing.cuh kernels/clahe_gpu.h src/clahe.h src/image.h | $(BUILD)/obj
	$(NVCC) $(NVCCFLAGS) -Ikernels -Isrc -c -o $@ $<
$(BUILD)/clahe-bench: $(BUILD)/obj/clahe_bench.o $(KERNEL_BUILD)/obj/clahe_gpu.o $(BUILD)/obj/clahe.o $(BUILD)/obj/util.o
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)
# the --diffuse ladder against the device copy (bench/diffuse_bench.cu)
bench-diffuse: $(BUILD)/diffuse-bench
	$(BUILD)/diffuse-bench
	$(BUILD)/diffuse-bench 8192 8192 16 1
$(BUILD)/diffuse-bench: bench/diffuse_bench.cu bench/bench_timing.cuh $(KERNEL_BUILD)/obj/diffuse_gpu.o kernels/diffuse_gpu.h src/border.h
	$(NVCC) $(NVCCFLAGS) -Ikernels -o $@ bench/diffuse_bench.cu $(KERNEL_BUILD)/obj/diffuse_gpu.o
# ---- end bench ----------------------------------------------------------------------
