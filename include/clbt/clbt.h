/**
 * @file
 * clbt: vLLM's paged-KV block tables on every OpenCL device.
 *
 * A block table keeps, per request, the list of KV-cache block ids the
 * request owns (one row). The host edits rows; commit copies them to an
 * OpenCL buffer; the slot-mapping kernel turns a batch's token positions into
 * the KV-cache slot each token writes (block_id * block_size + offset) and
 * pads the rest of a fixed-size buffer with CLBT_PAD_SLOT_ID.
 *
 * Contents, the banners below in this order:
 *   - Version: the header's version and the running library's.
 *   - Status codes: every status with its name and text, and
 *     clbt_last_error, this thread's last failure in words.
 *   - Logging: how much clbt says, and to whom.
 *   - Devices: clbt_device, an OpenCL context, a device and an in-order
 *     queue, with the programs built for it.
 *   - Row width: vLLM's get_block_table_width.
 *   - One block table: clbt_table, one KV-cache group's rows, their row
 *     operations, commits and slot mapping.
 *   - Attention-ready exports: the page tables attention kernels read.
 *   - The serving step: a step's commit, slot mapping, gather, export and
 *     state slots in one call.
 *   - Token slots: request-local token indices to KV-cache slots.
 *   - Several KV-cache groups: clbt_multi_table, a table per group, edited
 *     together, and the full text of the device calls, of which the
 *     clbt_table calls above are the one-group forms.
 *   - The KV-cache write: clbt_kv_cache, a layer's K and V into its paged
 *     cache.
 *   - Paged attention: clbt_attention, vLLM's unified_attention over a
 *     layer's cache, and clbt_kv_pages, the device page table of
 *     clbt_kv_pages.h for kernels of your own.
 *
 * A serving loop needs three calls: clbt_device_open (or clbt_device_wrap,
 * on the caller's own context and queue) and clbt_multi_table_create
 * (clbt_table_create for a single group) once; then at every step, once
 * the row operations (clbt_multi_table_append_row, _add_rows, _clear_row,
 * ...) have made the rows the scheduler's, clbt_multi_table_enqueue_step,
 * whose outputs (each group's clbt_table_slot_mapping,
 * clbt_table_gathered_rows, clbt_table_export_buffers) attention reads.
 * docs/guide.md walks through a loop.
 *
 * Every function's comment ends with its tag, [handle: threads]: the
 * handle it is a function of ("created" and "freed" mark the calls that
 * make and end one; "no handle" the library's own functions), and which
 * threads may call it: "any thread", or "its thread", the one thread that
 * uses the handle at the time (the conventions' last rule).
 *
 * Conventions (docs/errors.md has the whole model):
 *   - Every function that can fail returns a clbt_status: CLBT_SUCCESS (0), an
 *     OpenCL error code passed through unchanged, or one of clbt's own codes.
 *     clbt_last_error() then says what went wrong, naming the argument and
 *     the bound it broke. A call refused for its arguments changes nothing.
 *     A call that fails midway (a driver call or an allocation failed)
 *     leaves the host rows as they were and the handle usable; whatever it
 *     already did on the device, the next successful commit repairs, so
 *     that the device then holds exactly the host's rows and lengths. A
 *     command that fails after its call returned (its wait list failed),
 *     and every command of any table queued behind it then, is found and
 *     its rows sent again by a later commit: clbt keeps the event of every
 *     command that can fail that way until it ends (docs/design.md,
 *     "Events"), and none otherwise, unless the caller asks for one. A
 *     command of yours on the device's queue that can fail should be in
 *     the wait list of the next clbt call that follows it.
 *   - A table keeps a reference to the last eight buffers of yours it
 *     checked (query_start_loc, positions, idx_mapping, seq_lens, the
 *     token slots' token_indices and token_slots), so that
 *     a buffer it was given before costs no check; they are released as
 *     newer ones take their place, or with the table.
 *   - Every call that takes a wait list (num_events, wait_list) refuses,
 *     before it enqueues anything, one that is NULL with num_events > 0 or
 *     given with num_events 0 (CLBT_INVALID_ARGUMENT), a NULL event in it
 *     (CLBT_CL_INVALID_EVENT_WAIT_LIST), and an event of another context
 *     than the device's (CLBT_CONTEXT_MISMATCH), naming the event's index,
 *     as it refuses another context's buffers.
 *   - A lock clbt takes that fails (mtx_lock, which no platform we know
 *     fails) fails the call with CLBT_CL_OUT_OF_HOST_MEMORY, changing
 *     nothing; the few functions that cannot fail say what they do.
 *   - No enqueue_ call, and no plain commit or compute_slot_mapping, waits
 *     for the device. The calls that do wait say so: destroy,
 *     read_rejected_tokens.
 *   - Handles are opaque. Every create/open has a destroy/release that
 *     accepts NULL.
 *   - clbt uses the caller's OpenCL objects as given and never creates a
 *     hidden queue: commands go to the device handle's queue, which must be
 *     in order.
 *   - Threads: a device handle, the log and the status functions may be
 *     used from any thread at once. A table (clbt_table, clbt_multi_table),
 *     a KV cache or an attention descriptor has no lock: it is used by one thread at a time, which
 *     hands it to another with the usual happens-before (a mutex, a
 *     queue); a group of a multi-group table (clbt_multi_table_group) is
 *     part of its table, used by the table's thread. Different tables may
 *     be used by different threads at once (docs/threading.md).
 */
#ifndef CLBT_CLBT_H
#define CLBT_CLBT_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#ifdef __APPLE__
#include <OpenCL/cl.h>
#else
#include <CL/cl.h>
#endif

#include <stddef.h>
#include <stdint.h>

#include "clbt_kv_pages.h"

#if defined(_WIN32) && defined(CLBT_SHARED_BUILD)
#define CLBT_API __declspec(dllexport)
#elif defined(_WIN32) && defined(CLBT_SHARED)
#define CLBT_API __declspec(dllimport)
#elif defined(__GNUC__)
#define CLBT_API __attribute__((visibility("default")))
#else
#define CLBT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                  */
/* ------------------------------------------------------------------------ */

/* The version of this header; CMakeLists.txt reads the project version here. */
/**
 * Major version: the soname's (libclbt.so.0). From 0.5 on, a release of
 * one major version only adds to the API and ABI: a program built against
 * one runs with it and with every later one of the same major version
 * (docs/design.md, "Config structs and the ABI"). A program built against
 * 0.4 or earlier (libclbt.so.0.4) is rebuilt once; its source compiles
 * unchanged.
 */
#define CLBT_VERSION_MAJOR 0
/** Minor version: what a release added. */
#define CLBT_VERSION_MINOR 6
/** Patch version: fixes only, same API and ABI. */
#define CLBT_VERSION_PATCH 0
/** MAJOR * 10000 + MINOR * 100 + PATCH: 600 for 0.6.0. */
#define CLBT_VERSION_NUMBER                                   \
  (CLBT_VERSION_MAJOR * 10000 + CLBT_VERSION_MINOR * 100 + \
   CLBT_VERSION_PATCH)
#define CLBT__STRINGIFY_VALUE(x) #x
#define CLBT__STRINGIFY(x) CLBT__STRINGIFY_VALUE(x)
/** "MAJOR.MINOR.PATCH": "0.6.0". */
#define CLBT_VERSION_STRING                                      \
  CLBT__STRINGIFY(CLBT_VERSION_MAJOR) "." CLBT__STRINGIFY(       \
      CLBT_VERSION_MINOR) "." CLBT__STRINGIFY(CLBT_VERSION_PATCH)

/**
 * Returns the version of the library that is running, as
 * CLBT_VERSION_NUMBER encodes it. It differs from the header's
 * CLBT_VERSION_NUMBER when a program runs with another build of the shared
 * library than the one it was compiled against.
 * [no handle: any thread]
 */
CLBT_API unsigned clbt_version_number(void);

/**
 * Returns the running library's version as "MAJOR.MINOR.PATCH". Never NULL.
 * [no handle: any thread]
 */
CLBT_API const char *clbt_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

/**
 * Every status clbt returns: XX(name, value, text). The OpenCL codes are
 * listed by number so that a library built against OpenCL 1.2 headers still
 * names the codes a 3.0 driver returns. clbt's own codes start at -4001,
 * clear of the ranges Khronos gives OpenCL and its extensions.
 */
#define CLBT_STATUS_MAP(XX)                                                    \
  XX(SUCCESS, 0, "success")                                                    \
  XX(CL_DEVICE_NOT_FOUND, -1, "no OpenCL device of the requested type")        \
  XX(CL_DEVICE_NOT_AVAILABLE, -2, "OpenCL device not available")               \
  XX(CL_COMPILER_NOT_AVAILABLE, -3, "OpenCL compiler not available")           \
  XX(CL_MEM_OBJECT_ALLOCATION_FAILURE, -4, "device memory allocation failed")  \
  XX(CL_OUT_OF_RESOURCES, -5, "device out of resources")                       \
  XX(CL_OUT_OF_HOST_MEMORY, -6, "out of host memory")                          \
  XX(CL_PROFILING_INFO_NOT_AVAILABLE, -7, "profiling info not available")      \
  XX(CL_MEM_COPY_OVERLAP, -8, "memory copy overlap")                           \
  XX(CL_IMAGE_FORMAT_MISMATCH, -9, "image format mismatch")                    \
  XX(CL_IMAGE_FORMAT_NOT_SUPPORTED, -10, "image format not supported")         \
  XX(CL_BUILD_PROGRAM_FAILURE, -11, "OpenCL program build failed")             \
  XX(CL_MAP_FAILURE, -12, "map failure")                                       \
  XX(CL_MISALIGNED_SUB_BUFFER_OFFSET, -13, "misaligned sub-buffer offset")     \
  XX(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, -14,                        \
     "an event in the wait list failed")                                       \
  XX(CL_COMPILE_PROGRAM_FAILURE, -15, "OpenCL program compile failed")         \
  XX(CL_LINKER_NOT_AVAILABLE, -16, "OpenCL linker not available")              \
  XX(CL_LINK_PROGRAM_FAILURE, -17, "OpenCL program link failed")               \
  XX(CL_DEVICE_PARTITION_FAILED, -18, "device partition failed")               \
  XX(CL_KERNEL_ARG_INFO_NOT_AVAILABLE, -19, "kernel argument info unavailable")\
  XX(CL_INVALID_VALUE, -30, "invalid value")                                   \
  XX(CL_INVALID_DEVICE_TYPE, -31, "invalid device type")                       \
  XX(CL_INVALID_PLATFORM, -32, "invalid platform")                             \
  XX(CL_INVALID_DEVICE, -33, "invalid device")                                 \
  XX(CL_INVALID_CONTEXT, -34, "invalid context")                               \
  XX(CL_INVALID_QUEUE_PROPERTIES, -35, "invalid queue properties")             \
  XX(CL_INVALID_COMMAND_QUEUE, -36, "invalid command queue")                   \
  XX(CL_INVALID_HOST_PTR, -37, "invalid host pointer")                         \
  XX(CL_INVALID_MEM_OBJECT, -38, "invalid memory object")                      \
  XX(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, -39, "invalid image format")          \
  XX(CL_INVALID_IMAGE_SIZE, -40, "invalid image size")                         \
  XX(CL_INVALID_SAMPLER, -41, "invalid sampler")                               \
  XX(CL_INVALID_BINARY, -42, "invalid program binary")                         \
  XX(CL_INVALID_BUILD_OPTIONS, -43, "invalid build options")                   \
  XX(CL_INVALID_PROGRAM, -44, "invalid program")                               \
  XX(CL_INVALID_PROGRAM_EXECUTABLE, -45, "invalid program executable")         \
  XX(CL_INVALID_KERNEL_NAME, -46, "invalid kernel name")                       \
  XX(CL_INVALID_KERNEL_DEFINITION, -47, "invalid kernel definition")           \
  XX(CL_INVALID_KERNEL, -48, "invalid kernel")                                 \
  XX(CL_INVALID_ARG_INDEX, -49, "invalid kernel argument index")               \
  XX(CL_INVALID_ARG_VALUE, -50, "invalid kernel argument value")               \
  XX(CL_INVALID_ARG_SIZE, -51, "invalid kernel argument size")                 \
  XX(CL_INVALID_KERNEL_ARGS, -52, "invalid kernel arguments")                  \
  XX(CL_INVALID_WORK_DIMENSION, -53, "invalid work dimension")                 \
  XX(CL_INVALID_WORK_GROUP_SIZE, -54, "invalid work-group size")               \
  XX(CL_INVALID_WORK_ITEM_SIZE, -55, "invalid work-item size")                 \
  XX(CL_INVALID_GLOBAL_OFFSET, -56, "invalid global offset")                   \
  XX(CL_INVALID_EVENT_WAIT_LIST, -57, "invalid event wait list")               \
  XX(CL_INVALID_EVENT, -58, "invalid event")                                   \
  XX(CL_INVALID_OPERATION, -59, "invalid operation")                           \
  XX(CL_INVALID_GL_OBJECT, -60, "invalid GL object")                           \
  XX(CL_INVALID_BUFFER_SIZE, -61, "invalid buffer size")                       \
  XX(CL_INVALID_MIP_LEVEL, -62, "invalid mip level")                           \
  XX(CL_INVALID_GLOBAL_WORK_SIZE, -63, "invalid global work size")             \
  XX(CL_INVALID_PROPERTY, -64, "invalid property")                             \
  XX(CL_INVALID_IMAGE_DESCRIPTOR, -65, "invalid image descriptor")             \
  XX(CL_INVALID_COMPILER_OPTIONS, -66, "invalid compiler options")             \
  XX(CL_INVALID_LINKER_OPTIONS, -67, "invalid linker options")                 \
  XX(CL_INVALID_DEVICE_PARTITION_COUNT, -68, "invalid device partition count") \
  XX(CL_INVALID_PIPE_SIZE, -69, "invalid pipe size")                           \
  XX(CL_INVALID_DEVICE_QUEUE, -70, "invalid device queue")                     \
  XX(CL_INVALID_SPEC_ID, -71, "invalid specialization constant id")            \
  XX(CL_MAX_SIZE_RESTRICTION_EXCEEDED, -72,                                    \
     "maximum size restriction exceeded")                                      \
  XX(CL_PLATFORM_NOT_FOUND_KHR, -1001, "no OpenCL platform (no ICD installed)")\
  XX(NULL_ARGUMENT, -4001, "a required pointer or handle is NULL")             \
  XX(INVALID_ARGUMENT, -4002, "an argument has a value clbt does not accept")  \
  XX(INVALID_CONFIG, -4003, "the configuration breaks a rule")                 \
  XX(SIZE_OVERFLOW, -4004, "a size overflows its integer type")                \
  XX(ROW_OUT_OF_RANGE, -4005, "row index is not below max_num_reqs")           \
  XX(ROW_OVERFLOW, -4006, "the row would hold more blocks than its width")     \
  XX(INVALID_BLOCK_ID, -4007, "a block id is negative or too large")           \
  XX(TOO_MANY_REQUESTS, -4008, "num_reqs exceeds max_num_reqs")                \
  XX(TOO_MANY_TOKENS, -4009, "num_tokens exceeds max_num_batched_tokens")      \
  XX(BUFFER_TOO_SMALL, -4010, "an OpenCL buffer is smaller than needed")       \
  XX(CONTEXT_MISMATCH, -4011, "an OpenCL object belongs to another context")   \
  XX(INVALID_SELECTOR, -4012, "the device selector is malformed")              \
  XX(NO_MATCHING_DEVICE, -4013, "no OpenCL device matches the selector")       \
  XX(UNSUPPORTED_DEVICE, -4014, "the device lacks a feature clbt needs")       \
  XX(READ_ONLY_BUFFER, -4015, "a buffer clbt writes is read-only to kernels")

