/*
 * A reader for a flat JSON object, the shape Python's json.dump writes for
 * a dict of strings and numbers:
 *
 *   {"name": "decode-1", "num_reqs": 1, "kernel_us": 5.41}
 *
 * Values may be strings, numbers, true, false or null; nested objects and
 * arrays are refused. The whole document is checked against JSON's
 * grammar on every call, so a truncated or mangled file is an error, never
 * a wrong number.
 */
#ifndef SUPPORT_FLAT_JSON_H
#define SUPPORT_FLAT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Finds key in document and stores its value, which must be a whole
 * number in [0, UINT32_MAX]. Returns false, with the reason in error
 * (error_size bytes, NUL-terminated), when the document is not a flat JSON
 * object, has key twice or not at all, or the value is not such a number.
 */
bool flat_json_uint32(const char *document, const char *key, uint32_t *value,
                      char *error, size_t error_size);

#endif /* SUPPORT_FLAT_JSON_H */
