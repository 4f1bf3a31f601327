# A copy of the library whose OpenCL calls go through generated wrappers
# (cmake/fault_injection_wrappers.cmake) to a runtime: the fault-injection
# runtime of the tests (tests/reliability/fault_injection.c), which can
# fail any call and also sees every allocation, and the call counter of the
# clbt tool (tools/bench/call_counter.c), which counts them.

# clbt_wrapped_library_supported(<variable> <what>)
#
# Sets <variable> to TRUE where such a copy can be built: ELF objects, GCC
# or Clang (the wrappers use __builtin_return_address) and the binutils it
# drives (ld -r, nm, objcopy, objdump). Otherwise FALSE, with a STATUS
# message that <what> (e.g. "no fault-injection suite") and what is missing.
function(clbt_wrapped_library_supported variable what)
  set(missing "")
  if(NOT CMAKE_EXECUTABLE_FORMAT STREQUAL "ELF")
    list(APPEND missing "ELF objects")
  endif()
  if(NOT CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    list(APPEND missing "GCC or Clang")
  endif()
  foreach(tool CMAKE_LINKER CMAKE_NM CMAKE_OBJCOPY CMAKE_OBJDUMP)
    if(NOT ${tool})
      list(APPEND missing "${tool} (binutils)")
    endif()
  endforeach()
  if(missing)
    list(JOIN missing ", " missing)
    message(STATUS "clbt: ${what}: it needs ${missing}")
    set(${variable} FALSE PARENT_SCOPE)
  else()
    set(${variable} TRUE PARENT_SCOPE)
  endif()
endfunction()

# clbt_wrapped_library(<library> <object> <wrappers> RUNTIME <name>
#                      HEADER <header> [ALLOCATIONS] [EVERY_CALL]
#                      [SITES <sites>])
#
# Writes <object>, the library's objects joined into one whose every OpenCL
# call is renamed to a wrapper, and <wrappers>, the C source of those
# wrappers, generated from cl.h for exactly the functions the library
# calls; each wrapper reports to the runtime <name>_* that <header>
# declares. ALLOCATIONS routes the heap allocations through the runtime as
# well; EVERY_CALL reports the calls it may not fail (releases) as well as
# those it may; SITES also writes <sites>, the header of fault injection's
# call sites. Link <object> and <wrappers>, with the runtime, in place of the
# library. Call it only where clbt_wrapped_library_supported says yes.
function(clbt_wrapped_library library object wrappers)
  cmake_parse_arguments(PARSE_ARGV 3 wrapped "ALLOCATIONS;EVERY_CALL"
                        "RUNTIME;HEADER;SITES" "")
  set(script "${PROJECT_SOURCE_DIR}/cmake/fault_injection_wrappers.cmake")
  set(outputs "${object}" "${wrappers}")
  set(sites_argument "")
  if(wrapped_SITES)
    list(APPEND outputs "${wrapped_SITES}")
    set(sites_argument "-DOUTPUT_SITES=${wrapped_SITES}")
  endif()
  foreach(flag ALLOCATIONS EVERY_CALL)
    if(wrapped_${flag})
      set(${flag} ON)
    else()
      set(${flag} OFF)
    endif()
  endforeach()
  add_custom_command(
    OUTPUT ${outputs}
    COMMAND "${CMAKE_COMMAND}"
            "-DOBJECTS=$<JOIN:$<TARGET_OBJECTS:${library}>,$<COMMA>>"
            "-DLINKER=${CMAKE_LINKER}" "-DNM=${CMAKE_NM}"
            "-DOBJCOPY=${CMAKE_OBJCOPY}" "-DOBJDUMP=${CMAKE_OBJDUMP}"
            "-DCL_HEADER=${OpenCL_INCLUDE_DIR}/CL/cl.h"
            "-DRUNTIME=${wrapped_RUNTIME}" "-DRUNTIME_HEADER=${wrapped_HEADER}"
            "-DWRAP_ALLOCATORS=${ALLOCATIONS}" "-DEVERY_CALL=${EVERY_CALL}"
            "-DOUTPUT_OBJECT=${object}" "-DOUTPUT_SOURCE=${wrappers}"
            ${sites_argument}
            -P "${script}"
    DEPENDS ${library} "$<TARGET_OBJECTS:${library}>" "${script}"
    COMMENT "Routing ${library}'s OpenCL calls through ${wrapped_RUNTIME}"
    VERBATIM)
endfunction()
