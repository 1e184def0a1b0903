#!/usr/bin/env bash
# Render a traceq HTML report in headless Chromium with networking disabled and save a PNG, to check by eye
# that the self-contained page draws offline.
# Usage: scripts/screenshot_html.sh REPORT.html OUT.png   (needs Debian's `chromium`: apt-get install chromium)
set -euo pipefail
page=$(realpath "$1"); out=$(realpath -m "$2")
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" \
  --proxy-server="127.0.0.1:9" --proxy-bypass-list="<-loopback>" \
  --window-size=1200,2400 --screenshot="$out" "file://$page" 2>/dev/null
test -s "$out" && echo "wrote $out"
