"""Static group membership: an id per consumer that survives its process, claimed per host.

A member that dies holds its partitions until its session times out (30 s by default); a dynamic
member that comes back is a stranger to the group and waits that out like everyone else. With a
`group.instance.id` the broker knows it again and hands it the same partitions at once, without a
rebalance. The id must be the same after a restart and never held by two live members of a group.

Where the operator gives none, a slot is claimed on this host: the lowest `n` whose lock file for
the group no live process holds, `<hostname>-<n>`. `flock` locks go with their process however it
ends (SIGKILL included), so a restarted worker takes its predecessor's slot, and two workers on one
host get two. A graceful stop does not leave the group either (static members never do): its
partitions wait for it to come back, or for its session to end.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import re
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

DYNAMIC = "none"
# Host-wide, not per data directory: two workers with different data directories on one host would
# otherwise claim the same slot and fence each other.
SLOT_DIR = Path(tempfile.gettempdir()) / "seqstream-slots"


@dataclass
class Membership:
    """The `group.instance.id` a consumer joins with (None = dynamic), and the slot lock behind it."""

    instance_id: str | None
    # Held open for the process's life: closing it would free the slot for another process.
    _lock: IO[str] | None = field(default=None, repr=False)

    def consumer_config(self) -> dict[str, str]:
        return {"group.instance.id": self.instance_id} if self.instance_id else {}

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def membership(configured: str, group: str, slot_dir: Path = SLOT_DIR) -> Membership:
    """The configured id, dynamic membership for `none`, else a slot claimed on this host for `group`."""
    if configured == DYNAMIC:
        return Membership(None)
    if configured:
        return Membership(configured)
    return claim_slot(group, slot_dir)


def claim_slot(group: str, slot_dir: Path = SLOT_DIR) -> Membership:
    slot_dir.mkdir(parents=True, exist_ok=True)
    if slot_dir.stat().st_uid == os.geteuid():
        slot_dir.chmod(0o1777)  # other users' workers share the folder, as /tmp is shared
    name = re.sub(r"[^A-Za-z0-9._-]", "_", group)
    host = socket.gethostname()
    for n in itertools.count():
        try:
            lock = open(slot_dir / f"{name}.{n}.lock", "a+")  # noqa: SIM115 - held for the process's life
        except PermissionError:  # another user's worker made it: its slot, not ours
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return Membership(f"{host}-{n}", lock)
    raise AssertionError("unreachable")
