# Runs a program (the clbt tool, an example) as a user does and checks what
# it did against a file of expectations (tests/expected/<name>.txt):
#
#   cmake -DTOOL=<program> "-DARGUMENTS=<arguments, space-separated>"
#         -DEXPECTED=<file> -DVERSION=<x.y.z> -DDEVICE=<selector>
#         [-DPROGRAM=<name>] -P run_tool.cmake
#
# The file holds one expectation a line; '#' starts a comment line:
#   exit: N               the exit status must be N (exactly one such line)
#   stdout: PATTERN       a line of stdout matches PATTERN, a CMake regular
#   stderr: PATTERN       expression anchored at both ends of the line
#   not stdout: PATTERN   no line of stdout (stderr) matches PATTERN
#   not stderr: PATTERN
# Patterns match lines in the order given, each a line after the one the
# previous pattern of the same stream matched; lines between are free.
# @VERSION@, @DEVICE@ and @PROGRAM@ stand for the project version, the test
# device's selector and the program's name (PROGRAM, by default clbt).
# Every failure is listed, with the whole output.
cmake_minimum_required(VERSION 3.16)

separate_arguments(arguments UNIX_COMMAND "${ARGUMENTS}")
execute_process(COMMAND "${TOOL}" ${arguments} RESULT_VARIABLE status
                OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)

# Sets <line> to the first line of <text> and removes it from <text>.
macro(take_line text line)
  string(FIND "${${text}}" "\n" end)
  if(end EQUAL -1)
    set(${line} "${${text}}")
    set(${text} "")
  else()
    string(SUBSTRING "${${text}}" 0 ${end} ${line})
    math(EXPR end "${end} + 1")
    string(SUBSTRING "${${text}}" ${end} -1 ${text})
  endif()
endmacro()

if(NOT DEFINED PROGRAM)
  set(PROGRAM clbt)
endif()

# Puts the version, the device and the program's name into a pattern.
macro(substitute pattern)
  string(REPLACE "@VERSION@" "${VERSION}" ${pattern} "${${pattern}}")
  string(REPLACE "@DEVICE@" "${DEVICE}" ${pattern} "${${pattern}}")
  string(REPLACE "@PROGRAM@" "${PROGRAM}" ${pattern} "${${pattern}}")
endmacro()

file(READ "${EXPECTED}" expectations)
set(rest_stdout "${stdout}")
set(rest_stderr "${stderr}")
set(problems "")
set(expected_status "")
while(NOT expectations STREQUAL "")
  take_line(expectations expectation)
  if(expectation MATCHES "^exit: ([0-9]+)$")
    set(expected_status "${CMAKE_MATCH_1}")
  elseif(expectation MATCHES "^not (stdout|stderr): (.*)$")
    set(stream "${CMAKE_MATCH_1}")
    set(pattern "${CMAKE_MATCH_2}")
    substitute(pattern)
    set(lines "${${stream}}")
    while(NOT lines STREQUAL "")
      take_line(lines line)
      if(line MATCHES "^${pattern}$")
        string(APPEND problems "a line of ${stream} matches ${pattern}: ${line}\n")
      endif()
    endwhile()
  elseif(expectation MATCHES "^(stdout|stderr): (.*)$")
    set(stream "${CMAKE_MATCH_1}")
    set(pattern "${CMAKE_MATCH_2}")
    substitute(pattern)
    set(found FALSE)
    while(NOT found AND NOT rest_${stream} STREQUAL "")
      take_line(rest_${stream} line)
      if(line MATCHES "^${pattern}$")
        set(found TRUE)
      endif()
    endwhile()
    if(NOT found)
      string(APPEND problems "no later line of ${stream} matches: ${pattern}\n")
    endif()
  elseif(NOT expectation STREQUAL "" AND NOT expectation MATCHES "^#")
    message(FATAL_ERROR "${EXPECTED}: not an expectation: ${expectation}")
  endif()
endwhile()
if(expected_status STREQUAL "")
  message(FATAL_ERROR "${EXPECTED} has no 'exit:' line")
endif()
if(NOT status STREQUAL expected_status)
  string(APPEND problems "exit status ${status}, expected ${expected_status}\n")
endif()
if(problems)
  message(FATAL_ERROR "${PROGRAM} ${ARGUMENTS}:\n${problems}"
          "---- stdout\n${stdout}---- stderr\n${stderr}")
endif()
