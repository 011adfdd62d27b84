# The optional CUDA backend (src/backend/cuda/): the CUDA language and toolkit,
# the m2cuda library of every family folder under src/backend/cuda/, and the
# two optional header-only dependencies compiled apart for sm_90a: CUTLASS
# (the grouped FP8 MoE GEMMs) and FlashInfer (Hopper prefill attention).
# Included by the top-level CMakeLists.txt after the CPU layers; sets
# M2CPP_HAVE_CUDA and M2CPP_BACKEND_LIBS.
include(CheckLanguage)
set(M2CPP_HAVE_CUDA OFF)
if(NOT M2CPP_CUDA STREQUAL "OFF")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(M2CPP_HAVE_CUDA ON)
  elseif(M2CPP_CUDA STREQUAL "ON")
    message(FATAL_ERROR "M2CPP_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
file(GLOB_RECURSE M2CPP_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cpp)
if(M2CPP_HAVE_CUDA AND M2CPP_CUDA_SOURCES)
  # Hopper machine code only by default (sm_90a: wgmma, TMA; arch-specific PTX
  # would not run on later GPUs anyway), which keeps CI to one architecture.
  # -DCMAKE_CUDA_ARCHITECTURES="80-real;89-real;90a-real" adds Ampere and Ada
  # (a plain "80" also embeds PTX that newer GPUs JIT-compile): the Hopper-only
  # kernels are compiled out there and the backend falls back at run time
  # (src/backend/cuda/runtime/device_caps.h). Must be set before enable_language(CUDA),
  # which otherwise picks nvcc's default architecture.
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90a-real)
  endif()
  foreach(arch ${CMAKE_CUDA_ARCHITECTURES})
    if(arch MATCHES "^([0-9]+)" AND CMAKE_MATCH_1 LESS 80)
      message(FATAL_ERROR "CMAKE_CUDA_ARCHITECTURES entry ${arch}: the CUDA kernels need sm_80 or newer "
        "(cp.async, bf16 mma.sync)")
    endif()
  endforeach()
  enable_language(CUDA)
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)  # CMake < 3.26 knows no C++20 flag for nvcc
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  # moe_cutlass.cu: only with CUTLASS (below), compiled apart for sm_90a.
  list(FILTER M2CPP_CUDA_SOURCES EXCLUDE REGEX "/moe_cutlass\\.cu$")
  list(FILTER M2CPP_CUDA_SOURCES EXCLUDE REGEX "/flashinfer_prefill\\.cu$")
  add_library(m2cuda STATIC ${M2CPP_CUDA_SOURCES})
  target_include_directories(m2cuda PUBLIC ${CMAKE_SOURCE_DIR}/src)
  # The backend sits beside backend/cpu: it needs the model layer only.
  target_link_libraries(m2cuda PUBLIC m2_model m2_backend_cpu CUDA::cudart_static CUDA::cublasLt)
  target_compile_definitions(m2cuda PUBLIC M2CPP_WITH_CUDA=1)
  if("90a-real" IN_LIST CMAKE_CUDA_ARCHITECTURES OR "90a" IN_LIST CMAKE_CUDA_ARCHITECTURES)
    # The wgmma kernels exist in this build (src/backend/cuda/runtime/device_caps.h).
    target_compile_definitions(m2cuda PUBLIC M2CPP_WITH_SM90A=1)
  endif()
  # The directory's warning flags are GCC's: give nvcc its own spelling.
  set_target_properties(m2cuda PROPERTIES COMPILE_OPTIONS "")
  target_compile_options(m2cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -ffp-contract=off>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter -lineinfo --Werror=all-warnings>)
  set(M2CPP_BACKEND_LIBS m2cuda)

  # ---- CUTLASS: the grouped FP8 MoE's GEMMs (src/backend/cuda/moe/moe_cutlass.cu) ----
  # Header-only, from the PyPI package nvidia-cutlass (scripts/setup.sh;
  # module cutlass_library, headers under its source/) or M2CPP_CUTLASS_DIR.
  # On by default when the headers are found and 90a is among the
  # architectures; the file is compiled for sm_90a only (an object library of
  # its own), the backend uses it on sm_90 devices only (device_caps.h).
  # option(`name`): on by default when `why_not` is empty; else off, and an
  # error naming `why_not` if the user turned it on.
  function(m2_feature_option name doc why_not)
    if(why_not STREQUAL "")
      option(${name} "${doc}" ON)
    else()
      option(${name} "${doc}" OFF)
      if(${name})
        message(FATAL_ERROR "${name}=ON: ${why_not}")
      endif()
      message(STATUS "m2cpp: ${name} off: ${why_not}")
    endif()
  endfunction()
  # Sets the cache path `var`, unless set, to `subdir` of the installed Python
  # package `module` when it holds `marker` (header-only packages from PyPI).
  function(m2_python_package_dir var module subdir marker doc)
    if(${var})
      return()
    endif()
    find_package(Python3 COMPONENTS Interpreter)
    if(NOT Python3_Interpreter_FOUND)
      return()
    endif()
    execute_process(COMMAND ${Python3_EXECUTABLE} -c
      "import importlib.util as u; print(u.find_spec('${module}').submodule_search_locations[0] + '/${subdir}')"
      OUTPUT_VARIABLE dir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0 AND EXISTS ${dir}/${marker})
      set(${var} ${dir} CACHE PATH "${doc}")
    endif()
  endfunction()
  m2_python_package_dir(M2CPP_CUTLASS_DIR cutlass_library source include/cutlass/version.h
    "CUTLASS tree (include/, tools/util/include/)")
  set(cutlass_why "")
  if(NOT M2CPP_CUTLASS_DIR OR NOT EXISTS ${M2CPP_CUTLASS_DIR}/include/cutlass/version.h)
    set(cutlass_why "no CUTLASS headers (pip install nvidia-cutlass, scripts/setup.sh, or M2CPP_CUTLASS_DIR)")
  elseif(NOT "90a-real" IN_LIST CMAKE_CUDA_ARCHITECTURES AND NOT "90a" IN_LIST CMAKE_CUDA_ARCHITECTURES)
    set(cutlass_why "90a is not in CMAKE_CUDA_ARCHITECTURES (${CMAKE_CUDA_ARCHITECTURES})")
  endif()
  m2_feature_option(M2CPP_CUTLASS "The grouped FP8 MoE's GEMMs on CUTLASS (sm_90a)" "${cutlass_why}")
  if(M2CPP_CUTLASS)
    file(STRINGS ${M2CPP_CUTLASS_DIR}/include/cutlass/version.h cutlass_ver REGEX "define CUTLASS_(MAJOR|MINOR|PATCH) ")
    message(STATUS "m2cpp: CUTLASS MoE with ${M2CPP_CUTLASS_DIR} (${cutlass_ver})")
    add_library(m2cuda_cutlass OBJECT ${CMAKE_SOURCE_DIR}/src/backend/cuda/moe/moe_cutlass.cu)
    # CUTLASS's include paths as system headers (their warnings are not ours).
    set_target_properties(m2cuda_cutlass PROPERTIES CUDA_ARCHITECTURES 90a-real COMPILE_OPTIONS "")
    target_include_directories(m2cuda_cutlass SYSTEM PRIVATE ${M2CPP_CUTLASS_DIR}/include
      ${M2CPP_CUTLASS_DIR}/tools/util/include)
    target_link_libraries(m2cuda_cutlass PRIVATE m2_model CUDA::cudart_static)
    target_include_directories(m2cuda_cutlass PRIVATE ${CMAKE_SOURCE_DIR}/src)
    target_compile_definitions(m2cuda_cutlass PRIVATE M2CPP_WITH_CUDA=1 M2CPP_WITH_CUTLASS=1)
    target_compile_options(m2cuda_cutlass PRIVATE --expt-relaxed-constexpr -lineinfo
      -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter)
    target_sources(m2cuda PRIVATE $<TARGET_OBJECTS:m2cuda_cutlass>)
    target_compile_definitions(m2cuda PUBLIC M2CPP_WITH_CUTLASS=1)
  endif()

  # ---- FlashInfer: prefill attention over BF16 caches (src/backend/cuda/attention/flashinfer_prefill.cu) ----
  # Its Hopper kernel's headers, from the PyPI package flashinfer-python
  # (scripts/setup.sh; flashinfer/data/include) or M2CPP_FLASHINFER_DIR, on top
  # of the CUTLASS headers above (the version FlashInfer bundles). On when both
  # are found; compiled for sm_90a only, used on sm_90 devices only.
  if(M2CPP_CUTLASS)
    m2_python_package_dir(M2CPP_FLASHINFER_DIR flashinfer data/include flashinfer/attention/hopper/prefill_sm90.cuh
      "FlashInfer's include/ (flashinfer/attention/hopper/)")
  endif()
  set(fi_why "")
  if(NOT M2CPP_CUTLASS OR NOT M2CPP_FLASHINFER_DIR OR NOT EXISTS ${M2CPP_FLASHINFER_DIR}/flashinfer/attention/hopper/prefill_sm90.cuh)
    set(fi_why "needs CUTLASS and the FlashInfer headers (pip install flashinfer-python, scripts/setup.sh, or M2CPP_FLASHINFER_DIR)")
  endif()
  m2_feature_option(M2CPP_FLASHINFER "Prefill attention on FlashInfer's Hopper kernel (sm_90a)" "${fi_why}")
  if(M2CPP_FLASHINFER)
    message(STATUS "m2cpp: FlashInfer prefill with ${M2CPP_FLASHINFER_DIR}")
    add_library(m2cuda_flashinfer OBJECT ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention/flashinfer_prefill.cu)
    set_target_properties(m2cuda_flashinfer PROPERTIES CUDA_ARCHITECTURES 90a-real COMPILE_OPTIONS "")
    target_include_directories(m2cuda_flashinfer SYSTEM PRIVATE ${M2CPP_FLASHINFER_DIR} ${M2CPP_CUTLASS_DIR}/include
      ${M2CPP_CUTLASS_DIR}/tools/util/include)
    target_include_directories(m2cuda_flashinfer PRIVATE ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(m2cuda_flashinfer PRIVATE CUDA::cudart_static)
    target_compile_options(m2cuda_flashinfer PRIVATE --expt-relaxed-constexpr --expt-extended-lambda -lineinfo
      -diag-suppress=2908 -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter)
    target_sources(m2cuda PRIVATE $<TARGET_OBJECTS:m2cuda_flashinfer>)
    target_compile_definitions(m2cuda PUBLIC M2CPP_WITH_FLASHINFER=1)
  endif()
endif()
message(STATUS "m2cpp: CUDA backend ${M2CPP_HAVE_CUDA}")
