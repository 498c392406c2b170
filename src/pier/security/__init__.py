"""Who may call the gateway, and no way in from a web page: keys and roles, SigV4 and bearer verification, the
Host/Origin check, the audit log (the gateway's guard, `guard.py`); and what the CLI and bench need to reach a
gateway (`client_credentials`, `client_trust`, `signing`). It imports nothing of pier's processes: the gateway
hands it what it needs (which endpoint a name reaches, the body limits), a copy's own guard lives in
pier.server.middleware.model_server_guard, and the copy secret in pier.channel. See docs/security.md."""
