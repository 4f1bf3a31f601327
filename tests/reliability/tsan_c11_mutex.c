/*
 * For ThreadSanitizer builds only. glibc implements C11's mtx_* and
 * call_once with calls to its internal pthread functions, which
 * ThreadSanitizer (clang 14) does not intercept, so it sees the library's
 * locks neither taken nor released, and a call_once's writes unordered with
 * the reads after it, and reports the accesses they guard as races. These
 * definitions, linked into the test program, take the place of glibc's
 * for every caller in the program and go through the pthread calls that
 * ThreadSanitizer does intercept. glibc's mtx_t is a pthread_mutex_t, its
 * once_flag a pthread_once_t.
 */
#include <pthread.h>
#include <threads.h>

_Static_assert(sizeof(mtx_t) >= sizeof(pthread_mutex_t),
               "mtx_t holds a pthread_mutex_t");
_Static_assert(sizeof(once_flag) == sizeof(pthread_once_t),
               "once_flag is a pthread_once_t");

int mtx_init(mtx_t *mutex, int type) {
  pthread_mutexattr_t attributes;
  if (pthread_mutexattr_init(&attributes) != 0) return thrd_error;
  if (type & mtx_recursive)
    pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_RECURSIVE);
  int error = pthread_mutex_init((pthread_mutex_t *)mutex, &attributes);
  pthread_mutexattr_destroy(&attributes);
  return error == 0 ? thrd_success : thrd_error;
}

int mtx_lock(mtx_t *mutex) {
  return pthread_mutex_lock((pthread_mutex_t *)mutex) == 0 ? thrd_success
                                                            : thrd_error;
}

int mtx_unlock(mtx_t *mutex) {
  return pthread_mutex_unlock((pthread_mutex_t *)mutex) == 0 ? thrd_success
                                                              : thrd_error;
}

void mtx_destroy(mtx_t *mutex) {
  pthread_mutex_destroy((pthread_mutex_t *)mutex);
}

void call_once(once_flag *flag, void (*function)(void)) {
  pthread_once((pthread_once_t *)flag, function);
}
