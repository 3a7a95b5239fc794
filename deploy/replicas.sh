#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Starts N `mambacpp serve` replicas sharing one prefix-state folder, then HAProxy in front of
# them (deploy/haproxy.cfg.in), and runs until SIGINT or SIGTERM, when it stops HAProxy and then
# the replicas (SIGTERM: each finishes the requests in flight first). See deploy/README.md.
#
#   deploy/replicas.sh -m MODEL [-n 2] [--port 8080] [--base-port 8081] [--bind 127.0.0.1]
#                      [--replica-ports P1,P2,...] [--state-dir DIR] [--run-dir DIR]
#                      [--check-inter 2s] [--server-maxconn 32] [-- serve flags...]
# Replica i listens on base-port + i, or on the i-th of --replica-ports (which then sets N).
#
# MAMBACPP names the binary (default: mambacpp on PATH, else build/mambacpp next to this folder).
# The run folder holds haproxy.cfg, replica-<i>.pid, haproxy.pid and each process's log.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
model="" replicas=2 port=8080 base_port=8081 replica_ports="" bind=127.0.0.1 state_dir="" run_dir="" check_inter=2s
server_maxconn=32
serve_flags=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -m|--model) model=$2; shift 2 ;;
    -n|--replicas) replicas=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --base-port) base_port=$2; shift 2 ;;
    --replica-ports) replica_ports=$2; shift 2 ;;
    --bind) bind=$2; shift 2 ;;
    --state-dir) state_dir=$2; shift 2 ;;
    --run-dir) run_dir=$2; shift 2 ;;
    --check-inter) check_inter=$2; shift 2 ;;
    --server-maxconn) server_maxconn=$2; shift 2 ;;
    --) shift; serve_flags=("$@"); break ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "replicas.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -n "$replica_ports" ]]; then
  IFS=, read -r -a ports <<<"$replica_ports"
  replicas=${#ports[@]}
else
  ports=()
  for ((i = 0; i < replicas; i++)); do ports+=($((base_port + i))); done
fi
[[ -n "$model" ]] || { echo "replicas.sh: -m MODEL is required" >&2; exit 2; }
[[ "$replicas" =~ ^[1-9][0-9]*$ ]] || { echo "replicas.sh: -n must be a positive count" >&2; exit 2; }
[[ "$server_maxconn" =~ ^[1-9][0-9]*$ ]] || { echo "replicas.sh: --server-maxconn must be a positive count" >&2; exit 2; }
command -v haproxy >/dev/null || { echo "replicas.sh: haproxy is not installed (apt-get install haproxy)" >&2; exit 2; }
if [[ -z "${MAMBACPP:-}" ]]; then
  MAMBACPP=$(command -v mambacpp || echo "$here/../build/mambacpp")
fi
run_dir=${run_dir:-$(mktemp -d /tmp/mambacpp-replicas.XXXXXX)}
state_dir=${state_dir:-$run_dir/states}
mkdir -p "$run_dir" "$state_dir"

pids=()
stop_all() {
  trap - INT TERM EXIT
  # HAProxy first, so no new request reaches a replica that is draining.
  if [[ -f "$run_dir/haproxy.pid" ]]; then kill -TERM "$(cat "$run_dir/haproxy.pid")" 2>/dev/null || true; fi
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -f "$run_dir"/*.pid
  echo "replicas.sh: stopped"
}
trap 'stop_all; exit 0' INT TERM
trap stop_all EXIT

# HAProxy reaches the replicas from the address they listen on (from loopback when they listen on
# every address): the replicas believe its X-Forwarded-For, and only its.
proxy_address=$bind
[[ "$proxy_address" == "0.0.0.0" ]] && proxy_address=127.0.0.1
[[ "$proxy_address" == "::" ]] && proxy_address=::1
servers=""
for ((i = 0; i < replicas; i++)); do
  replica_port=${ports[i]}
  # shellcheck disable=SC2086 # MAMBACPP may be a command with arguments (an emulator)
  $MAMBACPP serve -m "$model" --host "$bind" --port "$replica_port" --trusted-proxy "$proxy_address" \
    --slot-save-path "$state_dir" --slot-persist "${serve_flags[@]}" \
    >"$run_dir/replica-$i.log" 2>&1 &
  pids+=($!)
  echo $! >"$run_dir/replica-$i.pid"
  servers+="    server replica-$i $bind:$replica_port"$'\n'
done

sed -e "s|@BIND@|$bind|" -e "s|@PORT@|$port|" -e "s|@CHECK_INTER@|$check_inter|" \
  -e "s|@SERVER_MAXCONN@|$server_maxconn|g" \
  "$here/haproxy.cfg.in" | awk -v servers="$servers" '$0 == "@SERVERS@" { printf "%s", servers; next } { print }' \
  >"$run_dir/haproxy.cfg"
haproxy -c -q -f "$run_dir/haproxy.cfg"
# -db: stay in the foreground, so this script owns the process and its exit.
haproxy -db -f "$run_dir/haproxy.cfg" >"$run_dir/haproxy.log" 2>&1 &
pids+=($!)
echo $! >"$run_dir/haproxy.pid"
echo "replicas.sh: $replicas replicas on $bind ports ${ports[*]}, HAProxy on $bind:$port"
echo "replicas.sh: states in $state_dir, logs and pids in $run_dir"

# "ready" once HAProxy has every replica in rotation (each loaded and passing its health checks).
url_host=$bind
[[ "$url_host" == "0.0.0.0" ]] && url_host=127.0.0.1
while true; do
  # A plain HTTP/1.0 GET over bash's /dev/tcp, so the script needs no HTTP client.
  up=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2" && printf "GET /haproxy/replicas-up HTTP/1.0\r\n\r\n" >&3 &&
       tail -n 1 <&3' _ "$url_host" "$port" 2>/dev/null || true)
  [[ "$up" == "$replicas" ]] && break
  if ! kill -0 "$(cat "$run_dir/haproxy.pid")" 2>/dev/null; then
    echo "replicas.sh: haproxy exited (see $run_dir/haproxy.log)" >&2
    exit 1
  fi
  sleep 0.2
done
echo "replicas.sh: ready, all $replicas replicas in rotation"

# Runs until a signal; a replica that dies stays down (HAProxy routes around it) until restarted.
while true; do
  sleep 1 &
  wait $! || true
  if ! kill -0 "$(cat "$run_dir/haproxy.pid")" 2>/dev/null; then
    echo "replicas.sh: haproxy exited (see $run_dir/haproxy.log)" >&2
    exit 1
  fi
done
