/* A part packed: a decision. */
void clbt__commit_pack(void);
