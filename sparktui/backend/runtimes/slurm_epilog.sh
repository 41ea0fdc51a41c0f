#!/bin/sh
# sparktui's Slurm job epilog: removes the containers a job left on this node.
#
# Why: Slurm does not see inside Docker. sparktui's Slurm runtime starts each rank as a
# `docker run` step labelled sparktui.slurm.job=<the job's id>; when the step is killed
# (scancel, a time limit, a lost node: SIGKILL to the `docker run` client), the container
# itself keeps running and holds the node's GPUs. At the end of every job slurmd runs this
# script as root on each of the job's nodes, and it force-removes every container on this
# node's Docker engine that carries the ending job's label. Containers of other jobs, and
# containers sparktui did not start, are never touched.
#
# Install (on every compute node, by an operator):
#   install -m 0755 slurm_epilog.sh /etc/slurm/sparktui_epilog.sh
#   and in slurm.conf:  Epilog=/etc/slurm/sparktui_epilog.sh
#   (an existing Epilog can call this script instead), then `scontrol reconfigure`.
# The script is shipped in the sparktui package: sparktui/backend/runtimes/slurm_epilog.sh
# (python3 -c 'import sparktui.backend.runtimes as r, os; print(os.path.dirname(r.__file__))').
#
# Exit status: 0 when nothing of the job is left (also on a node without docker or without
# an engine's socket, or for a job that ran no container); 1 when a labelled container could
# not be removed: Slurm then drains the node ("Epilog error"), so no new job lands beside a
# container still running. Docker is reached as the docker CLI finds it (DOCKER_HOST, else
# /var/run/docker.sock). An engine whose socket is there but does not answer is asked again
# every second for up to 60 s: a dockerd that crashed and is starting again still holds the
# job's containers, and they are back with it. Still silent after that, it is 1: what runs on
# the node cannot be known.

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

[ -n "${SLURM_JOB_ID:-}" ] || exit 0
command -v docker >/dev/null 2>&1 || exit 0

engine=${DOCKER_HOST:-unix:///var/run/docker.sock}
case "$engine" in
    unix://*) [ -S "${engine#unix://}" ] || exit 0 ;;  # no engine on this node
esac

# each call bounded (a paused engine takes the connection and answers nothing)
if command -v timeout >/dev/null 2>&1; then bounded="timeout 20"; else bounded=""; fi
filter="label=sparktui.slurm.job=$SLURM_JOB_ID"
waited=0 left=""
while :; do
    if left=$($bounded docker ps -aq --filter "$filter" 2>/dev/null); then
        [ -n "$left" ] || exit 0
        echo "$left" | xargs $bounded docker rm -f >/dev/null 2>&1
        left=$($bounded docker ps -aq --filter "$filter" 2>/dev/null) && [ -z "$left" ] && exit 0
    fi
    [ "$waited" -lt 60 ] || break
    sleep 1
    waited=$((waited + 1))
done
echo "sparktui epilog: job $SLURM_JOB_ID: ${left:+containers left on $(hostname): $left}${left:-the Docker engine on $(hostname) did not answer in 60 s}" >&2
exit 1
