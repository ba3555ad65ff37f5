"""Nearline writes: `OnlineWriter` puts records into a hybrid store's real-time topic, from which every region
ingests them between pushes (the Spark Structured Streaming writer is `venice_core.spark`'s)."""

from venice_core.nearline.writer import OnlineWriter

__all__ = ["OnlineWriter"]
