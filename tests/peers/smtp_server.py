"""A real SMTP server for the e-mail channel tests: aiosmtpd (Debian python3-aiosmtpd) with
STARTTLS required and AUTH (PLAIN/LOGIN) required over TLS. Every accepted message is appended
as one JSON line to the mailbox file the test reads.

Usage: smtp_server.py PORT CERT KEY MAILBOX USER PASSWORD
"""

import json
import signal
import ssl
import sys

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

port, cert, key, mailbox, user, password = sys.argv[1:7]


class Mailbox:
    async def handle_DATA(self, server, session, envelope):
        with open(mailbox, "a", encoding="utf-8") as f:
            f.write(json.dumps({
                "from": envelope.mail_from,
                "to": envelope.rcpt_tos,
                "tls": session.ssl is not None,
                "user": session.authenticated and user,
                "data": envelope.content.decode("utf-8", "replace"),
            }) + "\n")
        return "250 2.0.0 Message accepted for delivery"


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = (isinstance(auth_data, LoginPassword)
          and auth_data.login.decode() == user
          and auth_data.password.decode() == password)
    return AuthResult(success=ok, handled=False)


context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain(cert, key)
controller = Controller(
    Mailbox(),
    hostname="127.0.0.1",
    port=int(port),
    server_hostname="localhost",
    tls_context=context,
    require_starttls=True,
    authenticator=authenticator,
    auth_require_tls=True,
)
controller.start()
print("ready", flush=True)
signal.sigwait({signal.SIGTERM, signal.SIGINT})
controller.stop()
