"""Static membership's ids (streams/kafka/membership.py): stable across a restart, never shared."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

from streams.kafka.membership import claim_slot, membership

HOST = socket.gethostname()


def test_live_members_get_distinct_slots_and_a_released_slot_is_taken_again(tmp_path: Path) -> None:
    first, second = claim_slot("seqstream", tmp_path), claim_slot("seqstream", tmp_path)
    other_group = claim_slot("seqstream-sink-postgres", tmp_path)
    assert (first.instance_id, second.instance_id) == (f"{HOST}-0", f"{HOST}-1")
    assert other_group.instance_id == f"{HOST}-0", "slots are per group: ids need only be unique within one"
    first.release()
    assert claim_slot("seqstream", tmp_path).instance_id == f"{HOST}-0"


def test_a_sigkilled_members_slot_goes_to_its_successor(tmp_path: Path) -> None:
    code = (
        "import sys, time; from pathlib import Path; from streams.kafka.membership import claim_slot;"
        f"m = claim_slot('seqstream', Path({str(tmp_path)!r})); print(m.instance_id, flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == f"{HOST}-0"
        assert claim_slot("seqstream", tmp_path).instance_id == f"{HOST}-1", "a live member's slot was taken"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
    # The kernel dropped the dead process's lock: its successor is the same member to the broker.
    assert claim_slot("seqstream", tmp_path).instance_id == f"{HOST}-0"


def test_a_configured_id_is_used_as_given_and_none_means_dynamic(tmp_path: Path) -> None:
    assert membership("worker-slot-3", "seqstream", tmp_path).consumer_config() == {
        "group.instance.id": "worker-slot-3"
    }
    assert membership("none", "seqstream", tmp_path).consumer_config() == {}
    assert not list(tmp_path.iterdir()), "a configured id claimed a slot"
