#!/usr/bin/env python3
"""Listeners and prober of the testbed pods (Python 3 standard library only).

  probe.py serve --pidfile FILE [--tcp 80,81] [--udp 80] [--log-peers]
      Run inside a pod's network namespace: accept TCP connections (and close them) and echo
      UDP datagrams. Writes FILE (its pid) once every socket is bound. With --log-peers it
      prints PROTO/PORT and the peer's address for each connection and datagram.

  probe.py probe-from FROM [--timeout S] [--ports P,...] TARGET...
      Run inside the network namespace of pod FROM (ns/name). TARGET is ns/name=IP, or
      ns/name=IP:BASE for ports moved to BASE (a NodePort: 30000 stands for 80, 30001 for 81,
      and the target's name stays the pod's). Probes
      every target on every port (--ports: PROTO/NUMBER, PROTO tcp or udp; by default
      tcp/80,tcp/81,udp/80) at once and prints one line per probe:
          FROM TO PROTO/PORT 1|0
      TCP counts as reachable when the handshake completes, UDP when the echo comes back.

  probe.py matrix STATE_DIR [--timeout S] [--from ID,...] [--to ID,...] [--ports P,...]
                  [--outside] [--table]
      Probe all pairs of the testbed in STATE_DIR (its pods.tsv) in parallel, one probe-from
      per source through `ip netns exec`. --from and --to may name pods and outside hosts
      (outside.tsv, ids outside/NAME); without them every pod is a source and a target, and
      with --outside every outside host too; --ports as for probe-from. Prints the probe
      lines sorted, or with --table
      one truth table per port in the style of upstream Kubernetes' netpol e2e tests
      ('.' reachable, 'X' not).
"""

import argparse
import errno
import os
import selectors
import signal
import socket
import subprocess
import sys
import time

PORTS = ("tcp/80", "tcp/81", "udp/80")


def serve(args):
    sel = selectors.DefaultSelector()
    for port in (int(p) for p in args.tcp.split(",") if p):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen(256)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, "tcp")
    for port in (int(p) for p in args.udp.split(",") if p):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", port))
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, "udp")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    tmp = args.pidfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(tmp, args.pidfile)
    while True:
        for key, _ in sel.select():
            sock = key.fileobj
            try:
                if key.data == "tcp":
                    conn, peer = sock.accept()
                    conn.close()
                else:
                    data, peer = sock.recvfrom(65535)
                    sock.sendto(data, peer)
                if args.log_peers:
                    print("%s/%d %s" % (key.data, sock.getsockname()[1], peer[0]), flush=True)
            except (BlockingIOError, ConnectionError, OSError):
                pass


def parse_ports(text):
    """tcp/80,udp/53 -> ("tcp/80", "udp/53"), checked."""
    ports = tuple(p.strip() for p in text.split(",") if p.strip())
    for p in ports:
        proto, _, num = p.partition("/")
        if proto not in ("tcp", "udp") or not num.isdigit() or not 0 < int(num) < 65536:
            raise SystemExit("bad port %r (tcp/N or udp/N)" % p)
    return ports


def probe_from(src, targets, timeout, ports=PORTS):
    """Probe every (target, port) concurrently; returns {(to, port): bool}."""
    sel = selectors.DefaultSelector()
    result = {}
    pending = {}
    for target in targets:
        name, ip = target.split("=", 1)
        # IP:BASE: the ports sit BASE - 80 higher (a NodePort's 30000 stands for 80)
        shift = 0
        if ":" in ip:
            ip, base = ip.split(":", 1)
            shift = int(base) - 80
        for port in ports:
            proto, num = port.split("/")
            num = int(num) + shift
            result[(name, port)] = False
            if proto == "tcp":
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                err = s.connect_ex((ip, int(num)))
                if err == 0:
                    result[(name, port)] = True
                    s.close()
                    continue
                if err != errno.EINPROGRESS:
                    s.close()
                    continue
                sel.register(s, selectors.EVENT_WRITE, (name, port))
            else:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.setblocking(False)
                s.connect((ip, int(num)))
                payload = ("%s>%s" % (src, name)).encode()
                try:
                    s.send(payload)
                except OSError:
                    s.close()
                    continue
                sel.register(s, selectors.EVENT_READ, (name, port))
            pending[s] = (name, port)
    deadline = time.monotonic() + timeout
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for key, _ in sel.select(left):
            s = key.fileobj
            name, port = key.data
            ok = False
            try:
                if port.startswith("tcp"):
                    ok = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
                else:
                    ok = len(s.recv(2048)) > 0
            except OSError:
                ok = False  # refused (RST or ICMP port unreachable)
            result[(name, port)] = ok
            sel.unregister(s)
            s.close()
            del pending[s]
    for s in pending:
        s.close()
    return result


