/* A kernel's buffer argument. */
int clbt__bound_buffer_set(void);
