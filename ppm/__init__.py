"""The `ppm` command line: one console script with a sub-command per area."""