/**
 * What a call did: CLBT_SUCCESS, an OpenCL error code, or one of clbt's own
 * codes; CLBT_STATUS_MAP lists every value with its text.
 */
typedef enum clbt_status {
#define CLBT__STATUS_ENUM(name, value, text) CLBT_##name = (value),
  CLBT_STATUS_MAP(CLBT__STATUS_ENUM)
#undef CLBT__STATUS_ENUM
} clbt_status;

/**
 * Returns the static text of a status ("row index is not below
 * max_num_reqs"), or "unknown status" for a value outside CLBT_STATUS_MAP.
 * Never NULL.
 * [no handle: any thread]
 */
CLBT_API const char *clbt_status_string(clbt_status status);

/**
 * Returns the name of a status ("CLBT_ROW_OUT_OF_RANGE",
 * "CLBT_CL_OUT_OF_RESOURCES"), or "CLBT_UNKNOWN_STATUS". Never NULL.
 * [no handle: any thread]
 */
CLBT_API const char *clbt_status_name(clbt_status status);

/**
 * Returns the detail of this thread's most recent failure, for instance
 * "row 9 is out of range: max_num_reqs is 8". Like errno it is not cleared
 * by a later success, so read it right after the failing call. The text is
 * owned by clbt and stays valid until the thread's next failing call. It is
 * "" when this thread has had no failure. It is at most
 * CLBT_LAST_ERROR_SIZE bytes with its NUL: a longer message (a long build
 * log) is cut to fit.
 * [no handle: any thread]
 */
CLBT_API const char *clbt_last_error(void);

/**
 * The bytes clbt_last_error()'s text takes at most, its NUL included: a
 * build log's first lines, or the list of a machine's devices.
 */
#define CLBT_LAST_ERROR_SIZE 8192

/** The slot id of every token that has no KV-cache slot. */
#define CLBT_PAD_SLOT_ID (-1)

/* ------------------------------------------------------------------------ */
/* Logging                                                                  */
/* ------------------------------------------------------------------------ */

/**
 * How much clbt says. Each level includes the ones above it. The level
 * starts as the environment variable CLBT_LOG says (off, error, warn, info
 * or debug, read once, at the first message; default warn).
 */
typedef enum clbt_log_level {
  CLBT_LOG_OFF = 0,   /**< nothing */
  CLBT_LOG_ERROR = 1, /**< an OpenCL call failed, or memory ran out (the
                         text clbt_last_error also returns) */
  CLBT_LOG_WARN = 2,  /**< clbt worked around a problem: a bad CLBT_LOG, a bad
                         or unwritable program-cache entry */
  CLBT_LOG_INFO = 3,  /**< which device was opened, and why that one */
  CLBT_LOG_DEBUG = 4  /**< each program build: options, time, source or cache */
} clbt_log_level;

/**
 * Receives each message clbt logs: its level, the text (no trailing
 * newline; valid only during the call) and the user pointer given to
 * clbt_log_set_callback.
 */
typedef void (*clbt_log_fn)(clbt_log_level level, const char *message,
                            void *user);

/**
 * Routes every later message to callback instead of stderr; NULL restores
 * stderr ("clbt: <level>: <message>"). clbt calls the callback from
 * whichever thread logs, one message at a time; once this returns, the
 * previous callback is not called again. The callback may call clbt,
 * including this function. Should the log's lock fail (mtx_lock), the
 * callback stays as it was, clbt_last_error says so and the error is
 * logged; messages meanwhile go to stderr, never to a callback unguarded.
 * [no handle: any thread]
 */
CLBT_API void clbt_log_set_callback(clbt_log_fn callback, void *user);

/**
 * Sets the level, overriding CLBT_LOG.
 * Returns CLBT_SUCCESS, or CLBT_INVALID_ARGUMENT for a level outside
 * CLBT_LOG_OFF..CLBT_LOG_DEBUG (the level is then unchanged).
 * [no handle: any thread]
 */
CLBT_API clbt_status clbt_log_set_level(clbt_log_level level);

/**
 * Returns the current level: CLBT_LOG's, or the last one set.
 * [no handle: any thread]
 */
CLBT_API clbt_log_level clbt_log_get_level(void);

/**
 * Returns the word for a level ("off", "error", "warn", "info", "debug"),
 * as CLBT_LOG spells it, or "unknown". Never NULL.
 * [no handle: any thread]
 */
CLBT_API const char *clbt_log_level_name(clbt_log_level level);

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

/**
 * A device handle: an OpenCL context, one device and an in-order command
 * queue, plus the programs clbt has built for that device. A handle may be
 * shared by threads, and threads may open and release handles at once
 * (clbt serialises its listing of the devices and its creation and release
 * of contexts: docs/threading.md). Tables keep a reference to it, so it
 * may be released before the tables made on it.
 */
typedef struct clbt_device clbt_device;

/**
 * Opens the device a selector picks and creates a context and an in-order
 * queue on it. selector has the form [platform][:[type][:device]]; each of
 * platform and device is a 0-based index when all digits, else a
 * case-insensitive substring of the name; type is cpu, gpu, accelerator or
 * all. Examples: "portable:cpu", "nvidia:gpu:0", "1:gpu", ":cpu".
 * selector NULL reads the environment variable CLBT_DEVICE; when that is
 * unset or empty, the first GPU is taken, else the first device of any type.
 * The handle's settings start as the environment says, read now and not
 * again: its build options as CLBT_BUILD_OPTIONS, its program cache
 * directory as CLBT_CACHE_DIR (unset: none); clbt_device_set_build_options
 * and clbt_device_set_cache_dir change them.
 * Returns CLBT_SUCCESS and sets *out; CLBT_INVALID_SELECTOR for a malformed
 * selector, CLBT_NO_MATCHING_DEVICE when it matches nothing (the message
 * quotes it and lists the devices there are), CLBT_CL_PLATFORM_NOT_FOUND_KHR
 * when no OpenCL driver is installed, CLBT_UNSUPPORTED_DEVICE for a device
 * without OpenCL C 1.2 (or without 64-bit integers) or whose driver is known
 * to crash on clbt's kernels (the message names it), CLBT_INVALID_ARGUMENT
 * when CLBT_BUILD_OPTIONS or CLBT_CACHE_DIR is one its setter refuses (too
 * long, or options that define or undefine a CLBT_ macro, a name clbt's
 * kernels use or one the compiler reserves; the message names the
 * variable), or an OpenCL error.
 * [clbt_device, created: any thread]
 */
CLBT_API clbt_status clbt_device_open(const char *selector, clbt_device **out);

/**
 * Wraps the caller's own context, device and queue, retaining each (they
 * are released by clbt_device_release). The queue must belong to the
 * context and the device and must execute in order. The handle's settings
 * start from the environment, as clbt_device_open's do.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL object;
 * CLBT_CONTEXT_MISMATCH when the queue belongs to another context or
 * device; CLBT_INVALID_ARGUMENT for an out-of-order queue, or a setting in
 * the environment that its setter refuses (as clbt_device_open);
 * CLBT_UNSUPPORTED_DEVICE; or an OpenCL error.
 * [clbt_device, created: any thread]
 */
CLBT_API clbt_status clbt_device_wrap(cl_context context, cl_device_id device,
                                      cl_command_queue queue,
                                      clbt_device **out);

/**
 * Drops the caller's reference. The handle, its programs and the OpenCL
 * objects it retains are freed once no table uses it either. NULL is fine.
 * [clbt_device, freed: any thread]
 */
CLBT_API void clbt_device_release(clbt_device *device);

/**
 * The handle's OpenCL context; NULL for a NULL handle. Not retained.
 * [clbt_device: any thread]
 */
CLBT_API cl_context clbt_device_context(const clbt_device *device);

/**
 * The handle's OpenCL device; NULL for a NULL handle. Not retained.
 * [clbt_device: any thread]
 */
CLBT_API cl_device_id clbt_device_id(const clbt_device *device);

/**
 * The handle's in-order queue, where clbt enqueues its commands and where a
 * caller's kernels that read clbt's buffers belong; NULL for a NULL handle.
 * Not retained.
 * [clbt_device: any thread]
 */
CLBT_API cl_command_queue clbt_device_queue(const clbt_device *device);

/**
 * Sets the build options the device appends to clbt's own in every later
 * program build; NULL or "" means none. The options are part of each
 * program's key, so programs built before keep theirs, and so do the
 * kernels of tables made before: only later builds see the change. A
 * handle starts with CLBT_BUILD_OPTIONS (clbt_device_open). Other threads
 * may use the device meanwhile: the call waits for a build in progress on
 * it, which keeps the options it started with. Options the compiler
 * refuses fail the builds that use them (CLBT_CL_BUILD_PROGRAM_FAILURE with
 * the build log, or CLBT_CL_INVALID_BUILD_OPTIONS).
 * Macros named CLBT_* are clbt's: the contract between its host code and
 * its kernels (the pad id, each group's block size and CP constants), which
 * no build option may change. Options that define or undefine one (-D or
 * -U, with or without spaces and quotes) are refused; should a compiler
 * take such an option in a form this does not see, the build fails instead
 * (CLBT_CL_BUILD_PROGRAM_FAILURE, the log naming the macro): clbt's own
 * defines reach the compiler as lines ahead of the source, each refusing a
 * name already defined. Nor may options define or undefine a name the
 * code of clbt's kernels uses ("-Dmin(a,b)=(a)" would change every bound
 * a kernel takes the min of) or one the compiler reserves (beginning with
 * __, or with _ and a capital letter): build options tune how the kernels
 * compile, never what they compute (docs/cache.md). Any other -D is fine.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL device;
 * CLBT_INVALID_ARGUMENT for options of CLBT_BUILD_OPTIONS_SIZE characters
 * or more, or options that define or undefine a CLBT_ macro, a name the
 * kernels use or a reserved one (the message names it); either leaves the
 * device's options as they were.
 * [clbt_device: any thread]
 */
CLBT_API clbt_status clbt_device_set_build_options(clbt_device *device,
                                                   const char *options);

/**
 * Writes to buf (size bytes, NUL-terminated) the device's build options,
 * "" when it has none.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT; CLBT_BUFFER_TOO_SMALL when they
 * do not fit (CLBT_BUILD_OPTIONS_SIZE bytes always suffice).
 * [clbt_device: any thread]
 */
CLBT_API clbt_status clbt_device_build_options(clbt_device *device, char *buf,
                                               size_t size);

/** The bytes that hold a device's build options, their NUL included. */
#define CLBT_BUILD_OPTIONS_SIZE 256

/**
 * Sets the directory of the device's on-disk program cache for every later
 * build: a build first looks there for the program's binary and stores
 * what it builds from source (docs/cache.md). NULL or "" turns the cache
 * off. The directory, and any missing parent, is created (mode 0700) at
 * the first store; a relative path is taken from the working directory of
 * each build. A directory that cannot be used costs only the cache: the
 * builds succeed, with a warning. A handle starts with CLBT_CACHE_DIR
 * (clbt_device_open). Other threads may use the device meanwhile, as with
 * clbt_device_set_build_options.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL device;
 * CLBT_INVALID_ARGUMENT for a directory of CLBT_CACHE_DIR_SIZE characters
 * or more, which leaves the device's directory as it was.
 * [clbt_device: any thread]
 */
CLBT_API clbt_status clbt_device_set_cache_dir(clbt_device *device,
                                               const char *directory);

/**
 * Writes to buf (size bytes, NUL-terminated) the device's program cache
 * directory, "" when the cache is off.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT; CLBT_BUFFER_TOO_SMALL when it
 * does not fit (CLBT_CACHE_DIR_SIZE bytes always suffice).
 * [clbt_device: any thread]
 */
CLBT_API clbt_status clbt_device_cache_dir(clbt_device *device, char *buf,
                                           size_t size);

/** The bytes that hold a device's cache directory, its NUL included. */
#define CLBT_CACHE_DIR_SIZE 4096

/**
 * The number of programs the device has built and cached: one per distinct
 * kernel specialisation (block sizes, CP parameters, the device's build
 * options) among the tables made or prepared on it. 0 for NULL, and 0
 * when the device's lock fails (mtx_lock, which no platform we know fails:
 * clbt_last_error says so, and the error is logged).
 * [clbt_device: any thread]
 */
CLBT_API size_t clbt_device_program_count(clbt_device *device);

/**
 * Writes to buf (size bytes, NUL-terminated) the build options of the
 * device's program number index, counting from the newest, which are also
 * its key in the device's program cache: clbt's common options, its
 * defines for the kernel (-DCLBT_...; the compiler gets them as \#define
 * lines in front of the source) and the device's build options. Indices
 * stay valid until the next program is built.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT; CLBT_INVALID_ARGUMENT when index
 * is not below clbt_device_program_count; CLBT_BUFFER_TOO_SMALL when the
 * options do not fit (CLBT_PROGRAM_OPTIONS_SIZE bytes always suffice).
 * [clbt_device: any thread]
 */
