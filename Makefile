# The README's two commands: `make demo` and `make test`.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
BUILD ?= build
BUILD_SAN ?= build-sanitize

.PHONY: all build demo test test-fast test-sanitize clean format

all: build

build:
	@$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@$(CMAKE) --build $(BUILD) -j$(JOBS)

demo: build
	./$(BUILD)/libreyolo kernels

test: test-fast test-sanitize

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-sanitize:
	@$(CMAKE) -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DLIBREYOLO_SANITIZE=ON >/dev/null
	@$(CMAKE) --build $(BUILD_SAN) -j$(JOBS)
	cd $(BUILD_SAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j$(JOBS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_SAN)
