/* A slot handed its reader. */
void clbt__staging_submit(void);
