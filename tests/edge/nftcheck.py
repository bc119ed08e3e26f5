"""What the nftables sink's end-to-end tests (ledger-api, nginx) share:
the check printer, a TCP connect from a chosen source address, and whether
an address is in the sink's IPv4 set."""
import socket
import subprocess

failures = 0


def check(name, expected, actual):
    global failures
    if expected == actual:
        print(f"ok   {name}", flush=True)
    else:
        failures += 1
        print(f"FAIL {name}: expected {expected!r}, got {actual!r}",
              flush=True)


def connects(port, src):
    """A TCP connect from src to 127.0.0.1:port within 0.7 s, below the
    first SYN retransmission: a ban that only expires later does not
    count as through."""
    s = socket.socket()
    s.settimeout(0.7)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def in_set(addr, table="sluice", set4="deny4"):
    out = subprocess.run(["nft", "list", "set", "inet", table, set4],
                         capture_output=True, text=True).stdout
    return addr in out
