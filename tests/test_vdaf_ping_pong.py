"""The ping-pong topology (draft-irtf-cfrg-vdaf-20, Section 5.7.1)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppm_reference.vdaf.ping_pong import (
    CONTINUE,
    FINISH,
    INITIALIZE,
    Continued,
    Finished,
    FinishedWithOutbound,
    PingPongError,
    Rejected,
    decode_message,
    encode_message,
    ping_pong_helper_init,
    ping_pong_leader_continued,
    ping_pong_leader_init,
)
from ppm_reference.vdaf.prio3 import Prio3Count, Prio3Histogram

CTX = b"ctx"


def _report(vdaf, measurement):  # type: ignore[no-untyped-def]
    nonce = os.urandom(16)
    public_share, input_shares = vdaf.shard(CTX, measurement, nonce, os.urandom(vdaf.RAND_SIZE))
    return (nonce, vdaf.encode_public_share(public_share),
            [vdaf.encode_input_share(s) for s in input_shares])


@pytest.mark.parametrize("vdaf,measurement", [(Prio3Count(2), 1), (Prio3Histogram(2, 7, 3), 4)])
def test_one_round_trip(vdaf, measurement) -> None:  # type: ignore[no-untyped-def]
    key = os.urandom(vdaf.VERIFY_KEY_SIZE)
    nonce, ps, (leader_share, helper_share) = _report(vdaf, measurement)
    leader = ping_pong_leader_init(vdaf, key, CTX, b"", nonce, ps, leader_share)
    assert isinstance(leader, Continued)
    helper = ping_pong_helper_init(vdaf, key, CTX, b"", nonce, ps, helper_share, leader.outbound)
    assert isinstance(helper, FinishedWithOutbound)
    final = ping_pong_leader_continued(vdaf, CTX, b"", leader, helper.outbound)
    assert isinstance(final, Finished)
    total = vdaf.unshard(None, [final.out_share, helper.out_share], 1)
    assert total == (measurement if isinstance(vdaf, Prio3Count) else
                     [int(i == measurement) for i in range(7)])


def test_rejections() -> None:
    vdaf = Prio3Histogram(2, 5, 2)
    key = os.urandom(32)
    nonce, ps, (leader_share, helper_share) = _report(vdaf, 1)
    assert isinstance(ping_pong_leader_init(vdaf, key, CTX, b"", nonce, ps, leader_share[:-1]),
                      Rejected)
    leader = ping_pong_leader_init(vdaf, key, CTX, b"", nonce, ps, leader_share)
    assert isinstance(leader, Continued)
    # Wrong context at the helper: the verifier check fails.
    rejected = ping_pong_helper_init(vdaf, key, b"other", b"", nonce, ps, helper_share,
                                     leader.outbound)
    assert isinstance(rejected, Rejected) and rejected.reason
    # A helper answering with "initialize" is rejected by the leader.
    assert isinstance(ping_pong_leader_continued(vdaf, CTX, b"", leader, leader.outbound),
                      Rejected)
    # A finish message carrying the wrong joint randomness seed.
    bad = encode_message(FINISH, bytes(32))
    assert isinstance(ping_pong_leader_continued(vdaf, CTX, b"", leader, bad), Rejected)
    with pytest.raises(ValueError):
        ping_pong_leader_init(Prio3Count(3), key, CTX, b"", nonce, ps, leader_share)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([INITIALIZE, CONTINUE, FINISH]), st.binary(max_size=40),
       st.binary(max_size=40))
def test_message_codec_roundtrip(msg_type: int, a: bytes, b: bytes) -> None:
    items = (a, b) if msg_type == CONTINUE else (a,)
    enc = encode_message(msg_type, *items)
    assert decode_message(enc) == (msg_type, list(items))
    with pytest.raises(PingPongError):
        decode_message(enc + b"\0")
    with pytest.raises(PingPongError):
        decode_message(enc[:-1] if len(enc) > 5 else b"\x07")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=30))
def test_message_decoder_fuzz(data: bytes) -> None:
    try:
        msg_type, items = decode_message(data)
    except PingPongError:
        return
    assert encode_message(msg_type, *items) == data
