"""The state folder (`<state_dir>`, `~/.pier` by default) and the one interface of the stores that keep a file in it
(`store.StoreFile`): where each file lies, how it is opened, checked and copied for backups, and how its rows are
read (`rows.py`). Imports nothing of pier but `errors`: the control plane, autoscaling, the runtime and transform
each declare their store on it, and the gateway, which joins them, lists them all (`pier.gateway.state_files`)."""
