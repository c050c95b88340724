# SPDX-License-Identifier: MIT
# softmax_step(<name> [more .cu files]): the one line in every step folder's CMakeLists.txt.
#
# Builds <name>_kernels (softmax.cu: kernels, launcher, descriptor; plus any files named after
# the name), the program <name> (main.cu),
# registers a CTest test that verifies it (SKIPPED with no GPU: exit code 77), and records the step
# for the targets that iterate the step table.
function(softmax_step name)
  add_library(${name}_kernels STATIC softmax.cu ${ARGN})
  target_link_libraries(${name}_kernels PUBLIC softmax_common)

  add_executable(${name} main.cu)
  target_link_libraries(${name} PRIVATE ${name}_kernels)

  if(SOFTMAX_BUILD_TESTS)
    add_test(NAME ${name}.program COMMAND ${name} --verify-only)
    set_tests_properties(${name}.program PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu)
  endif()
  set_property(GLOBAL APPEND PROPERTY SOFTMAX_STEPS ${name})
endfunction()
