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
# Exit status: 0 when nothing of the job is left (also on a node without docker, or for a
# job that ran no container); 1 when a labelled container could not be removed: Slurm then
# drains the node ("Epilog error"), so no new job lands beside a container still running.
# Docker is reached as the docker CLI finds it (DOCKER_HOST, else /var/run/docker.sock); an
# engine that does not answer runs no container to remove, so that is 0 too.

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

[ -n "${SLURM_JOB_ID:-}" ] || exit 0
command -v docker >/dev/null 2>&1 || exit 0

filter="label=sparktui.slurm.job=$SLURM_JOB_ID"
docker ps -aq --filter "$filter" | xargs -r docker rm -f >/dev/null
left=$(docker ps -aq --filter "$filter") || exit 0
[ -z "$left" ] || {
    echo "sparktui epilog: job $SLURM_JOB_ID: containers left on $(hostname): $left" >&2
    exit 1
}
exit 0
