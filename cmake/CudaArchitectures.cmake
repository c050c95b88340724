# SPDX-License-Identifier: MIT
# Default CUDA architectures, decided before project() enables CUDA.
#
#  - set explicitly (-DCMAKE_CUDA_ARCHITECTURES=... or the CUDAARCHS environment variable): used as is;
#  - else, a GPU answers nvidia-smi: its compute capability (e.g. 90 on an H100);
#  - else: a short explicit list, SASS for sm_80 and sm_90 plus PTX of sm_90 for newer GPUs.
if(DEFINED CMAKE_CUDA_ARCHITECTURES OR DEFINED ENV{CUDAARCHS})
  return()
endif()

set(_softmax_archs "80-real;90")
find_program(SOFTMAX_NVIDIA_SMI nvidia-smi)
if(SOFTMAX_NVIDIA_SMI)
  execute_process(
    COMMAND ${SOFTMAX_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
    OUTPUT_VARIABLE _caps RESULT_VARIABLE _rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_rc EQUAL 0 AND _caps MATCHES "^([0-9]+)\\.([0-9]+)")
    set(_softmax_archs "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
    message(STATUS "CUDA architecture of the GPU present: ${_softmax_archs}")
  endif()
endif()
set(CMAKE_CUDA_ARCHITECTURES "${_softmax_archs}" CACHE STRING "CUDA architectures to build for")
