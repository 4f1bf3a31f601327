# The project's warnings, on every target it compiles. They are errors in
# CI (.ci/run configures with -DCLBT_WARNINGS_AS_ERRORS=ON), not for
# everyone who builds: another compiler's new warning must not stop a user's
# build.
option(CLBT_WARNINGS_AS_ERRORS "Treat compiler warnings as errors" OFF)

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
