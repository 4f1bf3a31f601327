# Runs a command on Oclgrind and fails on any report:
#
#   cmake "-DCOMMAND=<program>|<argument>|..." -P check.cmake
#
# Oclgrind reports out-of-bounds accesses, data races (OCLGRIND_DATA_RACES),
# API errors (OCLGRIND_CHECK_API) and its own fatal errors on stderr and
# carries on: the program may still exit 0. Its 21.10 writes every report
# there (OCLGRIND_LOG would move the kernels' reports to a file, but each
# OpenCL context truncates that file, and API errors stay on stderr), each
# with one of these marks: a kernel's report names the kernel ("\tKernel:"),
# an API error says "Oclgrind - OpenCL runtime error detected", a fault of
# its own "OCLGRIND FATAL ERROR", the logger's notes start "Oclgrind: ".
# Prints the command's output; fails when the command fails or its stderr
# holds a mark, saying how the command exited and quoting the first report.
cmake_minimum_required(VERSION 3.16)

string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} RESULT_VARIABLE status
                OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
message("${stdout}${stderr}")
set(marks "\tKernel:|Oclgrind - OpenCL runtime error detected|OCLGRIND FATAL ERROR|\nOclgrind: ")
string(REGEX MATCHALL "${marks}" reports "${stderr}")
list(LENGTH reports count)
if(count GREATER 0)
  # The first report: from the blank line before its first mark.
  list(GET reports 0 first)
  string(FIND "${stderr}" "${first}" at)
  string(SUBSTRING "${stderr}" 0 ${at} before)
  string(FIND "${before}" "\n\n" start REVERSE)
  if(start EQUAL -1)
    set(start 0)
  endif()
  string(SUBSTRING "${stderr}" ${start} 1500 shown)
  message(FATAL_ERROR "the command exited ${status} but Oclgrind reported "
                      "(${count} marks); the first report:\n${shown}")
endif()
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the command exited ${status}; Oclgrind reported nothing")
endif()
