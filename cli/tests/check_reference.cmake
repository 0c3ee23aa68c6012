# cmake -DPROGRAM=nvfp4check -DCASE=file.case -DOUT=out.f16 -P check_reference.cmake
# `nvfp4check reference CASE --out OUT` must exit 0, and OUT must hold exactly the case's expect
# words as little-endian words of the case's output type (4 hex digits fp16/bf16, 8 fp32), a
# grouped case's expect.G lines one after another: checked here from the file, not by the
# program's own compare.
execute_process(COMMAND ${PROGRAM} reference ${CASE} --out ${OUT}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvfp4check reference exited ${rc} on ${CASE}")
endif()

# The hand-made cases write a grouped case's expect.G lines in group order, empty groups (which
# have none) skipped: their concatenation is the reference output.
file(STRINGS ${CASE} expect_lines REGEX "^[ \t]*expect(\\.[0-9]+)?[ \t]*=")
list(LENGTH expect_lines count)
file(STRINGS ${CASE} grouped REGEX "^[ \t]*op[ \t]*=[ \t]*grouped_gemm")
# (A grouped case whose groups are all empty has none: its output is zero bytes.)
if(NOT grouped AND NOT count EQUAL 1)
  message(FATAL_ERROR "${CASE}: a hand-made case needs one expect line (one per non-empty group), found ${count}")
endif()
set(words "")
foreach(line IN LISTS expect_lines)
  string(REGEX REPLACE "#.*" "" line "${line}")
  string(REGEX REPLACE "^[ \t]*expect(\\.[0-9]+)?[ \t]*=" "" line "${line}")
  string(REGEX MATCHALL "[0-9a-fA-F]+" line_words "${line}")
  list(APPEND words ${line_words})
endforeach()
set(expected_hex "")
foreach(word IN LISTS words)
  string(TOLOWER "${word}" word)
  string(LENGTH "${word}" digits)
  # Little-endian: the word's bytes from the lowest.
  set(pos ${digits})
  while(pos GREATER 0)
    math(EXPR pos "${pos} - 2")
    string(SUBSTRING "${word}" ${pos} 2 byte)
    string(APPEND expected_hex "${byte}")
  endwhile()
endforeach()

file(READ ${OUT} actual_hex HEX)
if(NOT actual_hex STREQUAL expected_hex)
  string(LENGTH "${expected_hex}" want)
  string(LENGTH "${actual_hex}" got)
  message(FATAL_ERROR "${OUT} differs from the expect line of ${CASE} (${got} vs ${want} hex digits)")
endif()
list(LENGTH words n)
message("${OUT}: all ${n} words equal the case's expect line")