CLBT_API clbt_status clbt_device_program_options(clbt_device *device,
                                                 size_t index, char *buf,
                                                 size_t size);

/**
 * The bytes that always hold a program's build options, its NUL included:
 * clbt's own options, then the device's build options
 * (clbt_device_set_build_options).
 */
#define CLBT_PROGRAM_OPTIONS_SIZE 1024

/**
 * Writes to buf (size bytes, NUL-terminated) a CLBT_DEVICE selector that
 * picks exactly this device on this machine, such as "portable:cpu:0",
 * preferring platform names to indices.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT; CLBT_BUFFER_TOO_SMALL when the
 * selector does not fit (CLBT_SELECTOR_SIZE bytes always suffice);
 * CLBT_NO_MATCHING_DEVICE when the device is not among the installed
 * platforms; or an OpenCL error.
 * [no handle: any thread]
 */
CLBT_API clbt_status clbt_device_selector(cl_device_id device, char *buf,
                                          size_t size);

/** The bytes that always hold a selector, its NUL included. */
#define CLBT_SELECTOR_SIZE 64

/* ------------------------------------------------------------------------ */
/* Row width                                                                */
/* ------------------------------------------------------------------------ */

/**
 * vLLM's get_block_table_width: rounds max_num_blocks up so that a row
 * spans a multiple of token_alignment tokens (0: no alignment), then
 * converts KV-manager blocks to kernel blocks (kernel_block_size 0: the
 * same as block_size).
 * Returns CLBT_SUCCESS and sets *width; CLBT_NULL_ARGUMENT; CLBT_INVALID_CONFIG
 * when block_size is 0 or kernel_block_size does not divide it;
 * CLBT_SIZE_OVERFLOW when the width does not fit in 32 bits.
 * [no handle: any thread]
 */
CLBT_API clbt_status clbt_block_table_width(uint32_t max_num_blocks,
                                            uint32_t block_size,
                                            uint32_t kernel_block_size,
                                            uint32_t token_alignment,
                                            uint32_t *width);

/* ------------------------------------------------------------------------ */
/* One block table                                                          */
/* ------------------------------------------------------------------------ */

/*
 * A clbt_table is a table of its own (clbt_table_create) or a group of a
 * multi-group table (clbt_multi_table_group says what a group does).
 * Every clbt_table_* call takes either. Its device calls
 * (clbt_table_commit, _compute_slot_mapping, _clear, _enqueue_export,
 * _enqueue_step, _enqueue_token_slots and their enqueue_ forms) are the
 * one-group forms of the multi-group table's, whose comments under
 * "Several KV-cache groups" hold their whole text. Its row operations
 * (clbt_table_append_row to clbt_table_swap_row) are written here; the
 * multi-group table's apply them to every group.
 */

/** What a table's rows hold, and so whether it maps tokens to slots. */
typedef enum clbt_slot_mode {
  /** Tokens write KV-cache slots: compute_slot_mapping fills the buffer. */
  CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT = 0,
  /** Rows are state indices (Mamba): compute_slot_mapping does nothing;
      a step can write each request's state slots
      (CLBT_STEP_STATE_SLOTS). */
  CLBT_SLOT_MODE_NONE = 1
} clbt_slot_mode;

/*
 * The structs a caller fills (the configs, clbt_step, clbt_host_step,
 * clbt_multi_host_step, clbt_token_slots_request, clbt_export_request,
 * clbt_kv_write) may gain fields in later versions without breaking a
 * compiled caller. Each starts with struct_size: the struct's size in the
 * caller's header (the
 * CLBT_*_INIT macros and `.struct_size = sizeof(clbt_table_config)` set
 * it), or 0, which stands for the struct's first layout with the field
 * (0.2's for the configs, 0.3's for the steps, 0.4's for the token-slots
 * request and the multi-group host step, 0.5's for the export request and
 * the KV cache's config and write).
 * clbt reads the fields the caller's struct has and gives those it lacks
 * their default, 0; so a struct from an older header works with a newer
 * library, and one from a newer header works with an older library when
 * the fields the library does not know are 0. A struct_size that is no
 * version's size (one that ends inside a field, or above 4096) is refused
 * with CLBT_INVALID_CONFIG, and so is a field the library does not know
 * that is not 0. A field added after a struct's first layout is read only
 * when struct_size covers it: to set one, set struct_size. A
 * zero-initialised struct with its required fields set, as designated
 * initializers write it, stays valid in every version. The structs clbt
 * fills for a caller (clbt_export_buffers, clbt_commit_info,
 * clbt_kv_cache_addressing) never change
 * within a major version: clbt writes all of each. docs/design.md has the
 * rules.
 */
/* An initializer of a config struct: struct_size set, every other field 0
   (designated in C, where -Wextra warns of a positional one). */
#ifdef __cplusplus
#define CLBT__SIZED(type) {(uint32_t)sizeof(type)}
#else
#define CLBT__SIZED(type) {.struct_size = (uint32_t)sizeof(type)}
#endif

/**
 * A zero-initialised config with its required fields set is valid; 0 in an
 * optional field means its default.
 */
typedef struct clbt_table_config {
  uint32_t struct_size;            /**< 0 (the 0.2 layout) or
                                      sizeof(clbt_table_config) */
  uint32_t block_size;             /**< required: KV-manager block, tokens */
  uint32_t kernel_block_size;      /**< attention kernel block; 0: block_size.
                                      Must divide block_size. */
  uint32_t max_num_reqs;           /**< required: rows */
  uint32_t max_num_blocks_per_req; /**< required: KV-manager blocks per row;
                                      row width = this *
                                      (block_size / kernel_block_size) */
  uint32_t max_num_batched_tokens; /**< required: slot-mapping length;
                                      at most INT32_MAX */
  uint32_t cp_world_size;          /**< context-parallel ranks; 0 or 1: none */
  uint32_t cp_rank;                /**< below cp_world_size */
  uint32_t cp_interleave_size;     /**< 0: 1. Must divide block_size. */
  clbt_slot_mode slot_mode;        /**< 0: CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT */
  uint32_t zero_gathered_tails;    /**< since 0.3. Nonzero: a gathered row's
                                      entries past its committed length
                                      are 0; 0: they keep what earlier
                                      gathers left there, as vLLM's do
                                      (clbt_step) */
} clbt_table_config;

/**
 * A clbt_table_config whose struct_size is this header's size and whose
 * other fields are 0: `clbt_table_config config = CLBT_TABLE_CONFIG_INIT;`
 */
#define CLBT_TABLE_CONFIG_INIT CLBT__SIZED(clbt_table_config)

/** One KV-cache group's block table: host rows plus their device copy. */
typedef struct clbt_table clbt_table;

/**
 * Creates a table on a device: zeroed host rows, a zeroed device copy, a
 * slot-mapping buffer filled with CLBT_PAD_SLOT_ID, and the slot-mapping
 * kernel (built now, or taken from the device's program cache; a
 * CLBT_SLOT_MODE_NONE table, which maps no tokens, builds its program at
 * its first commit or gather). Each build appends the device's
 * build options to clbt's own; with a cache directory set on the device, a
 * build first looks for the program's binary there and stores what it
 * builds (clbt_device_set_build_options, clbt_device_set_cache_dir,
 * docs/cache.md).
 * Returns CLBT_SUCCESS and sets *out; CLBT_NULL_ARGUMENT; CLBT_INVALID_CONFIG
 * for a struct_size clbt cannot read (nonzero and below the 0.2 size, above
 * 4096, or larger than this library's struct with a field it does not know
 * set), a zero required field, a kernel_block_size or cp_interleave_size that
 * does not divide block_size, cp_rank not below cp_world_size, an unknown
 * slot_mode or max_num_batched_tokens above INT32_MAX; CLBT_SIZE_OVERFLOW
 * when a width or buffer size overflows; CLBT_CL_BUILD_PROGRAM_FAILURE with
 * the build log in clbt_last_error(); or another OpenCL error.
 * [clbt_table, created: any thread]
 */
CLBT_API clbt_status clbt_table_create(clbt_device *device,
                                       const clbt_table_config *config,
                                       clbt_table **out);

/**
 * Frees a table and its OpenCL objects. NULL is fine. A group of a
 * multi-group table is freed with its table: passed here it is left as it
 * is and an error is logged. Waits until the
 * device has run (or failed) every commit of the table still in flight,
 * because those read the table's staging memory: open every user event the
 * table's commands wait on first. Where the driver cannot say that a
 * commit has ended (the wait fails, and so does asking its status), its
 * staging memory is left allocated and a warning logged, not freed under
 * a write.
 * [clbt_table, freed: its thread]
 */
CLBT_API void clbt_table_destroy(clbt_table *table);

/**
 * Builds, and keeps in the device's program cache, every program a table
 * with this config needs, a CLBT_SLOT_MODE_NONE table's included, so that
 * creating and using tables later costs no compile (vLLM's warm-up).
 * Returns as clbt_table_create does.
 * [clbt_device: any thread]
 */
CLBT_API clbt_status clbt_table_prepare(clbt_device *device,
                                        const clbt_table_config *config);

/**
 * Appends n KV-manager block ids to a row. With kernel_block_size below
 * block_size each id b becomes the kernel blocks b*k .. b*k+k-1,
 * k = block_size / kernel_block_size. n = 0 does nothing.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL table, or NULL
 * block_ids with n > 0; CLBT_ROW_OUT_OF_RANGE; CLBT_ROW_OVERFLOW when the
 * row would exceed its width; CLBT_INVALID_BLOCK_ID for a negative id or one
 * whose kernel blocks exceed INT32_MAX. On failure the row is unchanged.
 * On a group of a multi-group table this and every row operation below
 * change that group alone (clbt_multi_table_group).
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_append_row(clbt_table *table, uint32_t row,
                                           const int32_t *block_ids, size_t n);

/**
 * Replaces a row's blocks with block_ids; fails as append_row does.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_add_row(clbt_table *table, uint32_t row,
                                        const int32_t *block_ids, size_t n);

/**
 * Appends to many rows in one call: entry i appends counts[i] KV-manager
 * block ids to row rows[i], as clbt_table_append_row does; the ids of all
 * entries lie end to end in block_ids, entry i's right after entry i-1's
 * (block_ids holds the sum of counts). Entries apply in order, so a row
 * named twice gains both entries' ids, exactly as two calls would. All or
 * nothing: every entry is checked, each against the row as the entries
 * before it leave it, before any row changes. num_rows 0 does nothing (rows
 * and counts may then be NULL; block_ids may be NULL when every count is 0).
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL table, NULL rows or
 * counts with num_rows > 0, or NULL block_ids with a nonzero count; or the
 * status clbt_table_append_row gives the first failing entry, whose message
 * starts "entry i (row r, ids from block_ids[j])". On failure no row
 * changes.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_append_rows(clbt_table *table, size_t num_rows,
                                            const uint32_t *rows,
                                            const uint32_t *counts,
                                            const int32_t *block_ids);

/**
 * Replaces many rows in one call: entry i replaces row rows[i] with its
 * counts[i] ids, as clbt_table_add_row does; block_ids as in
 * clbt_table_append_rows. A row named twice ends as the later entry leaves
 * it (columns past the later entry's length keep the earlier entry's ids,
 * as two calls would). Fails as clbt_table_append_rows does.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_add_rows(clbt_table *table, size_t num_rows,
                                         const uint32_t *rows,
                                         const uint32_t *counts,
                                         const int32_t *block_ids);

/** Zeroes a row's blocks and sets its length to 0. [clbt_table: its thread] */
CLBT_API clbt_status clbt_table_clear_row(clbt_table *table, uint32_t row);

/**
 * Shrinks a row to its first num_blocks KV-manager blocks: the rollback of
 * speculative decoding, when the blocks of rejected draft tokens go back
 * to the engine's allocator. The kernel blocks past them are zeroed, as
 * clear_row zeroes a row, and the next commit moves only that change.
 * num_blocks equal to the blocks the row holds changes nothing; 0 clears
 * the row.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT; CLBT_ROW_OUT_OF_RANGE;
 * CLBT_INVALID_ARGUMENT when num_blocks exceeds the blocks the row holds.
 * On failure the row is unchanged.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_truncate_row(clbt_table *table, uint32_t row,
                                             size_t num_blocks);

/**
 * Moves row src to dst and clears src (vLLM clears vacated rows because
 * dummy batches may still read them). move_row(r, r) leaves the row as it
 * is. Returns CLBT_SUCCESS, CLBT_NULL_ARGUMENT or CLBT_ROW_OUT_OF_RANGE.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_move_row(clbt_table *table, uint32_t src,
                                         uint32_t dst);

/**
 * Exchanges two whole rows and their lengths; fails as move_row does.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_swap_row(clbt_table *table, uint32_t a,
                                         uint32_t b);

/**
 * The one-group form of clbt_multi_table_commit: rows [0, num_reqs) of
 * this table's group and their lengths to the device, moving only what
 * the row operations changed since the last commit, as its commit mode
 * (clbt_table_set_commit_mode) says. Returns and fails as
 * clbt_multi_table_commit does.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_commit(clbt_table *table, uint32_t num_reqs);

/**
 * The one-group form of clbt_multi_table_enqueue_commit: clbt_table_commit
 * after wait_list, *event (when not NULL) completing once the rows are on
 * the device. Returns and fails as clbt_multi_table_enqueue_commit does.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_enqueue_commit(clbt_table *table,
                                               uint32_t num_reqs,
                                               cl_uint num_events,
                                               const cl_event *wait_list,
                                               cl_event *event);

/** How a commit moves rows to the device. */
typedef enum clbt_commit_mode {
  /** Per commit, the cheaper way for these changes: WHOLE when the packet
      of changes would be half the size of rows [0, num_reqs) or more, else
      SCATTER. The default. */
  CLBT_COMMIT_AUTO = 0,
  /** Copy rows [0, num_reqs) whole, as vLLM does: two enqueued writes of
      a snapshot, no wait. */
  CLBT_COMMIT_WHOLE = 1,
  /** Send a packet of the changed cells and lengths and scatter it on the
      device: inside a kernel launch's arguments when it fits (one command),
      else an upload and a launch; no wait. */
  CLBT_COMMIT_SCATTER = 2
} clbt_commit_mode;

/**
 * Sets how the table's commits move rows (CLBT_COMMIT_AUTO by default).
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT; CLBT_INVALID_ARGUMENT for a
 * value outside clbt_commit_mode.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_set_commit_mode(clbt_table *table,
                                                clbt_commit_mode mode);

/** What the last commit moved. Frozen: it never changes within a major
    version, and clbt_table_last_commit writes all of it. */
