"""Small pieces every layer uses and that know nothing of the platform: the one way to wait (`waiting`), classes
loaded only from configured lists (`class_paths`), Prometheus text rendering (`metrics`)."""
