#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine, private to one test:
# munged, slurmctld and slurmd with their own key, sockets, ports, state and
# logs under DIR, started and stopped by PID (no systemd, no /etc/slurm).
#
#   cluster.sh start DIR   # prints `export SLURM_CONF=DIR/slurm.conf` once the node is idle
#   cluster.sh stop DIR    # kills the daemons it started (by the PIDs in DIR)
#
# Needs root (slurmd starts jobs as their users) and Debian's slurmctld,
# slurmd, slurm-client and munge. proctrack/linuxproc and task/affinity: no
# cgroups needed. A CPU count equal to this machine's, so that srun -n2 gets
# both cores.
set -euo pipefail
cmd="${1:?usage: cluster.sh start|stop DIR}"
dir="$(mkdir -p "${2:?usage: cluster.sh start|stop DIR}" && cd "$2" && pwd)"

stop() {
  for name in slurmd slurmctld munged; do
    [ -f "$dir/$name.pid" ] || continue
    pid="$(cat "$dir/$name.pid")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/$name.pid"
  done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() {
  for tool in munged slurmctld slurmd sinfo; do
    command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || {
      echo "error: cluster.sh: $tool not found; expected Debian's munge, slurmctld, slurmd and slurm-client (scripts/install-deps.sh)" >&2; exit 2; }
  done
  [ "$(id -u)" -eq 0 ] || { echo "error: cluster.sh: slurmd needs root (it starts jobs as their users)" >&2; exit 2; }
  stop
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 700 "$dir/munge"
  # munge: a fresh key, its socket under DIR.
  head -c 1024 /dev/urandom > "$dir/munge/munge.key"
  chmod 400 "$dir/munge/munge.key"
  /usr/sbin/munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/munge.seed"
  local host cpus memory
  host="$(hostname -s)"
  cpus="$(nproc --all)"
  memory="$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))"
  cat > "$dir/slurm.conf" <<CONF
ClusterName=trainyard-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=30
NodeName=$host CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$dir/slurm.conf"
  /usr/sbin/slurmctld -f "$SLURM_CONF" -i
  /usr/sbin/slurmd -f "$SLURM_CONF"
  for _ in $(seq 300); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qx idle; then
      echo "export SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.2
  done
  echo "error: cluster.sh: the node did not become idle within 60 s; see $dir/slurmctld.log and $dir/slurmd.log" >&2
  tail -5 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
  stop
  exit 1
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) echo "error: cluster.sh: unknown command '$cmd'; expected start or stop" >&2; exit 2 ;;
esac
