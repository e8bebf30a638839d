"""``keys``: encryption at rest from the command line (docs/encryption.md): ``generate``,
``status``, ``rotate``, ``seal-heads``. Keys come from a key file or the environment."""

from __future__ import annotations

import argparse
import base64
import os

from sessionstore.cli.opening import key_options, opened
from sessionstore.cli.output import Refused, counted, escaped
from sessionstore.cli.wording import named
from sessionstore.encryption.keys import fingerprint, generate_key

__all__ = ["run_keys"]


async def run_keys(args: argparse.Namespace) -> int:
    if args.action == "generate":
        return _generate(args.out)
    if args.out is not None:
        raise Refused("--out is for keys generate")
    if args.action == "rotate" and "keys" not in key_options(args):
        raise Refused("keys rotate needs the keys: --key-file with the new key first, then the old")
    if args.action == "seal-heads" and "keys" not in key_options(args):
        raise Refused("keys seal-heads needs the keys: --key-file")
    async with opened(args, read=True) as store:
        report = getattr(store, "keyring_report", None)
        if report is None:
            raise Refused(
                f"{escaped(named(args.db))} is not a SQL store: only SQL stores are sealed"
            )
        if args.action == "rotate":
            done = await store.rotate_keys()  # type: ignore[attr-defined]
            done_why = "" if done else ": every data key was already wrapped by it"
            print(f"{counted(done, 'data key')} rewrapped under the first key given{done_why}")
        if args.action == "seal-heads":
            done = await store.seal_heads()  # type: ignore[attr-defined]
            print(f"{counted(done, 'head position')} sealed")
        found: dict[str, int] = await report()
    if not found:
        print(f"{escaped(named(args.db))}: not encrypted (a plain store)")
        return 0
    doomed = found.pop("doomed", 0)
    print(f"{escaped(named(args.db))}: encrypted, {counted(sum(found.values()), 'data key')}")
    for master, count in sorted(found.items()):
        print(f"  master key {master}: wraps {counted(count, 'data key')}")
    if doomed:
        print(f"  {counted(doomed, 'key')} doomed by an erase under way (the next open ends it)")
    return 0


def _generate(out: str | None) -> int:
    key = generate_key()
    if out is None:
        print(key)
        return 0
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        raise Refused(f"{escaped(out)} exists: a key file is never overwritten") from None
    except OSError as exc:
        raise Refused(f"cannot create {escaped(out)}: {exc.strerror}") from None
    with os.fdopen(fd, "w") as file:
        file.write(key + "\n")
    named = fingerprint(base64.urlsafe_b64decode(key))
    print(f"wrote a new key to {escaped(out)} (fingerprint {named}); keep it apart from the store")
    return 0
