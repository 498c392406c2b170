"""Who may call pier, and no way in from a web page: keys and roles, SigV4 and bearer verification, the
Host/Origin check, the audit log, and the model server's own guards. See docs/security.md."""
