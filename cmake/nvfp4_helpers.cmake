# One helper per kind of target. Every project target gets the same warnings and sanitizer flags.

# The project root is the include root: #include "reference/fp16.h".
# -Wno-missing-field-initializers: the ABI grows by appending fields that zero means "not
# declared" for (SPEC section 5), and kernels' info initializers name only what they declare.
function(nvfp4_target_defaults target)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers>)
  if(NVFP4_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined>)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()

# nvfp4_add_library(NAME SOURCES ... [LIBS ...])
function(nvfp4_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  nvfp4_target_defaults(${name})
  target_link_libraries(${name} PUBLIC ${ARG_LIBS})
endfunction()

# nvfp4_add_test(NAME SOURCES ... [LIBS ...] [LABELS ...] [ENVIRONMENT ...] [TIMEOUT s] [RUN_SERIAL])
# RUN_SERIAL: no other test runs beside it (one that holds the whole GPU).
# A GoogleTest binary whose tests are discovered at test time (so a GPU binary can be listed on a
# machine without a GPU). GTEST_SKIP shows as "skipped" in ctest, with its reason in the log.
function(nvfp4_add_test name)
  cmake_parse_arguments(ARG "RUN_SERIAL" "TIMEOUT" "SOURCES;LIBS;LABELS;ENVIRONMENT;RESOURCE_GROUPS" ${ARGN})
  if("gpu" IN_LIST ARG_LABELS)
    # One GPU per test from ctest's resource spec, so `ctest -j` spreads them over every GPU.
    list(APPEND ARG_SOURCES ${PROJECT_SOURCE_DIR}/harness/process/ctest_gpu_resource.cc)
    if(NOT ARG_RESOURCE_GROUPS)
      set(ARG_RESOURCE_GROUPS "gpus:1")
    endif()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  nvfp4_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  set(props TIMEOUT ${ARG_TIMEOUT} SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  if(ARG_ENVIRONMENT)
    list(APPEND props ENVIRONMENT "${ARG_ENVIRONMENT}")
  endif()
  if(ARG_RESOURCE_GROUPS)
    list(APPEND props RESOURCE_GROUPS "${ARG_RESOURCE_GROUPS}")
  endif()
  if(ARG_RUN_SERIAL)
    list(APPEND props RUN_SERIAL TRUE)
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60 PROPERTIES ${props})
  # Labels are set after discovery, from the test list it leaves behind: CMake 3.25's
  # gtest_discover_tests re-parses PROPERTIES and splits any list value ("cpu;mutants" would
  # lose "mutants" and shift every property after it).
  set(labels_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake")
  file(WRITE "${labels_file}"
    "if(DEFINED ${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${ARG_LABELS}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${labels_file}")
endfunction()
