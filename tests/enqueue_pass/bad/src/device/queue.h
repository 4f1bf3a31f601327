/* A sequence's command (the check reads its declarations). */
int clbt__sequence_write(void);
