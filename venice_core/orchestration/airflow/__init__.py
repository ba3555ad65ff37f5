"""Airflow's REST API as the CLI uses it: trigger a DAG run and follow it."""
