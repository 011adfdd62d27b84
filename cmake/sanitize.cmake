# The sanitizer build (M2CPP_SANITIZE) and the fuzz harnesses' coverage
# instrumentation (M2CPP_FUZZ). Included by the top-level CMakeLists.txt
# before the layers, so that every library is compiled with the same flags
# as the tests and harnesses that link it (ASan needs the whole program
# instrumented to see an overflow of a buffer allocated in another layer).
# scripts/sanitize_check.sh configures it in a build dir of its own.
option(M2CPP_SANITIZE "Compile everything with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(M2CPP_FUZZ "Build the libFuzzer harnesses of tests/fuzz/ (clang only; implies M2CPP_SANITIZE)" OFF)

if(M2CPP_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "M2CPP_FUZZ=ON needs clang (libFuzzer ships with it): configure with "
      "-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
  endif()
  set(M2CPP_SANITIZE ON CACHE BOOL "" FORCE)
endif()

if(M2CPP_SANITIZE)
  # -O1: fast enough for the unit tests, and stack traces still name the
  # right lines; -fno-sanitize-recover: a UB finding fails the test instead
  # of printing a line nobody reads.
  set(m2_san_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_compile_options(${m2_san_flags} -O1 -gline-tables-only)
  add_link_options(${m2_san_flags})
  if(M2CPP_FUZZ)
    # Coverage feedback for the fuzzer from every library, not only from the
    # harness; the libFuzzer main is linked into the harnesses alone.
    add_compile_options(-fsanitize=fuzzer-no-link)
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # GCC-only warning names of the AVX-512 files (CMakeLists.txt).
    add_compile_options(-Wno-unknown-warning-option)
  endif()
endif()

# The GoogleTest suites the sanitizer build compiles and runs (tests/<dir>):
# the layers that read untrusted input (request bodies, HTTP, tokenizer and
# template files, config.json, safetensors headers) and the engine they
# drive. The model and kernel suites (numerics, minutes under ASan) and the
# Python suites (they start the normal build's binary) run in the normal
# build only.
set(M2CPP_SANITIZE_TESTS "util;tensor;io;text;engine;server;loadgen" CACHE STRING
  "tests/ folders whose suites the sanitizer build compiles")
