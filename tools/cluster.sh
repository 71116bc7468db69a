#!/usr/bin/env bash
# cluster.sh: run a psdb cluster on one machine, the way the seeds'
# Scheduler.sh / Server.sh / Worker.sh do: one ps-scheduler, N ps-servers
# and M workers, every process configured by the PS_* variables
# (rpc/control/node_config.h) and writing its own log file.
#
#   tools/cluster.sh start --servers 2 --workers 2 [--dir ./psdb-cluster]
#                          [--bin ./build/tools] [--port 7100]
#                          [--server_args "--sync_mode=sync"]
#                          [-- WORKER COMMAND ...]
#   tools/cluster.sh status [--dir DIR]
#   tools/cluster.sh stop   [--dir DIR] [--grace 30]
#
# Layout under --dir: logs/scheduler.log, logs/server_<i>.log,
# logs/worker_<i>.log, data/server-<i>/ (each server's store), pids.
# Server i runs with PS_NODE_ID=server-<i>, worker i with
# PS_NODE_ID=worker-<i> and PS_WORKER_RANK=<i>; workers get the scheduler as
# PS_SCHED_HOST/PS_SCHED_PORT and PSDB_URL=scheduler:HOST:PORT. With
# --workers 0 the cluster is serving-only (servers answer pulls for
# inference). `start` returns once the scheduler logs "cluster ready" (or
# fails naming the log to read); `stop` sends SIGTERM to every process
# (workers, then servers, then the scheduler), waits up to --grace seconds,
# then SIGKILLs what is left.
set -euo pipefail

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

cmd=${1:-}; [[ -n "$cmd" ]] || usage; shift
dir=./psdb-cluster; bin=""; port=7100; servers=1; workers=0; grace=30
server_args=""; worker_cmd=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --grace) grace=$2; shift 2 ;;
    --server_args) server_args=$2; shift 2 ;;
    --) shift; worker_cmd=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "cluster.sh: unknown argument '$1'" >&2; usage ;;
  esac
done

find_bin() {  # $1 = binary name
  if [[ -n "$bin" ]]; then echo "$bin/$1"; return; fi
  local here; here=$(cd "$(dirname "$0")" && pwd)
  for d in "$here/../build/tools" "$here"; do
    [[ -x "$d/$1" ]] && { echo "$d/$1"; return; }
  done
  command -v "$1" || { echo "cluster.sh: cannot find $1 (use --bin)" >&2; exit 1; }
}

alive() { kill -0 "$1" 2>/dev/null; }

start() {
  [[ "$servers" =~ ^[1-9][0-9]*$ ]] || { echo "cluster.sh: --servers must be >= 1" >&2; exit 2; }
  [[ "$workers" =~ ^[0-9]+$ ]] || { echo "cluster.sh: --workers must be >= 0" >&2; exit 2; }
  if [[ "$workers" -gt 0 && ${#worker_cmd[@]} -eq 0 ]]; then
    echo "cluster.sh: --workers $workers needs the worker command after --" >&2; exit 2
  fi
  if [[ -f "$dir/pids" ]]; then
    echo "cluster.sh: $dir/pids exists; run 'cluster.sh stop --dir $dir' first" >&2; exit 1
  fi
  local sched server
  sched=$(find_bin ps-scheduler); server=$(find_bin ps-server)
  mkdir -p "$dir/logs" "$dir/data"
  : > "$dir/pids"
  export PS_SERVER_NUM=$servers PS_WORKER_NUM=$workers
  export PS_SCHED_HOST=127.0.0.1 PS_SCHED_PORT=$port
  PS_ROLE=scheduler "$sched" > "$dir/logs/scheduler.log" 2>&1 &
  echo "scheduler $!" >> "$dir/pids"
  for ((i = 0; i < servers; i++)); do
    # shellcheck disable=SC2086
    PS_ROLE=server PS_NODE_ID=server-$i "$server" \
      --data_dir="$dir/data/server-$i" $server_args \
      > "$dir/logs/server_$i.log" 2>&1 &
    echo "server-$i $!" >> "$dir/pids"
  done
  for ((i = 0; i < workers; i++)); do
    PS_ROLE=worker PS_NODE_ID=worker-$i PS_WORKER_RANK=$i \
      PSDB_URL="scheduler:127.0.0.1:$port" "${worker_cmd[@]}" \
      > "$dir/logs/worker_$i.log" 2>&1 &
    echo "worker-$i $!" >> "$dir/pids"
  done
  # Wait for the cluster to form (or a process to die).
  for ((t = 0; t < 600; t++)); do
    local serving=0
    for ((i = 0; i < servers; i++)); do
      grep -q "^listening on" "$dir/logs/server_$i.log" 2>/dev/null && serving=$((serving + 1))
    done
    if [[ $serving -eq $servers ]] && grep -q "cluster ready" "$dir/logs/scheduler.log" 2>/dev/null; then
      grep -E "assigned rank|cluster ready" "$dir/logs/scheduler.log"
      echo "cluster.sh: running; logs in $dir/logs, stop with: $0 stop --dir $dir"
      return 0
    fi
    while read -r name pid; do
      if ! alive "$pid" && [[ $name != worker-* ]]; then
        echo "cluster.sh: $name exited during start; see its log in $dir/logs:" >&2
        tail -n 5 "$dir/logs/${name/-/_}.log" 2>/dev/null >&2 || true
        stop; exit 1
      fi
    done < "$dir/pids"
    sleep 0.2
  done
  echo "cluster.sh: cluster not ready after 120 s; see $dir/logs" >&2
  stop; exit 1
}

status() {
  [[ -f "$dir/pids" ]] || { echo "cluster.sh: no cluster in $dir"; return 1; }
  while read -r name pid; do
    if alive "$pid"; then echo "$name pid $pid running"; else echo "$name pid $pid exited"; fi
  done < "$dir/pids"
}

stop() {
  [[ -f "$dir/pids" ]] || { echo "cluster.sh: no cluster in $dir"; return 0; }
  # Workers first, then servers (they flush their stores), scheduler last.
  for role in worker server scheduler; do
    local pids=()
    while read -r name pid; do
      [[ $name == "$role"* ]] && alive "$pid" && { kill -TERM "$pid" 2>/dev/null || true; pids+=("$pid"); }
    done < "$dir/pids"
    for pid in "${pids[@]}"; do
      for ((t = 0; t < grace * 10; t++)); do alive "$pid" || break; sleep 0.1; done
      if alive "$pid"; then
        echo "cluster.sh: pid $pid did not stop in ${grace}s; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
  done
  rm -f "$dir/pids"
  echo "cluster.sh: stopped"
}

case "$cmd" in
  start) start ;;
  status) status ;;
  stop) stop ;;
  *) usage ;;
esac
