# Makes a copy of the library whose OpenCL calls (and, with
# WRAP_ALLOCATORS, its heap allocations) all go through a runtime first:
# the fault-injection runtime (tests/reliability/fault_injection.c) or the
# tool's call counter (tools/bench/call_counter.c).
#
#   cmake -DOBJECTS=a.o,b.o,... -DLINKER=ld -DNM=nm -DOBJCOPY=objcopy
#         -DOBJDUMP=objdump -DCL_HEADER=/usr/include/CL/cl.h
#         -DRUNTIME=clbt_fault -DRUNTIME_HEADER=fault_injection.h
#         -DWRAP_ALLOCATORS=ON -DEVERY_CALL=OFF -DOUTPUT_OBJECT=clbt_faulty.o
#         -DOUTPUT_SOURCE=fault_wrappers.c [-DOUTPUT_SITES=fault_sites.h]
#         -P fault_injection_wrappers.cmake
#
# The runtime, declared in RUNTIME_HEADER, provides what the wrappers call
# (R is RUNTIME, R_ERROR its upper-case R_INJECTED_ERROR):
#   bool R_opencl_call(const char *function, const void *call_site);
#       every call but a release (with EVERY_CALL, releases too, whose
#       answer is ignored); true fails it with R_ERROR
#   void R_object_created(const void *), R_object_retained(const void *),
#        R_object_released(const void *);
#   and with WRAP_ALLOCATORS, R_wrap_malloc, R_wrap_free and the others of
#   wrapped_allocators below.
#
# 1. `ld -r` joins the library's objects into one relocatable object.
# 2. `nm -u` lists what it calls: every cl* function and every allocator.
# 3. Each cl* function gets a wrapper, generated from its prototype in
#    cl.h, that asks the runtime whether to fail, reports the objects it
#    creates, retains and releases, and otherwise calls the real function.
# 4. `objcopy --redefine-syms` renames those references in the joined
#    object only, so the caller's own OpenCL calls, Check's and PoCL's
#    allocations are left alone.
# 5. With OUTPUT_SITES, `objdump -r` lists the functions and counts the
#    call sites that can be failed, for the test to check that each
#    function was failed.
#
# Because the list comes from the objects, a call another change adds to
# src/ is covered on the next build with no edit here.

cmake_minimum_required(VERSION 3.16)

foreach(required RUNTIME RUNTIME_HEADER)
  if(NOT ${required})
    message(FATAL_ERROR "fault_injection_wrappers.cmake needs -D${required}")
  endif()
endforeach()
set(prefix "${RUNTIME}_wrap_")
string(TOUPPER "${RUNTIME}_INJECTED_ERROR" injected_error)
# Allocators the runtime wraps; any other the library calls stops the build.
set(wrapped_allocators malloc calloc realloc free aligned_alloc strdup strndup)
set(unwrapped_allocators posix_memalign memalign valloc pvalloc asprintf
    vasprintf reallocarray)

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE result
                  OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${ARGV} failed (${result}):\n${output}")
  endif()
  set(run_output "${output}" PARENT_SCOPE)
endfunction()

# The return type, parameter text and parameter names of an OpenCL function.
function(parse_prototype header name)
  set(space "[ \t\r\n]*")
  string(REGEX MATCH
         "CL_API_ENTRY([^;]*)CL_API_CALL${space}${name}\\(([^;]*)\\)${space}CL_API_SUFFIX"
         declaration "${header}")
  if(NOT declaration)
    message(FATAL_ERROR "clbt calls ${name}, which ${CL_HEADER} does not "
            "declare in its usual form; teach fault_injection_wrappers.cmake "
            "to wrap it")
  endif()
  set(return_type "${CMAKE_MATCH_1}")
  set(parameters "${CMAKE_MATCH_2}")
  string(REGEX REPLACE "CL_API_PREFIX[A-Za-z0-9_]*" "" return_type
         "${return_type}")
  string(REGEX REPLACE "[ \t\r\n]+" " " return_type "${return_type}")
  string(STRIP "${return_type}" return_type)
  string(REGEX REPLACE "[ \t\r\n]+" " " parameters "${parameters}")
  string(STRIP "${parameters}" parameters)

  # A callback parameter, void (CL_CALLBACK * name)(...), becomes its name
  # so that the list splits at its top-level commas.
  string(REGEX REPLACE
         "\\( *CL_CALLBACK *\\* *([A-Za-z0-9_]+) *\\) *\\([^()]*\\)" " \\1"
         flat "${parameters}")
  set(names "")
  if(NOT flat STREQUAL "void")
    string(REPLACE "," ";" pieces "${flat}")
    foreach(piece IN LISTS pieces)
      string(REGEX MATCH "([A-Za-z_][A-Za-z0-9_]*) *$" ignored "${piece}")
      list(APPEND names "${CMAKE_MATCH_1}")
    endforeach()
  endif()
  set(return_type "${return_type}" PARENT_SCOPE)
  set(parameters "${parameters}" PARENT_SCOPE)
  set(names "${names}" PARENT_SCOPE)
endfunction()