typedef struct clbt_commit_info {
  clbt_commit_mode mode; /**< the way it took; CLBT_COMMIT_AUTO: nothing */
  uint32_t rows;         /**< rows whose cells or length it moved */
  uint64_t bytes;        /**< bytes it sent to the device */
} clbt_commit_info;

/**
 * Fills *info with what the table's last commit moved (all zero before the
 * first). Returns CLBT_SUCCESS or CLBT_NULL_ARGUMENT.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_last_commit(const clbt_table *table,
                                            clbt_commit_info *info);

/**
 * The one-group form of clbt_multi_table_compute_slot_mapping: the slot of
 * each token of the batch, from this table's committed rows, into its
 * slot-mapping buffer (clbt_table_slot_mapping), the rest padded with
 * CLBT_PAD_SLOT_ID. A CLBT_SLOT_MODE_NONE table checks its arguments and
 * enqueues nothing. Returns and fails as
 * clbt_multi_table_compute_slot_mapping does.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_compute_slot_mapping(
    clbt_table *table, uint32_t num_reqs, cl_mem query_start_loc,
    cl_mem positions, uint32_t num_tokens);

/**
 * The one-group form of clbt_multi_table_enqueue_slot_mapping:
 * clbt_table_compute_slot_mapping after wait_list, *event (when not NULL)
 * completing with the kernel; a CLBT_SLOT_MODE_NONE table's is a marker
 * after the wait list. Returns and fails as
 * clbt_multi_table_enqueue_slot_mapping does.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_enqueue_slot_mapping(
    clbt_table *table, uint32_t num_reqs, cl_mem query_start_loc,
    cl_mem positions, uint32_t num_tokens, cl_uint num_events,
    const cl_event *wait_list, cl_event *event);

/**
 * The same function computed on the host from the host rows (not the
 * committed ones): the reference the tests compare against, and a CPU
 * fallback. out receives max_num_batched_tokens slot ids. A
 * CLBT_SLOT_MODE_NONE table leaves out untouched. Fails as
 * compute_slot_mapping does for the same arguments (CLBT_NULL_ARGUMENT for
 * a NULL array with a nonzero count).
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_compute_slot_mapping_host(
    const clbt_table *table, uint32_t num_reqs, const int32_t *query_start_loc,
    const int64_t *positions, uint32_t num_tokens, int64_t *out);

/**
 * The one-group form of clbt_multi_table_clear: zeroes every row and
 * length of this table's group, on the host and on the device. Returns
 * and fails as clbt_multi_table_clear does.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_clear(clbt_table *table);

/**
 * Reads the number of tokens the kernel has rejected since the table was
 * created or the count reset (see compute_slot_mapping). Waits for the
 * queue to reach the read. The count wraps modulo 2^32.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_read_rejected_tokens(clbt_table *table,
                                                     uint32_t *count);

/**
 * Enqueues a reset of the rejected-token count to 0.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_reset_rejected_tokens(clbt_table *table);

/** Kernel blocks per row; 0 for a NULL table. [clbt_table: its thread] */
CLBT_API uint32_t clbt_table_width(const clbt_table *table);

/**
 * Kernel blocks in use in a host row; 0 for a NULL table or a bad row.
 * [clbt_table: its thread]
 */
CLBT_API uint32_t clbt_table_row_length(const clbt_table *table, uint32_t row);

/**
 * Every host row's length, uint32[max_num_reqs] (vLLM's num_blocks_per_row),
 * owned by the table and changed by its row operations; NULL for NULL.
 * [clbt_table: its thread]
 */
CLBT_API const uint32_t *clbt_table_row_lengths(const clbt_table *table);

/**
 * The host rows, [max_num_reqs][width] row-major; NULL for NULL.
 * [clbt_table: its thread]
 */
CLBT_API const int32_t *clbt_table_host_data(const clbt_table *table);

/**
 * The committed rows on the device, same layout (int32).
 * [clbt_table: its thread]
 */
CLBT_API cl_mem clbt_table_device_data(const clbt_table *table);

/**
 * The committed row lengths on the device, int32[max_num_reqs], in kernel
 * blocks: what the kernels bound each row by (a length past the row's
 * width reads as the width). For reading: a commit sends only what the
 * host rows changed, so a value written here by anything else stays.
 * NULL for NULL.
 * [clbt_table: its thread]
 */
CLBT_API cl_mem clbt_table_device_row_lengths(const clbt_table *table);

/**
 * The slot-mapping output, int64[max_num_batched_tokens].
 * [clbt_table: its thread]
 */
CLBT_API cl_mem clbt_table_slot_mapping(const clbt_table *table);

/**
 * The rejected-token counter on the device, one uint32.
 * [clbt_table: its thread]
 */
CLBT_API cl_mem clbt_table_rejected_tokens(const clbt_table *table);

/* ------------------------------------------------------------------------ */
/* Attention-ready exports: FlashInfer's and OpenVINO's page tables          */
/* ------------------------------------------------------------------------ */

/**
 * A batch to export the page table of (docs/semantics.md, "Export").
 * Zero-initialise it with CLBT_EXPORT_REQUEST_INIT (or designated
 * initializers) and set the fields you use; it can grow as the configs do,
 * by struct_size, first since 0.5 (0.4's request had none; 0.5 also put
 * the counts before the buffers, which only positional initializers
 * notice).
 */
typedef struct clbt_export_request {
  uint32_t struct_size;     /**< since 0.5: 0 (the 0.5 layout) or sizeof */
  uint32_t num_reqs;        /**< requests (rows 0..num_reqs-1) */
  uint32_t num_reqs_padded; /**< entries to write, >= num_reqs and at most
                               max_num_reqs; 0: num_reqs. Requests past
                               num_reqs get no pages (graph padding). */
  uint32_t num_tokens;      /**< tokens in the batch */
  uint32_t flags;           /**< since 0.4: CLBT_EXPORT_CONTEXT,
                               CLBT_EXPORT_DENSE; 0: neither */
  uint32_t dense_row_pitch; /**< since 0.4, with CLBT_EXPORT_DENSE: entries
                               a row of the dense page table takes; 0: the
                               table's width. dense_row_pitch x
                               num_reqs_padded may not exceed max_num_reqs x
                               width (the page table's size) */
  cl_mem query_start_loc;   /**< required: int32[num_reqs + 1], as for the
                               slot mapping */
  cl_mem positions;         /**< int64[num_tokens]; may be NULL when
                               num_tokens is 0 */
  cl_mem seq_lens;          /**< int32[num_reqs] KV lengths, or NULL: each
                               request's last scheduled position + 1 */
  cl_mem idx_mapping;       /**< since 0.3: int32[num_reqs], batch request
                               -> row (request slot); a negative entry is a
                               padding request, with no pages; NULL: request
                               r is row r (clbt_step) */
} clbt_export_request;

/** A clbt_export_request with this header's struct_size, all else 0. */
#define CLBT_EXPORT_REQUEST_INIT CLBT__SIZED(clbt_export_request)

/** clbt_export_request.flags, since 0.4: also export each request's
    context alone, positions [0, length - query) of this rank's KV, as a CSR
    (vLLM's BatchDCPPrefillWrapper reads it for its prefills). */
#define CLBT_EXPORT_CONTEXT 1u
/** clbt_export_request.flags, since 0.4: also write the dense page table
    (FA3's page_table, FlashMLA's block_table, FlashInfer's block_tables):
    row r, at r x dense_row_pitch, holds request r's pages, then zeros. A
    request with more pages than the pitch is rejected. */
#define CLBT_EXPORT_DENSE 2u

/**
 * A table's export buffers: regions of its device allocation, int32, at
 * addresses fixed for the table's life, sized for its worst case. The
 * export writes entries [0, num_reqs_padded] of the indptr arrays and
 * subsequence_begins, [0, num_reqs_padded) of the per-request arrays,
 * [0, indptr[num_reqs_padded]) of the indices, max_seq_len, and (with
 * CLBT_EXPORT_DENSE) entries [0, num_reqs_padded x dense_row_pitch) of the
 * page table; it leaves the rest as it was. The context arrays are written
 * only with CLBT_EXPORT_CONTEXT, the page table only with
 * CLBT_EXPORT_DENSE. The fields after struct_size are since 0.4. clbt
 * fills it, so it is frozen: it never changes within a major version, and
 * clbt_table_export_buffers writes all of it, whatever struct_size holds.
 */
typedef struct clbt_export_buffers {
  cl_mem paged_kv_indptr;        /**< [max_num_reqs + 1]; FlashInfer's
                                    paged_kv_indptr, OpenVINO's
                                    block_indices_begins */
  cl_mem paged_kv_indices;       /**< [max_num_reqs * width]; FlashInfer's
                                    paged_kv_indices, OpenVINO's
                                    block_indices */
  cl_mem paged_kv_last_page_len; /**< [max_num_reqs], 1..page_size, 0 for a
                                    request with no page (since 0.4; 1
                                    before) */
  cl_mem past_lens;              /**< [max_num_reqs]; OpenVINO's past_lens;
                                    with context parallelism this rank's
                                    context length, FA3's seqused_k for a
                                    DCP context pass */
  cl_mem subsequence_begins;     /**< [max_num_reqs + 1]; OpenVINO's
                                    subsequence_begins */
  uint32_t page_size;            /**< tokens per page: kernel_block_size */
  uint32_t struct_size;          /**< since 0.4; read by no version since
                                    0.5 (0.4 wrote the later fields only as
                                    far as it said): clbt sets it to
                                    sizeof(clbt_export_buffers) */
  cl_mem seq_lens;               /**< [max_num_reqs]; each request's KV
                                    length, 0 for padding and rejected
                                    requests (FA3's seqused_k, FlashMLA's
                                    cache_seqlens, FlashInfer's seq_lens) */
  cl_mem dcp_local_seq_lens;     /**< [max_num_reqs]; this rank's part of
                                    it (vLLM's get_dcp_local_seq_lens), the
                                    same as seq_lens without CP */
  cl_mem max_seq_len;            /**< [1]; the longest seq_lens entry
                                    (OpenVINO's max_context_len) */
  cl_mem context_kv_indptr;      /**< [max_num_reqs + 1]; the context
                                    CSR's indptr (CLBT_EXPORT_CONTEXT) */
  cl_mem context_kv_indices;     /**< [max_num_reqs * width] */
  cl_mem context_kv_last_page_len; /**< [max_num_reqs], 0 for no page */
  cl_mem page_table;             /**< [max_num_reqs * width]; the dense page
                                    table (CLBT_EXPORT_DENSE) */
} clbt_export_buffers;

/** A clbt_export_buffers with this header's struct_size, all else 0: what
    0.4 asked for; since 0.5 any clbt_export_buffers receives every field. */
#define CLBT_EXPORT_BUFFERS_INIT                                      \
  {NULL, NULL, NULL, NULL, NULL, 0, (uint32_t)sizeof(clbt_export_buffers), \
   NULL, NULL, NULL, NULL, NULL, NULL, NULL}

/**
 * The one-group form of clbt_multi_table_enqueue_export: this table's
 * page tables for a batch, from its committed rows, into its export
 * buffers (clbt_table_export_buffers); request->dense_row_pitch 0 is its
 * width. Returns and fails as clbt_multi_table_enqueue_export does, and
 * with CLBT_INVALID_ARGUMENT for a CLBT_SLOT_MODE_NONE table, which has no
 * pages.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_enqueue_export(
    clbt_table *table, const clbt_export_request *request, cl_uint num_events,
    const cl_event *wait_list, cl_event *event);

/**
 * Fills *out with the table's export buffers (see clbt_export_buffers):
 * every field, struct_size set to sizeof(clbt_export_buffers).
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT; CLBT_INVALID_ARGUMENT for a
 * CLBT_SLOT_MODE_NONE table, which has none. On failure *out is unchanged.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_export_buffers(const clbt_table *table,
                                               clbt_export_buffers *out);

/* ------------------------------------------------------------------------ */
/* The serving step: persistent rows, the gather, one call per step          */
/* ------------------------------------------------------------------------ */

/** clbt_step.flags: also gather each batch request's row (see clbt_step). */
#define CLBT_STEP_GATHER 1u
/** clbt_step.flags: also export the page tables (clbt_table_enqueue_export)
    for this batch, through the same idx_mapping. */
#define CLBT_STEP_EXPORT 2u
/**
 * clbt_step.flags, since 0.4: a dummy run, for graph capture and warm-up
 * (Model Runner V2's get_dummy_block_tables and get_dummy_slot_mappings).
 * It commits nothing (the rows' changes stay for the next step) and reads
 * no buffer of the caller's: num_reqs and num_tokens must be 0, and
 * query_start_loc, positions, idx_mapping and seq_lens may be NULL and are
 * ignored. Every slot of every token-mapping group becomes the pad id; with
 * CLBT_STEP_GATHER gathered rows [0, num_reqs_padded) become 0, with
 * CLBT_STEP_EXPORT every exported request has no pages.
 */
#define CLBT_STEP_DUMMY 8u
/**
 * clbt_step.flags, since 0.4: also write each CLBT_SLOT_MODE_NONE group's
 * state slots (clbt_table_state_slots): per batch request, the
 * num_state_slots ids of the state blocks a hybrid model's Mamba layers
 * read, from its committed row, as vLLM's Mamba metadata reads them from
 * the block table (docs/semantics.md, "State slots"). Token-mapping groups
 * have none.
 */
#define CLBT_STEP_STATE_SLOTS 16u

/**
 * One serving step (docs/guide.md, "Two ways to keep rows"). Rows are
 * either kept in batch order (vLLM's v1 model: idx_mapping NULL, request r
 * is row r) or are persistent request slots that never move (vLLM's Model
 * Runner V2: idx_mapping[r] names request r's row; a negative entry is a
 * padding request). A step commits what the row operations changed, then
 * computes the slot mapping of every token-mapping group through
 * idx_mapping and, with CLBT_STEP_GATHER, builds each group's input block
 * table in batch order (clbt_table_gathered_rows): row b < num_reqs is row
 * idx_mapping[b]'s committed entries, rows num_reqs .. num_reqs_padded - 1
 * and padding requests' rows are 0. An idx_mapping entry not below
 * max_num_reqs gives the pad slot id to its tokens and a zero gathered row,
 * and adds 1 per step to the group's rejected-token counter.
 * Zero-initialise it with CLBT_STEP_INIT and set the fields you use; it can
 * grow as the configs do (struct_size).
 */
