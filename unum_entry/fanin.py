"""The fan-in rule: `n` branches join one target through a tree of fixed-size set shards.

Branch `i` adds its checkpoint name to slot `i % SHARD_SLOTS` of leaf shard `i // SHARD_SLOTS`.
Whoever sees a shard full adds that shard's index (member "1") to its parent on the next level;
whoever sees the root full has seen every branch join and invokes the target. Each add is one
upsert of an item of at most SHARD_SLOTS short members, so a branch's cost is the same at width
4 and at width 100,000, and no store item or document takes more than SHARD_SLOTS writes.

Every step is idempotent (a slot keeps its first member; a parent add is the same add again), so
a retry that crashes anywhere redoes the same adds and reaches the same decision. Where the
store tells which add completed a shard (SetState.completed_by: file, memory and Firestore
stores, whose members come back in apply order), only that adder carries the join on, so no
parent takes more than its SHARD_SLOTS adds even when an add and its read are two requests
(Firestore). Elsewhere (DynamoDB: SetState.completed_by is None) every adder that sees a shard
full claims carrying it on in the shard's claim slot (`CLAIM_SLOT`, outside every shard's
slots: never counted, and it keeps its first member like every slot): only the branch (or
child shard) whose claim is there — any execution of it — carries the join on. Without the
claim every later execution of every branch (each duplicate, retry and late copy) would invoke
the target again once the shard is full: a target that commits its result (no checkpoint for
a duplicate to see) then ran its ingress once per such execution, reading every leaf shard
(the wide-map schedules on DynamoDB: ~440 target deliveries for ~40 branches). The claim
costs one more upsert per shard, by its completer.

`leaf_add` and `next_add` name a branch's first two adds, for a store to make with other writes
(its checkpoint's create; a batch of branches' next-level adds in one write, `Runtime.handle_many`);
`join` then goes on from the states they left.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Final, TYPE_CHECKING

from unum_entry import naming
from unum_entry.errors import RetentionExpired, StoreMisuse
from unum_entry.frozen import ReadOnly
from unum_entry.stores.base import Kind, Record, SetAdd, SetState, Store

if TYPE_CHECKING:
    from unum_entry.retention import Ledger

SHARD_SLOTS = 16
CLAIM_SLOT = SHARD_SLOTS  # outside every shard (size <= SHARD_SLOTS): see the module docstring
_PARENT_MEMBER = "1"


class Shard(ReadOnly):
    """One set shard of a join tree: its store key and how many slots it has."""

    __slots__ = ("key", "size")

    key: Final[str]
    size: Final[int]

    def __init__(self, key: str, size: int) -> None:
        self.key = key
        self.size = size


@functools.lru_cache(maxsize=256)  # every branch of a join asks for the same width
def _level_widths(width: int) -> tuple[int, ...]:
    """How many slots each level of the tree has: `width` leaves' slots, then one slot per
    shard of the level below, up to the level with a single shard (the root)."""
    widths = [width]
    while widths[-1] > SHARD_SLOTS:
        widths.append(-(-widths[-1] // SHARD_SLOTS))
    return tuple(widths)


@functools.lru_cache(maxsize=256)  # SHARD_SLOTS branches in a row join one leaf; a gather names, then reads, 256 leaves
def _shard(set_key: str, level: int, index: int, level_width: int) -> Shard:
    """Shard `index` at `level` of the join tree of `set_key` (`level_width` slots at that level)."""
    return Shard(naming.set_shard_key(set_key, level, index), min(SHARD_SLOTS, level_width - index * SHARD_SLOTS))


def _check_slot(slot: int, width: int) -> None:
    if not 0 <= slot < width:
        raise StoreMisuse(f"slot {slot} outside a join of width {width}")


def leaf_add(ledger: Ledger, set_key: str, width: int, slot: int, member: str) -> SetAdd:
    """The add `join` makes first - `member` at `slot`'s position of its leaf shard - for a
    store to make with the branch's own create (`Store.create_joining`; its state then goes to
    `join` as `leaf_state`). Raises RetentionExpired as `join` would (the ledger's check)."""
    _check_slot(slot, width)
    shard_index, position = divmod(slot, SHARD_SLOTS)
    shard = _shard(set_key, 0, shard_index, _level_widths(width)[0])
    ledger.check_join(set_key, shard.key)
    return SetAdd(shard.key, position, member, shard.size, ledger.expires_at(Kind.SET))


def ends_at_leaf(leaf_state: SetState | None) -> bool:
    """Whether a branch's join ends with the leaf add its store made with its commit
    (`leaf_state`, as `join` takes it): the add did not fill the shard (15 of every 16
    branches), so `join` would return False at once; its caller need not build a ledger."""
    return leaf_state is not None and not leaf_state.full


def next_add(ledger: Ledger, set_key: str, width: int, slot: int, leaf_state: SetState) -> SetAdd | None:
    """The add `join` makes after the leaf add whose shard is then `leaf_state`, for a store to
    make with other branches' (`Store.add_to_set_many`; its state then goes to `join` as
    `parent_state`): the filled leaf's add to its parent, when this branch carries the join on
    and the store told so (`completed_by`). None when `join` ends at the leaf, the leaf is the
    root, or this branch must claim the shard first. Raises RetentionExpired as `join` would."""
    widths = _level_widths(width)
    shard_index, position = divmod(slot, SHARD_SLOTS)
    if len(widths) < 2 or not leaf_state.full or _carries_on(leaf_state, position) is not True:
        return None
    parent_index, parent_position = divmod(shard_index, SHARD_SLOTS)
    parent = _shard(set_key, 1, parent_index, widths[1])
    ledger.check_join(set_key, parent.key)
    return SetAdd(parent.key, parent_position, _PARENT_MEMBER, parent.size, ledger.expires_at(Kind.SET))


def _carries_on(state: SetState, position: int) -> bool | None:
    """Whether the adder at `position` of the shard it saw full (`state`) carries the join on
    to the next level: where the store says which add completed the shard, only that adder
    does (True or False); elsewhere None: it must claim the shard first (the module docstring)."""
    if state.completed_by is None:
        return None
    return state.completed_by == position


def join(store: Store, ledger: Ledger, set_key: str, width: int, slot: int, member: str, *,
         leaf_state: SetState | None = None, parent_state: SetState | None = None) -> bool:
    """Add `member` at `slot` of the join set; True when this call saw every branch joined.
    `leaf_state`: the leaf shard right after that add, when the store made it already (with the
    branch's checkpoint: `leaf_add`); `parent_state`: with it, the leaf's parent right after the
    add `next_add` named, when the store made that too; the rest of the join goes on from there.

    Every add goes through the workflow's `ledger`: stamped with the deadline (the same expiry
    in every add, so identical adds leave a shard unchanged on every store), and refused with
    RetentionExpired, naming the set, once the deadline has passed: the shard has expired (or
    vanished with it), and an upsert would recreate it with this one member, a join that could
    never fill. The runtime records that failure, so the workflow ends instead of waiting."""
    _check_slot(slot, width)
    if ends_at_leaf(leaf_state):
        return False
    index = slot
    for level, level_width in enumerate(_level_widths(width)):
        shard_index, position = divmod(index, SHARD_SLOTS)
        shard = _shard(set_key, level, shard_index, level_width)
        if level == 0 and leaf_state is not None:
            state = leaf_state
        elif level == 1 and parent_state is not None and leaf_state is not None:
            state = parent_state
        else:
            state = ledger.add_to_set(store, set_key, shard.key, position, member, size=shard.size)
        if not state.full:
            return False
        carries_on = _carries_on(state, position)
        if carries_on is None:  # the store cannot tell who completed it: claim (module doc)
            claim = state.members.get(CLAIM_SLOT)
            if claim is None:
                claim = ledger.add_to_set(store, set_key, shard.key, CLAIM_SLOT, str(position),
                                          size=shard.size).members.get(CLAIM_SLOT)
            if claim != str(position):
                return False
        elif not carries_on:
            # The store saw another adder complete this shard: that adder (and its retries)
            # carries the join on; seeing it full as well changes nothing.
            return False
        member, index = _PARENT_MEMBER, shard_index
    return True


def leaf_keys(set_key: str, width: int, leaves: range | None = None) -> list[str]:
    """The keys of the leaf shards (only those numbered `leaves`, when given), in slot order:
    what a target's ingress reads. Named through `_shard`, as `members` names them: a group read
    and then gathered is hashed once."""
    return [_shard(set_key, 0, i, width).key for i in (range(leaf_count(width)) if leaves is None else leaves)]


def leaf_count(width: int) -> int:
    """How many leaf shards a join of `width` branches has."""
    return -(-width // SHARD_SLOTS)


def members(records: Mapping[str, Record], set_key: str, width: int, leaves: range | None = None) -> list[str]:
    """Every branch's member in slot order, from the leaf shards in `records` (only those of the
    leaves numbered `leaves`, when given: a wide join is read a group of leaves at a time).

    Raises RetentionExpired when a leaf is missing or not full: the target is invoked only after
    every leaf filled, and nothing deletes a shard before its expiry."""
    found: list[str] = []
    for i in range(leaf_count(width)) if leaves is None else leaves:
        shard = _shard(set_key, 0, i, width)  # its key too (cached: `leaf_keys` of this group named it)
        record = records.get(shard.key)
        if record is None or any(slot not in record.members for slot in range(shard.size)):
            raise RetentionExpired(f"join set {set_key}: shard {i} of {width} branches is "
                                   f"{'gone' if record is None else 'incomplete'} (expired)")
        found.extend(record.members[slot] for slot in range(shard.size))
    return found
