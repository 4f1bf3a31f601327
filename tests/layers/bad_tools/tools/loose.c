/* A C file outside every floor's folder. */
int loose(void);
int loose(void) { return 0; }
