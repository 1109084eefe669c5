# The two commands of the README, and a few helpers. Everything builds under build/.
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?=
MAKEFLAGS += --no-print-directory

.PHONY: demo test build bootstrap format format-check bench clean

demo: build
	./$(BUILD)/qkv explain

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

build: bootstrap
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

bootstrap:
	@./scripts/bootstrap

format:
	@git ls-files '*.h' '*.cpp' | xargs clang-format -i

format-check:
	@git ls-files '*.h' '*.cpp' | xargs clang-format --dry-run --Werror

bench: build
	./$(BUILD)/bench/qkv_bench

clean:
	rm -rf $(BUILD)
