/* The plan's commands: a decision. */
void clbt__plan_commands(void);
