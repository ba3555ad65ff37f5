#!/usr/bin/env bash
# The main job of `make demo`: bring the embedded platform up, create the sample store, show it.
set -euo pipefail
cd "$(dirname "$0")/.."
venice=.venv/bin/venice
store=${DEMO_STORE:-demo_users}

$venice up
$venice status
if ! $venice store show "$store" >/dev/null 2>&1; then
  $venice store create "$store" --key-schema examples/schemas/user_key.avsc \
    --value-schema examples/schemas/user_value_v1.avsc --partitions 4
  $venice schema add "$store" --value-schema examples/schemas/user_value_v2.avsc
fi
$venice store show "$store"
echo
echo "The platform keeps running; stop it with: make down"
