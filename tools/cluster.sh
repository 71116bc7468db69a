#!/usr/bin/env bash
# cluster.sh: run a psdb cluster on one machine, the way the seeds'
# Scheduler.sh / Server.sh / Worker.sh do: one ps-scheduler, N ps-servers
# and M workers, every process configured by the PS_* variables
# (rpc/control/node_config.h) and writing its own log file.
#
#   tools/cluster.sh start --servers 2 --workers 2 [--dir ./psdb-cluster]
#                          [--bin ./build/tools] [--port 7100]
#                          [--server_args "--sync_mode=sync"]
#                          [--etcd [--etcd_port P] [--cluster NAME]]
#                          [-- WORKER COMMAND ...]
#   tools/cluster.sh status [--dir DIR]
#   tools/cluster.sh stop   [--dir DIR] [--grace 30]
#
# --etcd: the cluster state in a local etcd (Debian's /usr/bin/etcd, data in
# DIR/etcd, log logs/etcd.log, loopback client port --etcd_port or a free
# one, peer port a free one) and 2 ps-schedulers, on --port and --port+1,
# both with --etcd=127.0.0.1:<client port> --cluster=NAME (default
# "default"; state under /psdb/NAME/), logs logs/scheduler_0.log and
# logs/scheduler_1.log. Servers and workers get
# PS_SCHED_ADDRESSES=127.0.0.1:P,127.0.0.1:P+1 instead of
# PS_SCHED_HOST/PS_SCHED_PORT (workers' PSDB_URL names both).
# `status` lists etcd too; `stop` stops it last.
#
# Layout under --dir: logs/scheduler.log, logs/server_<i>.log,
# logs/worker_<i>.log, data/server-<i>/ (each server's store), pids.
# Server i runs with PS_NODE_ID=server-<i>, worker i with
# PS_NODE_ID=worker-<i> and PS_WORKER_RANK=<i>; workers get the scheduler as
# PS_SCHED_HOST/PS_SCHED_PORT and PSDB_URL=scheduler:HOST:PORT. With
# --workers 0 the cluster is serving-only (servers answer pulls for
# inference). `start` returns once the scheduler logs "cluster ready" (or
# fails naming the log to read); `stop` sends SIGTERM to every process
# (workers, then servers, then the schedulers, then etcd), waits up to
# --grace seconds, then SIGKILLs what is left.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }

cmd=${1:-}; [[ -n "$cmd" ]] || usage; shift
dir=./psdb-cluster; bin=""; port=7100; servers=1; workers=0; grace=30
server_args=""; worker_cmd=(); etcd=0; etcd_port=0; cluster_name=default
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --grace) grace=$2; shift 2 ;;
    --server_args) server_args=$2; shift 2 ;;
    --etcd) etcd=1; shift ;;
    --etcd_port) etcd_port=$2; shift 2 ;;
    --cluster) cluster_name=$2; shift 2 ;;
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

free_port() {  # a free loopback TCP port (the kernel's pick)
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts etcd on loopback and waits until it serves; sets etcd_client.
start_etcd() {
  local etcd_bin peer
  etcd_bin=$(command -v etcd || true)
  [[ -n "$etcd_bin" ]] || { echo "cluster.sh: --etcd needs etcd (Debian: etcd-server)" >&2; exit 1; }
  [[ "$etcd_port" =~ ^[0-9]+$ ]] || { echo "cluster.sh: --etcd_port must be a port number" >&2; exit 2; }
  [[ "$etcd_port" -ne 0 ]] || etcd_port=$(free_port)
  peer=$(free_port)
  while [[ "$peer" -eq "$etcd_port" ]]; do peer=$(free_port); done
  etcd_client=127.0.0.1:$etcd_port
  "$etcd_bin" --name=psdb-local --data-dir="$dir/etcd" \
    --listen-client-urls="http://$etcd_client" \
    --advertise-client-urls="http://$etcd_client" \
    --listen-peer-urls="http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls="http://127.0.0.1:$peer" \
    --initial-cluster="psdb-local=http://127.0.0.1:$peer" \
    --auto-compaction-mode=periodic --auto-compaction-retention=1h \
    > "$dir/logs/etcd.log" 2>&1 &
  local pid=$!
  echo "etcd $pid" >> "$dir/pids"
  for ((t = 0; t < 300; t++)); do
    grep -q "ready to serve client requests" "$dir/logs/etcd.log" 2>/dev/null && {
      echo "cluster.sh: etcd serving on $etcd_client (data in $dir/etcd)"; return 0; }
    alive "$pid" || break
    sleep 0.1
  done
  echo "cluster.sh: etcd did not start; see $dir/logs/etcd.log:" >&2
  tail -n 5 "$dir/logs/etcd.log" >&2 || true
  stop; exit 1
}

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
  local sched_logs=("$dir/logs/scheduler.log")
  if [[ $etcd -eq 1 ]]; then
    start_etcd
    sched_logs=()
    for i in 0 1; do
      PS_ROLE=scheduler PS_SCHED_PORT=$((port + i)) "$sched" \
        --etcd="$etcd_client" --cluster="$cluster_name" \
        > "$dir/logs/scheduler_$i.log" 2>&1 &
      echo "scheduler-$i $!" >> "$dir/pids"
      sched_logs+=("$dir/logs/scheduler_$i.log")
    done
    # Servers and workers know both schedulers, and no single one.
    unset PS_SCHED_HOST PS_SCHED_PORT
    export PS_SCHED_ADDRESSES=127.0.0.1:$port,127.0.0.1:$((port + 1))
  else
    unset PS_SCHED_ADDRESSES
    PS_ROLE=scheduler "$sched" > "$dir/logs/scheduler.log" 2>&1 &
    echo "scheduler $!" >> "$dir/pids"
  fi
  for ((i = 0; i < servers; i++)); do
    # shellcheck disable=SC2086
    PS_ROLE=server PS_NODE_ID=server-$i "$server" \
      --data_dir="$dir/data/server-$i" $server_args \
      > "$dir/logs/server_$i.log" 2>&1 &
    echo "server-$i $!" >> "$dir/pids"
  done
  # Workers' URL names every scheduler (with etcd, both: either may die).
  local url="scheduler:${PS_SCHED_ADDRESSES:-127.0.0.1:$port}"
  for ((i = 0; i < workers; i++)); do
    PS_ROLE=worker PS_NODE_ID=worker-$i PS_WORKER_RANK=$i \
      PSDB_URL="$url" "${worker_cmd[@]}" \
      > "$dir/logs/worker_$i.log" 2>&1 &
    echo "worker-$i $!" >> "$dir/pids"
  done
  # Wait for the cluster to form (or a process to die).
  for ((t = 0; t < 600; t++)); do
    local serving=0
    for ((i = 0; i < servers; i++)); do
      grep -q "^listening on" "$dir/logs/server_$i.log" 2>/dev/null && serving=$((serving + 1))
    done
    local ready_log=""
    for log in "${sched_logs[@]}"; do
      grep -q "cluster ready" "$log" 2>/dev/null && { ready_log=$log; break; }
    done
    if [[ $serving -eq $servers && -n "$ready_log" ]]; then
      grep -E "assigned rank|cluster ready" "$ready_log"
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
  # Workers first, then servers (they flush their stores), then the
  # scheduler(s), etcd last (schedulers may write to it until they stop).
  for role in worker server scheduler etcd; do
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
