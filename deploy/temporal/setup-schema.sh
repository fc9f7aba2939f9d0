#!/bin/sh
# Creates Temporal's two PostgreSQL databases (history and visibility) if they are missing and
# brings their schemas up to the version of the admin-tools image running this script. Safe to run
# again: an existing database is kept, and update-schema only applies the versions it lacks.
# Run by compose.yaml's `temporal-schema` service before the server starts.
set -eu

tool() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "${DB_PORT:-5432}" -u "$POSTGRES_USER" "$@"
}

for db in temporal temporal_visibility; do
  case "$db" in
    temporal) schema=/etc/temporal/schema/postgresql/v12/temporal/versioned ;;
    *) schema=/etc/temporal/schema/postgresql/v12/visibility/versioned ;;
  esac
  tool --db "$db" create || echo "database $db exists"
  # setup-schema -v 0.0 only records the version table on a new database; it fails harmlessly
  # on one that has it already.
  tool --db "$db" setup-schema -v 0.0 || echo "database $db has its version table"
  tool --db "$db" update-schema -d "$schema"
done
echo "Temporal schemas are up to date"
