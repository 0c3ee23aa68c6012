#!/usr/bin/env bash
# A private one-node Slurm (Debian's slurm-wlm 22.05: slurmctld, slurmd, munge) in a folder of
# its own, for the `slurm` test and for a GPU machine without a cluster. Nothing outside DIR is
# touched: its own munge key and socket, slurm.conf, state, spool, logs, ports.
#
# Usage:
#   scripts/slurm-private.sh start DIR [--gpus N | --gpu-files PATH,...] [--cpus N]
#       starts munged, slurmctld and slurmd as root (the daemons' user), waits until the node is
#       idle, and writes DIR/env (`source DIR/env` sets SLURM_CONF for sbatch, squeue, ...).
#       --gpus N: N fake GPUs, character devices made with mknod under DIR/dev (major 195, as
#       NVIDIA's) listed as gres.conf File= entries: Slurm schedules them and sets
#       CUDA_VISIBLE_DEVICES (a plain file is refused, a count-only GPU takes the node down).
#       --gpu-files: real device files instead (e.g. /dev/nvidia0 on a GPU machine).
#   scripts/slurm-private.sh stop DIR       stops the daemons started there (their own pids only)
#   scripts/slurm-private.sh install        installs slurm-wlm and munge with apt, not letting their
#       packages start the system's daemons (a machine without systemd would fail their postinst)
#   NVFP4_SLURM_BUNDLE=BDIR: use the Slurm and munge packed by scripts/slurm-bundle.sh in BDIR (a
#       machine where the packages cannot be installed) instead of the installed ones.
# Exit status: 0 started/stopped; 77 Slurm or munge is not installed, not root, or a daemon did
# not start (the reason on stderr, the logs in DIR/log); 2 bad usage.
#
# Configuration choices (a container, root, no systemd, no cgroups): SlurmUser=SlurmdUser=root,
# ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, MpiDefault=none,
# JobAcctGatherType=jobacct_gather/none, SelectType=select/cons_tres with CR_Core. No accounting
# daemon: AccountingStorageType=accounting_storage/none, so sacct has nothing; job states are read
# with `scontrol show job` (kept MinJobAge = 300 s after a job ends) and every finished job is
# also a line of DIR/log/jobcomp.txt (JobCompType=jobcomp/filetxt) for people to read.
set -uo pipefail

die() { echo "slurm-private.sh: $*" >&2; exit 2; }
skip() { echo "slurm-private.sh: SKIP: $*" >&2; exit 77; }

# Debian's packages start slurmctld, slurmd and munged from their postinst; a policy-rc.d that
# says no (unless the machine already has one) keeps them to installing files.
install_packages() {
  local sudo_cmd="" made=0
  [[ "$(id -u)" -eq 0 ]] || sudo_cmd=sudo
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo_cmd tee /usr/sbin/policy-rc.d >/dev/null && $sudo_cmd chmod +x /usr/sbin/policy-rc.d && made=1
  fi
  local rc=0
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends slurm-wlm munge || {
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends slurm-wlm munge
  } || rc=$?
  [[ $made -eq 1 ]] && $sudo_cmd rm -f /usr/sbin/policy-rc.d
  return $rc
}

[[ "${1:-}" == install ]] && { install_packages; exit $?; }
[[ $# -ge 2 ]] || die "usage: slurm-private.sh start|stop DIR [options] | install"
action=$1 dir=$2
shift 2

stop() {
  local f pid
  for f in slurmd slurmctld; do
    [[ -f "$dir/run/$f.bgpid" ]] || continue
    pid=$(cat "$dir/run/$f.bgpid")
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    rm -f "$dir/run/$f.bgpid"
  done
  if [[ -f "$dir/munge/munged.pid" ]]; then
    pid=$(cat "$dir/munge/munged.pid")
    kill "$pid" 2>/dev/null
    rm -f "$dir/munge/munged.pid"
  fi
}

case "$action" in
  stop) stop; exit 0 ;;
  start) ;;
  *) die "unknown action '$action' (start or stop)" ;;
esac

gpus=0 gpu_files="" cpus=$(nproc 2>/dev/null || echo 2)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --gpus) gpus=${2:?}; shift 2 ;;
    --gpu-files) gpu_files=${2:?}; shift 2 ;;
    --cpus) cpus=${2:?}; shift 2 ;;
    *) die "unknown option '$1'" ;;
  esac
done
[[ "$gpus" =~ ^[0-9]+$ && "$cpus" =~ ^[1-9][0-9]*$ ]] || die "--gpus and --cpus need whole numbers"

bundle=${NVFP4_SLURM_BUNDLE:-}
if [[ -n "$bundle" ]]; then
  [[ -x "$bundle/bin/slurmctld" ]] || skip "NVFP4_SLURM_BUNDLE=$bundle holds no bundle (scripts/slurm-bundle.sh makes one)"
  bundle=$(cd "$bundle" && pwd)
  export PATH="$bundle/bin:$PATH"
