#!/bin/sh
# Creates (or upgrades in place) Temporal's two databases on the shared PostgreSQL, then exits 0.
set -eu
: "${POSTGRES_SEEDS:?}" "${POSTGRES_USER:?}" "${SQL_PASSWORD:?}"
until nc -z -w 2 "$POSTGRES_SEEDS" 5432; do echo 'waiting for postgres'; sleep 1; done
tool="temporal-sql-tool --plugin postgres12 --ep $POSTGRES_SEEDS -u $POSTGRES_USER -p 5432"
for db in temporal temporal_visibility; do
  $tool --db "$db" create || true   # exists on a re-run
done
$tool --db temporal setup-schema -v 0.0 || true
$tool --db temporal update-schema -d /etc/temporal/schema/postgresql/v12/temporal/versioned
$tool --db temporal_visibility setup-schema -v 0.0 || true
$tool --db temporal_visibility update-schema -d /etc/temporal/schema/postgresql/v12/visibility/versioned
echo 'temporal schema ready'
