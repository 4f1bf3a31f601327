# Turns text files, end to end, into a C array, so the library needs no file
# at run time.
#   cmake -DINPUTS=first.h,second.cl,... -DOUTPUT=out.c -DSYMBOL=name
#         -P embed_source.cmake
# defines `const char name[]` (NUL-terminated) and `const size_t name_length`.
# An array of bytes, not a string literal: C11 promises only 4095 characters
# in a literal, and some compilers stop near 16 KiB.
string(REPLACE "," ";" inputs "${INPUTS}")
set(hex "")
foreach(input IN LISTS inputs)
  file(READ "${input}" part HEX)
  string(APPEND hex "${part}")
endforeach()
string(LENGTH "${hex}" hex_length)
math(EXPR length "${hex_length} / 2")
set(body "")
set(offset 0)
while(offset LESS hex_length)
  string(SUBSTRING "${hex}" ${offset} 32 chunk)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," chunk "${chunk}")
  string(APPEND body "  ${chunk}\n")
  math(EXPR offset "${offset} + 32")
endwhile()
file(WRITE "${OUTPUT}.tmp"
  "/* Generated from ${INPUTS} by embed_source.cmake; do not edit. */\n"
  "#include <stddef.h>\n"
  "extern const char ${SYMBOL}[];\n"
  "extern const size_t ${SYMBOL}_length;\n"
  "const char ${SYMBOL}[] = {\n${body}  0x00};\n"
  "const size_t ${SYMBOL}_length = ${length};\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
