# xgrammar (Apache-2.0): the grammar engine of constrained decoding
# (src/engine/constraint/, docs/decisions/constrained-decoding-xgrammar.md).
# Its C++ core is built here from the PyPI source distribution that
# scripts/setup.sh downloads (pinned version and SHA-256) and unpacks into
# third_party/; the Python bindings (nanobind / tvm-ffi) are not built.
set(M2CPP_XGRAMMAR_VERSION 0.2.9)
set(M2CPP_XGRAMMAR_DIR "${CMAKE_SOURCE_DIR}/third_party/xgrammar-${M2CPP_XGRAMMAR_VERSION}" CACHE PATH
    "the unpacked xgrammar sdist (scripts/setup.sh puts it there)")
if(NOT EXISTS "${M2CPP_XGRAMMAR_DIR}/include/xgrammar/xgrammar.h")
  message(FATAL_ERROR "xgrammar ${M2CPP_XGRAMMAR_VERSION} sources not found in ${M2CPP_XGRAMMAR_DIR}: "
                      "run scripts/setup.sh (it downloads the pinned sdist from PyPI)")
endif()
file(GLOB M2CPP_XGRAMMAR_SOURCES CONFIGURE_DEPENDS "${M2CPP_XGRAMMAR_DIR}/cpp/*.cc"
     "${M2CPP_XGRAMMAR_DIR}/cpp/support/*.cc" "${M2CPP_XGRAMMAR_DIR}/cpp/converter_ext/*.cc")
add_library(m2_xgrammar STATIC ${M2CPP_XGRAMMAR_SOURCES})
# Its own standard and warnings: it is C++17 code, not held to our -Wall.
set_target_properties(m2_xgrammar PROPERTIES CXX_STANDARD 17 POSITION_INDEPENDENT_CODE ON)
target_compile_options(m2_xgrammar PRIVATE -w)
target_compile_definitions(m2_xgrammar PUBLIC XGRAMMAR_ENABLE_CPPTRACE=0)
target_include_directories(m2_xgrammar SYSTEM PUBLIC "${M2CPP_XGRAMMAR_DIR}/include"
                           "${M2CPP_XGRAMMAR_DIR}/3rdparty/picojson" "${M2CPP_XGRAMMAR_DIR}/3rdparty/dlpack/include")
target_link_libraries(m2_xgrammar PUBLIC Threads::Threads)
