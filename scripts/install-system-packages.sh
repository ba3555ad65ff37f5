#!/usr/bin/env bash
# System packages the project needs beyond Python: Java 17 (a JDK: the push job's Spark functions are compiled with
# javac) and Maven (for the embedded Kafka broker's jars and Spark's Avro module); for the
# cluster profile (--with-cluster-deps: `make demo-cluster`), Debian's PostgreSQL and Redis servers, which
# `venice up --profile cluster` runs; and for the tests (--with-test-deps) those too, and Chromium (the UI page's
# browser test drives Debian's `chromium` through Playwright). Installs what is missing with apt when it can;
# otherwise names what to install.
set -euo pipefail

cluster=0
tests=0
for arg in "$@"; do
  case "$arg" in
    --with-cluster-deps) cluster=1 ;;
    --with-test-deps) cluster=1; tests=1 ;;
    *) echo "usage: $0 [--with-cluster-deps] [--with-test-deps]" >&2; exit 2 ;;
  esac
done

need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
if [ "$cluster" = 1 ]; then
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)  # the hosts profile's namespaces, links and routes
  command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
fi
if [ "$tests" = 1 ]; then
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
fi
[ ${#need[@]} -eq 0 ] && exit 0

if command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing system packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
else
  echo "error: missing system packages: ${need[*]} (install them with your package manager)" >&2
  exit 1
fi
