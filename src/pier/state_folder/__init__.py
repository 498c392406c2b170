"""The state folder (`<state_dir>`, `~/.pier` by default): where each store keeps its file, how a SQLite file of it
is opened and checked, and how any of its files is checked and copied for backups. Imports nothing of pier but
`errors`: the control plane, autoscaling, the runtime and transform each keep their own file through it, and the
gateway, which joins them, lists them all (`pier.gateway.state_files`)."""
