#!/usr/bin/env python3
"""Build a fake root (sysfs, procfs, module tree, MLNX_OFED sources) from a doctor test case.

usage: mktree.py CASE.json DIR

DIR/kernel.log gets the case's kernel log. The case format is described in README.md.
"""
import json
import lzma
import os
import struct
import sys

# Top-level keys whose dict value is merged with the extended case's (a null value deletes a
# key); every other key replaces the extended case's value.
MERGED = ("modules", "files", "links")

ROLES = {  # role: (vendor, device, class, PCIe port type, driver)
    "rp": (0x8086, 0x347A, 0x060400, 4, "pcieport"),
    "usp": (0x10B5, 0xC010, 0x060400, 5, "pcieport"),
    "dsp": (0x10B5, 0xC010, 0x060400, 6, "pcieport"),
    "gpu": (0x10DE, 0x2330, 0x030200, 0, "nvidia"),
    "nic": (0x15B3, 0x101B, 0x020700, 0, "mlx5_core"),
}
ACS_BITS = {"sv": 0, "tb": 1, "rr": 2, "cr": 3, "uf": 4, "ec": 5, "dt": 6}
NVIDIA_VERSION = {
    "open": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.20  Release Build"
            "  (dvs-builder@U16-I1-N08-12-3)  Thu Mar 13 21:47:11 UTC 2025\n",
    "proprietary": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.230.02  Release Build"
                   "  (dvs-builder@U16-I3-B02-5-1)  Wed Feb 12 00:31:27 UTC 2025\n",
}


def load(path):
    """The case at path, merged over the case it extends."""
    with open(path) as f:
        case = json.load(f)
    parent = case.pop("extends", None)
    if parent is None:
        return case
    merged = load(os.path.join(os.path.dirname(path), parent + ".json"))
    for key, value in case.items():
        if key in MERGED and isinstance(value, dict):
            base = dict(merged.get(key, {}))
            base.update(value)
            merged[key] = {k: v for k, v in base.items() if v is not None}
        else:
            merged[key] = value
    return merged


