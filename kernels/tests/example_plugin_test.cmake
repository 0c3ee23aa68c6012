# ctest script: install the ABI package of this build into a fresh prefix, build examples/plugin
# as a separate CMake project against it (find_package(nvfp4check)), then load the plugin
# through Registry::load_plugin (LOADER) and, when the CLI is built, `nvfp4check list --plugin` and
# a short `nvfp4check run --plugin` (the suite's own checks of an outside kernel).
# Inputs: BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR C_COMPILER LOADER [NVFP4CHECK].

function(run_step what)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${what}:\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc})")
  endif()
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})  # also where `run` saves its case files
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
  run_step("nvfp4check run --plugin (5 s, seed 7)"
    ${NVFP4CHECK} run --plugin ${plugin} --kernel example_host_gemv --seconds 5 --seed 7
      --report ${WORK_DIR}/report.json)
  if(NOT step_output MATCHES "example_host_gemv +[0-9]+ +pass")
    message(FATAL_ERROR "nvfp4check run did not report example_host_gemv as passing")
  endif()
else()
  message(STATUS "nvfp4check is not built: the `list` and `run --plugin` steps are not run")
endif()
