#!/usr/bin/env bash
# Start a one-host Slurm cluster on loopback (docs/slurm.md#ci-cluster): munged, slurmctld and slurmd
# from Debian's packages (slurm-wlm, munge), installed when missing. Idempotent: a running cluster that
# answers `sinfo` is left alone. The node offers every CPU of the machine as two "GPU hosts" would be
# modelled by dsv4h's tests: tasks, not GPUs (no gres), so a two-node service runs as two tasks here.
set -euo pipefail
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm slurm-client munge >/dev/null
fi
if pgrep -x slurmd >/dev/null && pgrep -x slurmctld >/dev/null \
        && sinfo -h -o '%T' 2>/dev/null | grep -qE 'idle|mix|alloc'; then
    echo "slurm: already running"; exit 0
fi
HOST="$(hostname -s)"
CPUS="$(nproc)"
MEM_MB="$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))"
STATE=/var/spool/slurmctld
mkdir -p /etc/slurm "$STATE" /var/spool/slurmd /var/log/slurm /run/munge
chown slurm:slurm "$STATE" /var/log/slurm
chown munge:munge /run/munge
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
cat > /etc/slurm/slurm.conf <<CONF
# Written by dsv4h's .ci/start_slurm.sh: one host, loopback only.
ClusterName=dsv4h-ci
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=slurm
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
StateSaveLocation=${STATE}
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=10
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=600
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM_MB} State=UNKNOWN
PartitionName=debug Nodes=${HOST} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
for _ in $(seq 60); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qE 'idle|mix|alloc'; then echo "slurm: one-host cluster up ($HOST, $CPUS CPUs)"; exit 0; fi
    scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true
    sleep 1
done
echo "slurm: the cluster did not come up; logs follow" >&2
tail -n 30 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
exit 1
