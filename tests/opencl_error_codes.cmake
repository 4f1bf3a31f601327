# clbt_opencl_error_codes(<cl.h> <output>)
#
# Writes the error codes of Khronos's cl.h as C initialisers, one
# {value, "CL_NAME"} per code, for tests/base/test_status.c: a list of what
# clbt must name that does not come from clbt's own status table. The codes
# are the #defines between cl.h's "Error Codes" and "cl_bool" comments,
# whatever OpenCL version guards them.
function(clbt_opencl_error_codes CL_HEADER OUTPUT)
  file(READ "${CL_HEADER}" header)
  string(FIND "${header}" "/* Error Codes */" start)
  string(FIND "${header}" "/* cl_bool */" end)
  if(start EQUAL -1 OR end LESS start)
    message(FATAL_ERROR "${CL_HEADER} has no 'Error Codes' section")
  endif()
  math(EXPR length "${end} - ${start}")
  string(SUBSTRING "${header}" ${start} ${length} section)
  string(REGEX MATCHALL "#define[ \t]+CL_[A-Z0-9_]+[ \t]+-[0-9]+" defines
         "${section}")
  set(lines "/* Generated from ${CL_HEADER} by tests/opencl_error_codes.cmake. */\n")
  foreach(define IN LISTS defines)
    string(REGEX MATCH "(CL_[A-Z0-9_]+)[ \t]+(-[0-9]+)" matched "${define}")
    string(APPEND lines "{${CMAKE_MATCH_2}, \"${CMAKE_MATCH_1}\"},\n")
  endforeach()
  # configure_file leaves an unchanged output alone: no needless rebuild.
  file(WRITE "${OUTPUT}.new" "${lines}")
  configure_file("${OUTPUT}.new" "${OUTPUT}" COPYONLY)
endfunction()
