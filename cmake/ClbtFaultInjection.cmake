# clbt_fault_injection_supported(<variable>)
#
# Sets <variable> to TRUE where the fault-injection suite can be built: ELF
# objects, GCC or Clang (the wrappers use __builtin_return_address) and the
# binutils it drives (ld -r, nm, objcopy, objdump). Otherwise FALSE, with a
# STATUS message saying what is missing.
function(clbt_fault_injection_supported variable)
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
    message(STATUS "clbt: no fault-injection suite: it needs ${missing}")
    set(${variable} FALSE PARENT_SCOPE)
  else()
    set(${variable} TRUE PARENT_SCOPE)
  endif()
endfunction()

# clbt_fault_injected_library(<library> <object> <wrappers> <sites>)
#
# Writes <object>, the library's objects joined into one whose every OpenCL
# call and heap allocation is renamed to a wrapper; <wrappers>, the C
# source of the OpenCL wrappers, generated from cl.h for exactly the
# functions the library calls; and <sites>, a header that counts the call
# sites (cmake/fault_injection_wrappers.cmake). Link the first two, with
# tests/fault_injection.c, in place of the library. Call it only where
# clbt_fault_injection_supported says yes.
function(clbt_fault_injected_library library object wrappers sites)
  set(script "${PROJECT_SOURCE_DIR}/cmake/fault_injection_wrappers.cmake")
  add_custom_command(
    OUTPUT "${object}" "${wrappers}" "${sites}"
    COMMAND "${CMAKE_COMMAND}"
            "-DOBJECTS=$<JOIN:$<TARGET_OBJECTS:${library}>,$<COMMA>>"
            "-DLINKER=${CMAKE_LINKER}" "-DNM=${CMAKE_NM}"
            "-DOBJCOPY=${CMAKE_OBJCOPY}" "-DOBJDUMP=${CMAKE_OBJDUMP}"
            "-DCL_HEADER=${OpenCL_INCLUDE_DIR}/CL/cl.h"
            "-DOUTPUT_OBJECT=${object}" "-DOUTPUT_SOURCE=${wrappers}"
            "-DOUTPUT_SITES=${sites}"
            -P "${script}"
    DEPENDS ${library} "$<TARGET_OBJECTS:${library}>" "${script}"
    COMMENT "Routing ${library}'s OpenCL calls and allocations through "
            "fault injection"
    VERBATIM)
endfunction()