typedef struct clbt_step {
  uint32_t struct_size;     /**< 0 (the 0.3 layout) or sizeof(clbt_step) */
  uint32_t flags;           /**< CLBT_STEP_GATHER, _EXPORT, _DUMMY,
                               _STATE_SLOTS */
  uint32_t num_reqs;        /**< requests in the batch */
  uint32_t num_reqs_padded; /**< gathered and exported entries, >= num_reqs
                               and at most max_num_reqs; 0: num_reqs */
  uint32_t num_tokens;      /**< tokens in the batch */
  cl_mem query_start_loc;   /**< required: int32[num_reqs + 1] */
  cl_mem positions;         /**< int64[num_tokens]; NULL when num_tokens 0 */
  cl_mem idx_mapping;       /**< int32[num_reqs], or NULL: the identity */
  cl_mem seq_lens;          /**< with CLBT_STEP_EXPORT or
                               CLBT_STEP_STATE_SLOTS: as in
                               clbt_export_request */
  uint32_t export_flags;    /**< since 0.4, with CLBT_STEP_EXPORT: as
                               clbt_export_request.flags */
  uint32_t dense_row_pitch; /**< since 0.4, with CLBT_EXPORT_DENSE: as in
                               clbt_export_request */
  uint32_t num_state_slots; /**< since 0.4, with CLBT_STEP_STATE_SLOTS:
                               ids per request (vLLM's 1 +
                               num_speculative_blocks), at most every NONE
                               group's width; 0: 1 */
  int32_t state_null_block; /**< since 0.4, with CLBT_STEP_STATE_SLOTS: the
                               id of no state, which padding requests and
                               columns past a row get; 0 (vLLM's
                               NULL_BLOCK_ID) unless set */
} clbt_step;

/** A clbt_step with this header's struct_size, all else 0. */
#define CLBT_STEP_INIT CLBT__SIZED(clbt_step)

/**
 * The one-group form of clbt_multi_table_enqueue_step: this table's
 * commit, then one launch that maps its tokens and, as step->flags ask,
 * gathers its rows (clbt_table_gathered_rows), exports its page tables
 * and writes its state slots (clbt_table_state_slots). A
 * CLBT_SLOT_MODE_NONE table commits and gathers, and has no slot mapping
 * or export. Returns and fails as clbt_multi_table_enqueue_step does, and
 * with CLBT_INVALID_ARGUMENT for CLBT_STEP_STATE_SLOTS on a token-mapping
 * table or CLBT_STEP_EXPORT on a NONE table.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_enqueue_step(clbt_table *table,
                                             const clbt_step *step,
                                             cl_uint num_events,
                                             const cl_event *wait_list,
                                             cl_event *event);

/**
 * The table's gathered input block table, int32 [max_num_reqs][width]
 * row-major, at an address fixed for the table's life (a recorded graph
 * may read it): rows [0, num_reqs_padded) are written by a step with
 * CLBT_STEP_GATHER. Zero until the first. Read it, never write it: the
 * gather rewrites only the positions whose row changed, trusting that the
 * rest still hold what it wrote. NULL for NULL.
 * [clbt_table: its thread]
 */
CLBT_API cl_mem clbt_table_gathered_rows(const clbt_table *table);

/**
 * A CLBT_SLOT_MODE_NONE table's state slots, int32, at an address fixed
 * for the table's life: a step with CLBT_STEP_STATE_SLOTS writes entries
 * [0, num_reqs_padded * num_state_slots), request b's ids at
 * [b * num_state_slots, (b + 1) * num_state_slots) (vLLM's
 * state_indices[group] of shape [num_reqs_padded][num_state_slots]), and
 * leaves the rest as it was; its room is [max_num_reqs][width]. NULL for a
 * NULL or token-mapping table, which has none.
 * [clbt_table: its thread]
 */
CLBT_API cl_mem clbt_table_state_slots(const clbt_table *table);

/**
 * A step computed on the host from the host rows: the reference of
 * clbt_table_enqueue_step's slot mapping and gather. The pointers are the
 * host forms of clbt_step's buffers; each output may be NULL to skip it.
 */
typedef struct clbt_host_step {
  uint32_t struct_size;     /**< 0 (the 0.3 layout) or sizeof */
  uint32_t flags;           /**< CLBT_STEP_GATHER: fill gathered_rows */
  uint32_t num_reqs;        /**< requests in the batch */
  uint32_t num_reqs_padded; /**< 0: num_reqs */
  uint32_t num_tokens;      /**< tokens in the batch */
  const int32_t *query_start_loc; /**< required: [num_reqs + 1] */
  const int64_t *positions;       /**< [num_tokens] */
  const int32_t *idx_mapping;     /**< [num_reqs], or NULL: the identity */
  int64_t *slot_mapping;    /**< out: [max_num_batched_tokens], or NULL */
  int32_t *gathered_rows;   /**< in and out: [max_num_reqs][width], the
                               gathered table before the step (entries past
                               a row's length are kept unless the table
                               zeroes gathered tails), or NULL */
} clbt_host_step;

/** A clbt_host_step with this header's struct_size, all else 0. */
#define CLBT_HOST_STEP_INIT CLBT__SIZED(clbt_host_step)

/**
 * The one-group form of clbt_multi_table_compute_step_host: a step on the
 * host (see clbt_host_step). A CLBT_SLOT_MODE_NONE table leaves
 * slot_mapping untouched. Fails as clbt_table_enqueue_step does for the
 * same arguments.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_compute_step_host(const clbt_table *table,
                                                  const clbt_host_step *step);

/* ------------------------------------------------------------------------ */
/* Token slots: request-local token indices to KV-cache slots              */
/* ------------------------------------------------------------------------ */

/**
 * An index matrix to translate (docs/semantics.md, "Token slots"): rows of
 * indices_per_row request-local token indices, row i belonging to the
 * batch request whose [query_start_loc[r], query_start_loc[r+1]) holds i
 * (so that the rows of a batch's query tokens are vLLM's token_indices with
 * its req_id_per_token; a list per request takes query_start_loc
 * 0, 1, ..., num_reqs). Zero-initialise it with CLBT_TOKEN_SLOTS_INIT and
 * set the fields you use; it can grow as the configs do (struct_size).
 */
typedef struct clbt_token_slots_request {
  uint32_t struct_size;     /**< 0 (the 0.4 layout) or sizeof */
  uint32_t num_reqs;        /**< requests in the batch */
  uint32_t num_rows;        /**< rows of the matrix, at most
                               max_num_batched_tokens; rows from
                               query_start_loc[num_reqs] on are padding */
  uint32_t indices_per_row; /**< k, the matrix's columns */
  cl_mem query_start_loc;   /**< required: int32[num_reqs + 1], as for the
                               slot mapping, with num_rows for num_tokens */
  cl_mem idx_mapping;       /**< int32[num_reqs], batch request -> row, a
                               negative entry a padding request; NULL: request
                               r is row r (clbt_step) */
  cl_mem token_indices;     /**< int32[num_rows][indices_per_row], row-major:
                               token positions within the row's request; -1
                               (vLLM's top-k padding) is none. NULL when
                               num_rows * indices_per_row is 0 */
  cl_mem token_slots;       /**< out: int32[sections][num_rows]
                               [indices_per_row], one section per
                               token-mapping group (one for a clbt_table);
                               NULL when num_rows * indices_per_row is 0 */
} clbt_token_slots_request;

/** A clbt_token_slots_request with this header's struct_size, all else 0. */
#define CLBT_TOKEN_SLOTS_INIT CLBT__SIZED(clbt_token_slots_request)

/**
 * The one-group form of clbt_multi_table_enqueue_token_slots, since 0.4:
 * the slots of an index matrix's tokens from this table's committed rows,
 * token_slots one section of num_rows x indices_per_row entries. Returns
 * and fails as clbt_multi_table_enqueue_token_slots does, and with
 * CLBT_INVALID_ARGUMENT for a CLBT_SLOT_MODE_NONE table, which has no
 * slots.
 * [clbt_table: its thread]
 */
CLBT_API clbt_status clbt_table_enqueue_token_slots(
    clbt_table *table, const clbt_token_slots_request *request,
    cl_uint num_events, const cl_event *wait_list, cl_event *event);

/* ------------------------------------------------------------------------ */
/* Several KV-cache groups                                                  */
/* ------------------------------------------------------------------------ */

/*
 * A clbt_multi_table is vLLM's MultiGroupBlockTable: a clbt_table per
 * KV-cache group, sharing max_num_reqs and max_num_batched_tokens, edited
 * together. Its device calls are written here whole; the clbt_table calls
 * of the sections above are their one-group forms.
 */

/**
 * One KV-cache group of a multi-group table. Zero-initialised with its
 * required fields set, it is valid.
 */
typedef struct clbt_group_config {
  uint32_t struct_size;       /**< 0 (the 0.2 layout) or
                                 sizeof(clbt_group_config); the same in
                                 every element of one array */
  uint32_t block_size;        /**< required */
  uint32_t kernel_block_size; /**< 0: block_size */
  uint32_t max_num_blocks;    /**< required: KV-manager blocks, before the
                                 multi-group table aligns them to 128 tokens
                                 (none for CLBT_SLOT_MODE_NONE groups) */
  clbt_slot_mode slot_mode;   /**< 0: CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT */
  uint32_t cp_replicated;     /**< nonzero: this group's cache is whole on
                                 every CP rank, so it is not sharded */
} clbt_group_config;

/** A clbt_group_config with this header's struct_size, all else 0. */
#define CLBT_GROUP_CONFIG_INIT CLBT__SIZED(clbt_group_config)

/**
 * A multi-group table: the sizes its groups share, the groups, and the
 * context-parallel layout that applies to the sharded groups.
 */
typedef struct clbt_multi_table_config {
  uint32_t struct_size;            /**< 0 (the 0.2 layout) or
                                      sizeof(clbt_multi_table_config) */
  uint32_t max_num_reqs;           /**< required */
  uint32_t max_num_batched_tokens; /**< required */
  uint32_t cp_world_size;          /**< 0 or 1: none */
  uint32_t cp_rank;                /**< below cp_world_size */
  uint32_t cp_interleave_size;     /**< 0: 1 */
  uint32_t num_groups;             /**< required */
  const clbt_group_config *groups; /**< required: num_groups entries, each
                                      as large as groups[0].struct_size
                                      says */
  clbt_commit_mode commit_mode;    /**< since 0.3: every group's commit
                                      mode at creation; 0: AUTO */
  uint32_t zero_gathered_tails;    /**< since 0.3: as in clbt_table_config,
                                      for every group */
  uint32_t exact_widths;           /**< since 0.4; read only when
                                      struct_size covers it. Nonzero: each
                                      group's row is exactly max_num_blocks
                                      KV-manager blocks wide (times
                                      block_size / kernel_block_size kernel
                                      blocks), as vLLM's Model Runner V2
                                      sizes rows; 0: token-mapping groups
                                      align to 128 tokens, as its
                                      MultiGroupBlockTable does */
  uint32_t reserved;               /**< since 0.4: must be 0. It keeps the
                                      struct free of trailing padding (which
                                      a caller's struct_size would cover
                                      with bytes nobody set), for a later
                                      version's field */
} clbt_multi_table_config;

/** A clbt_multi_table_config with this header's struct_size, all else 0. */
#define CLBT_MULTI_TABLE_CONFIG_INIT CLBT__SIZED(clbt_multi_table_config)

/** One clbt_table per KV-cache group, edited together (MultiGroupBlockTable).*/
typedef struct clbt_multi_table clbt_multi_table;

/**
 * Creates one table per group. Each group's width is
 * clbt_block_table_width(max_num_blocks, block_size, kernel_block_size, 128),
 * or with no alignment for a CLBT_SLOT_MODE_NONE group or with
 * exact_widths, as vLLM sizes them.
 * Returns as clbt_table_create does; the message names the group.
 * CLBT_INVALID_CONFIG for cp_rank not below cp_world_size (0 counting as
 * 1), whether or not any group is sharded, or for a group whose
 * struct_size differs from groups[0]'s (the array's element size).
 * [clbt_multi_table, created: any thread]
 */
CLBT_API clbt_status clbt_multi_table_create(
    clbt_device *device, const clbt_multi_table_config *config,
    clbt_multi_table **out);

/** Frees every group's table, waiting as clbt_table_destroy does. NULL is
    fine. [clbt_multi_table, freed: its thread] */
CLBT_API void clbt_multi_table_destroy(clbt_multi_table *table);

/**
 * Builds, and keeps in the device's program cache, every program a
 * multi-group table with this config needs (one per launch of up to
 * CLBT_MAX_LAUNCH_GROUPS groups), as clbt_table_prepare does for one
 * table. Returns as clbt_multi_table_create does.
 * [clbt_device: any thread]
 */
CLBT_API clbt_status clbt_multi_table_prepare(
    clbt_device *device, const clbt_multi_table_config *config);

/*
 * The row operations act on every group at once and are all or nothing:
 * when any group would fail, no group changes. Each fails as its
 * single-table operation does, and the message names the group.
 */

/**
 * Appends counts[g] block ids block_ids[g] to the row of each group g, as
 * clbt_table_append_row does (block_ids[g] may be NULL when counts[g] is 0).
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_append_row(
    clbt_multi_table *table, uint32_t row, const int32_t *const *block_ids,
    const size_t *counts);

/**
 * Replaces the row of each group g with block_ids[g] (clbt_table_add_row).
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_add_row(clbt_multi_table *table,
                                              uint32_t row,
                                              const int32_t *const *block_ids,
                                              const size_t *counts);

/** How clbt_multi_table_update_row changes the row of each group. */
typedef enum clbt_row_update {
  /** After the row's blocks, as clbt_multi_table_append_row. */
  CLBT_ROW_APPEND = 0,
  /** From column 0, as clbt_multi_table_add_row. */
  CLBT_ROW_REPLACE = 1
} clbt_row_update;

