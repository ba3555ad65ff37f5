"""The `venice` command."""
