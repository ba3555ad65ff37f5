# The project's image: region servers, the CLI, and the Airflow services (which load dags/ and plugins/).
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/venice
COPY requirements.lock pyproject.toml ./
RUN pip install --no-cache-dir uv==0.13.8 && uv pip install --system --no-cache -r requirements.lock
COPY venice_core ./venice_core
COPY dags ./dags
COPY plugins ./plugins
RUN uv pip install --system --no-deps .
ENV VENICE_CONFIG=/etc/venice/venice.properties
