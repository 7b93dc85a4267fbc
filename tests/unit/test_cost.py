"""What a move costs (bench/analysis/cost.py): the price file, the arithmetic, the medians per
configuration and the headline cases, and the request kinds the brokers' S3 client counts."""
from __future__ import annotations

import math

import pytest

from bench.analysis import cost
from bench.history.names import OBJSTORE_REQUEST_KINDS


def test_request_kinds_are_the_object_store_clients():
    from systems.shared.objstore import REQUEST_KINDS

    assert OBJSTORE_REQUEST_KINDS == REQUEST_KINDS


def test_default_price_table_is_cited_and_dated():
    p = cost.load_prices()
    assert p.currency == "USD" and p.recorded and p.sources
    assert any("aws.amazon.com/s3/pricing" in s for s in p.sources)
    assert p.cross_zone_per_gb == 0.02 and p.requests_per_1000["put"] == 0.005 and p.requests_per_1000["get"] == 0.0004
    assert "recorded" in p.cite()


@pytest.mark.parametrize("text, needle", [
    ("name: x\n", "missing"),
    ("[1, 2]\n", "expected a mapping"),
    ("name: x\ncurrency: USD\nrecorded: d\nsources: [s]\ncross_zone_per_gb: 0.02\nrequests_per_1000: {put: 1}\n",
     "must price exactly"),
    ("name: x\ncurrency: USD\nrecorded: d\nsources: [s]\ncross_zone_per_gb: -1\n"
     "requests_per_1000: {put: 1, get: 1, list: 1, head: 1, delete: 0}\n", "cross_zone_per_gb must be a number >= 0"),
    ("name: x\nprise: 1\n", "unknown key(s) ['prise']"),
    ("name: [x\n", "not valid YAML"),
])
def test_bad_price_files_name_the_file_and_the_key(tmp_path, text, needle):
    f = tmp_path / "prices.yaml"
    f.write_text(text)
    with pytest.raises(cost.PriceError) as e:
        cost.load_prices(f)
    assert needle in str(e.value) and str(f) in str(e.value)


def test_missing_price_file():
    with pytest.raises(cost.PriceError, match="cannot read price file /nonexistent.yaml"):
        cost.load_prices("/nonexistent.yaml")


def test_move_cost_prices_bytes_crossing_zones_and_each_request_kind():
    p = cost.load_prices()
    c = cost.move_cost(p, 2e9, {"put": 2000, "get": 1000, "list": 1000, "head": 0, "delete": 5000})
    assert c["transfer"] == pytest.approx(0.04)  # 2 GB x 0.02
    assert c["requests"] == pytest.approx(2 * 0.005 + 0.0004 + 0.005)  # DELETE free
    assert c["total"] == pytest.approx(c["transfer"] + c["requests"])
    unknown = cost.move_cost(p, None, None)
    assert unknown == {"transfer": None, "requests": None, "total": None}


def _move(config, system, ib, put, secs=10.0, parts=1):
    return {"config_key": config, "system": system, "move_seconds": secs, "partitions_in_action": parts,
            "bytes_moved_inter_broker": ib, "bytes_moved_objstore": 0.0,
            **{f"objstore_{k}_requests": 0 for k in OBJSTORE_REQUEST_KINDS}, "objstore_put_requests": put}


def test_cost_by_config_takes_medians_of_single_partition_measured_moves():
    p = cost.load_prices()
    moves = [_move("a", "replication", 1e9, 0), _move("a", "replication", 3e9, 0), _move("a", "replication", 2e9, 0),
             _move("a", "replication", 9e9, 0, parts=2),  # a drain's move: not alone
             _move("a", "replication", 9e9, 0, secs=None),  # never finished
             {**_move("b", "shared", 0.0, 4), "objstore_get_requests": None, "objstore_put_requests": None,
              "objstore_list_requests": None, "objstore_head_requests": None, "objstore_delete_requests": None}]
    by = cost.cost_by_config(p, moves)
    assert set(by) == {"a"}  # b journaled no requests
    assert by["a"]["moves"] == 3 and by["a"]["inter_broker_bytes"] == 2e9
    assert by["a"]["total"] == pytest.approx(0.04) and by["a"]["total_max"] == pytest.approx(0.06)


