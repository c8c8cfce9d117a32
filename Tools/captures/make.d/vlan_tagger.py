#!/usr/bin/env python3
"""Make a lab host's interface speak 802.1Q (or 802.1ad + 802.1Q) without the 8021q module.

    Tools/lab exec --name fx h2 -- python3 vlan_tagger.py attach lan1 --push 7
    Tools/lab exec --name fx h3 -- python3 vlan_tagger.py attach lan1 --push 7 --outer 100
    Tools/lab exec --name fx h2 -- python3 vlan_tagger.py detach lan1

The machine's kernel has no CONFIG_VLAN_8021Q (no `ip link add ... type vlan`) and no tc vlan
action, but it has cls_bpf and the bpf_skb_vlan_push/pop helpers. So this loads two tiny eBPF
programs, assembled here by hand, and attaches them with tc (clsact, direct-action):

  egress:  bpf_skb_vlan_push(skb, 802.1Q, VID)   [then bpf_skb_vlan_push(skb, 802.1ad, OUTER)]
  ingress: bpf_skb_vlan_pop(skb) twice (no-op on untagged frames)

so every frame the host sends on IF leaves with the tag(s) the KERNEL inserts, and tagged frames
it receives are untagged before IP sees them: the host's sockets (python-zeroconf, avahi) work
unchanged over "VLAN VID", and a tcpdump on another host's interface records real tagged frames.
It refuses to run outside a lab host's network namespace (/run/netns/nb*-hN).
"""
import argparse
import ctypes
import os
import struct
import subprocess
import sys
import tempfile

BPF_PROG_LOAD, BPF_OBJ_PIN = 5, 6
BPF_PROG_TYPE_SCHED_CLS = 3
FUNC_SKB_VLAN_PUSH, FUNC_SKB_VLAN_POP = 18, 19
SYS_BPF = 321  # x86_64
ETH_P_8021Q_BE, ETH_P_8021AD_BE = 0x0081, 0xA888  # htons(0x8100), htons(0x88a8) on little-endian


def refuse_root_namespace() -> None:
    me = os.stat("/proc/self/ns/net")
    for entry in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
        st = os.stat(os.path.join("/run/netns", entry))
        if (st.st_dev, st.st_ino) == (me.st_dev, me.st_ino):
            if entry.startswith("nb") and entry.rsplit("-", 1)[-1].startswith("h"):
                return
            break
    sys.exit("vlan_tagger: not inside a lab host's network namespace; run me with `Tools/lab exec`")


def insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


MOV64_REG, MOV64_IMM, CALL, EXIT = 0xBF, 0xB7, 0x85, 0x95


def push_program(vid: int, outer: int | None) -> bytes:
    code = insn(MOV64_REG, 6, 1)  # r6 = skb
    code += insn(MOV64_IMM, 2, imm=ETH_P_8021Q_BE) + insn(MOV64_IMM, 3, imm=vid) + insn(CALL, imm=FUNC_SKB_VLAN_PUSH)
    if outer is not None:  # a second push moves the first tag into the frame: 88a8/outer, 8100/vid
        code += insn(MOV64_REG, 1, 6)
        code += insn(MOV64_IMM, 2, imm=ETH_P_8021AD_BE) + insn(MOV64_IMM, 3, imm=outer) + insn(CALL, imm=FUNC_SKB_VLAN_PUSH)
    return code + insn(MOV64_IMM, 0, imm=0) + insn(EXIT)  # TC_ACT_OK


def pop_program() -> bytes:
    code = insn(MOV64_REG, 6, 1) + insn(CALL, imm=FUNC_SKB_VLAN_POP)
    code += insn(MOV64_REG, 1, 6) + insn(CALL, imm=FUNC_SKB_VLAN_POP)
    return code + insn(MOV64_IMM, 0, imm=0) + insn(EXIT)


libc = ctypes.CDLL(None, use_errno=True)


def bpf(cmd: int, attr: bytes) -> int:
    buf = ctypes.create_string_buffer(attr, 128)
    r = libc.syscall(SYS_BPF, cmd, buf, 128)
    if r < 0:
        raise OSError(ctypes.get_errno(), f"bpf({cmd}): {os.strerror(ctypes.get_errno())}")
    return r


def load(program: bytes) -> int:
    insns = ctypes.create_string_buffer(program, len(program))
    license = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(65536)
    # union bpf_attr for BPF_PROG_LOAD: prog_type, insn_cnt, insns, license, log_level, log_size, log_buf
    attr = struct.pack("<IIQQIIQ", BPF_PROG_TYPE_SCHED_CLS, len(program) // 8,
                       ctypes.addressof(insns), ctypes.addressof(license), 1, len(log), ctypes.addressof(log))
    try:
        return bpf(BPF_PROG_LOAD, attr)
    except OSError:
        sys.stderr.write(log.value.decode(errors="replace"))
        raise


def pin(fd: int, path: str) -> None:
    p = ctypes.create_string_buffer(path.encode())
    bpf(BPF_OBJ_PIN, struct.pack("<QI", ctypes.addressof(p), fd))


def tc(*args: str, check: bool = True) -> None:
    subprocess.run(["tc", *args], check=check, stderr=None if check else subprocess.DEVNULL)


def attach(interface: str, vid: int, outer: int | None) -> None:
    # `ip netns exec` gave us a private mount namespace: a bpffs mounted here vanishes with us,
    # while tc's filters keep the programs alive.
    bpffs = tempfile.mkdtemp(prefix="vlan-tagger-")
    subprocess.run(["mount", "-t", "bpf", "bpf", bpffs], check=True)
    try:
        tc("qdisc", "replace", "dev", interface, "clsact")
        for direction, program in (("egress", push_program(vid, outer)), ("ingress", pop_program())):
            path = f"{bpffs}/{direction}"
            pin(load(program), path)
            tc("filter", "del", "dev", interface, direction, check=False)
            tc("filter", "add", "dev", interface, direction, "pref", "1", "bpf", "object-pinned", path, "direct-action")
    finally:
        subprocess.run(["umount", bpffs], check=False)
        os.rmdir(bpffs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["attach", "detach"])
    parser.add_argument("interface")
    parser.add_argument("--push", type=int, default=7, help="802.1Q VLAN ID (inner tag)")
    parser.add_argument("--outer", type=int, help="also push an 802.1ad (0x88a8) outer tag with this VLAN ID")
    args = parser.parse_args()
    refuse_root_namespace()
    if args.action == "detach":
        tc("qdisc", "del", "dev", args.interface, "clsact", check=False)
        return 0
    attach(args.interface, args.push, args.outer)
    print(f"vlan_tagger: {args.interface}: egress push 802.1Q {args.push}"
          + (f" inside 802.1ad {args.outer}" if args.outer is not None else "") + ", ingress pop", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
