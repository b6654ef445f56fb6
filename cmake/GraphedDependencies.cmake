# cmake/GraphedDependencies.cmake — finds LibTorch (either flavour), CLI11, nlohmann-json and
# GoogleTest, from the system or from the offline .deps/ folder, and defines:
#   graphed::torch      interface target: LibTorch libraries + TORCH_CXX_FLAGS + GRAPHED_CUDA
#   graphed::torch_headers  the same without the libraries
#   GRAPHED_CUDA        1 when the LibTorch found has CUDA (target torch_cuda exists), else 0
#   GRAPHED_TORCH_VERSION
#   GRAPHED_GLOO        1 when the gloo headers are found (CPU ranks of a multi-process run), else 0
#   graphed::httplib    cpp-httplib (graphed serve): Debian's libcpp-httplib-dev, or .deps/httplib

find_package(Threads REQUIRED)
find_package(Torch REQUIRED)
set(GRAPHED_TORCH_VERSION "${Torch_VERSION}")
if(TARGET torch_cuda)
  set(GRAPHED_CUDA 1)
else()
  set(GRAPHED_CUDA 0)
endif()

# graphed::torch_headers: LibTorch's headers, flags and GRAPHED_CUDA without linking its libraries
# (util/build_info.cpp needs only <torch/version.h>; tests that do not run torch code start faster).
add_library(graphed_torch_headers INTERFACE)
add_library(graphed::torch_headers ALIAS graphed_torch_headers)
target_include_directories(graphed_torch_headers INTERFACE ${TORCH_INCLUDE_DIRS})
if(TORCH_CXX_FLAGS)
  separate_arguments(_graphed_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  target_compile_options(graphed_torch_headers INTERFACE ${_graphed_torch_flags})
endif()
target_compile_definitions(graphed_torch_headers INTERFACE GRAPHED_CUDA=${GRAPHED_CUDA})

add_library(graphed_torch INTERFACE)
add_library(graphed::torch ALIAS graphed_torch)
target_link_libraries(graphed_torch INTERFACE graphed_torch_headers ${TORCH_LIBRARIES})
message(STATUS "graphed: LibTorch ${GRAPHED_TORCH_VERSION}, GRAPHED_CUDA=${GRAPHED_CUDA}")

# Gloo's headers (Debian's libgloo-dev; the pip wheel ships none): CPU ranks of a multi-process run.
find_path(GRAPHED_GLOO_INCLUDE_DIR gloo/algorithm.h HINTS ${TORCH_INCLUDE_DIRS})
if(GRAPHED_GLOO_INCLUDE_DIR)
  set(GRAPHED_GLOO 1)
else()
  set(GRAPHED_GLOO 0)
endif()
message(STATUS "graphed: Gloo for CPU ranks: ${GRAPHED_GLOO}")

# Header-only libraries: the system's (apt) first, then .deps/include (scripts/gpu-prepare).
find_package(CLI11 CONFIG QUIET)
if(NOT TARGET CLI11::CLI11)
  if(NOT EXISTS "${GRAPHED_DEPS_DIR}/include/CLI/CLI.hpp")
    message(FATAL_ERROR "CLI11 not found: install libcli11-dev (scripts/setup) or run scripts/gpu-prepare "
                        "where apt works and carry .deps/ to this machine")
  endif()
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE "${GRAPHED_DEPS_DIR}/include")
endif()

find_package(nlohmann_json CONFIG QUIET)
if(NOT TARGET nlohmann_json::nlohmann_json)
  if(NOT EXISTS "${GRAPHED_DEPS_DIR}/include/nlohmann/json.hpp")
    message(FATAL_ERROR "nlohmann-json not found: install nlohmann-json3-dev (scripts/setup) or run "
                        "scripts/gpu-prepare where apt works and carry .deps/ to this machine")
  endif()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  target_include_directories(nlohmann_json::nlohmann_json INTERFACE "${GRAPHED_DEPS_DIR}/include")
endif()

# cpp-httplib, the HTTP server of `graphed serve`. Debian builds it as a shared library with OpenSSL, zlib
# and brotli support, and its header's declarations depend on those macros, so they come from its
# pkg-config file. On a machine without apt, scripts/gpu-prepare's .deps/httplib holds the same header,
# library and the libraries it needs; an RPATH (not RUNPATH: it must reach the library's own needs too)
# points there.
add_library(graphed_httplib INTERFACE)
add_library(graphed::httplib ALIAS graphed_httplib)
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(GRAPHED_CPP_HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
if(TARGET PkgConfig::GRAPHED_CPP_HTTPLIB)
  target_link_libraries(graphed_httplib INTERFACE PkgConfig::GRAPHED_CPP_HTTPLIB Threads::Threads)
  message(STATUS "graphed: cpp-httplib ${GRAPHED_CPP_HTTPLIB_VERSION} (system)")
elseif(EXISTS "${GRAPHED_DEPS_DIR}/httplib/include/httplib.h")
  set(_graphed_httplib_lib "${GRAPHED_DEPS_DIR}/httplib/lib")
  target_include_directories(graphed_httplib SYSTEM INTERFACE "${GRAPHED_DEPS_DIR}/httplib/include")
  target_compile_definitions(graphed_httplib INTERFACE CPPHTTPLIB_OPENSSL_SUPPORT CPPHTTPLIB_ZLIB_SUPPORT
                                                       CPPHTTPLIB_BROTLI_SUPPORT)
  target_link_libraries(graphed_httplib INTERFACE "${_graphed_httplib_lib}/libcpp-httplib.so.0.11" Threads::Threads)
  target_link_options(graphed_httplib INTERFACE "LINKER:-rpath,${_graphed_httplib_lib}"
                      "LINKER:-rpath-link,${_graphed_httplib_lib}" "LINKER:--disable-new-dtags")
  message(STATUS "graphed: cpp-httplib from ${GRAPHED_DEPS_DIR}/httplib")
else()
  message(FATAL_ERROR "cpp-httplib not found: install libcpp-httplib-dev (scripts/setup) or run scripts/gpu-prepare "
                      "where apt works and carry .deps/ to this machine")
endif()

if(GRAPHED_BUILD_TESTS)
  find_package(GTest CONFIG QUIET)
  if(NOT TARGET GTest::gtest_main)
    if(NOT EXISTS "${GRAPHED_DEPS_DIR}/googletest/CMakeLists.txt")
      message(FATAL_ERROR "GoogleTest not found: install googletest (preinstalled on Debian machines) or "
                          "run scripts/gpu-prepare and carry .deps/ to this machine")
    endif()
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
    add_subdirectory("${GRAPHED_DEPS_DIR}/googletest" "${CMAKE_BINARY_DIR}/_deps/googletest" EXCLUDE_FROM_ALL)
    if(NOT TARGET GTest::gtest_main)  # GoogleTest >= 1.11 defines the alias itself
      add_library(GTest::gtest_main ALIAS gtest_main)
    endif()
  endif()
  include(GoogleTest)
endif()
