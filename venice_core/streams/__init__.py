"""Nearline streaming pipelines: their control, drain and upgrade."""
