# cmake -DPROGRAM=nvfp4check -DCASE=file.case -DOUT=out.f16 -P check_reference.cmake
# `nvfp4check reference CASE --out OUT` must exit 0, and OUT must hold exactly the case's expect
# words as little-endian binary16: checked here from the file, not by the program's own compare.
execute_process(COMMAND ${PROGRAM} reference ${CASE} --out ${OUT}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvfp4check reference exited ${rc} on ${CASE}")
endif()

file(STRINGS ${CASE} expect_lines REGEX "^[ \t]*expect[ \t]*=")
list(LENGTH expect_lines count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "${CASE}: a hand-made case needs exactly one expect line (found ${count})")
endif()
string(REGEX REPLACE "#.*" "" expect_line "${expect_lines}")
string(REGEX REPLACE "^[ \t]*expect[ \t]*=" "" expect_line "${expect_line}")
string(REGEX MATCHALL "[0-9a-fA-F]+" words "${expect_line}")
set(expected_hex "")
foreach(word IN LISTS words)
  string(TOLOWER "${word}" word)
  string(SUBSTRING "${word}" 0 2 high)
  string(SUBSTRING "${word}" 2 2 low)
  string(APPEND expected_hex "${low}${high}")
endforeach()

file(READ ${OUT} actual_hex HEX)
if(NOT actual_hex STREQUAL expected_hex)
  string(LENGTH "${expected_hex}" want)
  string(LENGTH "${actual_hex}" got)
  message(FATAL_ERROR "${OUT} differs from the expect line of ${CASE} (${got} vs ${want} hex digits)")
endif()
list(LENGTH words n)
message("${OUT}: all ${n} words equal the case's expect line")
