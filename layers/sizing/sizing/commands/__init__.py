"""Command groups of the `sizing` CLI (see sizing.cli.COMMAND_MODULES)."""
