"""apt purge of both packages, offline, on the machine itself; stock-purged then looks for
anything left."""
import os
import subprocess
import sys

from lib import *

PACKAGES = ("nvidia-peer-memory", "nvidia-peer-memory-dkms")


def known():
    """The packages dpkg still knows (neither unknown nor purged), one "name status" a line."""
    sys.stdout.flush()
    p = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n", *PACKAGES],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return "\n".join(line for line in p.stdout.splitlines()
                     if (line.split() + ["", ""])[1] not in ("un", "pn"))


rc, out = captured("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "purge", "-y", *PACKAGES)
show("\n".join(out.split("\n")[-5:]), "  | ")
check("apt-get purge exits 0", rc == 0)
left = known()
check(f"dpkg knows neither package any more ({left or 'none'})", left == "")
check("the completed Rust build trees are gone", not os.path.exists("/var/cache/nv_peer_mem"))
os.sync()
finish()
