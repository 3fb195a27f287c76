"""nv_peer_mem's metrics on the stock machine, as a fleet scrapes them: Debian's
prometheus-node-exporter (installed into this world's root by stock-world.sh) reads
/var/lib/prometheus/node-exporter/*.prom. The timer is off after the install; its service
writes the file atomically; node_exporter serves our metrics with the module's real counters
and the doctor's verdicts; enabled, the timer rewrites the file; a drop-in moves the directory."""
import os
import time
import urllib.request

from lib import *

DIR = "/var/lib/prometheus/node-exporter"
PROM = f"{DIR}/nv_peer_mem.prom"
UNIT = "nv_peer_mem-metrics.service"
TIMER = "nv_peer_mem-metrics.timer"
DROPIN = f"/etc/systemd/system/{UNIT}.d/textfile-dir.conf"


def scrape():
    """node_exporter's /metrics, or "" when it does not answer within a minute."""
    for _ in range(60):
        try:
            with urllib.request.urlopen("http://127.0.0.1:9100/metrics", timeout=10) as r:
                return r.read().decode("utf-8", "replace")
        except OSError:
            time.sleep(1)
    return ""


def mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


rc, out = captured("systemctl", "is-enabled", TIMER)
check(f"the timer is off after the install (is-enabled: {out})", out == "disabled")
check("  no metrics file yet", not os.path.exists(PROM))
check("node_exporter's unit is running (Debian's prometheus-node-exporter)",
      lambda: captured("systemctl", "is-active", "prometheus-node-exporter")[1] == "active")
check("systemctl start nv_peer_mem", run("systemctl", "start", "nv_peer_mem"))
check("a registration, so that the counters move", lambda: ctl_nv(
    f"alloc {GPU_VA:#x} 0x20000 contiguous") and ctl_ib(f"reg 1 edu0 {GPU_VA:#x} 0x20000"))

check(f"systemctl start {UNIT}", run("systemctl", "start", UNIT))
check(f"  wrote {PROM}", os.path.isfile(PROM))
check("  mode 0644 (node_exporter runs as the prometheus user)",
      lambda: oct(os.stat(PROM).st_mode & 0o777) == "0o644")
check("  no temporary file left", sorted(os.listdir(DIR)) == ["nv_peer_mem.prom"])
rc, out = captured("nv_peer_mem", "metrics")
check("nv_peer_mem metrics: exit 0", rc == 0)
text = scrape()
ours = [line for line in text.splitlines() if line.startswith("nv_peer_mem_")]
say(f"  node_exporter serves {len(ours)} nv_peer_mem_* samples:")
show("\n".join(ours), "  | ")
check("node_exporter read the file without error", has_line(text, "^node_textfile_scrape_error 0$"))
check("  and names it",
      has_line(text, r'^node_textfile_mtime_seconds\{file=".*nv_peer_mem\.prom"\}'))
for want in ("nv_peer_mem_loaded 1", 'nv_peer_mem_info{version="1.4.0"} 1',
             'nv_peer_mem_live_registrations{client="nv_mem"} 1',
             'nv_peer_mem_pinned_bytes{client="nv_mem"} 131072',
             'nv_peer_mem_registrations_total{client="nv_mem"} 1',
             "nv_peer_mem_doctor_up 1", "nv_peer_mem_doctor_gpudirect_rdma 1",
             # OK, and INFO for its line of live registrations: 1
             'nv_peer_mem_doctor_check{check="nv_peer_mem.loaded"} 1',
             'nv_peer_mem_doctor_check{check="peer_modules.conflict"} 0',
             "nv_peer_mem_nvidia_peermem_loaded 0"):
    check(f"  serves: {want}", want in ours)
check("deregister, free", lambda: ctl_ib("dereg 1") and ctl_nv(f"free {GPU_VA:#x}"))

before = mtime(PROM)
check(f"systemctl enable --now {TIMER}", run("systemctl", "enable", "--now", TIMER))
rc, out = captured("systemctl", "list-timers", "--all", TIMER)
show(out, "  | ")
# OnUnitActiveSec=1min after the start above: the file is replaced within about a minute.
for _ in range(100):
    if mtime(PROM) != before:
        break
    time.sleep(1)
check("  the timer's run replaced the file within 100 s", mtime(PROM) != before)
check("  with the registration gone",
      'nv_peer_mem_live_registrations{client="nv_mem"} 0' in read(PROM).splitlines())
check(f"systemctl disable --now {TIMER}", run("systemctl", "disable", "--now", TIMER))

os.makedirs(os.path.dirname(DROPIN), exist_ok=True)
os.makedirs("/run/nvpm-textfile", exist_ok=True)
with open(DROPIN, "w") as f:
    f.write("[Service]\nEnvironment=TEXTFILE_DIR=/run/nvpm-textfile\n")
check("a drop-in sets TEXTFILE_DIR=/run/nvpm-textfile; daemon-reload; start",
      lambda: run("systemctl", "daemon-reload") and run("systemctl", "start", UNIT))
check("  the file is written there", os.path.isfile("/run/nvpm-textfile/nv_peer_mem.prom"))
with open(DROPIN, "w") as f:
    f.write("[Service]\nEnvironment=TEXTFILE_DIR=/nonexistent\n")
run("systemctl", "daemon-reload")
check("TEXTFILE_DIR=/nonexistent: the unit fails", not run("systemctl", "start", UNIT))
rc, out = captured("journalctl", "-b", "-u", UNIT, "-o", "cat", "--no-pager")
check("  saying so in one line of the journal", has_line(
    out, "^nv_peer_mem: metrics: cannot write /nonexistent/nv_peer_mem.prom: the directory "
    "/nonexistent does not exist"))
os.unlink(DROPIN)
os.rmdir(os.path.dirname(DROPIN))
run("systemctl", "daemon-reload")
run("systemctl", "reset-failed", UNIT)
check("systemctl stop nv_peer_mem, for the scenarios after",
      run("systemctl", "stop", "nv_peer_mem"))
finish()
