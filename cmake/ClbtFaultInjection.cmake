# clbt_fault_injected_library(<library> <object> <wrappers> <sites>)
#
# Writes <object>, the library's objects joined into one whose every OpenCL
# call and heap allocation is renamed to a wrapper; <wrappers>, the C
# source of the OpenCL wrappers, generated from cl.h for exactly the
# functions the library calls; and <sites>, a header that counts the call
# sites (cmake/fault_injection_wrappers.cmake). Link the first two, with
# tests/fault_injection.c, in place of the library. Needs ELF binutils:
# ld -r, nm, objcopy and objdump.
function(clbt_fault_injected_library library object wrappers sites)
  foreach(tool CMAKE_LINKER CMAKE_NM CMAKE_OBJCOPY CMAKE_OBJDUMP)
    if(NOT ${tool})
      message(FATAL_ERROR "fault injection needs ${tool} (binutils)")
    endif()
  endforeach()
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
