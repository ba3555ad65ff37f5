"""A push's input and a repush's source inspected without a JVM, where a push is checked and prepared (`venice push`,
the rollout) and in the push job itself: a local input's schema (`input_files`), matched against the store's value
schemas (`input_schema`), and spread-out samples of values for a dictionary (`input_sample`, `topic_sample`)."""
