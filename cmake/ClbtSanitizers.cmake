# -DCLBT_SANITIZE=address,undefined (or thread) builds everything with
# those sanitizers and runs the tests with the options and suppressions
# that docs/reliability.md explains. Errors stop the program: a report is a
# failed test, never a line in a log.
set(CLBT_SANITIZE "" CACHE STRING
    "Sanitizers to build with, as -fsanitize= takes them (empty: none)")

set(CLBT_SANITIZER_ENVIRONMENT "")
if(CLBT_SANITIZE)
  add_compile_options(-fsanitize=${CLBT_SANITIZE} -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${CLBT_SANITIZE})
  set(clbt_suppressions "${PROJECT_SOURCE_DIR}/tests")
  # allocator_may_return_null: a table too large to allocate must fail with
  # CLBT_CL_OUT_OF_HOST_MEMORY, as it does without ASan
  # (tests/reliability/test_sizes.c).
  # use_sigaltstack=0: PoCL sets LLVM up on the first thread that lists the
  # devices, and LLVM (RemoveFileOnSignal) gives that thread a signal stack
  # it allocated. ASan, ending the thread, unmaps whatever stack is
  # installed: munmap fails on the malloc'd one and ASan aborts
  # (test_threads, when a worker thread is the first to open a device).
  # intercept_tls_get_addr=0: up to LLVM 16 the __tls_get_addr interceptor
  # takes a dynamic TLS block (PoCL's, loaded by the ICD loader) that
  # happens to start 16 bytes into a page for one with a pre-2.25 glibc
  # header and reads a size from before it; LeakSanitizer's tracer then
  # faults at exit, after every check passed ("Tracer caught signal 11").
  set(CLBT_SANITIZER_ENVIRONMENT
      "ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1:strict_string_checks=1:use_sigaltstack=0:intercept_tls_get_addr=0"
      "LSAN_OPTIONS=suppressions=${clbt_suppressions}/lsan.supp:print_suppressions=0"
      "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
      "TSAN_OPTIONS=suppressions=${clbt_suppressions}/tsan.supp:halt_on_error=1:second_deadlock_stack=1")
endif()