fi
[[ "$(id -u)" -eq 0 ]] || skip "not root: the private slurmd runs jobs as root and mknod needs root"
for p in munged slurmctld slurmd sbatch squeue scontrol scancel; do
  command -v "$p" >/dev/null 2>&1 || skip "$p is not installed (Debian packages slurm-wlm and munge: scripts/install-deps.sh)"
done

dir=$(mkdir -p "$dir" && cd "$dir" && pwd) || die "cannot create $dir"
mkdir -p "$dir"/{state,spool,log,run,munge,dev}
chmod 700 "$dir/munge"
host=$(hostname -s)

# Devices: fake character devices, or the real ones given.
files=()
if [[ -n "$gpu_files" ]]; then
  IFS=, read -r -a files <<< "$gpu_files"
  for f in "${files[@]}"; do [[ -c "$f" ]] || die "$f is not a character device"; done
else
  for (( g = 0; g < gpus; ++g )); do
    [[ -c "$dir/dev/nvidia$g" ]] || mknod "$dir/dev/nvidia$g" c 195 "$g" || skip "mknod failed (no CAP_MKNOD?)"
    files+=("$dir/dev/nvidia$g")
  done
fi

# Ports of their own, away from a real Slurm (6817/6818) and from other private ones.
port=$(( 20000 + ($$ % 5000) * 2 ))
while ss -ltn 2>/dev/null | grep -qE ":($port|$((port + 1)))\b"; do port=$(( port + 2 )); done

head -c 1024 /dev/urandom > "$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"
munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" --pid-file="$dir/munge/munged.pid" \
  --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" --force ||
  { stop; skip "munged did not start (see $dir/munge/munged.log)"; }

gres=""
[[ ${#files[@]} -gt 0 ]] && gres="Gres=gpu:${#files[@]}"
cat > "$dir/slurm.conf" <<EOF
# A private one-node cluster made by scripts/slurm-private.sh.
ClusterName=nvfp4private
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$(( port + 1 ))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
GresTypes=gpu
${bundle:+PluginDir=$bundle/plugins}
ReturnToService=2
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 $gres State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
{
  echo "AutoDetect=off"
  for f in "${files[@]}"; do echo "NodeName=$host Name=gpu File=$f"; done
} > "$dir/gres.conf"
echo "export SLURM_CONF=$dir/slurm.conf" > "$dir/env"
[[ -n "$bundle" ]] && echo "export PATH=$bundle/bin:\$PATH" >> "$dir/env"
export SLURM_CONF="$dir/slurm.conf"

slurmctld -D -c -f "$SLURM_CONF" > "$dir/log/slurmctld.out" 2>&1 &
echo $! > "$dir/run/slurmctld.bgpid"
start_slurmd() {
  slurmd -D -f "$SLURM_CONF" ${bundle:+-d "$bundle/bin/slurmstepd"} > "$dir/log/slurmd.out" 2>&1 &
  echo $! > "$dir/run/slurmd.bgpid"
}
start_slurmd
# slurmd initialises a cgroup plugin even with proctrack/linuxproc and task/none; on a cgroup v2
# machine whose hierarchy it may not write (a VM or container's), cgroup/v2 fails its init and
# slurmd exits. cgroup/v1's init touches nothing, and nothing here uses cgroups after it.
cgroup_retry=1
for _ in $(seq 150); do
  state=$(sinfo -h -N -o %t 2>/dev/null | head -1)
  [[ "$state" == idle ]] && break
  if ! kill -0 "$(cat "$dir/run/slurmd.bgpid")" 2>/dev/null && [[ $cgroup_retry -eq 1 ]] &&
     grep -q "cgroup" "$dir/log/slurmd.out"; then
    cgroup_retry=0
    echo "slurm-private.sh: slurmd could not initialise cgroup/v2 here; again with CgroupPlugin=cgroup/v1" >&2
    echo "CgroupPlugin=cgroup/v1" > "$dir/cgroup.conf"
    start_slurmd
    continue
  fi
  for f in slurmctld slurmd; do
    kill -0 "$(cat "$dir/run/$f.bgpid")" 2>/dev/null ||
      { tail -5 "$dir/log/$f.out" >&2; stop; skip "$f exited at start (see $dir/log/$f.out)"; }
  done
  sleep 0.2
done
if [[ "$state" != idle ]]; then
  tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2
  stop
  skip "the node did not come up (state '${state:-none}' after 30 s; see $dir/log)"
fi
echo "slurm-private.sh: node $host up, $cpus CPU(s), ${#files[@]} GPU(s); source $dir/env"