class Tree:
    def __init__(self, top, release):
        self.top, self.release = top, release
        self.groups = 0
        self.bar = 0x38000000000

    def path(self, rel):
        return os.path.join(self.top, rel.replace("{release}", self.release).lstrip("/"))

    def write(self, rel, content):
        full = self.path(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if isinstance(content, str):
            content = content.replace("{release}", self.release).encode()
        with open(full, "wb") as f:
            f.write(content)

    def mkdir(self, rel):
        os.makedirs(self.path(rel), exist_ok=True)

    def link(self, rel, target, relative=True):
        """A symbolic link; with relative, an absolute target becomes a relative one (as in
        sysfs), else it is kept as it is (the doctor resolves it inside its --root)."""
        full = self.path(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if target.startswith("/") and relative:
            target = os.path.relpath(self.path(target), os.path.dirname(full))
        os.symlink(target, full)


def elf(sections):
    """An ELF64 little-endian relocatable file holding the given (name, bytes) sections."""
    names = [name for name, _data in sections] + [".shstrtab"]
    shstrtab = b"\0" + b"".join(n.encode() + b"\0" for n in names)
    body, offsets = bytearray(64), []
    for _name, data in sections + [(".shstrtab", shstrtab)]:
        body += b"\0" * (-len(body) % 8)
        offsets.append((len(body), len(data)))
        body += data
    body += b"\0" * (-len(body) % 8)
    shoff, name_at = len(body), 1
    body += bytes(64)  # the null section
    for i, name in enumerate(names):
        kind = 3 if name == ".shstrtab" else 1
        body += struct.pack("<IIQQQQIIQQ", name_at, kind, 0, 0, offsets[i][0], offsets[i][1],
                            0, 0, 1, 0)
        name_at += len(name) + 1
    struct.pack_into("<16sHHIQQQIHHHHHH", body, 0, b"\x7fELF\x02\x01\x01", 1, 0x3E, 1, 0, 0,
                     shoff, 0, 64, 0, 0, 64, len(names) + 1, len(names))
    return bytes(body)


def der(tag, body):
    """One DER element."""
    n = len(body)
    if n < 0x80:
        head = bytes([tag, n])
    else:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        head = bytes([tag, 0x80 | len(raw)]) + raw
    return head + body


def der_seq(*items):
    return der(0x30, b"".join(items))


def der_int(hexdigits):
    raw = bytes.fromhex(hexdigits)
    return der(0x02, (b"\0" + raw) if raw[0] & 0x80 else raw)


def der_name(cn):
    return der_seq(der(0x31, der_seq(der(0x06, b"\x55\x04\x03"), der(0x0C, cn.encode()))))


OID_RSA = der(0x06, bytes.fromhex("2a864886f70d010101"))
OID_SHA256 = der(0x06, bytes.fromhex("608648016503040201"))


def certificate(cn, serial):
    """A self-signed X.509 certificate in DER, as DKMS's mok.pub is, with stand-in key and
    signature bits (the doctor reads the serial, and compares whole certificates)."""
    validity = der_seq(der(0x17, b"250101000000Z"), der(0x17, b"491231000000Z"))
    tbs = der_seq(der(0xA0, der_int("02")), der_int(serial), der_seq(OID_RSA), der_name(cn),
                  validity, der_name(cn), der_seq(der_seq(OID_RSA), der(0x03, b"\0")))
    return der_seq(tbs, der_seq(OID_RSA), der(0x03, b"\0"))


def signature(cn, serial):
    """What scripts/sign-file appends to a module: PKCS#7 SignedData whose one SignerInfo names
    the signing certificate by issuer and serial, struct module_signature, the magic."""
    signer_info = der_seq(der_int("01"), der_seq(der_name(cn), der_int(serial)),
                          der_seq(OID_SHA256), der_seq(OID_RSA), der(0x04, b"\x5a" * 32))
    signed_data = der_seq(der_int("01"), der(0x31, der_seq(OID_SHA256)),
                          der_seq(der(0x06, bytes.fromhex("2a864886f70d010701"))),
                          der(0x31, signer_info))
    pkcs7 = der_seq(der(0x06, bytes.fromhex("2a864886f70d010702")), der(0xA0, signed_data))
    return pkcs7 + struct.pack(">BBBBB3xI", 0, 0, 2, 0, 0, len(pkcs7)) + \
        b"~Module signature appended~\n"


def efi_cert_list(certs):
    """An EFI signature-list variable as efivarfs shows it: attributes (NV, BS, RT), then one
    EFI_CERT_X509 list a certificate, each entry with an owner GUID (shim's)."""
    x509 = bytes.fromhex("a159c0a5e494a74a87b5ab155c2bf072")
    owner = bytes.fromhex("50ab5d6046e00043abb63dd810dd8b23")
    out = struct.pack("<I", 7)
    for cert in certs:
        out += x509 + struct.pack("<III", 28 + 16 + len(cert), 0, 16 + len(cert)) + owner + cert
    return out


def ko(spec, release):
    """nv_peer_mem.ko contents: .modinfo with vermagic; __versions (or, with ext, the extended
    modversions tables) from {symbol: crc}; xz-compressed with compress=xz."""
    vermagic = spec.get("vermagic", "{release} SMP preempt mod_unload ").replace(
        "{release}", release)
    modinfo = b"version=1.4.0\0license=Dual BSD/GPL\0name=nv_peer_mem\0vermagic=%s\0" % (
        vermagic.encode())
    sections = [(".text", b"\xc3" * 16), (".modinfo", modinfo)]
    versions = spec.get("versions", {})
    if versions and spec.get("ext"):  # extended modversions (Linux 6.14+, Rust modules)
        sections.append(("__version_ext_crcs", b"".join(
            struct.pack("<I", int(crc, 16)) for crc in versions.values())))
        sections.append(("__version_ext_names", b"".join(
            sym.encode() + b"\0" for sym in versions)))
    elif versions:
        sections.append(("__versions", b"".join(struct.pack("<Q56s", int(crc, 16), sym.encode())
                                                for sym, crc in versions.items())))
    data = elf(sections)
    if spec.get("signer"):
        data += signature(spec["signer"]["name"], spec["signer"]["serial"])
    return lzma.compress(data) if spec.get("compress") == "xz" else data


def config_space(role, opts):
    """Config space: header, PM and PCI Express capabilities, AER and optional ACS."""
    vendor, device, cls, port, _driver = ROLES[role]
    cfg = bytearray(int(opts.get("cfg", 4096)))
    head = bytearray(0x100)
    struct.pack_into("<HHHHI", head, 0, vendor, device, 0x0406, 0x0010, cls << 8 | 0xA1)
    head[0x0E] = 1 if cls >> 8 == 0x0604 else 0
    head[0x34] = 0x40
    head[0x40:0x44] = b"\x01\x60\x03\x00"                     # power management, next 0x60
    struct.pack_into("<BBH", head, 0x60, 0x10, 0, 0x0002 | port << 4)  # PCI Express v2
    if len(cfg) > 0x100:
        acs = opts.get("acs")
        struct.pack_into("<I", cfg, 0x100, 0x0001 | 2 << 16 | (0x148 if acs is not None else 0) << 20)
        if acs is not None:
            ctrl = sum(1 << ACS_BITS[b] for b in acs.split(",") if b)
            struct.pack_into("<IHH", cfg, 0x148, 0x000D | 1 << 16, 0x005F, ctrl)
    cfg[:min(len(cfg), 0x100)] = head[:min(len(cfg), 0x100)]
    return bytes(cfg)


def resource(opts, tree):
    """A GPU's resource file: BAR0 16 MiB, BAR1 (bar1=, default 32G) and BAR3 32 MiB."""
    size = opts.get("bar1", "32G")
    bar1 = int(size[:-1]) << {"M": 20, "G": 30}[size[-1]]
    lines = []
    for length, flags in [(16 << 20, 0x40200), (bar1, 0x14220C), (0, 0), (32 << 20, 0x14220C),
                          (0, 0), (128, 0x40101)]:
        if length:
            tree.bar = (tree.bar + length - 1) // length * length
            start, tree.bar = tree.bar, tree.bar + length
            lines.append((start, start + length - 1, flags))
        else:
            lines.append((0, 0, 0))
    lines += [(0, 0, 0)] * 7
    return "".join("0x%016x 0x%016x 0x%016x\n" % line for line in lines)


def pci(tree, case, nodes, parent, domain, inherited):
    """Devices from the nested {"BB:DD.F role opt=value...": {children}} description."""
    for key in sorted(nodes):
        words = key.split()
        if words[0].startswith("pci"):                     # a host bridge
            tree.mkdir("sys/devices/" + words[0])
            opts = dict(inherited, **dict(w.split("=", 1) for w in words[1:]))
            pci(tree, case, nodes[key], "sys/devices/" + words[0], words[0][3:7], opts)
            continue
        bdf = words[0] if words[0].count(":") == 2 else domain + ":" + words[0]
        role, _eq, nic = words[1].partition("=")
        opts = dict(inherited, **dict(w.partition("=")[::2] for w in words[2:]))
        path = parent + "/" + bdf
        vendor, device, cls, _port, driver = ROLES[role]
        tree.write(path + "/vendor", "0x%04x\n" % vendor)
        tree.write(path + "/device", "0x%04x\n" % device)
        tree.write(path + "/class", "0x%06x\n" % cls)
        tree.write(path + "/numa_node", "%s\n" % opts.get("numa", "-1"))
        tree.write(path + "/config", config_space(role, opts))
        tree.mkdir("sys/bus/pci/drivers/" + driver)
        tree.link(path + "/driver", "/sys/bus/pci/drivers/" + driver)
        tree.link("sys/bus/pci/devices/" + bdf, "/" + path)
        if role == "gpu":
            tree.write(path + "/resource", resource(opts, tree))
        if nic:
            tree.link(path + "/infiniband/%s/device" % nic, "/" + path)
            tree.link("sys/class/infiniband/" + nic, "/%s/infiniband/%s" % (path, nic))
        if role in ("gpu", "nic") and opts.get("iommu", case.get("iommu")):
            tree.groups += 1
            group = "sys/kernel/iommu_groups/%d" % tree.groups
            tree.write(group + "/type", opts.get("iommu", case.get("iommu")) + "\n")
            tree.link(path + "/iommu_group", "/" + group)
        pci(tree, case, nodes[key], path, domain, inherited)


def build(case, top):
    release = case.get("release", "6.1.0-31-amd64")
    tree = Tree(top, release)
    tree.write("proc/sys/kernel/osrelease", release + "\n")
    tree.write("proc/sys/kernel/arch", case.get("arch", "x86_64") + "\n")
    for name, spec in sorted(case.get("modules", {}).items()):
        tree.mkdir("sys/module/" + name)
        if "version" in spec:
            tree.write("sys/module/%s/version" % name, spec["version"] + "\n")
        for client, count in sorted(spec.get("stats", {}).items()):
            tree.write("sys/module/%s/stats/%s/live_registrations" % (name, client), "%d\n" % count)
    symbols = ["_text", "ib_register_client"] + case.get("kallsyms", [])
    tree.write("proc/kallsyms", "".join("0000000000000000 T %s\t[ib_core]\n" % s for s in symbols))
    for rel, spec in sorted(case.get("ko", {}).items()):
        name = rel + (".xz" if spec.get("compress") == "xz" else "")
        tree.write(name, ko(spec, release))
    for rel, crcs in sorted(case.get("symvers", {}).items()):
        tree.write(rel, "".join("0x%s\t%s\tdrivers/infiniband/core/ib_core\tEXPORT_SYMBOL\t\n"
                                % (crc[2:].zfill(8), sym) for sym, crc in sorted(crcs.items())))
    for rel, content in sorted(case.get("files", {}).items()):
        tree.write(rel, content)
    for rel, target in sorted(case.get("links", {}).items()):
        tree.link(rel, target, relative=False)
    efivars = "sys/firmware/efi/efivars/"
    if "secure_boot" in case:
        tree.write(efivars + "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c",
                   struct.pack("<IB", 6, 1 if case["secure_boot"] else 0))
    if case.get("dkms_mok"):
        tree.write("var/lib/dkms/mok.pub", certificate("DKMS module signing key", case["dkms_mok"]))
    if "mok_list" in case:
        tree.write(efivars + "MokListRT-605dab50-e046-4300-abb6-3dd810dd8b23", efi_cert_list(
            [certificate(cn, serial) for cn, serial in case["mok_list"]]))
    if case.get("nvidia_driver"):
        tree.write("proc/driver/nvidia/version", NVIDIA_VERSION[case["nvidia_driver"]])
    if case.get("iommu"):
        tree.mkdir("sys/class/iommu/" + case.get("iommu_unit", "dmar0"))
    pci(tree, case, case.get("pci", {}), "sys/devices", "0000", {})
    tree.write("kernel.log", "".join(line + "\n" for line in case.get("kernel_log", [])))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    build(load(sys.argv[1]), sys.argv[2])
