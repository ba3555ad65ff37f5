"""Spark entry points (`spark-submit`) and the local push orchestration that runs them."""
