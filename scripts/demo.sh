#!/usr/bin/env bash
# The main job of `make demo`: bring the embedded platform up (Kafka, metadata store, three region servers,
# Airflow), generate 1,000,000 user records, push them as the store's Airflow rollout DAG run (Spark writes the
# version topic; each region ingests and swaps in rollout order), and read sample keys back from every region.
# DEMO_PROFILE names another profile (deploy/<profile>.properties, each with its own data dir and ports, beside the
# default platform's): `replicated` (`make demo-replicated`: three instances per region, replication factor 2) or
# `cluster` (`make demo-cluster`: every engine in its distributed form). Allow a few minutes for those on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
venice=.venv/bin/venice
if [ -n "${DEMO_PROFILE:-}" ]; then
  export VENICE_PROFILE="$DEMO_PROFILE"
fi
read -r home airflow_url < <(.venv/bin/python -c \
  "from venice_core.config import load_config; c = load_config(); print(c.data_dir, c.airflow.api_url)")
store=${DEMO_STORE:-demo_users}
records=${DEMO_RECORDS:-1000000}
data=$home/demo-data/users-$records

$venice up
if ! $venice store show "$store" >/dev/null 2>&1; then
  $venice store create "$store" --key-schema examples/schemas/user_key.avsc \
    --value-schema examples/schemas/user_value_v1.avsc --partitions 4
fi
[ -d "$data" ] || .venv/bin/python scripts/generate_dataset.py --out "$data" --records "$records"
time $venice push "$store" --input "$data"  # through Airflow (the default when it runs)
for region in dc-0 dc-1 dc-2; do
  for key in user-000000000 "user-$(printf %09d $((records / 8)))" "user-$(printf %09d $((records - 1)))"; do
    echo "$region $key: $($venice get "$store" "$key" --region "$region")"
  done
done
$venice store show "$store" | tail -4
if [ -n "${DEMO_PROFILE:-}" ]; then $venice status || true; fi  # every process: instances, replicas, brokers, workers
echo
echo "The platform keeps running (Airflow UI: $airflow_url, user admin, password in"
echo "$home/airflow/simple_auth_manager_passwords.json.generated); stop it with:"
echo "  ${VENICE_PROFILE:+VENICE_PROFILE=$VENICE_PROFILE }make down"
