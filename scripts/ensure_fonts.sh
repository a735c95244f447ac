#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Make a font that draws Chinese available for the OCR tests, which render their scanned pages
# from text at test time (mx_rag.testing.scans.find_font looks for it).
#
# 1. A known CJK font file present: nothing to do.
# 2. Otherwise install Debian's fonts-wqy-microhei with apt-get (root only, about 5 MB).
#
# When no font can be had it says so and exits 0: the OCR tests that need Chinese then skip with
# the reason, and every other test still runs.
set -euo pipefail

log() { echo "ensure_fonts: $*" >&2; }

for font in /usr/share/fonts/truetype/wqy/wqy-microhei.ttc /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc; do
    [[ -f "$font" ]] && exit 0
done
if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    log "no CJK font and cannot install one (not root, or no apt-get): Chinese OCR tests skip"
    exit 0
fi
log "installing Debian's fonts-wqy-microhei"
if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y -q fonts-wqy-microhei >/dev/null 2>&1 \
       || { apt-get update -q >/dev/null 2>&1 \
            && DEBIAN_FRONTEND=noninteractive apt-get install -y -q fonts-wqy-microhei >/dev/null 2>&1; }; }; then
    log "apt-get could not install fonts-wqy-microhei: Chinese OCR tests skip"
fi
exit 0