def test_headline_cases_priced_only_where_the_network_carries_them():
    p = cost.load_prices()
    measured = cost.cost_by_config(p, [_move("s", "shared", 0.0, 3), _move("s", "shared", 0.0, 5),
                                       _move("r", "replication", 1e9, 0)])
    head = [
        {"case": "partition", "system": "shared", "link_gbit_s": 10, "status": "not validated", "bytes_moved": None,
         "moves": 1},
        {"case": "cluster", "system": "shared", "link_gbit_s": 10, "status": "validated", "bytes_moved": 1e6,
         "moves": 100},
        {"case": "partition", "system": "replication", "link_gbit_s": 1, "status": "infeasible", "bytes_moved": None,
         "moves": 1},
        {"case": "partition", "system": "replication", "link_gbit_s": 10, "status": "not validated",
         "bytes_moved": None, "moves": 1},
        {"case": "partition", "system": "replication", "link_gbit_s": 25, "status": "validated",
         "bytes_moved": 8.2e12, "moves": 1},
        {"case": "partition", "system": "tiered", "link_gbit_s": 25, "status": "validated", "bytes_moved": 1e9,
         "moves": 1},
    ]
    rows = cost.headline_costs(p, head, measured)
    # shared: nothing between brokers, its median 4 PUTs per move, whatever the time's status
    assert rows[0]["inter_broker_bytes"] == 0 and rows[0]["requests"]["put"] == 4
    assert rows[0]["total"] == pytest.approx(4 * 0.005 / 1000)
    assert rows[1]["requests"]["put"] == 400 and rows[1]["total"] == pytest.approx(400 * 0.005 / 1000)
    assert rows[2]["total"] is None and rows[2]["why"] == "the network cannot carry this case"
    assert rows[3]["total"] is None and "not validated" in rows[3]["why"]
    assert rows[4]["total"] == pytest.approx(8.2e12 / 1e9 * 0.02)  # 8.2 TB across a zone: 164 USD
    assert rows[5]["total"] is None and "journaled its requests" in rows[5]["why"]  # no tiered move measured


def test_a_shared_case_pays_the_puts_of_its_tail_and_says_how_far_beyond_the_measured_tails():
    """A close uploads its tail in parts, one PUT each (make bench at 8691430: 2, 4 and 10 PUTs for
    4, 16 and 64 MiB tails): a headline case with a 512 MiB tail is not priced at the small tails'
    median of 2 PUTs, and the row says the fit's reach."""
    p = cost.load_prices()
    part = 8 * 2**20
    moves = [{**_move("up", "shared", 0.0, 1 + math.ceil(t / part)), "bytes_moved_objstore": t, "objstore_get_requests": 1}
             for t in (0.5e6, 0.6e6, 0.5e6, 4.2e6, 4.2e6, 16.8e6, 16.8e6, 67.2e6, 67.3e6)]
    measured = cost.cost_by_config(p, moves)
    tail = 512 * 2**20
    big, none = cost.headline_costs(p, [
        {"case": "partition", "system": "shared", "link_gbit_s": 10, "status": "not validated", "bytes_moved": None,
         "moves": 1, "validity": {"tail": {"projected": tail}}},
        {"case": "partition", "system": "shared", "link_gbit_s": 10, "status": "not validated", "bytes_moved": None,
         "moves": 1}], measured)
    assert none["requests"]["put"] == 2 and none["requests_basis"] is None  # no tail known: the median
    assert 1 + tail / part * 0.8 < big["requests"]["put"] < 1 + tail / part * 1.25, big  # ~65 PUTs
    assert big["requests"]["get"] == 1  # the open's reads do not grow with the tail
    assert "PUT" in big["requests_basis"] and "7.98x beyond them" in big["requests_basis"], big["requests_basis"]
    assert big["total"] == pytest.approx(big["requests"]["put"] * 0.005 / 1000 + 0.0004 / 1000)
