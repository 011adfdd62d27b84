#!/usr/bin/env bash
# The second half of `make test`: the libraries that read untrusted input and
# their suites built with clang, AddressSanitizer and UndefinedBehaviorSanitizer
# in a build dir of their own (cmake/sanitize.cmake: util, tensor, io, text,
# engine, server, loadgen; the CPU backend and model compiled too, as the
# engine links them), then those suites and every libFuzzer harness of
# tests/fuzz/ for M2CPP_FUZZ_SECONDS each (cmake/fuzz.cmake). ccache serves
# the rebuilds. M2CPP_SANITIZE_CHECK=0 skips it.
#   scripts/sanitize_check.sh [build-dir]     (default build-san)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-san}
JOBS=${JOBS:-$(nproc)}
if [[ "${M2CPP_SANITIZE_CHECK:-1}" == 0 ]]; then
  echo "sanitize: skipped (M2CPP_SANITIZE_CHECK=0)"
  exit 0
fi
start=$(date +%s)
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS_RELEASE= -DCMAKE_C_FLAGS_RELEASE= -DM2CPP_CUDA=OFF -DM2CPP_BUILD_BENCH=OFF -DM2CPP_FUZZ=ON ${M2CPP_FUZZ_SECONDS:+-DM2CPP_FUZZ_SECONDS=$M2CPP_FUZZ_SECONDS} \
  > /dev/null
cmake --build "$BUILD" -j "$JOBS"
built=$(date +%s)
# (The empty release flags: no -DNDEBUG, so assertions run too.)
# A UB report is an error (-fno-sanitize-recover) with its stack; ASan's
# leak check runs at every exit.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS")
echo "sanitize: built in $((built - start)) s, tests and fuzzers ran in $(( $(date +%s) - built )) s"
