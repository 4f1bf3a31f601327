/* The command floor's header; support/'s report.h is below it. */
#include "report.h"
int cli_run(void);