/**
 * Since 0.6. clbt_multi_table_append_row (how = CLBT_ROW_APPEND) or
 * clbt_multi_table_add_row (CLBT_ROW_REPLACE) with every group's ids in one
 * array: group g's counts[g] ids follow group g-1's in block_ids, which may
 * be NULL when every count is 0. Two flat arrays, whatever the number of
 * groups, are what a binding builds cheapest for each row update of a
 * serving step (the Python facade makes one call per vLLM append_row).
 * All or nothing: every group is checked before any changes.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL table or counts, or
 * NULL block_ids with a nonzero count; CLBT_INVALID_ARGUMENT for a how that
 * is neither value; or the status clbt_table_append_row gives the first
 * group that fails (CLBT_ROW_OUT_OF_RANGE, CLBT_ROW_OVERFLOW,
 * CLBT_INVALID_BLOCK_ID), the message naming the group. On failure no
 * group changes.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_update_row(clbt_multi_table *table,
                                                 uint32_t row,
                                                 const size_t *counts,
                                                 const int32_t *block_ids,
                                                 clbt_row_update how);

/**
 * clbt_table_append_rows for every group in one call: the entries name the
 * same rows in every group; group g appends counts[g][i] ids to rows[i],
 * taken end to end from block_ids[g] (which may be NULL when the group's
 * counts are all 0). Every entry of every group is checked before any group
 * changes; the message names the group and the entry. Fails as
 * clbt_table_append_rows does, and with CLBT_NULL_ARGUMENT for NULL counts
 * or block_ids (the arrays of one pointer per group).
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_append_rows(
    clbt_multi_table *table, size_t num_rows, const uint32_t *rows,
    const uint32_t *const *counts, const int32_t *const *block_ids);

/**
 * clbt_table_add_rows for every group, as clbt_multi_table_append_rows.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_add_rows(
    clbt_multi_table *table, size_t num_rows, const uint32_t *rows,
    const uint32_t *const *counts, const int32_t *const *block_ids);

/**
 * Clears the row in every group (clbt_table_clear_row).
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_clear_row(clbt_multi_table *table,
                                                uint32_t row);

/**
 * Shrinks the row of each group g to its first num_blocks[g] KV-manager
 * blocks (clbt_table_truncate_row), all or nothing: when any group would
 * fail, no group changes.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_truncate_row(clbt_multi_table *table,
                                                   uint32_t row,
                                                   const size_t *num_blocks);

/**
 * Moves row src to dst in every group (clbt_table_move_row).
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_move_row(clbt_multi_table *table,
                                               uint32_t src, uint32_t dst);

/**
 * Exchanges rows a and b in every group (clbt_table_swap_row).
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_swap_row(clbt_multi_table *table,
                                               uint32_t a, uint32_t b);

/**
 * Copies rows [0, num_reqs) of every group and their lengths to the
 * device, moving only what the row operations changed since the last
 * commit, each group as its commit mode says (clbt_commit_mode,
 * clbt_table_set_commit_mode): one launch per CLBT_MAX_LAUNCH_GROUPS groups
 * carries their changes, a group rewritten WHOLE takes its own writes.
 * Once it returns, the caller may change host rows without affecting what
 * was committed, even while the copy is still in flight. Rows from
 * num_reqs on keep their changes for a later commit. After a failed call
 * or a failed upload (see the conventions above) the next commit rewrites
 * every row, num_reqs or not, in the WHOLE way. Enqueues and returns
 * without waiting for the device: the copy is taken into a staging
 * packet, and each commit still in flight keeps its own (about 12 bytes
 * per changed cell for SCATTER, 4 x (width + 1) bytes per row for WHOLE;
 * a small packet travels in the kernel launch itself and keeps none),
 * reused once the device has run it. Once no commit of the table is in
 * flight, the next commit leaves at most two packets (each no larger than
 * the largest a commit of the table took) and their upload buffers: the
 * rest go back to the system.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL table;
 * CLBT_TOO_MANY_REQUESTS for num_reqs above max_num_reqs;
 * CLBT_SIZE_OVERFLOW for a CLBT_COMMIT_SCATTER commit of more than
 * 2^32 - 1 changed cells or rows; or an OpenCL error.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_commit(clbt_multi_table *table,
                                             uint32_t num_reqs);

/**
 * clbt_multi_table_commit, ordered after the events of wait_list
 * (num_events of them). When event is not NULL it receives an event that
 * completes once every group's committed rows are on the device; the
 * caller releases it. Fails as clbt_multi_table_commit does, and with
 * CLBT_INVALID_ARGUMENT for a wait list that is NULL with num_events > 0
 * or not NULL with num_events 0, CLBT_CL_INVALID_EVENT_WAIT_LIST for a
 * NULL event in it, or CLBT_CONTEXT_MISMATCH for an event of another
 * context than the table's device (the message names its index); those
 * change nothing.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_enqueue_commit(
    clbt_multi_table *table, uint32_t num_reqs, cl_uint num_events,
    const cl_event *wait_list, cl_event *event);

/**
 * Enqueues every CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT group's slot mapping of
 * one batch. Token t of [query_start_loc[r], query_start_loc[r+1])
 * belongs to request (row) r and gets the slot of its position; every
 * other element of a group's slot-mapping buffer (clbt_table_slot_mapping
 * of clbt_multi_table_group), up to max_num_batched_tokens, gets
 * CLBT_PAD_SLOT_ID. A token whose block index is not below its row's
 * committed length, or whose position is negative, also gets
 * CLBT_PAD_SLOT_ID and is counted in the group's rejected-token counter;
 * so is every token of a batch whose query_start_loc is not a
 * non-decreasing run from >= 0 to <= num_tokens. query_start_loc:
 * int32[num_reqs + 1]; positions: int64[num_tokens] (may be NULL when
 * num_tokens is 0). Both must belong to the device's context. One kernel
 * launch serves up to CLBT_MAX_LAUNCH_GROUPS groups (the request of each
 * token is found once for all of them; more groups launch once per
 * CLBT_MAX_LAUNCH_GROUPS of them), and the results equal group-by-group
 * calls. NONE groups map no tokens: with no other group the call checks
 * its arguments and enqueues nothing. Returns without waiting; the result
 * is ready when the queue reaches it.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL table or
 * query_start_loc, or NULL positions with num_tokens > 0;
 * CLBT_TOO_MANY_REQUESTS; CLBT_TOO_MANY_TOKENS; CLBT_BUFFER_TOO_SMALL when
 * a buffer holds fewer entries than num_reqs or num_tokens need;
 * CLBT_CONTEXT_MISMATCH; or an OpenCL error.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_compute_slot_mapping(
    clbt_multi_table *table, uint32_t num_reqs, cl_mem query_start_loc,
    cl_mem positions, uint32_t num_tokens);

/** The most groups one slot-mapping kernel launch serves. */
#define CLBT_MAX_LAUNCH_GROUPS 8

/**
 * clbt_multi_table_compute_slot_mapping, ordered after the events of
 * wait_list (num_events of them). When event is not NULL it receives an
 * event that completes once every group's slots are written (with no
 * token-mapping group, a marker after the wait list); the caller releases
 * it. Fails as clbt_multi_table_compute_slot_mapping does, and for a wait
 * list as clbt_multi_table_enqueue_commit does.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_enqueue_slot_mapping(
    clbt_multi_table *table, uint32_t num_reqs, cl_mem query_start_loc,
    cl_mem positions, uint32_t num_tokens, cl_uint num_events,
    const cl_event *wait_list, cl_event *event);

/**
 * Enqueues the export of every CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT group's
 * committed rows for a batch, on the device with no host sync, into the
 * group's own buffers (clbt_table_export_buffers of
 * clbt_multi_table_group), in its own kernel-block units: per request r
 * below num_reqs_padded, its pages (kernel blocks; with context
 * parallelism, this rank's) as a CSR list
 * paged_kv_indices[indptr[r] .. indptr[r+1]), how many tokens its last
 * page holds, its past length, its query's begin, its length and this
 * rank's part of it, and the longest length; with CLBT_EXPORT_CONTEXT the
 * CSR of its context alone, with CLBT_EXPORT_DENSE its row of the dense
 * page table (docs/semantics.md has every rule). Request r reads row
 * idx_mapping[r] when idx_mapping is given. A request whose length is
 * inconsistent, whose idx_mapping entry is not below max_num_reqs, or that
 * needs more pages than its committed row holds (or than dense_row_pitch)
 * gets no pages, no length and no tokens, and adds 1 to the group's
 * rejected-token counter. request->dense_row_pitch (nonzero) applies to
 * every group and must fit each one's page table; 0 gives each group its
 * own width. NONE groups are skipped. One launch per
 * CLBT_MAX_LAUNCH_GROUPS groups; when event is not NULL it receives an
 * event that completes once every group is exported (with no
 * token-mapping group, a marker after the wait list); the caller releases
 * it.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL table, request or
 * query_start_loc, or NULL positions with num_tokens > 0;
 * CLBT_INVALID_ARGUMENT for num_reqs_padded below num_reqs, unknown flags,
 * a dense_row_pitch without CLBT_EXPORT_DENSE or whose rows exceed a
 * group's page table (the message names the group), or an inconsistent
 * wait list (as clbt_multi_table_enqueue_commit);
 * CLBT_INVALID_CONFIG for a struct_size clbt cannot read;
 * CLBT_TOO_MANY_REQUESTS (num_reqs or num_reqs_padded above max_num_reqs);
 * CLBT_TOO_MANY_TOKENS; CLBT_BUFFER_TOO_SMALL; CLBT_CONTEXT_MISMATCH;
 * CLBT_SIZE_OVERFLOW when a group's max_num_reqs x width exceeds
 * INT32_MAX (int32 indptr); or an OpenCL error.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_enqueue_export(
    clbt_multi_table *table, const clbt_export_request *request,
    cl_uint num_events, const cl_event *wait_list, cl_event *event);

/**
 * Enqueues a whole serving step for every group: the commit of every
 * row's changes (every row, not only rows below num_reqs: a persistent
 * slot can be anywhere; inside the launch's arguments when they fit, else
 * from one upload for all, a group rewritten WHOLE taking its own
 * writes), then one launch per CLBT_MAX_LAUNCH_GROUPS groups that
 * computes the token-mapping groups' slot mappings and, with
 * CLBT_STEP_GATHER, every group's gather (clbt_table_gathered_rows of
 * clbt_multi_table_group), then with CLBT_STEP_EXPORT the token-mapping
 * groups' exports (clbt_multi_table_enqueue_export), then with
 * CLBT_STEP_STATE_SLOTS each NONE group's state slots
 * (clbt_table_state_slots). A steady step (the same idx_mapping, a few
 * rows changed) moves only the changed rows' entries into the gathered
 * tables. NONE groups are gathered and have no slot mapping or export.
 * The first command waits for wait_list; *event (when not NULL) completes
 * with the last. Nothing waits for the device.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL table, step or
 * query_start_loc, or NULL positions with num_tokens > 0;
 * CLBT_INVALID_CONFIG for a struct_size clbt cannot read;
 * CLBT_INVALID_ARGUMENT for unknown flags, export_flags or dense_row_pitch
 * without CLBT_STEP_EXPORT, num_state_slots or state_null_block without
 * CLBT_STEP_STATE_SLOTS, num_reqs_padded below num_reqs, num_state_slots
 * above a NONE group's width, or an inconsistent wait list (as
 * clbt_multi_table_enqueue_commit); CLBT_TOO_MANY_REQUESTS;
 * CLBT_TOO_MANY_TOKENS; CLBT_BUFFER_TOO_SMALL; CLBT_CONTEXT_MISMATCH; what
 * clbt_multi_table_commit or clbt_multi_table_enqueue_export fails with;
 * or an OpenCL error. After a failure the next commit or step rewrites
 * the device rows from the host.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_enqueue_step(clbt_multi_table *table,
                                                   const clbt_step *step,
                                                   cl_uint num_events,
                                                   const cl_event *wait_list,
                                                   cl_event *event);

/**
 * A step of every group computed on the host from the host rows: the
 * reference of clbt_multi_table_enqueue_step's slot mappings and gathers,
 * as clbt_host_step is one table's. The batch fields are clbt_host_step's;
 * the outputs are one array per group.
 */
typedef struct clbt_multi_host_step {
  uint32_t struct_size;     /**< 0 (the 0.4 layout) or sizeof */
  uint32_t flags;           /**< CLBT_STEP_GATHER: fill gathered_rows */
  uint32_t num_reqs;        /**< requests in the batch */
  uint32_t num_reqs_padded; /**< 0: num_reqs */
  uint32_t num_tokens;      /**< tokens in the batch */
  const int32_t *query_start_loc; /**< required: [num_reqs + 1] */
  const int64_t *positions;       /**< [num_tokens] */
  const int32_t *idx_mapping;     /**< [num_reqs], or NULL: the identity */
  int64_t *const *slot_mappings;  /**< out: NULL, or one pointer per group,
                                     each NULL or [max_num_batched_tokens];
                                     a CLBT_SLOT_MODE_NONE group's is left
                                     untouched */
  int32_t *const *gathered_rows;  /**< in and out: NULL, or one pointer per
                                     group, each NULL or that group's
                                     [max_num_reqs][width], as
                                     clbt_host_step's gathered_rows */
} clbt_multi_host_step;

/** A clbt_multi_host_step with this header's struct_size, all else 0. */
#define CLBT_MULTI_HOST_STEP_INIT CLBT__SIZED(clbt_multi_host_step)

