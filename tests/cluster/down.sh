#!/usr/bin/env bash
# Stops what up.sh started and removes its state; with a real node, also undoes the node's
# changes to the host: processes (daemons, containerd shims, every container), mounts
# (kubelet root dir, tmpfs volumes, overlay rootfs, pod network namespaces), cgroups
# (kubepods), network devices (cni0, veths), iptables chains (KUBE-*, CNI-*) and the empty
# tables they leave, conntrack entries of pod/Service addresses, host paths
# created by the kubelet/containerd, and the kernel settings saved by up.sh.
#
# Idempotent, and works after a crash: beyond the pid files, it finds our daemons by the
# cluster dir in their command line, and containers by their cgroups.
#
# Usage: down.sh [--keep-lock] [--node-only]
#   --keep-lock  the caller (up.sh) holds the cluster lock already
#   --node-only  stop the node only, keep the control plane and its state
set -uo pipefail
DIR="${SWITCHBOARD_CLUSTER_DIR:-/tmp/switchboard-cluster}"
NODE="$DIR/node"
[ -d "$DIR" ] || exit 0
KEEP_LOCK="" NODE_ONLY=""
for a in "$@"; do
  case "$a" in
    --keep-lock) KEEP_LOCK=1 ;;
    --node-only) NODE_ONLY=1 ;;
    *) echo "usage: $0 [--keep-lock] [--node-only]" >&2; exit 2 ;;
  esac
done
if [ -z "$KEEP_LOCK" ]; then
  exec 9>"$DIR/.lock"
  flock 9
fi

log() { echo "[cluster/down] $*" >&2; }

# running PID: exists and is not a zombie (stopped daemons stay zombies ~2 s until reaped).
running() {
  local st
  st="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)"
  [ -n "$st" ] && [ "$st" != Z ]
}
# ours PID: its command line names the cluster dir (guards against a reused pid).
ours() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$DIR/"; }

# stop NAME [TENTHS]: TERM the process group of NAME.pid, KILL it after TENTHS/10 s.
stop() {
  local f="$DIR/$1.pid" pid
  [ -f "$f" ] || return 0
  pid="$(cat "$f")"
  if [ -n "$pid" ] && running "$pid" && ours "$pid"; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 "${2:-50}"); do running "$pid" || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$f"
}

# stray NAMES...: pids of processes with one of these names whose command line names the
# cluster dir (left behind by a crash, or pid files lost). A name matches the process name
# (which the kernel cuts to 15 characters) or, for a script, the script run by bash.
stray() {
  local p n comm arg1
  for p in /proc/[0-9]*; do
    p="${p#/proc/}"
    [ "$p" = $$ ] && continue
    comm="$(cat "/proc/$p/comm" 2>/dev/null)" || continue
    arg1=""
    [ "$comm" = bash ] && arg1="$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | sed -n 2p)"
    for n in "$@"; do
      if [ "$comm" = "${n:0:15}" ] || [ "${arg1##*/}" = "$n" ]; then
        ours "$p" && running "$p" && echo "$p"
        break
      fi
    done
  done
}
kill_stray() { # NAMES...
  local pids
  pids="$(stray "$@")"
  [ -n "$pids" ] || return 0
  kill -TERM $pids 2>/dev/null
  for _ in $(seq 1 30); do pids="$(stray "$@")"; [ -n "$pids" ] || return 0; sleep 0.1; done
  kill -KILL $pids 2>/dev/null
}

# Mount points under a prefix, deepest first.
mounts_under() { awk -v p="$1" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r -u; }
umount_under() {
  local m
  for _ in 1 2 3 4 5; do
    [ -n "$(mounts_under "$1")" ] || return 0
    for m in $(mounts_under "$1"); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
  done
}

