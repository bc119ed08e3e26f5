#!/usr/bin/python3
"""An SMTP server for the alert suite (Debian's python3-aiosmtpd): listens
on 127.0.0.1:PORT and writes each message it accepts to DIR/N.eml, the
envelope first ("MAIL FROM:", one "RCPT TO:" per recipient, a blank
line), then the message as received.  Runs until killed.

usage: smtp_sink.py PORT DIR
"""
import os
import sys
import threading

from aiosmtpd.controller import Controller


class Keep:
    def __init__(self, out):
        self.out = out
        self.n = 0

    async def handle_DATA(self, server, session, envelope):
        self.n += 1
        tmp = os.path.join(self.out, "%d.tmp" % self.n)
        with open(tmp, "wb") as f:
            f.write(b"MAIL FROM:" + envelope.mail_from.encode() + b"\n")
            for r in envelope.rcpt_tos:
                f.write(b"RCPT TO:" + r.encode() + b"\n")
            f.write(b"\n")
            f.write(envelope.original_content or envelope.content)
        os.rename(tmp, os.path.join(self.out, "%d.eml" % self.n))
        return "250 OK"


def main():
    port, out = int(sys.argv[1]), sys.argv[2]
    c = Controller(Keep(out), hostname="127.0.0.1", port=port)
    c.start()
    open(os.path.join(out, "ready"), "w").close()
    try:
        threading.Event().wait()
    finally:
        c.stop()


if __name__ == "__main__":
    main()
