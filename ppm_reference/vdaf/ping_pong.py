"""The ping-pong topology for two Aggregators (draft-irtf-cfrg-vdaf-20, Section 5.7.1) and
the verification states of Appendix B.

The draft's functions catch every exception and return `Rejected()`. Here only the
exceptions that bad input can cause are caught (`ValueError` and its subclasses: every
decoding and verification error of this package), and `Rejected` records the reason,
so that a bug is not silently turned into a rejected report and an Aggregator can say
why it rejected one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ppm_reference.vdaf.vdaf import Vdaf

# MessageType (Section 5.7.1).
INITIALIZE = 0
CONTINUE = 1
FINISH = 2


class PingPongError(ValueError):
    """A malformed ping-pong message."""


class State:
    """A verification state (Appendix B)."""


@dataclass(frozen=True, eq=True)
class Start(State):
    pass


@dataclass(frozen=True, eq=True)
class Continued(State):
    verify_state: Any
    verify_round: int
    outbound: bytes


@dataclass(frozen=True, eq=True)
class Finished(State):
    out_share: Any


@dataclass(frozen=True, eq=True)
class FinishedWithOutbound(State):
    out_share: Any
    outbound: bytes


@dataclass(frozen=True, eq=True)
class Rejected(State):
    reason: str = ""


def encode_message(msg_type: int, *items: bytes) -> bytes:
    """Encode a ping-pong `Message`: the type byte, then each field as opaque<0..2^32-1>."""
    expected = {INITIALIZE: 1, CONTINUE: 2, FINISH: 1}.get(msg_type)
    if expected is None or len(items) != expected:
        raise PingPongError(f"bad ping-pong message type {msg_type} with {len(items)} fields")
    out = bytes([msg_type])
    for item in items:
        out += len(item).to_bytes(4, "big") + item
    return out


def decode_message(encoded: bytes) -> tuple[int, list[bytes]]:
    """Strictly decode a ping-pong `Message` (no trailing bytes)."""
    if not encoded:
        raise PingPongError("empty ping-pong message")
    msg_type = encoded[0]
    count = {INITIALIZE: 1, CONTINUE: 2, FINISH: 1}.get(msg_type)
    if count is None:
        raise PingPongError(f"unknown ping-pong message type {msg_type}")
    items = []
    pos = 1
    for _ in range(count):
        if len(encoded) < pos + 4:
            raise PingPongError("truncated ping-pong message")
        length = int.from_bytes(encoded[pos : pos + 4], "big")
        pos += 4
        if len(encoded) < pos + length:
            raise PingPongError("truncated ping-pong message")
        items.append(bytes(encoded[pos : pos + length]))
        pos += length
    if pos != len(encoded):
        raise PingPongError("trailing bytes after ping-pong message")
    return msg_type, items


def ping_pong_leader_init(vdaf: Vdaf, vdaf_verify_key: bytes, ctx: bytes, agg_param: bytes,
                          nonce: bytes, public_share: bytes,
                          input_share: bytes) -> Continued | Rejected:
    """Called by the Leader to initialize ping-ponging."""
    _check_two(vdaf)
    v: Any = vdaf
    try:
        decoded = v.decode_public_share(public_share), v.decode_input_share(0, input_share)
    except ValueError as exc:
        return Rejected(str(exc))
    return ping_pong_leader_init_decoded(vdaf, vdaf_verify_key, ctx, agg_param, nonce,
                                         *decoded)


def ping_pong_leader_init_decoded(vdaf: Vdaf, vdaf_verify_key: bytes, ctx: bytes,
                                  agg_param: bytes, nonce: bytes, public_share: Any,
                                  input_share: Any) -> Continued | Rejected:
    """`ping_pong_leader_init` with the public share and the Leader's input share
    already decoded (a caller that decoded them to check them does not decode twice)."""
    _check_two(vdaf)
    v: Any = vdaf
    try:
        verify_state, verifier_share = v.verify_init(
            vdaf_verify_key, ctx, 0, v.decode_agg_param(agg_param), nonce, public_share,
            input_share)
        encoded = v.encode_verifier_share(verifier_share)
        return Continued(verify_state, 0, encode_message(INITIALIZE, encoded))
    except ValueError as exc:
        return Rejected(str(exc))


def ping_pong_helper_init(vdaf: Vdaf, vdaf_verify_key: bytes, ctx: bytes, agg_param: bytes,
                          nonce: bytes, public_share: bytes, input_share: bytes,
                          inbound: bytes) -> Continued | FinishedWithOutbound | Rejected:
    """Called by the Helper in response to the Leader's initial message."""
    _check_two(vdaf)
    v: Any = vdaf
    try:
        decoded_param = v.decode_agg_param(agg_param)
        verify_state, verifier_share = v.verify_init(
            vdaf_verify_key, ctx, 1, decoded_param, nonce,
            v.decode_public_share(public_share), v.decode_input_share(1, input_share))
        inbound_type, items = decode_message(inbound)
        if inbound_type != INITIALIZE:
            return Rejected("expected an initialize message")
        verifier_shares = [v.decode_verifier_share(verify_state, items[0]), verifier_share]
        return ping_pong_transition(vdaf, ctx, decoded_param, verifier_shares, verify_state, 0)
    except ValueError as exc:
        return Rejected(str(exc))


