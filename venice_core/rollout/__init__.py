"""The push workflow, whichever orchestrator runs it."""