def cmd_probe_from(args):
    res = probe_from(args.src, args.targets, args.timeout, parse_ports(args.ports))
    for (to, port), ok in sorted(res.items()):
        print("%s %s %s %d" % (args.src, to, port, 1 if ok else 0))


def read_hosts(state, table):
    """pods.tsv or outside.tsv (absent: none): ns name ip mac ofport netns iface, one a line."""
    hosts = []
    path = os.path.join(state, table)
    if table != "pods.tsv" and not os.path.exists(path):
        return hosts
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and not line.startswith("#"):
                hosts.append({"id": fields[0] + "/" + fields[1], "ip": fields[2], "netns": fields[5]})
    return hosts


def cmd_matrix(args):
    parse_ports(args.ports)  # refused here, not once per source
    pods = read_hosts(args.state, "pods.tsv")
    outside = read_hosts(args.state, "outside.tsv")
    default = pods + outside if args.outside else pods

    def pick(sel):
        if not sel:
            return default
        return [h for h in pods + outside if h["id"] in sel.split(",")]

    srcs = pick(args.src)
    dsts = pick(args.to)
    targets = ["%s=%s" % (p["id"], p["ip"]) for p in dsts]
    me = os.path.abspath(__file__)
    procs = []
    for p in srcs:
        cmd = ["ip", "netns", "exec", p["netns"], sys.executable, me, "probe-from",
               "--timeout", str(args.timeout), "--ports", args.ports, p["id"]] + targets
        procs.append((p, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    lines = []
    failed = False
    for p, proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            sys.stderr.write("probe from %s failed (%d): %s" % (p["id"], proc.returncode, err))
            failed = True
            continue
        lines.extend(l for l in out.splitlines() if l.strip())
    if failed:
        return 1
    lines.sort()
    if args.table:
        print_tables(lines, [p["id"] for p in srcs], [p["id"] for p in dsts], parse_ports(args.ports))
    else:
        for l in lines:
            print(l)
    return 0


def print_tables(lines, srcs, dsts, ports):
    got = {}
    for l in lines:
        f, t, port, ok = l.split()
        got[(f, t, port)] = ok == "1"
    width = max(len(p) for p in ports + tuple(srcs) + tuple(dsts)) + 1
    cell = lambda s: s.ljust(width)
    for port in ports:
        print((cell(port) + "".join(cell(t) for t in dsts)).rstrip())
        for f in srcs:
            row = "".join(cell("." if got.get((f, t, port)) else "X") for t in dsts)
            print((cell(f) + row).rstrip())
        print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--pidfile", required=True)
    s.add_argument("--tcp", default="80,81")
    s.add_argument("--udp", default="80")
    s.add_argument("--tag", default="", help="ignored; marks the process for its owner")
    s.add_argument("--log-peers", action="store_true", help="print PROTO/PORT PEER-IP for each connection")
    p = sub.add_parser("probe-from")
    p.add_argument("src")
    p.add_argument("targets", nargs="*")
    p.add_argument("--timeout", type=float, default=0.5)
    p.add_argument("--ports", default=",".join(PORTS))
    m = sub.add_parser("matrix")
    m.add_argument("state")
    m.add_argument("--timeout", type=float, default=float(os.environ.get("NPA_PROBE_TIMEOUT", "0.5")))
    m.add_argument("--from", dest="src", default="")
    m.add_argument("--to", default="")
    m.add_argument("--ports", default=",".join(PORTS))
    m.add_argument("--outside", action="store_true", help="outside hosts too, by default")
    m.add_argument("--table", action="store_true")
    args = ap.parse_args()
    if args.cmd == "serve":
        serve(args)
    elif args.cmd == "probe-from":
        cmd_probe_from(args)
    else:
        sys.exit(cmd_matrix(args))


if __name__ == "__main__":
    main()
