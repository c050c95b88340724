# SPDX-License-Identifier: MIT
# GoogleTest and Google Benchmark: the system's packages when found, else fetched at a pinned
# release. cuDNN: optional (a benchmark baseline), found by header and library.
include(FetchContent)

if(SOFTMAX_BUILD_TESTS)
  find_package(GTest 1.10 QUIET)
  if(GTest_FOUND)
    message(STATUS "GoogleTest: system package ${GTest_VERSION}")
  else()
    message(STATUS "GoogleTest: not found on the system, fetching v1.14.0")
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    FetchContent_Declare(googletest
      GIT_REPOSITORY https://github.com/google/googletest.git
      GIT_TAG v1.14.0
      GIT_SHALLOW TRUE)
    FetchContent_MakeAvailable(googletest)
  endif()
  include(GoogleTest)
endif()

if(SOFTMAX_BUILD_BENCHMARKS)
  find_package(benchmark 1.6 QUIET)
  if(benchmark_FOUND)
    message(STATUS "Google Benchmark: system package ${benchmark_VERSION}")
  else()
    message(STATUS "Google Benchmark: not found on the system, fetching v1.8.3")
    set(BENCHMARK_ENABLE_TESTING OFF CACHE BOOL "" FORCE)
    set(BENCHMARK_ENABLE_INSTALL OFF CACHE BOOL "" FORCE)
    FetchContent_Declare(benchmark
      GIT_REPOSITORY https://github.com/google/benchmark.git
      GIT_TAG v1.8.3
      GIT_SHALLOW TRUE)
    FetchContent_MakeAvailable(benchmark)
  endif()
endif()

option(SOFTMAX_WITH_CUDNN "Use cuDNN as a benchmark baseline when found" ON)
set(SOFTMAX_CUDNN_FOUND OFF)
if(SOFTMAX_WITH_CUDNN)
  find_path(CUDNN_INCLUDE_DIR cudnn.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include ENV CUDNN_ROOT
    PATH_SUFFIXES include)
  find_library(CUDNN_LIBRARY cudnn
    HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_ROOT}/lib64
          ENV CUDNN_ROOT
    PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
  if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
    set(SOFTMAX_CUDNN_FOUND ON)
    add_library(softmax::cudnn UNKNOWN IMPORTED)
    set_target_properties(softmax::cudnn PROPERTIES
      IMPORTED_LOCATION ${CUDNN_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${CUDNN_INCLUDE_DIR})
    message(STATUS "cuDNN: ${CUDNN_LIBRARY} (a benchmark baseline)")
  else()
    message(STATUS "cuDNN: not found; the benchmark runs without that baseline")
  endif()
endif()
