#!/usr/bin/env bash
# Keeps the cluster DNS in step with the Services: writes one hosts line per Service with a
# ClusterIP, `<clusterIP> <svc>.<ns>.svc.cluster.local`, into a file of dnsmasq's --hostsdir
# (dnsmasq re-reads it on change). Started by up.sh with SWITCHBOARD_REAL_NODE=1.
#
# It lists the Services, then watches them; every watch event triggers a fresh list (simple,
# always complete, cheap at test scale), so a new Service resolves well under a second
# after it is created. Headless and ExternalName Services get no record.
#
# Usage: dns-feeder.sh API_URL TOKEN_FILE HOSTS_FILE
set -uo pipefail
API="$1"
HDR="Authorization: Bearer $(cat "$2")"
OUT="$3"
# Written beside the hosts dir, not in it (dnsmasq would read the half-written file), then
# renamed into place (same file system: atomic).
TMP="$(dirname "$(dirname "$OUT")")/.dns-hosts.tmp"

# sync: rewrites the hosts file if the Services changed; prints the list's resourceVersion.
sync() {
  local json
  json="$(curl -sfk --max-time 10 -H "$HDR" "$API/api/v1/services")" || return 1
  jq -r '.items[]
    | select(.spec.clusterIP != null and .spec.clusterIP != "" and .spec.clusterIP != "None")
    | "\(.spec.clusterIP) \(.metadata.name).\(.metadata.namespace).svc.cluster.local"' \
    <<<"$json" | sort >"$TMP" || return 1
  if cmp -s "$TMP" "$OUT"; then
    rm -f "$TMP"
  else
    chmod 644 "$TMP"
    mv -f "$TMP" "$OUT"
  fi
  jq -r .metadata.resourceVersion <<<"$json"
}

while :; do
  if rv="$(sync)"; then
    # The server ends the watch after timeoutSeconds (or on a 410 Gone); then list again.
    curl -sfkN --max-time 330 -H "$HDR" \
      "$API/api/v1/services?watch=1&resourceVersion=$rv&timeoutSeconds=300" |
      while read -r _; do sync >/dev/null; done
  fi
  sleep 1
done
