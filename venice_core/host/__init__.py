"""What the platform needs of the machine it runs on: programs on PATH (`programs`), processes that run (`pids`),
jars from Maven Central (`maven`) in a cache safe for parallel fillers (`cache`), and the garbage-collector settings
of its long-running processes (`gc_settings`)."""
