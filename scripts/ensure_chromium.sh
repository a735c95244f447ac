#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Make Debian's headless Chromium available for the web app's browser tests and print its path.
#
#   chromium=$(scripts/ensure_chromium.sh) && MXRAG_TEST_CHROMIUM=$chromium pytest tests/webapp
#
# 1. MXRAG_TEST_CHROMIUM set: print it, nothing else.
# 2. /usr/bin/chromium present: print it.
# 3. Otherwise install the Debian packages chromium and chromium-driver with apt-get (root only;
#    Playwright drives this browser through executable_path, so nothing is downloaded at run time).
#
# Only the path goes to stdout. When no browser can be had, it prints nothing and exits 0: the
# browser tests then skip with the reason, and every other test still runs.
set -euo pipefail

log() { echo "ensure_chromium: $*" >&2; }

if [[ -n "${MXRAG_TEST_CHROMIUM:-}" ]]; then
    echo "$MXRAG_TEST_CHROMIUM"; exit 0
fi
if [[ ! -x /usr/bin/chromium ]]; then
    if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
        log "no /usr/bin/chromium and cannot install it (not root, or no apt-get): browser tests skip"
        exit 0
    fi
    log "installing Debian's chromium and chromium-driver"
    if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
           || { apt-get update -q >/dev/null 2>&1 \
                && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; }; }; then
        log "apt-get could not install chromium: browser tests skip"
        exit 0
    fi
fi
echo /usr/bin/chromium