def ping_pong_transition(vdaf: Vdaf, ctx: bytes, agg_param: Any, verifier_shares: list[Any],
                         verify_state: Any,
                         verify_round: int) -> Continued | FinishedWithOutbound:
    """Combine the verifier shares and compute the caller's next state."""
    v: Any = vdaf
    verifier_message = v.verifier_shares_to_message(ctx, agg_param, verifier_shares)
    encoded_message = v.encode_verifier_message(verifier_message)
    out = v.verify_next(ctx, verify_state, verifier_message)
    if verify_round + 1 == vdaf.ROUNDS:
        return FinishedWithOutbound(out, encode_message(FINISH, encoded_message))
    next_state, verifier_share = out
    return Continued(next_state, verify_round + 1,
                     encode_message(CONTINUE, encoded_message,
                                    v.encode_verifier_share(verifier_share)))


def ping_pong_leader_continued(vdaf: Vdaf, ctx: bytes, agg_param: bytes, state: Continued,
                               inbound: bytes) -> State:
    """Called by the Leader to start the next step of ping-ponging."""
    return ping_pong_continued(vdaf, True, ctx, agg_param, state, inbound)


def ping_pong_helper_continued(vdaf: Vdaf, ctx: bytes, agg_param: bytes, state: Continued,
                               inbound: bytes) -> State:
    """Called by the Helper to continue ping-ponging."""
    return ping_pong_continued(vdaf, False, ctx, agg_param, state, inbound)


def ping_pong_continued(vdaf: Vdaf, is_leader: bool, ctx: bytes, agg_param: bytes,
                        state: Continued, inbound: bytes) -> State:
    v: Any = vdaf
    try:
        verify_round = state.verify_round
        inbound_type, items = decode_message(inbound)
        if inbound_type == INITIALIZE:
            return Rejected("unexpected initialize message")
        verifier_message = v.decode_verifier_message(state.verify_state, items[0])
        out = v.verify_next(ctx, state.verify_state, verifier_message)
        if verify_round + 1 < vdaf.ROUNDS and inbound_type == CONTINUE:
            verify_state, verifier_share = out
            verifier_shares = [v.decode_verifier_share(verify_state, items[1]), verifier_share]
            if is_leader:
                verifier_shares.reverse()
            return ping_pong_transition(vdaf, ctx, v.decode_agg_param(agg_param),
                                        verifier_shares, verify_state, verify_round + 1)
        if verify_round + 1 == vdaf.ROUNDS and inbound_type == FINISH:
            return Finished(out)
        return Rejected("message type does not match the verification round")
    except ValueError as exc:
        return Rejected(str(exc))


def _check_two(vdaf: Vdaf) -> None:
    if vdaf.SHARES != 2:
        raise ValueError("the ping-pong topology needs exactly two Aggregators")
