"""`python -m pier` is the `pier` command."""

from pier.cli import app

app(prog_name="pier")
