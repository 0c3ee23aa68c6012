# cmake -DPROGRAM=nvfp4check "-DARGS=a|b|c" -DCODE=2 "-DREGEX=..." -P expect_exit.cmake
# The program must exit with CODE; for a failure, its stderr must match REGEX (the message that
# says what is wrong), otherwise its stdout must.
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND ${PROGRAM} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit ${rc}\n--- stdout\n${out}--- stderr\n${err}")
if(NOT rc STREQUAL "${CODE}")
  message(FATAL_ERROR "expected exit ${CODE}, got ${rc}")
endif()
if(CODE EQUAL 0)
  set(text "${out}")
else()
  set(text "${err}")
endif()
if(NOT REGEX STREQUAL "" AND NOT text MATCHES "${REGEX}")
  message(FATAL_ERROR "the output does not match: ${REGEX}")
endif()
