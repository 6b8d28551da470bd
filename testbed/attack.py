#!/usr/bin/env python3
"""What a hostile pod sends, for the enforcement tests (Python 3 standard library only).
Run inside a pod's network namespace (`ip netns exec POD-NS attack.py ...`).

  attack.py udp-spoof --src IP --sport P --dst IP --dport P [--count N]
      Send N IPv4/UDP datagrams from a raw socket with a forged source address.

  attack.py udp-listen --port P --timeout S
      Count the UDP datagrams that arrive on port P within S seconds; print the count.
      Prints "ready" on stderr once bound.

  attack.py udp-echo --dst IP --dport P --sport P [--timeout S]
      Send one datagram from port sport and wait for its echo: print 1 if it came back, else 0.

  attack.py arp-claim --iface IF --spa IP --tpa IP [--count N]
      Broadcast N ARP requests "who has TPA, tell SPA" with the interface's own MAC as the
      sender hardware address: a claim that SPA lives here.

  attack.py frame-send --iface IF --dst-mac MAC --kind udp|arp --src IP --dst IP [--vlan TCI] [--count N]
      Send N Ethernet frames to MAC from the interface's own MAC: IPv4/UDP from SRC to DST
      port 80, or a unicast ARP request "who has DST, tell SRC" padded with a message (the
      shapes a covert channel to a colluding pod would use); with an 802.1Q tag of TCI
      (0 is a priority tag) when --vlan is given.

  attack.py sniff --iface IF --from-mac MAC --timeout S
      Put IF in promiscuous mode and count the frames with source MAC that arrive within S
      seconds; print the count. Prints "ready" on stderr once listening.
"""

import argparse
import socket
import struct
import sys
import time


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def udp_spoof(args):
    src, dst = socket.inet_aton(args.src), socket.inet_aton(args.dst)
    payload = b"spoofed"
    udp_len = 8 + len(payload)
    pseudo = src + dst + struct.pack("!BBH", 0, socket.IPPROTO_UDP, udp_len)
    udp = struct.pack("!HHHH", args.sport, args.dport, udp_len, 0) + payload
    udp = udp[:6] + struct.pack("!H", checksum(pseudo + udp) or 0xFFFF) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0x1234, 0, 64, socket.IPPROTO_UDP, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    for _ in range(args.count):
        s.sendto(ip + udp, (args.dst, 0))
        time.sleep(0.05)


def udp_listen(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", args.port))
    print("ready", file=sys.stderr, flush=True)
    deadline = time.monotonic() + args.timeout
    n = 0
    while (left := deadline - time.monotonic()) > 0:
        s.settimeout(left)
        try:
            s.recv(2048)
            n += 1
        except socket.timeout:
            break
    print(n)


def udp_echo(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", args.sport))
    s.settimeout(args.timeout)
    s.sendto(b"ping", (args.dst, args.dport))
    try:
        s.recv(2048)
        print(1)
    except socket.timeout:
        print(0)


def arp_claim(args):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args.iface, 0))
    mac = s.getsockname()[4]
    frame = b"\xff" * 6 + mac + struct.pack("!H", 0x0806)
    frame += struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1)
    frame += mac + socket.inet_aton(args.spa) + b"\0" * 6 + socket.inet_aton(args.tpa)
    for _ in range(args.count):
        s.send(frame)
        time.sleep(0.05)


def mac_bytes(text):
    return bytes(int(b, 16) for b in text.split(":"))


def frame_send(args):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args.iface, 0))
    mac = s.getsockname()[4]
    src, dst = socket.inet_aton(args.src), socket.inet_aton(args.dst)
    if args.kind == "arp":
        body = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac + src + b"\0" * 6 + dst
        body += b"covert channel padding"
        frame = mac_bytes(args.dst_mac) + mac + struct.pack("!H", 0x0806) + body
    else:
        payload = b"covert"
        udp = struct.pack("!HHHH", 40000, 80, 8 + len(payload), 0) + payload
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0x4321, 0, 64, socket.IPPROTO_UDP, 0, src, dst)
        ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
        frame = mac_bytes(args.dst_mac) + mac + struct.pack("!H", 0x0800) + ip + udp
    if args.vlan is not None:
        frame = frame[:12] + struct.pack("!HH", 0x8100, args.vlan) + frame[12:]
    for _ in range(args.count):
        s.send(frame)
        time.sleep(0.02)


def sniff(args):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((args.iface, 0))
    ifindex = socket.if_nametoindex(args.iface)
    # PACKET_ADD_MEMBERSHIP (1) of PACKET_MR_PROMISC (1): every frame the link delivers.
    s.setsockopt(263, 1, struct.pack("IHH8s", ifindex, 1, 0, b""))
    want = mac_bytes(args.from_mac)
    print("ready", file=sys.stderr, flush=True)
    deadline = time.monotonic() + args.timeout
    n = 0
    while (left := deadline - time.monotonic()) > 0:
        s.settimeout(left)
        try:
            frame, addr = s.recvfrom(65535)
        except socket.timeout:
            break
        # addr[2] is the packet type: 4 (PACKET_OUTGOING) is the pod's own sending.
        if addr[2] != 4 and frame[6:12] == want:
            n += 1
    print(n)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("udp-spoof")
    c.add_argument("--src", required=True)
    c.add_argument("--sport", type=int, required=True)
    c.add_argument("--dst", required=True)
    c.add_argument("--dport", type=int, required=True)
    c.add_argument("--count", type=int, default=3)
    c.set_defaults(run=udp_spoof)
    c = sub.add_parser("udp-listen")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--timeout", type=float, required=True)
    c.set_defaults(run=udp_listen)
    c = sub.add_parser("udp-echo")
    c.add_argument("--dst", required=True)
    c.add_argument("--dport", type=int, required=True)
    c.add_argument("--sport", type=int, required=True)
    c.add_argument("--timeout", type=float, default=1.0)
    c.set_defaults(run=udp_echo)
    c = sub.add_parser("arp-claim")
    c.add_argument("--iface", required=True)
    c.add_argument("--spa", required=True)
    c.add_argument("--tpa", required=True)
    c.add_argument("--count", type=int, default=3)
    c.set_defaults(run=arp_claim)
    c = sub.add_parser("frame-send")
    c.add_argument("--iface", required=True)
    c.add_argument("--dst-mac", required=True)
    c.add_argument("--kind", choices=["udp", "arp"], required=True)
    c.add_argument("--src", required=True)
    c.add_argument("--dst", required=True)
    c.add_argument("--vlan", type=int)
    c.add_argument("--count", type=int, default=3)
    c.set_defaults(run=frame_send)
    c = sub.add_parser("sniff")
    c.add_argument("--iface", required=True)
    c.add_argument("--from-mac", required=True)
    c.add_argument("--timeout", type=float, required=True)
    c.set_defaults(run=sniff)
    args = p.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
