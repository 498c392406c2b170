"""The gateway's copy of a remote copy's log, under `<state_dir>/copies/<copy_id>/copy.log`: it outlives the
copy's node."""

from __future__ import annotations

from pathlib import Path

from pier.backends.logfile import note, rotate


class LogMirror:
    """The gateway's copy of a remote copy's log: the lines its actor sends, and the gateway's own notes."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "copy.log"
        self._offset_path = folder / "node-offset"
        try:
            self.offset = int(self._offset_path.read_text())  # how far the node's log has been mirrored
        except (OSError, ValueError):
            self.offset = 0

    def append(self, data: bytes, offset: int) -> None:
        if data:
            rotate(self.path)
            with self.path.open("ab") as out:
                out.write(data)
        if offset != self.offset:
            self.offset = offset
            self._offset_path.write_text(str(offset))

    def note(self, line: str) -> None:
        note(self.path, line)
