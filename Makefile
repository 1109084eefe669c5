# The two commands of the README, and a few helpers. Everything builds under build/.
#   make demo   the library and the command only, `qkv` installed into $(PREFIX)/bin, then the main job
#   make test   everything (tests, benchmarks), then every test
BUILD  ?= build
JOBS   ?= $(shell nproc)
PREFIX ?= $(HOME)/.local
CMAKE_FLAGS ?=
MAKEFLAGS += --no-print-directory

.PHONY: demo test build configure command install-command bootstrap fuzz format format-check \
        bench clean

demo: command install-command
	@$(BUILD)/qkv explain

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The Python module (python/) is built with the Python of scripts/python_venv, which has nanobind.
configure: bootstrap
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DQKV_PYTHON=ON \
	  -DPython_EXECUTABLE=$$(./scripts/python_venv --path) $(CMAKE_FLAGS) >/dev/null

# Only what `qkv` needs: the library and the command (no tests, no benchmarks).
command: configure
	@cmake --build $(BUILD) -j $(JOBS) --target qkv_cli

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# A copy of the command on the PATH as the README writes it (`qkv explain ...`); it needs nothing
# from the build folder (the model lives in $QKV_HOME, default ~/.cache/qkv).
install-command:
	@./scripts/install_command $(BUILD)/qkv $(PREFIX)/bin

bootstrap:
	@./scripts/bootstrap

# libFuzzer targets (clang) for the file readers and the tokenizer, FUZZ_SECONDS each.
FUZZ_SECONDS ?= 60
fuzz:
	@./scripts/bootstrap --fuzz
	@./scripts/fuzz $(FUZZ_SECONDS)

format:
	@git ls-files '*.h' '*.cpp' | xargs clang-format -i

format-check:
	@git ls-files '*.h' '*.cpp' | xargs clang-format --dry-run --Werror

bench: build
	./$(BUILD)/bench/qkv_bench

clean:
	rm -rf $(BUILD)
