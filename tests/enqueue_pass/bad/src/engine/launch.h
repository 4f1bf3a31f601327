/* A launch's enqueue. */
int clbt__launch_enqueue(void);
