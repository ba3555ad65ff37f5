"""The embedded platform: the processes `venice up` starts on one machine, and how to stop them."""
