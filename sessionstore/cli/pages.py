"""``html``: a session as one self-contained page, written as it is read.

A module of its own: a page needs the transcript, not the archive.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from sessionstore.cli.naming import session_named
from sessionstore.cli.opening import opened
from sessionstore.cli.output import escaped
from sessionstore.transcript import render_html, write_html

__all__ = ["run_html"]


async def run_html(args: argparse.Namespace) -> int:
    async with opened(args, read=True) as store:
        args.id = await session_named(store, args.id, exact=args.exact)
        if args.out is None:
            await write_html(store, args.id, sys.stdout)
            return 0
        # The page is rendered before the file is made: a missing session
        # leaves no empty file behind.
        chunks = render_html(store, args.id)
        first = await anext(chunks)
        out = await asyncio.to_thread(open, args.out, "w", encoding="utf-8", newline="\n")
        with out:
            out.write(first)
            async for chunk in chunks:
                out.write(chunk)
    print(f"wrote the page of session {escaped(args.id)} to {escaped(args.out)}")
    return 0
