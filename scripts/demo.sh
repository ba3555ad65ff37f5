#!/usr/bin/env bash
# The main job of `make demo`: bring the embedded platform up (Kafka, metadata store, three region servers,
# Airflow), generate 1,000,000 user records, push them as the store's Airflow rollout DAG run (Spark writes the
# version topic; each region ingests and swaps in rollout order), and read sample keys back from every region.
# DEMO_REPLICATED=1 (`make demo-replicated`): three instances per region, replication factor 2, on a config of its
# own (deploy/replicated.properties, data in ~/.venice-replicated, ports beside the default platform's): nine region
# servers, Kafka, Airflow and the Spark push on one machine, so allow a few minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
venice=.venv/bin/venice
home=${VENICE_HOME:-$HOME/.venice}
port=8080
if [ "${DEMO_REPLICATED:-0}" = 1 ]; then
  export VENICE_CONFIG="$PWD/deploy/replicated.properties"
  home=$HOME/.venice-replicated
  port=8180
fi
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
if [ "${DEMO_REPLICATED:-0}" = 1 ]; then $venice status || true; fi  # every instance, its replicas and leaderships
echo
echo "The platform keeps running (Airflow UI: http://127.0.0.1:$port, user admin, password in"
echo "$home/airflow/simple_auth_manager_passwords.json.generated); stop it with:"
echo "  ${VENICE_CONFIG:+VENICE_CONFIG=$VENICE_CONFIG }make down"