# The C source of one OpenCL wrapper.
function(wrapper_source header name)
  parse_prototype("${header}" "${name}")
  list(JOIN names ", " arguments)
  set(signature "${return_type} ${prefix}${name}(${parameters})")
  set(body "${signature};\n${signature} {\n")
  set(ask "${RUNTIME}_opencl_call(\"${name}\", __builtin_return_address(0))")
  set(call "${name}(${arguments})")
  # A release that failed would leave nothing to report it to (destroy
  # functions return void), so releases (and functions that return nothing)
  # are never failed; with EVERY_CALL the runtime still hears of them.
  set(never_failed "")
  if(EVERY_CALL)
    set(never_failed "  (void)${ask};\n")
  endif()
  if(return_type STREQUAL "void")
    string(APPEND body "${never_failed}  ${call};\n}\n\n")
    set(wrapper "${body}" PARENT_SCOPE)
    return()
  endif()
  if(name MATCHES "^clRelease")
    string(APPEND body "${never_failed}  cl_int result = ${call};\n"
           "  if (result == CL_SUCCESS) ${RUNTIME}_object_released(${names});\n"
           "  return result;\n}\n\n")
    set(wrapper "${body}" PARENT_SCOPE)
    return()
  endif()

  if(return_type STREQUAL "cl_int")
    string(APPEND body "  if (${ask}) return ${injected_error};\n")
  else()
    string(APPEND body "  if (${ask}) {\n")
    if("errcode_ret" IN_LIST names)
      string(APPEND body
             "    if (errcode_ret) *errcode_ret = ${injected_error};\n")
    endif()
    string(APPEND body "    return NULL;\n  }\n")
  endif()
  string(APPEND body "  ${return_type} result = ${call};\n")
  if(name MATCHES "^clRetain")
    string(APPEND body
           "  if (result == CL_SUCCESS) ${RUNTIME}_object_retained(${names});\n")
  elseif(NOT return_type STREQUAL "cl_int" AND return_type MATCHES "^cl_")
    string(APPEND body "  if (result) ${RUNTIME}_object_created(result);\n")
  endif()
  # An enqueue that hands back an event creates an object too.
  if(parameters MATCHES "(^|, )cl_event \\* *event(,|$)")
    string(APPEND body "  if (result == CL_SUCCESS && event) "
           "${RUNTIME}_object_created(*event);\n")
  endif()
  string(APPEND body "  return result;\n}\n\n")
  set(wrapper "${body}" PARENT_SCOPE)
endfunction()

string(REPLACE "," ";" objects "${OBJECTS}")
set(joined "${OUTPUT_OBJECT}.joined.o")
set(renames "${OUTPUT_OBJECT}.renames")
run("${LINKER}" -r -o "${joined}" ${objects})
run("${NM}" -u "${joined}")
string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_]*" undefined "${run_output}")
list(REMOVE_DUPLICATES undefined)
list(SORT undefined)

file(READ "${CL_HEADER}" header)
string(CONCAT source "/* Generated by cmake/fault_injection_wrappers.cmake; do not edit. */\n"
           "#include \"${RUNTIME_HEADER}\"\n\n")
set(rename_lines "")
foreach(symbol IN LISTS undefined)
  if(NOT WRAP_ALLOCATORS AND NOT symbol MATCHES "^cl[A-Z]")
    continue()
  elseif(symbol IN_LIST unwrapped_allocators)
    message(FATAL_ERROR "clbt calls ${symbol}, which the fault-injection "
            "runtime does not wrap: add it to "
            "tests/reliability/fault_injection.c")
  elseif(symbol IN_LIST wrapped_allocators)
    string(APPEND rename_lines "${symbol} ${prefix}${symbol}\n")
  elseif(symbol MATCHES "^cl[A-Z]")
    wrapper_source("${header}" "${symbol}")
    string(APPEND source "${wrapper}")
    string(APPEND rename_lines "${symbol} ${prefix}${symbol}\n")
  endif()
endforeach()

file(WRITE "${renames}" "${rename_lines}")
run("${OBJCOPY}" "--redefine-syms=${renames}" "${joined}" "${OUTPUT_OBJECT}")

# Fault injection's sites header: each relocation against a wrapper is a
# call site; releases and free are counted by the wrappers but never failed.
if(OUTPUT_SITES)
  run("${OBJDUMP}" -r "${OUTPUT_OBJECT}")
  string(REGEX MATCHALL "${prefix}[A-Za-z_]+" references "${run_output}")
  set(opencl_sites 0)
  set(allocation_sites 0)
  set(opencl_functions "")
  set(allocation_functions "")
  foreach(reference IN LISTS references)
    string(REPLACE "${prefix}" "" callee "${reference}")
    if(callee MATCHES "^clRelease" OR callee STREQUAL "free")
      continue()
    elseif(callee MATCHES "^cl[A-Z]")
      math(EXPR opencl_sites "${opencl_sites} + 1")
      list(APPEND opencl_functions "\"${callee}\"")
    else()
      math(EXPR allocation_sites "${allocation_sites} + 1")
      list(APPEND allocation_functions "\"${callee}\"")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES opencl_functions)
  list(REMOVE_DUPLICATES allocation_functions)
  list(JOIN opencl_functions ", " opencl_functions)
  list(JOIN allocation_functions ", " allocation_functions)
  file(WRITE "${OUTPUT_SITES}"
    "/* Generated by cmake/fault_injection_wrappers.cmake; do not edit. */\n"
    "/* What fault injection can fail in the library: the functions it calls\n"
    "   and its call sites of them. */\n"
    "#define CLBT_FAULT_OPENCL_FUNCTIONS ${opencl_functions}\n"
    "#define CLBT_FAULT_ALLOCATION_FUNCTIONS ${allocation_functions}\n"
    "#define CLBT_FAULT_OPENCL_SITES ${opencl_sites}\n"
    "#define CLBT_FAULT_ALLOCATION_SITES ${allocation_sites}\n")
endif()

file(WRITE "${OUTPUT_SOURCE}.tmp" "${source}")
file(RENAME "${OUTPUT_SOURCE}.tmp" "${OUTPUT_SOURCE}")