/**
 * Computes a step of every group on the host from the host rows (see
 * clbt_multi_host_step): the reference of clbt_multi_table_enqueue_step's
 * slot mappings and gathers. Every argument is checked before any output
 * is written. Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL table,
 * step or query_start_loc, or NULL positions with num_tokens > 0;
 * CLBT_INVALID_CONFIG for a struct_size clbt cannot read; otherwise fails
 * as clbt_multi_table_enqueue_step does for the same arguments.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_compute_step_host(
    const clbt_multi_table *table, const clbt_multi_host_step *step);

/**
 * Enqueues, since 0.4, the translation of an index matrix of request-local
 * token indices into the KV-cache slots the slot mapping gave those
 * tokens, from every CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT group's committed
 * rows (vLLM's triton_convert_req_index_to_global_index, with the DCP
 * path's de-interleave): token_slots holds one section of num_rows x
 * indices_per_row entries per token-mapping group, in group order (NONE
 * groups have none), and in a group's section token_slots[i][j] is the
 * slot of token token_indices[i][j] of row i's request, read through
 * idx_mapping. It is -1 for an index of -1, another CP rank's token, and
 * every entry of a padding row or padding request; it is -1 and adds 1 to
 * the group's rejected-token counter for an index below -1, a token past
 * the committed row, a slot above INT32_MAX (the output is int32), each
 * entry but -1 of a request whose idx_mapping entry is not below
 * max_num_reqs, and each entry but -1 of a batch whose query_start_loc is
 * not a non-decreasing run from >= 0 to <= num_rows (-1 is padding
 * wherever it is, never counted). Every entry of the matrix is written.
 * One launch per CLBT_MAX_LAUNCH_GROUPS groups, nothing waits; the first
 * command waits for wait_list, *event (when not NULL) completes with the
 * last (with no token-mapping group, a marker after the wait list).
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL table, request or
 * query_start_loc, or NULL token_indices or token_slots with entries to
 * translate; CLBT_INVALID_CONFIG for a struct_size clbt cannot read;
 * CLBT_INVALID_ARGUMENT for token_slots in the table's own storage (a
 * buffer clbt hands out, such as clbt_table_device_data) or an
 * inconsistent wait list (as clbt_multi_table_enqueue_commit);
 * CLBT_TOO_MANY_REQUESTS; CLBT_TOO_MANY_TOKENS (num_rows above
 * max_num_batched_tokens); CLBT_SIZE_OVERFLOW for num_rows x
 * indices_per_row above UINT32_MAX; CLBT_BUFFER_TOO_SMALL;
 * CLBT_CONTEXT_MISMATCH; CLBT_READ_ONLY_BUFFER for a token_slots made
 * CL_MEM_READ_ONLY; or an OpenCL error. A refused call enqueues nothing.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_enqueue_token_slots(
    clbt_multi_table *table, const clbt_token_slots_request *request,
    cl_uint num_events, const cl_event *wait_list, cl_event *event);

/**
 * Zeroes every row and length of every group, on the host and on the
 * device (vLLM keeps the lengths; clbt resets them so that a later append
 * starts at column 0). Enqueues the device's fills without waiting. All or
 * nothing on the host: when a group's device fill fails no host group
 * changes, and the next commit repairs every group's device copy.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL table; or an OpenCL
 * error.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_status clbt_multi_table_clear(clbt_multi_table *table);

/** Number of groups; 0 for NULL. [clbt_multi_table: its thread] */
CLBT_API uint32_t clbt_multi_table_num_groups(const clbt_multi_table *table);

/**
 * Group g's table, owned by the multi-group table; NULL for a NULL table or
 * g not below the number of groups. It is a view of the group, not a table
 * of its own: device calls on it (clbt_table_commit, _compute_slot_mapping,
 * _enqueue_step, _enqueue_export, _enqueue_token_slots and their enqueue_
 * forms) run in this table's launch that holds the group, with that group
 * alone taking part, so they build no program (clbt_device_program_count
 * stays as it was) and give the group what this table's call gives it. Row
 * operations on it (clbt_table_append_row, _add_row, _append_rows,
 * _add_rows, _clear_row, _truncate_row, _move_row, _swap_row) and
 * clbt_table_clear change that group alone, outside the all-or-nothing
 * rule of this table's own row operations: use those to keep the groups'
 * rows in step. clbt_table_destroy leaves it; it goes with
 * clbt_multi_table_destroy.
 * [clbt_multi_table: its thread]
 */
CLBT_API clbt_table *clbt_multi_table_group(clbt_multi_table *table,
                                            uint32_t group);

/* ------------------------------------------------------------------------ */
/* The KV-cache write: a layer's K and V into its paged cache               */
/* ------------------------------------------------------------------------ */

/** The element type of a KV cache or of the K/V a write reads. */
typedef enum clbt_kv_dtype {
  CLBT_KV_DTYPE_NONE = 0, /**< none given: a config's default */
  CLBT_KV_FLOAT32 = 1,    /**< IEEE binary32 */
  CLBT_KV_FLOAT16 = 2,    /**< IEEE binary16, held as its 16 bits */
  CLBT_KV_BFLOAT16 = 3,   /**< bfloat16, held as its 16 bits */
  CLBT_KV_FP8_E4M3 = 4    /**< float8 e4m3fn (vLLM's "fp8" cache): bias 7,
                             no infinity, 0x7f/0xff NaN, largest 448 */
} clbt_kv_dtype;

/** Where a cache keeps a block's elements (docs/semantics.md). */
typedef enum clbt_kv_layout {
  /** vLLM's flash layout, [num_blocks][block_size][num_kv_heads]
      [head_size] (FlashAttention's, FlashInfer's NHD). */
  CLBT_KV_LAYOUT_FLASH = 0,
  /** Head-major, [num_blocks][num_kv_heads][block_size][head_size]
      (FlashInfer's HND). */
  CLBT_KV_LAYOUT_HEAD_MAJOR = 1
} clbt_kv_layout;

/**
 * A layer's paged KV cache, described once (clbt_kv_cache_create). Sizes
 * and strides count elements of cache_dtype. Key element e of head h of
 * the token in slot s = b x block_size + p is at
 * key_offset + b x block_stride + p x page_stride + h x head_stride + e of
 * key_cache; value elements likewise from value_offset, in value_cache or,
 * when that is NULL, in key_cache too (vLLM's kv_cache[:, 0] and
 * kv_cache[:, 1] of one tensor). A stride of 0 takes the layout's: with
 * E = block_size x num_kv_heads x head_size, the flash layout's page and
 * head strides are num_kv_heads x head_size and head_size, the head-major
 * one's head_size and block_size x head_size; block_stride is E with two
 * buffers and 2E with one, whose value_offset 0 stands for
 * key_offset + E ([num_blocks][2][...], FlashInfer's kv_cache; for
 * FlashAttention's [2][num_blocks][...] set value_offset to num_blocks x E
 * and block_stride to E). No two elements may share an address (K's and
 * V's included), and every element must lie inside its buffer. Zero it
 * with CLBT_KV_CACHE_CONFIG_INIT and set the fields you use; it can grow
 * as the configs do (struct_size).
 */
typedef struct clbt_kv_cache_config {
  uint32_t struct_size;       /**< 0 (the 0.5 layout) or sizeof */
  clbt_kv_layout layout;      /**< 0: CLBT_KV_LAYOUT_FLASH */
  clbt_kv_dtype cache_dtype;  /**< required */
  clbt_kv_dtype input_dtype;  /**< the K/V a write reads; NONE: cache_dtype
                                 (required for an fp8 cache, which takes
                                 float32, float16 or bfloat16 with scales,
                                 or fp8 as it is) */
  uint32_t num_kv_heads;      /**< required */
  uint32_t head_size;         /**< required: elements per head */
  uint32_t block_size;        /**< required: token slots per block */
  uint32_t num_blocks;        /**< required */
  cl_mem key_cache;           /**< required; retained by the cache */
  cl_mem value_cache;         /**< NULL: the values are in key_cache */
  uint64_t key_offset;        /**< where K starts in key_cache */
  uint64_t value_offset;      /**< where V starts; see above for 0 */
  uint64_t block_stride;      /**< 0: the layout's */
  uint64_t page_stride;       /**< 0: the layout's */
  uint64_t head_stride;       /**< 0: the layout's */
} clbt_kv_cache_config;

/** A clbt_kv_cache_config with this header's struct_size, all else 0. */
#define CLBT_KV_CACHE_CONFIG_INIT CLBT__SIZED(clbt_kv_cache_config)

/** A layer's paged KV cache: its buffers, checked once, and its kernel. */
typedef struct clbt_kv_cache clbt_kv_cache;

/**
 * Describes a layer's cache: checks the config against the buffers once,
 * so that a write checks only its own arguments, and builds the write's
 * kernel (or takes it from the device's program cache; one program per
 * input and cache type and alignment). The cache retains its buffers and
 * has a rejected-token counter of its own, 0 at creation.
 * Returns CLBT_SUCCESS and sets *out; CLBT_NULL_ARGUMENT for a NULL
 * device, config, out or key_cache; CLBT_INVALID_CONFIG for a struct_size
 * clbt cannot read, a zero required field, an unknown layout or dtype, an
 * input_dtype the cache's cannot take, or strides under which two
 * elements share an address (the message names the dimensions);
 * CLBT_CONTEXT_MISMATCH for a buffer of another context;
 * CLBT_BUFFER_TOO_SMALL when an element lies past its buffer's end;
 * CLBT_READ_ONLY_BUFFER for a cache buffer made CL_MEM_READ_ONLY (the
 * write's kernel stores there);
 * CLBT_SIZE_OVERFLOW when num_kv_heads x head_size exceeds INT32_MAX or an
 * address does not fit 64 bits; or an OpenCL error
 * (CLBT_CL_BUILD_PROGRAM_FAILURE with the build log).
 * [clbt_kv_cache, created: any thread]
 */
CLBT_API clbt_status clbt_kv_cache_create(clbt_device *device,
                                          const clbt_kv_cache_config *config,
                                          clbt_kv_cache **out);

/**
 * Frees a cache and its references to the caller's buffers; commands
 * already enqueued run to the end. NULL is fine.
 * [clbt_kv_cache, freed: its thread]
 */
CLBT_API void clbt_kv_cache_destroy(clbt_kv_cache *cache);

/**
 * One layer's write of a batch: token t's K and V, input_dtype
 * [num_tokens][num_kv_heads][head_size] with the heads of a token
 * contiguous and any token stride, go to slot slot_mapping[t]. Offsets and
 * strides count elements of their buffer (int64 entries for the slot
 * mapping: clbt_table_slot_mapping's buffer, or a caller's). Zero it with
 * CLBT_KV_WRITE_INIT and set the fields you use; it can grow as the
 * configs do.
 */
typedef struct clbt_kv_write {
  uint32_t struct_size;        /**< 0 (the 0.5 layout) or sizeof */
  uint32_t num_tokens;         /**< tokens to write, at most INT32_MAX */
  cl_mem key;                  /**< required with num_tokens > 0 */
  cl_mem value;                /**< required with num_tokens > 0 */
  cl_mem slot_mapping;         /**< required with num_tokens > 0: int64 */
  uint64_t key_offset;         /**< token 0's first element in key */
  uint64_t key_token_stride;   /**< 0: num_kv_heads x head_size */
  uint64_t value_offset;       /**< token 0's first element in value */
  uint64_t value_token_stride; /**< 0: num_kv_heads x head_size */
  uint64_t slot_mapping_offset; /**< token 0's entry */
  float k_scale;               /**< an fp8 cache from another type: K is
                                  divided by it, which must be finite and
                                  above 0 (vLLM's k_scale); else unused */
  float v_scale;               /**< the same for V */
} clbt_kv_write;

/** A clbt_kv_write with this header's struct_size, all else 0. */
#define CLBT_KV_WRITE_INIT CLBT__SIZED(clbt_kv_write)

/**
 * Enqueues one layer's write (vLLM's reshape_and_cache_flash): one kernel
 * launch, after wait_list, that writes token t's K and V to slot
 * s = slot_mapping[t]; a negative s (CLBT_PAD_SLOT_ID) is skipped, and an
 * s not below num_blocks x block_size is skipped and adds 1 to the cache's
 * rejected-token counter. Elements of the cache's type are copied as their
 * bits; others are rounded to nearest even, fp8 from the value divided by
 * its scale and saturated at +-448 (docs/semantics.md, "The KV-cache
 * write"). Tokens that share a slot leave, element by element, one of
 * theirs there. *event (when
 * not NULL) completes with the write; with num_tokens 0 it is a marker
 * after the wait list. Nothing waits for the device. The cache keeps a
 * reference to the last eight input buffers it checked, as a table does.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL cache or write, or a
 * NULL buffer with num_tokens > 0; CLBT_INVALID_CONFIG for a struct_size
 * clbt cannot read; CLBT_INVALID_ARGUMENT for a token stride below
 * num_kv_heads x head_size, a scale of an fp8 cache that is not finite
 * and above 0, num_tokens above INT32_MAX, or an inconsistent wait list;
 * CLBT_BUFFER_TOO_SMALL when key, value or slot_mapping ends before the
 * last token's elements or entry; CLBT_CONTEXT_MISMATCH;
 * CLBT_SIZE_OVERFLOW when an address does not fit 64 bits; or an OpenCL
 * error. A refused call enqueues nothing.
 * [clbt_kv_cache: its thread]
 */
CLBT_API clbt_status clbt_kv_cache_enqueue_write(clbt_kv_cache *cache,
                                                 const clbt_kv_write *write,
                                                 cl_uint num_events,
                                                 const cl_event *wait_list,
                                                 cl_event *event);

/**
 * Reads the number of tokens the cache's writes have rejected (slots not
 * below num_blocks x block_size) since it was created or the count reset.
 * Waits for the queue to reach the read. The count wraps modulo 2^32.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT; or an OpenCL error.
 * [clbt_kv_cache: its thread]
 */
CLBT_API clbt_status clbt_kv_cache_read_rejected_tokens(clbt_kv_cache *cache,
                                                        uint32_t *count);

/**
 * Enqueues a reset of the rejected-token count to 0. Returns CLBT_SUCCESS;
 * CLBT_NULL_ARGUMENT; or an OpenCL error.
 * [clbt_kv_cache: its thread]
 */
CLBT_API clbt_status clbt_kv_cache_reset_rejected_tokens(
    clbt_kv_cache *cache);

/**
 * The rejected-token counter on the device, one uint32; NULL for NULL.
 * [clbt_kv_cache: its thread]
 */
CLBT_API cl_mem clbt_kv_cache_rejected_tokens(const clbt_kv_cache *cache);

/**
 * Where a cache's elements are, as clbt resolved its config at creation:
 * each stride of 0 replaced by the layout's, a one-buffer value_offset of
 * 0 by key_offset + E, and the elements one tensor spans from its offset,
 * its last element's index + 1: K lies in key_cache's elements
 * [key_offset, key_offset + tensor_span), V likewise from value_offset in
 * its buffer. What an attention kernel reading the cache, or a binding
 * checking the arrays it passed, needs of clbt's defaults. clbt fills it,
 * so it is frozen: it never changes within a major version.
 */
typedef struct clbt_kv_cache_addressing {
  uint64_t key_offset;   /**< K's first element in key_cache */
  uint64_t value_offset; /**< V's first element in its buffer */
  uint64_t block_stride; /**< elements from a block to the next */
  uint64_t page_stride;  /**< from a slot to the next in a block */
  uint64_t head_stride;  /**< from a head to the next in a slot */
  uint64_t tensor_span;  /**< elements K (and V) spans from its offset */
} clbt_kv_cache_addressing;

