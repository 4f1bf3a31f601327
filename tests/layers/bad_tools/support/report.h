/* support/: below every floor of tools/. */
