# The libFuzzer harnesses (M2CPP_FUZZ, cmake/sanitize.cmake): one program per
# tests/fuzz/fuzz_<name>.cpp, seeded from tests/fuzz/corpus/<name>/, each a
# ctest entry `fuzz:<name>` that runs it for M2CPP_FUZZ_SECONDS. The run
# first replays every committed input (the seeds and the crash inputs of
# fixed bugs), then mutates; new inputs go to the build dir, never into the
# committed corpus. A crash, a leak, a UB report, an input slower than 10 s
# or more than 2 GiB of memory fails the test and leaves the input in
# <build>/fuzz-artifacts/.
if(NOT M2CPP_FUZZ)
  return()
endif()
set(M2CPP_FUZZ_SECONDS 15 CACHE STRING "Seconds each fuzz harness runs in ctest")
file(GLOB fuzz_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_*.cpp)
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz-artifacts)
foreach(src ${fuzz_sources})
  get_filename_component(target ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" name ${target})
  add_executable(${target} ${src})
  target_link_libraries(${target} PRIVATE m2core ${M2CPP_BACKEND_LIBS})
  target_link_options(${target} PRIVATE -fsanitize=fuzzer)
  target_compile_definitions(${target} PRIVATE M2CPP_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  set(seeds ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${name})
  if(NOT IS_DIRECTORY ${seeds})
    message(FATAL_ERROR "${src}: no seed corpus at tests/fuzz/corpus/${name}/")
  endif()
  set(work ${CMAKE_BINARY_DIR}/fuzz-corpus/${name})
  file(MAKE_DIRECTORY ${work})
  if(BUILD_TESTING OR M2CPP_BUILD_TESTS)
    add_test(NAME fuzz:${name}
      COMMAND ${target} -max_total_time=${M2CPP_FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048
        -max_len=65536 -print_final_stats=1 -artifact_prefix=${CMAKE_BINARY_DIR}/fuzz-artifacts/${name}-
        ${work} ${seeds}
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(fuzz:${name} PROPERTIES LABELS fuzz TIMEOUT 300)
  endif()
endforeach()