/**
 * Fills *out with the cache's addressing (clbt_kv_cache_addressing).
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL cache or out, with
 * *out unchanged.
 * [clbt_kv_cache: its thread]
 */
CLBT_API clbt_status clbt_kv_cache_get_addressing(
    const clbt_kv_cache *cache, clbt_kv_cache_addressing *out);

/** The bytes an element of a type takes: 4, 2, 2 or 1; 0 for another
    value. [no handle: any thread] */
CLBT_API size_t clbt_kv_dtype_size(clbt_kv_dtype dtype);

/* ------------------------------------------------------------------------ */
/* Paged attention: vLLM's unified_attention over a layer's cache           */
/* ------------------------------------------------------------------------ */

/**
 * Fills *out with where cache's elements are (clbt_kv_pages, the device
 * page table of clbt_kv_pages.h) and, with a table, where its committed
 * rows are: rows_offset and row_lengths_offset 0 of
 * clbt_table_device_data and clbt_table_device_row_lengths, its width as
 * row_stride and row_capacity, max_num_reqs as num_rows, its kernel block
 * size, KV-manager block size and context-parallel shard. With table NULL
 * the rows describe none (row_capacity 0, cp_world_size 1): set
 * rows_offset, row_stride, row_capacity and num_rows for a block table of
 * your own (a dense [num_seqs][max_blocks] int32 array). What a kernel of
 * yours that includes clbt_kv_pages.h takes by value. Returns
 * CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL cache or out;
 * CLBT_INVALID_ARGUMENT for a table whose kernel block size is not the
 * cache's block_size, that maps no tokens (CLBT_SLOT_MODE_NONE) or whose
 * cp_world_size x block size passes UINT32_MAX;
 * CLBT_CONTEXT_MISMATCH for a table of another OpenCL context; with *out
 * unchanged.
 * [clbt_kv_cache: its thread]
 */
CLBT_API clbt_status clbt_kv_pages_describe(const clbt_kv_cache *cache,
                                            const clbt_table *table,
                                            clbt_kv_pages *out);

/**
 * A layer shape's paged attention, described once (clbt_attention_create):
 * the heads, the caches it reads (the clbt_kv_cache_config fields a cache
 * must share with it) and the types and options of vLLM's
 * unified_attention that stay the same from step to step. Query heads
 * h = g x num_heads / num_kv_heads + i (i below that ratio) read KV head
 * g (GQA; MQA with one KV head). Zero it with CLBT_ATTENTION_CONFIG_INIT
 * and set the fields you use; it can grow as the configs do
 * (struct_size).
 */
typedef struct clbt_attention_config {
  uint32_t struct_size;       /**< 0 (the 0.6 layout) or sizeof */
  uint32_t num_heads;         /**< required: query heads, a multiple of
                                 num_kv_heads */
  uint32_t num_kv_heads;      /**< required: the caches' */
  uint32_t head_size;         /**< required: the caches' */
  uint32_t block_size;        /**< required: the caches' token slots per
                                 block */
  clbt_kv_layout layout;      /**< the caches' (0: CLBT_KV_LAYOUT_FLASH) */
  clbt_kv_dtype cache_dtype;  /**< required: the caches' */
  clbt_kv_dtype query_dtype;  /**< NONE: cache_dtype (required with an fp8
                                 cache) */
  clbt_kv_dtype output_dtype; /**< NONE: query_dtype (required with an fp8
                                 query) */
  float softmax_scale;        /**< a score is q.k x softmax_scale; 0:
                                 1/sqrt(head_size) */
  float softcap;              /**< 0: none; else a score s becomes
                                 softcap x tanh(s / softcap) (vLLM's
                                 logits soft-cap, after the scale) */
  uint32_t sliding_window;    /**< 0: none; else a query at position p
                                 attends the keys at positions above
                                 p - sliding_window (vLLM's window_size[0]
                                 + 1) */
} clbt_attention_config;

/** A clbt_attention_config with this header's struct_size, all else 0. */
#define CLBT_ATTENTION_CONFIG_INIT CLBT__SIZED(clbt_attention_config)

/** A layer shape's paged attention: its kernels, built once. */
typedef struct clbt_attention clbt_attention;

/**
 * Describes a layer shape's attention and builds its kernels (or takes
 * them from the device's program cache: one program per shape and types),
 * choosing their geometry from the device's tuning table. One descriptor
 * serves every layer of its shape, each launch naming the layer's cache.
 * It has a rejected-token counter of its own, 0 at creation, and keeps
 * the scratch its split contexts need (docs/semantics.md, "Paged
 * attention"). Returns CLBT_SUCCESS and sets *out; CLBT_NULL_ARGUMENT for
 * a NULL device, config or out; CLBT_INVALID_CONFIG for a struct_size
 * clbt cannot read, a zero required field, num_heads not a multiple of
 * num_kv_heads, a head_size above 1024, an unknown layout or dtype, an
 * fp8 cache or query without the query or output type named, a
 * softmax_scale or softcap that is not finite and at least 0, or a
 * CLBT_ATTENTION_TUNING environment variable that cannot be read or
 * cannot shape a kernel; CLBT_SIZE_OVERFLOW for num_heads x head_size
 * above INT32_MAX; CLBT_UNSUPPORTED_DEVICE for a
 * device whose work-groups or local memory cannot hold the kernels'; or
 * an OpenCL error (CLBT_CL_BUILD_PROGRAM_FAILURE with the build log).
 * [clbt_attention, created: any thread]
 */
CLBT_API clbt_status clbt_attention_create(
    clbt_device *device, const clbt_attention_config *config,
    clbt_attention **out);

/**
 * Frees a descriptor, its kernels and scratch; commands already enqueued
 * run to the end. NULL is fine.
 * [clbt_attention, freed: its thread]
 */
CLBT_API void clbt_attention_destroy(clbt_attention *attention);

/**
 * One layer's attention over one step's batch, as vLLM's unified_attention
 * reads it: sequence s has the query tokens [cu_seqlens_q[s],
 * cu_seqlens_q[s + 1]) (a decode, a speculative decode, a chunk of a
 * prefill) and seqused_k[s] tokens of context in all, its query tokens the
 * last of them: query token i of q_len is at position
 * seqused_k[s] - q_len + i and attends, causally, every cached position up
 * to its own (within the sliding window). The block ids come from a clbt
 * table's committed rows (table; sequence s reads row idx_mapping[s], or
 * row s with no idx_mapping) or from a dense int32 block table of your own
 * (block_table, row s at block_table_offset + s x block_table_stride,
 * max_blocks_per_seq entries of it readable). Offsets and strides count
 * elements of their buffer; a stride of 0 takes the contiguous one. Zero
 * it with CLBT_ATTENTION_BATCH_INIT and set the fields you use; it can
 * grow as the configs do.
 */
typedef struct clbt_attention_batch {
  uint32_t struct_size;  /**< 0 (the 0.6 layout) or sizeof */
  uint32_t num_seqs;     /**< sequences in the batch */
  uint32_t num_tokens;   /**< query tokens: rows of query and output */
  uint32_t max_seqlen_q; /**< 0, or at least every sequence's query
                            tokens: a hint (1: a decode), never trusted */
  uint32_t max_seqlen_k; /**< 0, or at least every seqused_k: a hint for
                            splitting contexts, never trusted */
  uint32_t block_table_stride; /**< a dense table's entries from a row to
                                  the next; 0: max_blocks_per_seq */
  uint32_t max_blocks_per_seq; /**< a dense table's readable entries a row;
                                  required with block_table */
  uint32_t cp_world_size; /**< a dense table of a context-parallel rank's
                             shard: the ranks; 0 or 1: none (a table
                             brings its own) */
  uint32_t cp_rank;            /**< below cp_world_size */
  uint32_t cp_interleave_size; /**< 0: 1; divides block_size */
  cl_mem query;  /**< required with num_tokens > 0: query_dtype
                    [num_tokens][num_heads][head_size] */
  cl_mem output; /**< required with num_tokens > 0: output_dtype, alike */
  cl_mem cu_seqlens_q; /**< required: int32 [num_seqs + 1] */
  cl_mem seqused_k;    /**< required with num_seqs > 0: int32 [num_seqs] */
  const clbt_table *table; /**< block ids from its committed rows, or NULL
                              with block_table */
  cl_mem idx_mapping;  /**< with a table: int32 [num_seqs], the row of each
                          sequence; NULL: sequence s reads row s */
  cl_mem block_table;  /**< without a table: int32 block ids */
  cl_mem sinks;        /**< NULL, or float32 [num_heads]: each head's
                          attention sink logit */
  cl_mem k_descales;   /**< NULL, or float32 [num_seqs][num_kv_heads]: an
                          fp8 cache's K scale per (sequence, KV head), in
                          place of k_descale */
  cl_mem v_descales;   /**< the same for V */
  cl_mem lse;          /**< NULL, or float32: the natural log of each
                          (token, head)'s softmax denominator, for merging
                          context-parallel ranks' outputs */
  uint64_t query_offset;       /**< token 0's first element */
  uint64_t query_token_stride; /**< 0: num_heads x head_size */
  uint64_t query_head_stride;  /**< 0: head_size */
  uint64_t output_offset;       /**< token 0's first element */
  uint64_t output_token_stride; /**< 0: num_heads x head_size */
  uint64_t output_head_stride;  /**< 0: head_size */
  uint64_t cu_seqlens_q_offset; /**< its first entry */
  uint64_t seqused_k_offset;    /**< its first entry */
  uint64_t idx_mapping_offset;  /**< its first entry */
  uint64_t block_table_offset;  /**< row 0's first entry */
  uint64_t sinks_offset;        /**< head 0's entry */
  uint64_t k_descales_offset;   /**< sequence 0's first entry */
  uint64_t v_descales_offset;   /**< sequence 0's first entry */
  uint64_t lse_offset;          /**< token 0's head 0 */
  uint64_t lse_token_stride;    /**< 0: num_heads */
  uint64_t lse_head_stride;     /**< 0: 1 */
  float q_descale;    /**< an fp8 query: its values are multiplied by it,
                         which must be finite and above 0; else unused */
  float k_descale;    /**< an fp8 cache without k_descales: K's scale,
                         finite and above 0 (vLLM's k_scale); else unused */
  float v_descale;    /**< the same for V */
  float output_scale; /**< an fp8 output: values are divided by it, which
                         must be finite and above 0, then saturated at
                         +-448; else unused */
} clbt_attention_batch;

/** A clbt_attention_batch with this header's struct_size, all else 0. */
#define CLBT_ATTENTION_BATCH_INIT CLBT__SIZED(clbt_attention_batch)

/**
 * Enqueues one layer's paged attention over a batch (vLLM's
 * unified_attention, docs/semantics.md "Paged attention"), after
 * wait_list: one kernel launch, or two when contexts are split over
 * work-groups (a second pass merges the splits), reading K and V from
 * cache, which must have the descriptor's num_kv_heads, head_size,
 * block_size, layout and cache_dtype. Every output row of a query token
 * is written: its attention, converted to output_dtype (rounded to
 * nearest even; fp8 divided by output_scale and saturated), and, with
 * lse, its log-sum-exp. What the batch's device arrays hold is checked on
 * the device: a query token of a sequence whose query or context length
 * is impossible (cu_seqlens_q not a non-decreasing run from >= 0 to at
 * most num_tokens, a query longer than its context, a context past the
 * row's blocks) or that would read a block id outside its row or the cache gets
 * 0 (and lse -infinity) and adds 1 to the descriptor's rejected-token
 * counter; no block outside the cache is read. Rows of tokens past
 * cu_seqlens_q[num_seqs] are left as they are, and a padding request's
 * (a negative idx_mapping entry) tokens get 0 uncounted. *event (when not
 * NULL) completes with the attention; with num_tokens 0 it is a marker
 * after the wait list. Nothing waits for the device. The descriptor keeps
 * a reference to the last eight buffers it checked, as a table does.
 * Returns CLBT_SUCCESS; CLBT_NULL_ARGUMENT for a NULL attention, cache or
 * batch, or a required buffer that is NULL; CLBT_INVALID_CONFIG for a
 * struct_size clbt cannot read; CLBT_INVALID_ARGUMENT for a cache of
 * another shape, both a table and a block_table or neither, a table
 * whose kernel block size is not block_size or that maps no tokens, CP
 * fields with a table or out of range, a world x block size (the table's
 * or the batch's) past UINT32_MAX, a stride below what its rows or
 * heads span, an fp8 scale that is not finite and above 0,
 * num_seqs or num_tokens above INT32_MAX, or an inconsistent wait list;
 * CLBT_BUFFER_TOO_SMALL when an array ends before its last element;
 * CLBT_CONTEXT_MISMATCH for a cache, table, buffer or event of another
 * OpenCL context; CLBT_SIZE_OVERFLOW when an address does not fit 64 bits
 * or the launch needs more than 2^32 work-groups; CLBT_READ_ONLY_BUFFER
 * for an output or lse made CL_MEM_READ_ONLY; or an OpenCL error. A
 * refused call enqueues nothing and writes nothing.
 * [clbt_attention: its thread]
 */
CLBT_API clbt_status clbt_attention_enqueue(
    clbt_attention *attention, const clbt_kv_cache *cache,
    const clbt_attention_batch *batch, cl_uint num_events,
    const cl_event *wait_list, cl_event *event);

/**
 * Reads the number of query tokens the descriptor's launches have
 * rejected since it was created or the count reset. Waits for the queue to
 * reach the read. The count wraps modulo 2^32. Returns CLBT_SUCCESS;
 * CLBT_NULL_ARGUMENT; or an OpenCL error.
 * [clbt_attention: its thread]
 */
CLBT_API clbt_status clbt_attention_read_rejected_tokens(
    clbt_attention *attention, uint32_t *count);

/**
 * Enqueues a reset of the rejected-token count to 0. Returns CLBT_SUCCESS;
 * CLBT_NULL_ARGUMENT; or an OpenCL error.
 * [clbt_attention: its thread]
 */
CLBT_API clbt_status clbt_attention_reset_rejected_tokens(
    clbt_attention *attention);

/**
 * The rejected-token counter on the device, one uint32; NULL for NULL.
 * [clbt_attention: its thread]
 */
CLBT_API cl_mem clbt_attention_rejected_tokens(
    const clbt_attention *attention);

#ifdef __cplusplus
}
#endif

#endif /* CLBT_CLBT_H */
