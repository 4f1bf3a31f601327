/* The second header of engine/lens.c: its module's, no fault. */
