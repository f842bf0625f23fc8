"""Review finding: UHP_REPLICA_ID names a folder (data_dir/replicas/<id>/run/local: the local
sandbox's turn folders, each emptied when its replica starts). The id ".." passes the
setting's pattern and makes that folder data_dir/run/local, the one a server without an id
uses: a replica of id ".." starting beside one without an id (its id kept in the shared data
folder) deletes that one's live turn folders, the failure replica folders exist to prevent."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from uhp_server.settings import Settings


def test_the_replica_id_dot_dot_is_refused() -> None:
    with pytest.raises(ValidationError):
        Settings(replica_id="..")


def test_a_plain_replica_id_is_taken() -> None:
    assert Settings(replica_id="r0.eu-1").replica_id == "r0.eu-1"
