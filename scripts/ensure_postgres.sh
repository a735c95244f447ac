#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Make a PostgreSQL server available for the tests and print its SQLAlchemy URL on stdout.
#
#   url=$(scripts/ensure_postgres.sh) && MXRAG_TEST_POSTGRES_URL=$url pytest tests/storage
#
# 1. MXRAG_TEST_POSTGRES_URL set: print it, nothing else.
# 2. The role mxrag can already log in on 127.0.0.1: print the URL (fast path, well under a second).
# 3. No server binaries: install the `postgresql` package with apt-get (root only).
# 4. Start a server: the Debian cluster of the newest installed version (pg_ctlcluster; one is
#    created with pg_createcluster if none exists), or, without the Debian cluster tools or when
#    not root, a private data directory under ${TMPDIR:-/tmp} initialised with initdb (run as the
#    `postgres` user when we are root, since initdb refuses to run as root).
# 5. Create the role and database `mxrag` (password `mxrag`) if missing, then print
#    postgresql+psycopg://mxrag:mxrag@127.0.0.1:PORT/mxrag.
#
# Idempotent; only the URL goes to stdout; on failure it exits non-zero with the reason on stderr.
#
# MXRAG_POSTGRES_BINDIR (scripts/ensure_pgvector.sh sets it): run the server binaries found there,
# always as a private server (its own data directory), and create MXRAG_POSTGRES_EXTENSION (if set)
# in the database.
set -euo pipefail

ROLE=mxrag
PASSWORD=mxrag
DATABASE=mxrag
HOST=127.0.0.1
PORT=${MXRAG_TEST_POSTGRES_PORT:-5432}
BINDIR_OVERRIDE=${MXRAG_POSTGRES_BINDIR:-}
EXTENSION=${MXRAG_POSTGRES_EXTENSION:-}
PRIVATE_DIR="${TMPDIR:-/tmp}/mxrag-postgres-$(id -u)${BINDIR_OVERRIDE:+-$PORT}"

log() { echo "ensure_postgres: $*" >&2; }
die() { log "$*"; exit 1; }

if [[ -n "${MXRAG_TEST_POSTGRES_URL:-}" ]]; then
    echo "$MXRAG_TEST_POSTGRES_URL"
    exit 0
fi

url() { echo "postgresql+psycopg://$ROLE:$PASSWORD@$HOST:$1/$DATABASE"; }

can_login() {  # can_login PORT
    command -v psql >/dev/null 2>&1 || return 1
    PGPASSWORD=$PASSWORD PGCONNECT_TIMEOUT=3 psql -X -q -t -A -h "$HOST" -p "$1" -U "$ROLE" -d "$DATABASE" \
        -c 'SELECT 1' >/dev/null 2>&1
}

if can_login "$PORT"; then
    url "$PORT"
    exit 0
fi

# One run at a time (parallel test sessions); flock is in util-linux, present on Debian. Commands
# that leave a daemon behind (apt-get's postinst, cluster start) get `9>&-`, or the server would
# hold the lock for its lifetime.
if command -v flock >/dev/null 2>&1; then
    exec 9>"${TMPDIR:-/tmp}/mxrag-ensure-postgres-$(id -u).lock"
    flock -w 300 9 || die "timed out waiting for another ensure_postgres.sh run"
    if can_login "$PORT"; then url "$PORT"; exit 0; fi
fi

is_root() { [[ $(id -u) == 0 ]]; }

find_bindir() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [[ -n $dir && -x $dir/postgres ]]; then echo "$dir"; return; fi
    if command -v pg_config >/dev/null 2>&1 && [[ -x "$(pg_config --bindir)/postgres" ]]; then
        pg_config --bindir; return
    fi
    if command -v initdb >/dev/null 2>&1; then
        dir=$(dirname "$(readlink -f "$(command -v initdb)")")
        if [[ -x $dir/postgres ]]; then echo "$dir"; fi
    fi
}

BINDIR=${BINDIR_OVERRIDE:-$(find_bindir)}
[[ -z $BINDIR_OVERRIDE || -x $BINDIR/postgres ]] || die "no postgres binary in MXRAG_POSTGRES_BINDIR=$BINDIR"
if [[ -z $BINDIR ]]; then
    is_root || die "PostgreSQL server binaries not found and not root: install the postgresql package or set MXRAG_TEST_POSTGRES_URL"
    command -v apt-get >/dev/null 2>&1 || die "PostgreSQL server binaries not found and no apt-get to install them"
    log "installing postgresql with apt-get (about a minute)"
    apt_log="${TMPDIR:-/tmp}/mxrag-apt-postgresql.log"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } \
        >"$apt_log" 2>&1 9>&-; then
        tail -n 20 "$apt_log" >&2
        die "apt-get install postgresql failed (log: $apt_log)"
    fi
    BINDIR=$(find_bindir)
    [[ -n $BINDIR ]] || die "postgresql installed but its server binaries were not found"
