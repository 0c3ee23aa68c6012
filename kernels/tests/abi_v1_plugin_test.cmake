# ctest script: a plugin built against version 1 of the kernel ABI (kernels/tests/abi_v1) keeps
# loading and passing (SPEC.md section 5, "Versions"): Registry::load_plugin and a GEMV against an
# answer computed by LOADER, then, when the CLI is built, `nvfp4check list --plugin` showing it
# as ABI version 1 with FP16 output, and `nvfp4check run --plugin` passing 300 cases.
# Inputs: PLUGIN LOADER WORK_DIR [NVFP4CHECK].

function(run_step what)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${what}:\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc})")
  endif()
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})  # where `run` saves its case files

run_step("load and run it through Registry::load_plugin" ${LOADER} ${PLUGIN} example_host_gemv)

if(NVFP4CHECK AND EXISTS "${NVFP4CHECK}")
  run_step("nvfp4check list --plugin" ${NVFP4CHECK} list --plugin ${PLUGIN})
  if(NOT step_output MATCHES "example_host_gemv +host +gemv +linear,permuted +fp16 ")
    message(FATAL_ERROR "nvfp4check list --plugin does not show example_host_gemv as a host FP16 GEMV kernel")
  endif()
  if(NOT step_output MATCHES "\\(ABI version 1\\)")
    message(FATAL_ERROR "nvfp4check list --plugin does not say the plugin is ABI version 1")
  endif()
  run_step("nvfp4check run --plugin (300 cases, seed 7)"
    ${NVFP4CHECK} run --plugin ${PLUGIN} --kernel example_host_gemv --cases 300 --seed 7
      --report ${WORK_DIR}/report.json)
  if(NOT step_output MATCHES "example_host_gemv +300 +pass")
    message(FATAL_ERROR "nvfp4check run did not report example_host_gemv as passing 300 cases")
  endif()
else()
  message(STATUS "nvfp4check is not built: the `list` and `run --plugin` steps are not run")
endif()
