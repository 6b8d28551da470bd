#!/usr/bin/env python3
"""What a hostile pod sends, for the enforcement tests (Python 3 standard library only).
Run inside a pod's network namespace (`ip netns exec POD-NS attack.py ...`).

  attack.py udp-spoof --src IP --sport P --dst IP --dport P [--count N] [--interval S]
      Send N IPv4/UDP datagrams from a raw socket with a forged source address, S seconds
      apart (default 0.05; 0: as fast as it goes). Prints "ready" on stderr first.

  attack.py udp-listen --port P --timeout S
      Count the UDP datagrams that arrive on port P within S seconds; print the count.
      Prints "ready" on stderr once bound.

  attack.py udp-echo --dst IP --dport P --sport P [--timeout S] [--count N] [--size B]
      Send N datagrams of B bytes (default 1 of 4) from port sport, one at a time, each
      waiting for its echo; print how many echoes came back.

  attack.py udp-flood --dst IP --dport P --flows N [--wait S]
      Open N UDP flows to DST:DPORT, one datagram from each of N source ports (sockets kept
      open), then wait S seconds for echoes; print how many flows got one (each flow takes a
      conntrack entry).

  attack.py udp-victim --peer IP --dport P --sport P --wait S
      A connected UDP socket: send one datagram and take its echo, print "ready" on stderr,
      then watch for S seconds whether an ICMP error reaches the socket: print "refused" (an
      ICMP port unreachable arrived) or "quiet".

  attack.py icmp-error --src IP --dst IP --inner-src IP --inner-sport P --inner-dst IP
                       --inner-dport P [--count N]
      Send N ICMP port-unreachable errors from SRC to DST about the UDP datagram
      INNER-SRC:INNER-SPORT -> INNER-DST:INNER-DPORT (a raw socket: any outer source).

  attack.py sctp-raw --src IP --dst IP --sport P --dport P [--count N]
      Send N raw SCTP INIT chunks from SRC:SPORT to DST:DPORT (no SCTP stack needed).

  attack.py arp-claim --iface IF --spa IP --tpa IP [--count N]
      Broadcast N ARP requests "who has TPA, tell SPA" with the interface's own MAC as the
      sender hardware address: a claim that SPA lives here.

  attack.py frame-send --iface IF --dst-mac MAC --kind udp|arp --src IP --dst IP [--vlan TCI] [--count N]
      Send N Ethernet frames to MAC from the interface's own MAC: IPv4/UDP from SRC to DST
      port 80, or a unicast ARP request "who has DST, tell SRC" padded with a message (the
      shapes a covert channel to a colluding pod would use); with an 802.1Q tag of TCI
      (0 is a priority tag) when --vlan is given.

  attack.py tcp-raw --src IP --dst IP --sport P --dport P --flags F [--count N]
      Send N TCP segments with flags F (0x12 is SYN+ACK) from a raw socket, no connection
      behind them.

  attack.py udp-burst --dst IP --dport P --count N [--interval S]
      Send one datagram from each of N fresh sockets (N new connections), S seconds apart
      (default: as fast as it goes). Prints "ready" on stderr first.

  attack.py nd-dad --iface IF --target IPV6 --seconds S
      For S seconds, send IPv6 neighbour solicitations from :: for TARGET (duplicate address
      detection probes) to its solicited-node group, every 50 ms. Prints "ready" on stderr
      first.

  attack.py sniff --iface IF --from-mac MAC --timeout S [--ip-proto N [--dport P]]
      Put IF in promiscuous mode and count the frames with source MAC that arrive within S
      seconds (IPv4 of that protocol to that destination port only, when given); print the
      count. Prints "ready" on stderr once listening.
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
    print("ready", file=sys.stderr, flush=True)
    for _ in range(args.count):
        s.sendto(ip + udp, (args.dst, 0))
        if args.interval:
            time.sleep(args.interval)


def received(s, seconds):
    """What socket `s` receives (`recvfrom`) until `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        s.settimeout(left)
        try:
            yield s.recvfrom(65535)
        except socket.timeout:
            return


def udp_listen(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", args.port))
    print("ready", file=sys.stderr, flush=True)
    print(sum(1 for _ in received(s, args.timeout)))


def udp_from(port):
    """A UDP socket bound to `port` (reusable at once by the next test step)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    return s


def udp_echo(args):
    s = udp_from(args.sport)
    s.settimeout(args.timeout)
    payload = (b"ping" * (args.size // 4 + 1))[: args.size]
    got = 0
    for _ in range(args.count):
        s.sendto(payload, (args.dst, args.dport))
        try:
            if len(s.recv(65535)) == len(payload):
                got += 1
        except socket.timeout:
            pass
    print(got)


def udp_flood(args):
    import select

    socks = []
    for _ in range(args.flows):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", 0))
        s.setblocking(False)
        s.sendto(b"flood", (args.dst, args.dport))
        socks.append(s)
        time.sleep(0.0005)  # paced, so that the switch's upcall queue takes every first packet
    answered = set()
    deadline = time.monotonic() + args.wait
    while (left := deadline - time.monotonic()) > 0 and len(answered) < len(socks):
        waiting = [s for s in socks if s.fileno() not in answered]
        ready, _, _ = select.select(waiting[:1000], [], [], min(left, 0.2))
        for s in ready:
            try:
                s.recv(2048)
                answered.add(s.fileno())
            except OSError:
                pass
    print(len(answered))


def udp_victim(args):
    s = udp_from(args.sport)
    s.connect((args.peer, args.dport))
    s.settimeout(2)
    s.send(b"hello")
    s.recv(2048)
    print("ready", file=sys.stderr, flush=True)
    deadline = time.monotonic() + args.wait
    verdict = "quiet"
    while (left := deadline - time.monotonic()) > 0:
        s.settimeout(left)
        try:
            s.recv(2048)
        except socket.timeout:
            break
        except ConnectionRefusedError:
            verdict = "refused"
            break
    print(verdict)


def ip_header(src, dst, proto, payload_len, ident=0x1234):
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + payload_len, ident, 0, 64, proto, 0, src, dst)
    return ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]


def send_raw(dst, packet, count):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    for _ in range(count):
        s.sendto(packet, (dst, 0))
        time.sleep(0.05)


def icmp_error(args):
    inner_src, inner_dst = socket.inet_aton(args.inner_src), socket.inet_aton(args.inner_dst)
    inner_udp = struct.pack("!HHHH", args.inner_sport, args.inner_dport, 8 + 5, 0)
    inner = ip_header(inner_src, inner_dst, socket.IPPROTO_UDP, 8 + 5) + inner_udp
    icmp = struct.pack("!BBHI", 3, 3, 0, 0) + inner
    icmp = icmp[:2] + struct.pack("!H", checksum(icmp)) + icmp[4:]
    src, dst = socket.inet_aton(args.src), socket.inet_aton(args.dst)
    send_raw(args.dst, ip_header(src, dst, socket.IPPROTO_ICMP, len(icmp)) + icmp, args.count)


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def sctp_raw(args):
    # INIT chunk: type 1, flags 0, length 20, initiate tag, a_rwnd, streams, initial TSN.
    chunk = struct.pack("!BBHIIHHI", 1, 0, 20, 0x1234567, 65535, 1, 1, 1)
    common = struct.pack("!HHII", args.sport, args.dport, 0, 0)
    sctp = common + chunk
    sctp = sctp[:8] + struct.pack("<I", crc32c(sctp)) + sctp[12:]
    src, dst = socket.inet_aton(args.src), socket.inet_aton(args.dst)
    send_raw(args.dst, ip_header(src, dst, 132, len(sctp)) + sctp, args.count)


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


def tcp_raw(args):
    """TCP segments with the given flags from the pod's own address, no connection behind
    them (a SYN+ACK out of nowhere is invalid to conntrack)."""
    src, dst = socket.inet_aton(args.src), socket.inet_aton(args.dst)
    tcp = struct.pack("!HHIIBBHHH", args.sport, args.dport, 1, 1, 5 << 4, args.flags, 65535, 0, 0)
    pseudo = src + dst + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    for _ in range(args.count):
        s.sendto(tcp, (args.dst, 0))
        time.sleep(0.02)


def udp_burst(args):
    """One datagram from each of `count` fresh sockets (a new connection each), as fast as it
    goes, or `interval` seconds apart. Prints "ready" on stderr first."""
    print("ready", file=sys.stderr, flush=True)
    for _ in range(args.count):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"npagent-e2e", (args.dst, args.dport))
        s.close()
        if args.interval:
            time.sleep(args.interval)


def nd_dad(args):
    """Neighbour solicitations from :: for TARGET (duplicate address detection probes): to a
    node doing DAD for TARGET they say someone else holds it."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args.iface, 0))
    mac = s.getsockname()[4]
    target = socket.inet_pton(socket.AF_INET6, args.target)
    group = socket.inet_pton(socket.AF_INET6, "ff02::1:ff00:0")[:13] + target[13:]
    unspecified = bytes(16)
    icmp = struct.pack("!BBHI", 135, 0, 0, 0) + target
    pseudo = unspecified + group + struct.pack("!I3xB", len(icmp), 58)
    icmp = icmp[:2] + struct.pack("!H", checksum(pseudo + icmp)) + icmp[4:]
    ip6 = struct.pack("!IHBB", 6 << 28, len(icmp), 58, 255) + unspecified + group
    frame = bytes([0x33, 0x33]) + group[12:] + mac + struct.pack("!H", 0x86DD) + ip6 + icmp
    print("ready", file=sys.stderr, flush=True)
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        s.send(frame)
        time.sleep(0.05)


def wanted_ip(frame, proto, dport):
    if proto is None:
        return True
    if frame[12:14] != b"\x08\x00" or frame[14 + 9] != proto:
        return False
    ihl = (frame[14] & 0x0F) * 4
    return dport is None or struct.unpack("!H", frame[14 + ihl + 2 : 14 + ihl + 4])[0] == dport


def sniff(args):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((args.iface, 0))
    ifindex = socket.if_nametoindex(args.iface)
    # PACKET_ADD_MEMBERSHIP (1) of PACKET_MR_PROMISC (1): every frame the link delivers.
    s.setsockopt(263, 1, struct.pack("IHH8s", ifindex, 1, 0, b""))
    want = mac_bytes(args.from_mac)
    print("ready", file=sys.stderr, flush=True)
    # addr[2] is the packet type: 4 (PACKET_OUTGOING) is the pod's own sending.
    print(
        sum(
            1
            for frame, addr in received(s, args.timeout)
            if addr[2] != 4 and frame[6:12] == want and wanted_ip(frame, args.ip_proto, args.dport)
        )
    )


# Each command's options: `name` is a required string, `name:type` a required value of that
# type (int, float, hex for an integer in any base), `name=default` (or `name:type=default`) an
# optional one, `name?` (or `name:type?`) an optional one without default.
FOUR_TUPLE = "src dst sport:int dport:int"
COMMANDS = {
    "udp-spoof": (udp_spoof, f"{FOUR_TUPLE} count:int=3 interval:float=0.05"),
    "udp-listen": (udp_listen, "port:int timeout:float"),
    "udp-echo": (udp_echo, "dst dport:int sport:int timeout:float=1.0 count:int=1 size:int=4"),
    "udp-flood": (udp_flood, "dst dport:int flows:int wait:float=1.0"),
    "udp-victim": (udp_victim, "peer dport:int sport:int wait:float"),
    "icmp-error": (icmp_error, "src dst inner-src inner-dst inner-sport:int inner-dport:int count:int=3"),
    "sctp-raw": (sctp_raw, f"{FOUR_TUPLE} count:int=3"),
    "arp-claim": (arp_claim, "iface spa tpa count:int=3"),
    "frame-send": (frame_send, "iface dst-mac kind src dst vlan:int? count:int=3"),
    "tcp-raw": (tcp_raw, f"{FOUR_TUPLE} flags:hex count:int=3"),
    "udp-burst": (udp_burst, "dst dport:int count:int interval:float=0.0"),
    "nd-dad": (nd_dad, "iface target seconds:float"),
    "sniff": (sniff, "iface from-mac timeout:float ip-proto:int? dport:int?"),
}
TYPES = {"str": str, "int": int, "float": float, "hex": lambda v: int(v, 0)}


def add_options(parser, spec):
    for option in spec.split():
        name, _, default = option.partition("=")
        optional = name.endswith("?")
        name, _, kind = name.rstrip("?").partition(":")
        convert = TYPES[kind or "str"]
        if default:
            parser.add_argument(f"--{name}", type=convert, default=convert(default))
        else:
            parser.add_argument(f"--{name}", type=convert, required=not optional)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for command, (run, spec) in COMMANDS.items():
        c = sub.add_parser(command)
        add_options(c, spec)
        c.set_defaults(run=run)
    args = p.parse_args()
    if args.cmd == "frame-send" and args.kind not in ("udp", "arp"):
        p.error("frame-send --kind is udp or arp")
    args.run(args)


if __name__ == "__main__":
    main()