fi
VERSION=$("$BINDIR/postgres" --version | sed -E 's/[^0-9]*([0-9]+).*/\1/')

# Run a command as the database superuser's OS account (postgres when we are root).
as_owner() {
    if is_root; then runuser -u postgres -- "$@"; else "$@"; fi
}

# Start the Debian cluster of $VERSION (creating one if needed); sets PORT and SOCKET_ARGS.
start_debian_cluster() {
    local line name status
    line=$(pg_lsclusters -h 2>/dev/null | awk -v v="$VERSION" '$1 == v' | head -n 1 || true)
    if [[ -z $line ]]; then
        log "creating cluster $VERSION/main"
        pg_createcluster "$VERSION" main -p "$PORT" >/dev/null 2>&1 9>&- || return 1
        line=$(pg_lsclusters -h | awk -v v="$VERSION" '$1 == v' | head -n 1)
    fi
    read -r _ name PORT status _ <<<"$line"
    install -d -o postgres -g postgres -m 2775 /var/run/postgresql
    if [[ $status != online* ]]; then
        log "starting cluster $VERSION/$name on port $PORT"
        pg_ctlcluster "$VERSION" "$name" start >&2 9>&- || return 1
    fi
    SOCKET_ARGS=(-p "$PORT")
}

# Start a private server in $PRIVATE_DIR; sets SOCKET_ARGS.
start_private_server() {
    if is_root; then
        id postgres >/dev/null 2>&1 || die "no 'postgres' user to run initdb as (initdb refuses root)"
        install -d -o postgres -m 0700 "$PRIVATE_DIR"
    else
        install -d -m 0700 "$PRIVATE_DIR"
    fi
    if [[ ! -s $PRIVATE_DIR/PG_VERSION ]]; then
        log "initialising $PRIVATE_DIR"
        as_owner "$BINDIR/initdb" -D "$PRIVATE_DIR" -U postgres -E UTF8 --locale=C --auth-local=trust \
            --auth-host=scram-sha-256 >/dev/null || return 1
    fi
    if ! as_owner "$BINDIR/pg_ctl" -D "$PRIVATE_DIR" status >/dev/null 2>&1; then
        log "starting a private server in $PRIVATE_DIR on port $PORT"
        as_owner "$BINDIR/pg_ctl" -D "$PRIVATE_DIR" -l "$PRIVATE_DIR/server.log" -w -t 60 \
            -o "-p $PORT -k $PRIVATE_DIR -c listen_addresses=$HOST" start >/dev/null 9>&- || return 1
    fi
    SOCKET_ARGS=(-h "$PRIVATE_DIR" -p "$PORT" -U postgres)
}

SOCKET_ARGS=()
if [[ -z $BINDIR_OVERRIDE ]] && is_root && command -v pg_ctlcluster >/dev/null 2>&1 && command -v pg_lsclusters >/dev/null 2>&1; then
    start_debian_cluster || die "could not start the PostgreSQL $VERSION cluster (see /var/log/postgresql/)"
else
    start_private_server || die "could not start a private PostgreSQL server (see $PRIVATE_DIR/server.log)"
fi

"$BINDIR/pg_isready" -q -h "$HOST" -p "$PORT" -t 30 || die "the server on $HOST:$PORT does not accept connections"

superuser_sql() { as_owner "$BINDIR/psql" -X -q -t -A -v ON_ERROR_STOP=1 "${SOCKET_ARGS[@]}" -d postgres -c "$1"; }

superuser_sql "DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$ROLE') THEN
        CREATE ROLE $ROLE LOGIN PASSWORD '$PASSWORD';
    END IF;
END \$\$;" >/dev/null || die "could not create the role $ROLE"
# UTF8 whatever the cluster's default (a container without locales gets SQL_ASCII); the C locale
# exists everywhere, and with it PostgreSQL's text parser treats every non-ASCII letter as a letter.
if [[ -z $(superuser_sql "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'") ]]; then
    superuser_sql "CREATE DATABASE $DATABASE OWNER $ROLE ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0" \
        >/dev/null || die "could not create the database $DATABASE"
fi
encoding=$(superuser_sql "SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = '$DATABASE'")
[[ $encoding == UTF8 ]] || die "the database $DATABASE has encoding $encoding, not UTF8: drop it and run this again"
if [[ -n $EXTENSION ]]; then
    as_owner "$BINDIR/psql" -X -q -t -A -v ON_ERROR_STOP=1 "${SOCKET_ARGS[@]}" -d "$DATABASE" \
        -c "CREATE EXTENSION IF NOT EXISTS $EXTENSION" >/dev/null || die "could not create the extension $EXTENSION"
fi

can_login "$PORT" || die "the role $ROLE cannot log in to $HOST:$PORT/$DATABASE with its password"
url "$PORT"
