# m2cpp — the two commands of the README:
#   make demo   installs what is missing, builds, runs the bundled model
#   make test   installs what is missing, builds, runs every test, then the
#               sanitizer (ASan + UBSan) suites and fuzzers in build-san/
#               (scripts/sanitize_check.sh; M2CPP_SANITIZE_CHECK=0 skips them)
MAKEFLAGS += --no-print-directory
BUILD ?= build
SAN_BUILD ?= build-san
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup configure build test demo clean

all: build

setup:
	@scripts/setup.sh

configure:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > /dev/null

build: setup configure
	@cmake --build $(BUILD) -j $(JOBS)
	@echo "built $(BUILD)/m2cpp"

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@JOBS=$(JOBS) scripts/sanitize_check.sh $(SAN_BUILD)

demo: build
	@scripts/demo.sh $(BUILD)/m2cpp

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
