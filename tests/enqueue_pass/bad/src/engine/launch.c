/* A launch whose enqueue is not marked. */
int clbt__launch_enqueue(void) { return clbt__bound_buffer_set(); }
