# shellcheck shell=sh
# apt purge of both packages, offline, on the machine itself; stock-purged then looks for
# anything left.
out=$(DEBIAN_FRONTEND=noninteractive apt-get purge -y nvidia-peer-memory nvidia-peer-memory-dkms 2>&1)
rc=$?
echo "$out" | tail -n 5 | sed 's/^/  | /'
check "apt-get purge exits 0" test $rc = 0
left=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' nvidia-peer-memory nvidia-peer-memory-dkms 2>/dev/null | awk '$2 != "un" && $2 != "pn"')
check "dpkg knows neither package any more (${left:-none})" test -z "$left"
check "the completed Rust build trees are gone" test ! -e /var/cache/nv_peer_mem
sync
finish
