# Warnings are errors in this project; consumers of an installed clbt can
# turn that off with -DCLBT_WARNINGS_AS_ERRORS=OFF.
option(CLBT_WARNINGS_AS_ERRORS "Treat compiler warnings as errors" ON)

function(clbt_set_warnings target)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes
      -Wmissing-prototypes -Wformat=2 -Wundef -Wcast-qual)
    if(CLBT_WARNINGS_AS_ERRORS)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  elseif(MSVC)
    target_compile_options(${target} PRIVATE /W4 $<$<BOOL:${CLBT_WARNINGS_AS_ERRORS}>:/WX>)
  endif()
endfunction()
