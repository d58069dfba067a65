#!/bin/sh
# netns-ssh: what MPICH's Hydra calls instead of ssh (HYDRA_LAUNCHER_EXEC, or -launcher-exec) when the
# "hosts" are Linux network namespaces on this machine (benchmarks/harness/netns_cluster.py
# copies this file into a cluster's directory, beside the cluster.env it reads).
#
#     netns-ssh [-x] HOST COMMAND...       as Hydra calls ssh: the words are one command line for a shell
#
# Like an ssh session it runs the command on HOST with a login's bare environment (no variable of the
# caller crosses: what the ranks need, Hydra sends them itself) and in HOST's home directory; unlike
# ssh it reaches HOST through the kernel, not through HOST's network link, so a host whose link is down
# still starts its Hydra proxy, which then fails to connect back and says so. On HOST: its own network
# namespace (its veth "eth0", its /etc/netns/NAME/hosts as /etc/hosts), its own host name (a UTS
# namespace) and its own mount namespace, where the host's directory hosts/HOST is mounted over the
# cluster's home/ (the same path on every host, other contents on each: no file is shared by accident).
set -eu

while [ $# -gt 0 ]; do
    case $1 in
        -o) shift 2 ;;            # ssh options Hydra or a user may add
        -*) shift ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "netns-ssh: usage: netns-ssh [-x] HOST COMMAND..." >&2
    exit 255
fi
host=$1
shift
root=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
# NETNS_PREFIX (the namespaces are NETNS_PREFIX-HOST) and HOSTS (the host names, space-separated)
. "$root/cluster.env"
case " $HOSTS " in
    *" $host "*) ;;
    *) echo "netns-ssh: could not resolve hostname $host: not a host of this cluster ($HOSTS)" >&2; exit 255 ;;
esac

exec ip netns exec "$NETNS_PREFIX-$host" unshare --uts \
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="${HOME:-/root}" LANG=C.UTF-8 \
    sh -c 'hostname "$1" && mount --bind "$2/hosts/$1" "$2/home" && cd "$2/home" && exec sh -c "$3"' \
    netns-ssh "$host" "$root" "$*"
