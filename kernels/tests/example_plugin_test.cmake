# ctest script: install the ABI package of this build into a fresh prefix, build examples/plugin
# as a separate CMake project against it (find_package(nvfp4check)), then load the plugin
# through Registry::load_plugin (LOADER) and, when the CLI is built, `nvfp4check list --plugin`.
# Inputs: BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR C_COMPILER LOADER [NVFP4CHECK].

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${what}:\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc})")
  endif()
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

# Only the ABI component: the header and the package config, all an outside kernel needs.
run_step("install the nvfp4check_abi component"
  ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component nvfp4check_abi)
if(NOT EXISTS ${prefix}/include/nvfp4check/nvfp4_kernel_abi.h)
  message(FATAL_ERROR "the ABI header was not installed under include/nvfp4check/")
endif()

run_step("configure examples/plugin against the installed package"
  ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_BUILD_TYPE=Release)
run_step("build examples/plugin" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)

file(GLOB plugin ${WORK_DIR}/build/*example_host_gemv*)
if(NOT plugin)
  message(FATAL_ERROR "examples/plugin built no example_host_gemv library in ${WORK_DIR}/build")
endif()
run_step("load and run it through Registry::load_plugin" ${LOADER} ${plugin} example_host_gemv)

if(NVFP4CHECK AND EXISTS "${NVFP4CHECK}")
  run_step("nvfp4check list --plugin" ${NVFP4CHECK} list --plugin ${plugin})
  if(NOT step_output MATCHES "example_host_gemv")
    message(FATAL_ERROR "nvfp4check list --plugin does not show example_host_gemv")
  endif()
else()
  message(STATUS "nvfp4check is not built: `list --plugin` step not run")
endif()
