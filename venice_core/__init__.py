"""venice_core: a Venice-style derived-data platform. Importable without Airflow."""

__version__ = "0.1.0"

import logging

logging.getLogger(__name__).addHandler(logging.NullHandler())
