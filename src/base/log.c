/*
 * Logging: a level (CLBT_LOG, read once, or clbt_log_set_level) and a
 * destination (stderr, or the host's callback). Delivery holds a recursive
 * lock, so messages never interleave, a callback may call clbt, and a
 * replaced callback is not called once clbt_log_set_callback returns.
 */
#include "base/log.h"

#include "base/status.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <threads.h>

/* As much as clbt_last_error holds (a build log), or a path and options. */
#define CLBT__LOG_MESSAGE_SIZE CLBT_LAST_ERROR_SIZE
/* How much of a bad CLBT_LOG value the warning quotes. */
#define CLBT__LOG_QUOTE_SIZE 64

static once_flag setup_once = ONCE_FLAG_INIT;
static atomic_int current_level = CLBT_LOG_WARN;
/* mtx_init and mtx_lock cannot fail on the platforms we know; if they do,
   clbt writes to stderr rather than lose a message or call a callback
   unguarded, and keeps the callback it has. */
static bool lock_ready;
static mtx_t delivery_lock; /* guards callback and callback_user */
static clbt_log_fn callback;
static void *callback_user;
/* A CLBT_LOG value that names no level, reported with the first message. */
static char bad_setting[CLBT__LOG_QUOTE_SIZE];
static atomic_bool bad_setting_pending;

static const char *const level_names[] = {"off", "error", "warn", "info",
                                          "debug"};

const char *clbt_log_level_name(clbt_log_level level) {
  if (level < CLBT_LOG_OFF || level > CLBT_LOG_DEBUG) return "unknown";
  return level_names[level];
}

/* Matches a level's name, ignoring case. */
static bool parse_level(const char *text, clbt_log_level *level) {
  for (int candidate = CLBT_LOG_OFF; candidate <= CLBT_LOG_DEBUG; ++candidate) {
    const char *name = level_names[candidate];
    size_t i = 0;
    while (name[i] && tolower((unsigned char)text[i]) == name[i]) ++i;
    if (name[i] == '\0' && text[i] == '\0') {
      *level = (clbt_log_level)candidate;
      return true;
    }
  }
  return false;
}

static void setup(void) {
  lock_ready = mtx_init(&delivery_lock, mtx_plain | mtx_recursive) ==
               thrd_success;
  const char *setting = getenv("CLBT_LOG");
  clbt_log_level level = CLBT_LOG_WARN;
  if (setting && *setting && !parse_level(setting, &level)) {
    snprintf(bad_setting, sizeof bad_setting, "%s", setting);
    atomic_store(&bad_setting_pending, true);
  }
  atomic_store(&current_level, level);
}

static void write_to_stderr(clbt_log_level level, const char *message,
                            void *user) {
  (void)user;
  fprintf(stderr, "clbt: %s: %s\n", clbt_log_level_name(level), message);
}

static void deliver(clbt_log_level level, const char *message) {
  if (!lock_ready || mtx_lock(&delivery_lock) != thrd_success) {
    write_to_stderr(level, message, NULL);
    return;
  }
  if (callback)
    callback(level, message, callback_user);
  else
    write_to_stderr(level, message, NULL);
  mtx_unlock(&delivery_lock);
}

/*
 * Reported with the first message clbt considers, rather than in setup, so
 * that it reaches a callback the host installs before that.
 */
static void report_bad_setting(void) {
  if (!atomic_load(&bad_setting_pending) ||
      !atomic_exchange(&bad_setting_pending, false) ||
      atomic_load(&current_level) < CLBT_LOG_WARN)
    return;
  char message[CLBT__LOG_QUOTE_SIZE + 128];
  snprintf(message, sizeof message,
           "CLBT_LOG='%s' is not off, error, warn, info or debug; using warn",
           bad_setting);
  deliver(CLBT_LOG_WARN, message);
}

bool clbt__log_enabled(clbt_log_level level) {
  call_once(&setup_once, setup);
  report_bad_setting();
  return level > CLBT_LOG_OFF && (int)level <= atomic_load(&current_level);
}

void clbt__log(clbt_log_level level, const char *format, ...) {
  if (!clbt__log_enabled(level)) return;
  char message[CLBT__LOG_MESSAGE_SIZE];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  deliver(level, message);
}

void clbt_log_set_callback(clbt_log_fn new_callback, void *user) {
  call_once(&setup_once, setup);
  if (!lock_ready) return;
  if (mtx_lock(&delivery_lock) != thrd_success) {
    clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
               "mtx_lock failed on the log's lock; the callback is unchanged");
    return;
  }
  callback = new_callback;
  callback_user = new_callback ? user : NULL;
  mtx_unlock(&delivery_lock);
}

clbt_status clbt_log_set_level(clbt_log_level level) {
  if (level < CLBT_LOG_OFF || level > CLBT_LOG_DEBUG)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "level %d is outside CLBT_LOG_OFF (0)..CLBT_LOG_DEBUG "
                      "(4)",
                      (int)level);
  call_once(&setup_once, setup);
  atomic_store(&current_level, level);
  return CLBT_SUCCESS;
}

clbt_log_level clbt_log_get_level(void) {
  call_once(&setup_once, setup);
  return (clbt_log_level)atomic_load(&current_level);
}
