# Turns a kernel program's source into a C array, so the library needs no
# file at run time.
#   cmake -DROOT=<root part> -DTOP=<project root> -DOUTPUT=out.c
#         -DSYMBOL=name [-DINCLUDE_DIRS=dir,...] -P embed_source.cmake
# The program is its root part, each `#include "name"` line in it replaced
# by the text of that part, recursively, each part once: a part included
# again adds nothing, as its `#pragma once` says, and that line becomes a
# blank one. A name is looked up as a C compiler with -I for each of
# INCLUDE_DIRS looks it up: beside the including part, then in each
# directory; it must name a file under the root's folder or one of them.
# A #line marker starts each part's text and the rest of a part after an
# include, naming the part by its path from TOP, so that a compiler's
# message names the part and its line ("cl/export.cl:45:13: error: ..."),
# not a line of the joined text. Defines `const char name[]`
# (NUL-terminated), `const size_t name_length` and `const char name_file[]`
# (the root's path from TOP). An array of bytes, not a string literal: C11
# promises only 4095 characters in a literal, and some compilers stop near
# 16 KiB.
cmake_minimum_required(VERSION 3.16)

get_filename_component(folder "${ROOT}" DIRECTORY)
string(REPLACE "," ";" include_dirs "${INCLUDE_DIRS}")
set(directive_regex
    "\n[ \t]*#[ \t]*(include[ \t]*\"([^\"]*)\"|pragma[ \t]+once)[^\n]*")

function(append text)
  set_property(GLOBAL APPEND_STRING PROPERTY program "${text}")
endfunction()

# Sets out to the file an include of name in part means, if it is one of
# the program's: beside part, else under an include directory.
function(find_part name part out)
  get_filename_component(beside "${part}" DIRECTORY)
  set(${out} "" PARENT_SCOPE)
  foreach(base IN ITEMS "${beside}" ${include_dirs})
    get_filename_component(path "${name}" ABSOLUTE BASE_DIR "${base}")
    foreach(allowed IN ITEMS "${folder}" ${include_dirs})
      file(RELATIVE_PATH inside "${allowed}" "${path}")
      if(EXISTS "${path}" AND NOT inside MATCHES "^\\.\\./")
        set(${out} "${path}" PARENT_SCOPE)
        return()
      endif()
    endforeach()
  endforeach()
endfunction()

# Appends a part's text with its includes' in their places.
function(embed part)
  get_property(embedded GLOBAL PROPERTY parts)
  if(part IN_LIST embedded)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY parts "${part}")
  file(RELATIVE_PATH name "${TOP}" "${part}")
  file(READ "${part}" text)
  # A newline ahead stands for the start of line 1, so that every directive
  # follows one.
  set(text "\n${text}")
  set(line 0) # the line where text starts
  append("#line 1 \"${name}\"")
  while(text MATCHES "${directive_regex}")
    set(directive "${CMAKE_MATCH_0}")
    set(included "${CMAKE_MATCH_2}")
    string(FIND "${text}" "${directive}" at)
    string(SUBSTRING "${text}" 0 ${at} before)
    append("${before}")
    string(REGEX REPLACE "[^\n]" "" newlines "${before}")
    string(LENGTH "${newlines}" lines)
    math(EXPR line "${line} + ${lines} + 1")
    string(LENGTH "${directive}" length)
    math(EXPR at "${at} + ${length}")
    string(SUBSTRING "${text}" ${at} -1 text)
    if(directive MATCHES "pragma")
      append("\n") # the line stays, blank
      continue()
    endif()
    find_part("${included}" "${part}" path)
    if(NOT path)
      message(FATAL_ERROR "${name}:${line}: \"${included}\" is no file of "
                          "${folder} or of ${include_dirs}, where the "
                          "program's parts are")
    endif()
    append("\n")
    embed("${path}")
    math(EXPR next "${line} + 1")
    append("#line ${next} \"${name}\"")
  endwhile()
  append("${text}\n")
endfunction()

embed("${ROOT}")
get_property(program GLOBAL PROPERTY program)
file(WRITE "${OUTPUT}.txt" "${program}")
file(READ "${OUTPUT}.txt" hex HEX)
file(REMOVE "${OUTPUT}.txt")
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
file(RELATIVE_PATH root_name "${TOP}" "${ROOT}")
file(WRITE "${OUTPUT}.tmp"
  "/* Generated from ${root_name} and the parts it includes by\n"
  "   embed_source.cmake; do not edit. */\n"
  "#include <stddef.h>\n"
  "extern const char ${SYMBOL}[];\n"
  "extern const size_t ${SYMBOL}_length;\n"
  "extern const char ${SYMBOL}_file[];\n"
  "const char ${SYMBOL}[] = {\n${body}  0x00};\n"
  "const size_t ${SYMBOL}_length = ${length};\n"
  "const char ${SYMBOL}_file[] = \"${root_name}\";\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
