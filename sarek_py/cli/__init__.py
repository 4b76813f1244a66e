"""The ``sarek-py`` command: one module per subcommand (docs/cli.md)."""