kubepods_cgroups() { ls -d /sys/fs/cgroup/*/kubepods 2>/dev/null; }

# clean_iptables iptables|ip6tables: remove the KUBE-* and CNI-* chains and the rules that
# jump to them from other chains, in one iptables-restore transaction per table.
clean_iptables() {
  local t rules chains
  command -v "$1-save" >/dev/null || return 0
  for t in filter nat mangle raw; do
    rules="$("$1-save" -t "$t" 2>/dev/null)" || continue
    chains="$(grep -oE '^:(KUBE-|CNI-)[^ ]+' <<<"$rules" | cut -c2-)"
    [ -n "$chains" ] || grep -qE -- '-j (KUBE-|CNI-)' <<<"$rules" || continue
    {
      echo "*$t"
      grep -E '^-A ' <<<"$rules" | grep -vE '^-A (KUBE-|CNI-)' | grep -E -- ' -(j|g) (KUBE-|CNI-)' | sed 's/^-A /-D /'
      for c in $chains; do echo "-F $c"; done
      for c in $chains; do echo "-X $c"; done
      echo COMMIT
    } | "$1-restore" --noflush || log "$1: could not remove all chains of table $t"
  done
}

node_down() {
  local pids c p
  # Daemons first, so nothing restarts containers or rewrites rules while we clean up.
  for name in dns-feeder dnsmasq kube-proxy kube-scheduler kubelet; do stop "$name"; done
  kill_stray kubelet kube-proxy kube-scheduler dnsmasq dns-feeder.sh

  # Every container process: they live in the kubepods cgroups (not children of anything
  # we stop: the shims run in their own process groups).
  for _ in $(seq 1 50); do
    c="$(kubepods_cgroups)"
    [ -n "$c" ] || break
    # shellcheck disable=SC2086 # one path per line, no spaces
    pids="$(find $c -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)"
    [ -n "$pids" ] || break
    kill -KILL $pids 2>/dev/null
    sleep 0.1
  done
  # The shims (their -address is our socket), then containerd.
  kill_stray containerd-shim containerd-shim-runc-v2
  stop containerd
  kill_stray containerd

  # Mounts: overlay rootfs, shm, kubelet root dir and tmpfs volumes, then the pod network
  # namespaces our containerd created (those not there before up.sh).
  umount_under "$NODE/"
  for p in /run/netns/*; do
    [ -e "$p" ] || continue
    grep -qxF "${p##*/}" "$NODE/netns.before" 2>/dev/null && continue
    umount "$p" 2>/dev/null || umount -l "$p" 2>/dev/null
    rm -f "$p"
  done

  # Cgroups: deepest first; a dir whose last task is still exiting refuses for a moment.
  for _ in $(seq 1 30); do
    c="$(kubepods_cgroups)"
    [ -n "$c" ] || break
    find $c -depth -type d -exec rmdir {} + 2>/dev/null
    [ -n "$(kubepods_cgroups)" ] || break
    sleep 0.1
  done
  [ -z "$(kubepods_cgroups)" ] || log "could not remove: $(kubepods_cgroups | tr '\n' ' ')"

  # Network devices: veths whose pod netns is gone disappear by themselves; any left on the
  # bridge, and the bridge.
  if [ -e /sys/class/net/cni0 ]; then
    for p in /sys/class/net/cni0/brif/*; do [ -e "$p" ] && ip link del "${p##*/}" 2>/dev/null; done
    ip link del cni0 2>/dev/null
  fi

  clean_iptables iptables
  clean_iptables ip6tables
  # iptables-nft leaves the tables it created (empty, policy ACCEPT): drop those that did
  # not exist before up.sh and hold nothing now.
  if command -v nft >/dev/null && [ -f "$NODE/nft-tables.before" ]; then
    nft list tables 2>/dev/null | while read -r _ fam t; do
      grep -qxF "table $fam $t" "$NODE/nft-tables.before" && continue
      case "$fam" in ip) save=iptables-save ;; ip6) save=ip6tables-save ;; *) continue ;; esac
      "$save" -t "$t" 2>/dev/null | grep -qE '^(-A |:[^ ]+ - )' && continue
      nft delete table "$fam" "$t" 2>/dev/null
    done
  fi

  # Connection tracking: NAT state of pod and Service addresses would outlive them.
  if command -v conntrack >/dev/null && [ -f "$NODE/env" ]; then
    pod_subnet="$(sed -n 's/^POD_SUBNET=//p' "$NODE/env")"
    service_range="$(sed -n 's/^SERVICE_RANGE=//p' "$NODE/env")"
    for f in "-s $pod_subnet" "-d $pod_subnet" "-d $service_range"; do
      conntrack -D $f >/dev/null 2>&1
    done
  fi

  # Host paths the kubelet/containerd/libcni created (recorded by up.sh), then the saved
  # kernel settings.
  if [ -f "$NODE/created-paths" ]; then
    while read -r p; do
      [ -n "$p" ] || continue
      umount_under "$p/"
      rm -rf "$p"
    done <"$NODE/created-paths"
  fi
  if [ -f "$NODE/sysctl.saved" ]; then
    while IFS='=' read -r k v; do
      p="/proc/sys/$(echo "$k" | tr . /)"
      [ -w "$p" ] && echo "$v" >"$p" 2>/dev/null || log "could not restore $k=$v"
    done <"$NODE/sysctl.saved"
  fi
  # Nothing may stay mounted below what we delete.
  umount_under "$NODE/"
  rm -rf "$NODE"
}

# The node, when one was started (its dir exists from the first step of starting it).
if [ -d "$NODE" ]; then
  node_down
  log "node stopped"
fi
[ -n "$NODE_ONLY" ] && exit 0

# kube-apiserver may ignore SIGTERM for 45 s; its state is disposable: KILL after 1 s.
stop kube-controller-manager
stop kube-apiserver 10
stop etcd
kill_stray kube-controller-manager kube-apiserver etcd
find "$DIR" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
log "stopped"
