# Turns a text file into a C array, so the library needs no file at run time.
#   cmake -DINPUT=in.cl [-DPREFIX=first.h] -DOUTPUT=out.c -DSYMBOL=name
#         -P embed_source.cmake
# defines `const char name[]` (NUL-terminated) and `const size_t name_length`.
# An array of bytes, not a string literal: C11 promises only 4095 characters
# in a literal, and some compilers stop near 16 KiB.
# With -DPREFIX=file, that file's text comes first (cl/contract.h, which
# the host includes too).
file(READ "${INPUT}" hex HEX)
if(PREFIX)
  file(READ "${PREFIX}" prefix_hex HEX)
  string(PREPEND hex "${prefix_hex}")
endif()
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
  "/* Generated from ${INPUT} by embed_source.cmake; do not edit. */\n"
  "#include <stddef.h>\n"
  "extern const char ${SYMBOL}[];\n"
  "extern const size_t ${SYMBOL}_length;\n"
  "const char ${SYMBOL}[] = {\n${body}  0x00};\n"
  "const size_t ${SYMBOL}_length = ${length};\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
