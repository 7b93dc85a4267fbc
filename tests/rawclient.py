"""Old import path (before issue 27): tests/support/rawclient.py. Kept until the branches of
issue 27 are merged; then removed."""
from tests.support.rawclient import RawConn, batch  # noqa: F401
